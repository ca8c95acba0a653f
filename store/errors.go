package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
)

// Sentinel errors. Every error the store returns names its data directory and
// what to do; these are for callers to branch on with errors.Is.
var (
	// ErrDuplicate: the batch's Dedup key was already recorded, so nothing
	// was applied.
	ErrDuplicate = errors.New("duplicate request")
	// ErrDedupMismatch: the batch's Dedup key was already recorded for
	// another request (another DedupSum), so nothing was applied.
	ErrDedupMismatch = errors.New("idempotency key reused for another request")
	// ErrLocked: another process (probably another danyue daemon) has the
	// data directory open.
	ErrLocked = errors.New("store is locked")
	// ErrNewerSchema: the store was written by a newer danyue.
	ErrNewerSchema = errors.New("store written by a newer danyue")
	// ErrCorrupt: a stored value fails to decode.
	ErrCorrupt = errors.New("store is damaged")
	// ErrDiskFull: the disk holding the store has too little free space.
	ErrDiskFull = errors.New("disk full")
	// ErrTooBig: a batch does not fit in one transaction; split it (see
	// MaxBatchBytes).
	ErrTooBig = errors.New("batch too big")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store closed")
	// ErrFailed: an earlier write or sync failed, so what is on disk is
	// uncertain; the store refuses further writes until it is reopened.
	ErrFailed = errors.New("store failed")
)

// damaged is the advice for a database that cannot be read: Repair moves
// it aside, and the store starts a new one (with a new epoch, so other
// devices send the library again), keeping the device identity and library
// in DIR/secrets.
func damaged(dir string) string {
	return fmt.Sprintf("stop danyue and run `danyue repair`: it moves %s aside (kept, in case this device held books no other has), keeps this device and its library, and the other devices send the library again",
		filepath.Join(dir, "db"))
}

// corruptf reports a damaged database in dir.
func corruptf(dir string, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s; %s", ErrCorrupt, dir, fmt.Sprintf(format, args...), damaged(dir))
}

// secretsCorruptf reports a damaged secrets file.
func secretsCorruptf(path string, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s; restore it from a backup, or move it away and restart danyue: this device then gets a new identity and must join the library again",
		ErrCorrupt, path, fmt.Sprintf(format, args...))
}

func lockedErr(dir string) error {
	return fmt.Errorf("%w: another danyue daemon is probably running on %s; stop it first", ErrLocked, dir)
}

func diskFullErr(dir string, cause error) error {
	return fmt.Errorf("%w: not enough free space for the store in %s; free some space and retry: %w", ErrDiskFull, dir, cause)
}

// isDiskFull reports whether err is out-of-space (or over quota). badger
// formats its causes with %+v rather than wrapping them, so the text is
// checked too.
func isDiskFull(err error) bool {
	return hasErrno(err, diskFullErrnos())
}

// isLockErr reports whether a badger.Open error is its directory lock.
func isLockErr(err error) bool {
	return hasErrno(err, lockErrnos()) || strings.Contains(err.Error(), "Cannot acquire directory lock")
}

// hasErrno reports whether err is, wraps or names one of errnos.
func hasErrno(err error, errnos []syscall.Errno) bool {
	for _, e := range errnos {
		if errors.Is(err, e) || strings.Contains(err.Error(), e.Error()) {
			return true
		}
	}
	return false
}

// ioErr wraps an error of the database, classifying out-of-space.
func ioErr(dir, op string, err error) error {
	if isDiskFull(err) {
		return diskFullErr(dir, err)
	}
	if isChecksumErr(err) {
		return corruptf(dir, "%s: %v", op, err)
	}
	return fmt.Errorf("store %s: %s: %w", dir, op, err)
}

// isChecksumErr reports whether badger found a block or index that fails its
// checksum (badger's errors carry no sentinel through its wrapping).
func isChecksumErr(err error) bool {
	return strings.Contains(err.Error(), "checksum mismatch")
}
