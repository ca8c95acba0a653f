package testfs

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/windows"
)

// A file held open unshared, as badger holds its LOCK, is left out of the
// copy; the rest is copied.
func TestCopyTreeLeavesOutExclusiveFiles(t *testing.T) {
	from, to := t.TempDir(), filepath.Join(t.TempDir(), "copy")
	if err := os.WriteFile(filepath.Join(from, "data"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(from, "LOCK")
	name, err := windows.UTF16PtrFromString(lock)
	if err != nil {
		t.Fatal(err)
	}
	h, err := windows.CreateFile(name, windows.GENERIC_READ|windows.GENERIC_WRITE, 0, nil,
		windows.CREATE_NEW, windows.FILE_ATTRIBUTE_NORMAL|windows.FILE_FLAG_DELETE_ON_CLOSE, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer windows.CloseHandle(h)
	CopyTree(t, from, to)
	if _, err := os.Stat(filepath.Join(to, "data")); err != nil {
		t.Errorf("data not copied: %v", err)
	}
	if _, err := os.Stat(filepath.Join(to, "LOCK")); !os.IsNotExist(err) {
		t.Errorf("LOCK copied (stat: %v)", err)
	}
}
