// Package dirlock keeps a directory to one process at a time: the
// server's meter journal, the agent's data dir (and, with TakeFile, a lock
// file of its own: the market lock beside a SQLite database). The lock is an exclusive
// advisory lock (github.com/gofrs/flock) on the file LOCK in the
// directory; it goes with the process that holds it, so a crash leaves
// none behind, and the file itself stays.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gofrs/flock"
)

// Name is the file in a locked directory that holds its lock.
const Name = "LOCK"

// ErrHeld is Take's answer when another holder has the directory.
var ErrHeld = errors.New("locked by another process")

// Lock is a directory taken.
type Lock struct{ f *flock.Flock }

// Take makes dir (mode 0700) if it is missing and takes its lock without
// waiting; ErrHeld when another holds it, in this process or another.
func Take(dir string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return TakeFile(filepath.Join(dir, Name))
}

// TakeFile takes the lock on the file at path (made with mode 0600 if it
// is missing) without waiting: what Take does for a directory's LOCK, for
// a lock file of the caller's naming (the market lock beside a SQLite
// database).
func TakeFile(path string) (*Lock, error) {
	f := flock.New(path, flock.SetPermissions(0o600))
	switch ok, err := f.TryLock(); {
	case err != nil:
		return nil, fmt.Errorf("lock %s: %w", f.Path(), err)
	case !ok:
		return nil, fmt.Errorf("%s is %w", f.Path(), ErrHeld)
	}
	return &Lock{f: f}, nil
}

// Path is the lock's file.
func (l *Lock) Path() string { return l.f.Path() }

// Release gives the directory back.
func (l *Lock) Release() error { return l.f.Unlock() }
