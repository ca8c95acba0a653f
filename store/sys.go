package store

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
)

// What the store needs of the operating system, each behind one portable
// function here whose per-OS half lives in sys_*.go, so that nothing else in
// the package sees a syscall:
//
//   - syncFile, syncDir: make a file's data, or a directory's entries,
//     durable (datasync and syncDir per OS; the package doc says what each
//     platform guarantees).
//   - freeSpace: the bytes this user may still write on a disk (diskAvail).
//   - lockFile: an exclusive lock on an open file that no other open file,
//     in this process or another, can take while it is held.
//   - MakePrivateDir, MakeFilePrivate: only this user can reach a directory
//     or file (private).
//   - isDiskFull, isLockErr: which errors mean a full disk or a held lock
//     (diskFullErrnos, lockErrnos).

// errLockHeld is what lockFile returns when another open file holds the lock.
var errLockHeld = errors.New("lock held by another open file")

// syncFile makes durable everything written to the file at path before the
// call, with the strongest flush the OS offers (datasync).
func syncFile(path string) error {
	f, err := openForSync(path)
	if err != nil {
		return err
	}
	err = datasync(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// freeSpace returns the bytes available to this user on the device holding
// dir, or MaxUint64 if that cannot be told: an unknown amount never refuses
// a write.
func freeSpace(dir string) uint64 {
	n, err := diskAvail(dir)
	if err != nil {
		return math.MaxUint64
	}
	return n
}

// MakePrivateDir creates dir (and its missing parents), or tightens an
// existing one, so that no other user of the machine can reach it: mode 0700
// on unix; on Windows, where modes mean nothing, a protected DACL granting
// only this user, SYSTEM and Administrators. It reports whether an existing
// dir was open to others before. The daemon uses it for the directory that
// holds the store, the API socket and its token.
func MakePrivateDir(dir string) (tightened bool, err error) {
	_, err = os.Lstat(dir)
	fresh := errors.Is(err, fs.ErrNotExist)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return false, err
	}
	if !fi.IsDir() {
		return false, fmt.Errorf("%s: not a directory", dir)
	}
	return private(dir, fi, fresh)
}

// MakeFilePrivate makes an existing file readable by this user only (0600
// on unix; the DACL of MakePrivateDir on Windows), reporting whether it was
// open to others. The daemon uses it for its API tokens.
func MakeFilePrivate(path string) (tightened bool, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return false, err
	}
	return private(path, fi, false)
}
