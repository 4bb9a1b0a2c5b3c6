package dirlock_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid/internal/dirlock"
)

// TestTake: one holder at a time, within a process too; a released
// directory can be taken again; a missing one is made.
func TestTake(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	first, err := dirlock.Take(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dirlock.Take(dir); !errors.Is(err, dirlock.ErrHeld) || !strings.Contains(err.Error(), filepath.Join(dir, dirlock.Name)) {
		t.Fatalf("a second Take: %v, want ErrHeld naming the lock file", err)
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	again, err := dirlock.Take(dir)
	if err != nil {
		t.Fatalf("Take after Release: %v", err)
	}
	again.Release()
}
