//go:build !cgo

package cuda

import (
	"context"
	"errors"
	"testing"

	"github.com/idlegrid/idlegrid/internal/challenge"
)

func TestOpen_NoCgo(t *testing.T) {
	if _, err := Open(); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Open = %v, want ErrUnavailable", err)
	}
	var r Runner
	if _, err := r.Run(context.Background(), "GPU-1", challenge.Task{Size: 64}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Run = %v, want ErrUnavailable", err)
	}
}
