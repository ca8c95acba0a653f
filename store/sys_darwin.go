package store

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// datasync is F_FULLFSYNC: on macOS a plain fsync hands the data to the
// drive, which may keep it in its volatile cache; F_FULLFSYNC also flushes
// that cache, as SQLite and Go's own os.File.Sync do. Some filesystems
// (SMB mounts) refuse it with ENOTSUP; there fsync is the best there is.
func datasync(f *os.File) error {
	fd := f.Fd()
	_, err := unix.FcntlInt(fd, unix.F_FULLFSYNC, 0)
	if errors.Is(err, unix.ENOTSUP) {
		err = unix.Fsync(int(fd))
	}
	return err
}

func diskAvail(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}
