//go:build !cgo

package cuda

import (
	"context"
	"fmt"

	"github.com/idlegrid/idlegrid/internal/challenge"
)

// Runner stands in for the CUDA runner in a build without cgo: it cannot
// be opened.
type Runner struct{}

// errNoCgo is what every call answers.
var errNoCgo = fmt.Errorf("%w: this binary was built without cgo, which loading libcuda.so.1 needs", ErrUnavailable)

// Open fails: no cgo.
func Open() (*Runner, error) { return nil, errNoCgo }

// OpenLibraries fails: no cgo.
func OpenLibraries(string, ...string) (*Runner, error) { return nil, errNoCgo }

// Run fails: no cgo.
func (*Runner) Run(context.Context, string, challenge.Task) (*Result, error) { return nil, errNoCgo }

// Devices fails: no cgo.
func (*Runner) Devices() ([]string, error) { return nil, errNoCgo }

// BLAS is empty.
func (*Runner) BLAS() string { return "" }

// Close does nothing.
func (*Runner) Close() error { return nil }
