package store

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/windows"
)

// openForSync opens the file for writing, which FlushFileBuffers needs, and
// shares delete access: badger removes a memtable's WAL once it is flushed
// to a table, and a handle of ours without FILE_SHARE_DELETE would make that
// fail for as long as a sync runs.
func openForSync(path string) (*os.File, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	h, err := windows.CreateFile(p, windows.GENERIC_READ|windows.GENERIC_WRITE,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE,
		nil, windows.OPEN_EXISTING, windows.FILE_ATTRIBUTE_NORMAL, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(h), path), nil
}

// datasync is FlushFileBuffers (what os.File.Sync calls on Windows): the
// file's data and metadata are written and the drive is told to flush its
// cache.
func datasync(f *os.File) error { return f.Sync() }

// syncDir does nothing on Windows: NTFS journals its metadata, so a file
// created or renamed is recorded once the journal is, and a directory
// handle from os.Open is read-only, which FlushFileBuffers refuses.
func syncDir(string) error { return nil }

func diskAvail(dir string) (uint64, error) {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return 0, err
	}
	var avail uint64 // to this user: quotas count
	if err := windows.GetDiskFreeSpaceEx(p, &avail, nil, nil); err != nil {
		return 0, err
	}
	return avail, nil
}

// lockFile locks the file's first byte with LockFileEx. The lock belongs to
// the handle, so a second open in this process is refused as another
// process's would be, and Windows drops it when the process dies.
func lockFile(f *os.File) error {
	var ol windows.Overlapped
	err := windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return errLockHeld
	}
	return err
}

func diskFullErrnos() []syscall.Errno {
	return []syscall.Errno{windows.ERROR_DISK_FULL, windows.ERROR_HANDLE_DISK_FULL}
}

// lockErrnos: badger's own directory lock on Windows is a file opened with
// no sharing, which a second open fails with a sharing violation.
func lockErrnos() []syscall.Errno {
	return []syscall.Errno{windows.ERROR_LOCK_VIOLATION, windows.ERROR_SHARING_VIOLATION}
}
