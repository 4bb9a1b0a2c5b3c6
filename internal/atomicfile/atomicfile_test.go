package atomicfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/idlegrid/idlegrid/internal/atomicfile"
)

// Write replaces what was at the path, privately, making its directory,
// and leaves no temporary file behind.
func TestWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "state.json")
	for _, data := range []string{"first\n", "second\n"} {
		if err := atomicfile.Write(path, []byte(data)); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != data {
			t.Fatalf("read back %q, %v; want %q", got, err, data)
		}
	}
	wantAlone(t, path)
}

// Create never replaces a file that has the name, and says so.
func TestCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.key")
	if err := atomicfile.Create(path, []byte("mine\n")); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.Create(path, []byte("theirs\n")); !errors.Is(err, os.ErrExist) {
		t.Fatalf("a second Create = %v, want os.ErrExist", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "mine\n" {
		t.Fatalf("the file holds %q, want the first's", got)
	}
	wantAlone(t, path)
}

// wantAlone fails t unless path is private and alone in its directory.
func wantAlone(t *testing.T, path string) {
	t.Helper()
	es, err := os.ReadDir(filepath.Dir(path))
	if err != nil || len(es) != 1 {
		t.Errorf("directory holds %v (%v), want the file alone", es, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
}
