// Package atomicfile writes files so that a crash or a power cut leaves
// the old file or the new one whole at a path, never an empty or torn one:
// the data goes to a temporary file beside it, which is synced and then
// renamed, or linked, into place, and the directory is synced. Files are
// private to their owner (0600), their directories made 0700.
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// Write puts data at path, in place of what was there, and returns once
// both are on disk.
func Write(path string, data []byte) error {
	f, err := Temp(path)
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // on failure; fails harmlessly after the rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return Replace(f, path)
}

// Create puts data at path unless a file has that name already, when it
// fails with an error that is os.ErrExist, and returns once it is on disk.
func Create(path string, data []byte) error {
	f, err := Temp(path)
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // on failure; fails harmlessly after the link
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := linkNew(f.Name(), path); err != nil {
		return err
	}
	os.Remove(f.Name()) // before the sync, so that no second name outlives a power cut
	return SyncDir(filepath.Dir(path))
}

// Temp is a new file beside path, mode 0600, its directory made if need
// be, for Replace.
func Temp(path string) (*os.File, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create directory: %w", err)
	}
	return os.CreateTemp(dir, "."+filepath.Base(path)+".*")
}

// Replace gives f, a file written beside path (Temp), the name path in
// place of what had it: f is synced and closed, renamed, and the directory
// synced.
func Replace(f *os.File, path string) error {
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// linkNew gives the file at tmp the name path too, unless a file has it:
// a hard link, or where the file system has none (some network shares) a
// rename after a look, which a file made between the two would lose to.
func linkNew(tmp, path string) error {
	err := os.Link(tmp, path)
	if err == nil || errors.Is(err, os.ErrExist) {
		return err
	}
	if _, serr := os.Lstat(path); serr == nil {
		return fmt.Errorf("%s: %w", path, os.ErrExist)
	}
	if rerr := os.Rename(tmp, path); rerr != nil {
		return errors.Join(err, rerr)
	}
	return nil
}

// SyncDir flushes a directory's entries to disk. Windows cannot sync a
// directory, and commits a rename or link with the file.
func SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
