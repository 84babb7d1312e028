// Package privfile writes and reads the small private files Airlock keeps for people and
// processes (the approvers and clients files, approver and client credentials): owner-only
// modes, atomic replacement, and the change test live-reloading readers use. One place, so
// the approvers file and the clients file cannot drift in how they guard their secrets.
package privfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// ErrMode reports a private file that group or others may read or write.
var ErrMode = errors.New("privfile: readable or writable by group or others")

// Replace writes b to path atomically (a temporary file in the same folder, renamed over it)
// with mode 0600, creating the folder with mode 0700. pattern names the temporary file
// (os.CreateTemp), e.g. ".clients-*.json".
func Replace(path, pattern string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), pattern)
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Create writes b to a new file at path with mode 0600 (the folder 0700) and never replaces
// an existing one: an error wrapping fs.ErrExist.
func Create(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadOwnerOnly reads path, refusing (ErrMode, with the mode) a file group or others may read
// or write. A missing file is an error wrapping fs.ErrNotExist.
func ReadOwnerOnly(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %v", ErrMode, path, fi.Mode().Perm())
	}
	return os.ReadFile(path)
}

// Unchanged reports whether now describes the same file, unchanged, as before did: the same
// inode (Replace renames a new one in), size, modification time and mode. The time alone has
// the kernel's coarse clock, and a rotated key has the same length. before nil: changed.
func Unchanged(before, now fs.FileInfo) bool {
	return before != nil && now != nil && os.SameFile(before, now) && before.ModTime().Equal(now.ModTime()) &&
		before.Size() == now.Size() && before.Mode() == now.Mode()
}

// Watched is a live-reloading reader of one file: Current parses it with Load the first time
// and again only when Unchanged says the file changed, so the approvers and clients files are
// re-read as soon as they are edited without being parsed on every decision or turn. After an
// error nothing is cached: a broken or missing file fails closed until it is fixed. Safe for
// concurrent use. The zero value is not usable: set Path and Load.
type Watched[T any] struct {
	Path string
	Load func(path string) (T, error)

	mu     sync.Mutex
	v      T
	cached bool
	fi     fs.FileInfo // of the file v was parsed from
}

// Current returns what Load made of the file as it is now. Errors: os.Stat's (fs.ErrNotExist
// when the file is missing; the caller says how to create it) or Load's.
func (w *Watched[T]) Current() (T, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var zero T
	fi, err := os.Stat(w.Path)
	if err != nil {
		w.v, w.cached = zero, false
		return zero, err
	}
	if w.cached && Unchanged(w.fi, fi) {
		return w.v, nil
	}
	v, err := w.Load(w.Path)
	if err != nil {
		w.v, w.cached = zero, false
		return zero, err
	}
	w.v, w.cached, w.fi = v, true, fi
	return v, nil
}
