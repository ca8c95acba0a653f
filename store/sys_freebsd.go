package store

import (
	"os"

	"golang.org/x/sys/unix"
)

// datasync is fsync, the finest call FreeBSD has; whether it also flushes
// the drive's write cache is the filesystem's choice (ZFS does).
func datasync(f *os.File) error { return f.Sync() }

func diskAvail(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	// Bavail is signed here: it goes below zero when root has eaten into
	// the space reserved for it.
	return uint64(max(st.Bavail, 0)) * st.Bsize, nil
}
