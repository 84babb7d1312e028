//go:build !unix

package capabilities

import (
	"errors"
	"fmt"
)

// diskSpace has no statfs off unix: it returns errors.ErrUnsupported, which the health
// report lists.
func diskSpace(path string) (total, free, available uint64, err error) {
	return 0, 0, 0, fmt.Errorf("capabilities: statfs %s: %w", path, errors.ErrUnsupported)
}
