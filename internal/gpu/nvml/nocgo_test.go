//go:build !cgo

package nvml_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idlegrid/idlegrid/internal/gpu/nvml"
)

func TestOpen_NoCgo(t *testing.T) {
	if _, err := nvml.Open(); !errors.Is(err, nvml.ErrNoCgo) {
		t.Errorf("Open error = %v, want %v", err, nvml.ErrNoCgo)
	}
	var d nvml.Detector
	if _, err := d.Detect(context.Background()); !errors.Is(err, nvml.ErrNoCgo) {
		t.Errorf("Detect error = %v, want %v", err, nvml.ErrNoCgo)
	}
}
