//go:build unix

package capabilities

import (
	"fmt"
	"syscall"
)

// diskSpace returns the size, free and unprivileged-available bytes of the filesystem
// holding path.
func diskSpace(path string) (total, free, available uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, 0, 0, fmt.Errorf("capabilities: statfs %s: %w", path, err)
	}
	bs := uint64(st.Bsize)
	return uint64(st.Blocks) * bs, uint64(st.Bfree) * bs, uint64(st.Bavail) * bs, nil
}
