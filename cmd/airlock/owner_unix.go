//go:build unix

package main

import (
	"io/fs"
	"syscall"
)

// ownerOf is the owning user and group of a file (false where the platform does not say).
func ownerOf(fi fs.FileInfo) (uid, gid uint32, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return st.Uid, st.Gid, true
}
