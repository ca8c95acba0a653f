//go:build unix && !linux && !darwin && !freebsd

package store

import (
	"errors"
	"os"
)

// datasync is fsync on the unixes that have no finer call.
func datasync(f *os.File) error { return f.Sync() }

// diskAvail is not told here: the statfs structures of these systems differ
// and none of them is a platform danyue ships for.
func diskAvail(string) (uint64, error) { return 0, errors.ErrUnsupported }
