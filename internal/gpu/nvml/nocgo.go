//go:build !cgo

package nvml

import (
	"context"

	"github.com/idlegrid/idlegrid/internal/gpu"
)

// Detector stands in for the NVML detector in a build without cgo. It
// cannot be opened.
type Detector struct{}

var (
	_ gpu.Detector        = (*Detector)(nil)
	_ gpu.PowerController = (*Detector)(nil)
)

// Open fails with ErrNoCgo.
func Open() (*Detector, error) { return nil, ErrNoCgo }

// Detect fails with ErrNoCgo.
func (*Detector) Detect(context.Context) ([]gpu.Device, error) { return nil, ErrNoCgo }

// SetPowerLimit fails with ErrNoCgo.
func (*Detector) SetPowerLimit(context.Context, string, int) (int, error) { return 0, ErrNoCgo }

// Driver is empty.
func (*Detector) Driver() string { return "" }

// Close does nothing.
func (*Detector) Close() error { return nil }
