//go:build !unix

package capabilities

import (
	"errors"
	"fmt"
)

// diskSpace is not implemented off unix; the health report lists the error.
func diskSpace(path string) (total, free, available uint64, err error) {
	return 0, 0, 0, fmt.Errorf("capabilities: statfs %s: %w", path, errors.ErrUnsupported)
}
