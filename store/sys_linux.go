package store

import (
	"os"

	"golang.org/x/sys/unix"
)

// datasync is fdatasync (Linux and Android): the data and the metadata
// needed to read it back (the size), not the timestamps; the kernel also
// flushes the disk's write cache.
func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

func diskAvail(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}
