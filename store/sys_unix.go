//go:build unix

package store

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

func openForSync(path string) (*os.File, error) { return os.Open(path) }

// syncDir makes dir's entries (files created, renamed or removed in it)
// durable: on unix a rename or a new file is durable only once its
// directory is synced.
func syncDir(dir string) error {
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

// lockFile takes an flock: it belongs to the open file, so a second open of
// the same file in this process is refused as another process's would be,
// and the kernel drops it when the process dies.
func lockFile(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return errLockHeld
	}
	return err
}

// private chmods a directory to 0700 or a file to 0600 if group or others
// have any permission on it. A fresh directory needs nothing: MkdirAll made
// it 0700.
func private(path string, fi fs.FileInfo, _ bool) (tightened bool, err error) {
	if fi.Mode().Perm()&0o077 == 0 {
		return false, nil
	}
	mode := os.FileMode(0o600)
	if fi.IsDir() {
		mode = 0o700
	}
	return true, os.Chmod(path, mode)
}

func diskFullErrnos() []syscall.Errno { return []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT} }

func lockErrnos() []syscall.Errno { return []syscall.Errno{syscall.EWOULDBLOCK} }
