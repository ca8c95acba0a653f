package store

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// The OS seams (sys.go), through their portable functions.

func TestSyncFileAndDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	tests := []struct {
		name    string
		sync    func(string) error
		path    string
		wantErr bool
	}{
		{"file", syncFile, file, false},
		{"missing file", syncFile, missing, true},
		{"dir", syncDir, dir, false},
		{"missing dir", syncDir, missing, runtime.GOOS != "windows"}, // a no-op there
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.sync(tt.path)
			if (err != nil) != tt.wantErr {
				t.Fatalf("sync %s = %v, want error %v", tt.path, err, tt.wantErr)
			}
			if tt.wantErr && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("sync %s = %v, want fs.ErrNotExist", tt.path, err)
			}
		})
	}
	// The file is unchanged, and syncing it again works: the sync handle
	// was closed.
	if err := syncFile(file); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(file); err != nil || string(data) != "data" {
		t.Fatalf("after sync: %q, %v", data, err)
	}
}

func TestFreeSpace(t *testing.T) {
	free := freeSpace(t.TempDir())
	t.Logf("free: %d bytes", free)
	if free == 0 || free == math.MaxUint64 || free > 1<<60 {
		t.Errorf("freeSpace of a temp dir = %d, want a real figure (more than 0, less than an exbibyte)", free)
	}
	if got := freeSpace(filepath.Join(t.TempDir(), "missing")); got != math.MaxUint64 {
		t.Errorf("freeSpace of a missing dir = %d, want MaxUint64 (cannot tell)", got)
	}
}

func TestLockFileExcludesOtherOpens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	openLock := func() *os.File {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	first, second := openLock(), openLock()
	if err := lockFile(first); err != nil {
		t.Fatalf("first lock: %v", err)
	}
	if err := lockFile(second); !errors.Is(err, errLockHeld) {
		t.Fatalf("second lock while the first is held = %v, want errLockHeld", err)
	}
	first.Close() // releases the lock
	if err := lockFile(second); err != nil {
		t.Fatalf("lock after the holder closed: %v", err)
	}
}

func TestMakePrivate(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("checks unix modes; the Windows DACL is only compiled here")
	}
	base := t.TempDir()
	mk := func(name string, mode os.FileMode, dir bool) string {
		p := filepath.Join(base, name)
		var err error
		if dir {
			err = os.Mkdir(p, mode)
		} else {
			err = os.WriteFile(p, nil, mode)
		}
		if err == nil {
			err = os.Chmod(p, mode) // past the umask
		}
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name          string
		path          string
		private       func(string) (bool, error)
		wantTightened bool
		wantMode      os.FileMode
	}{
		{"new dir and parents", filepath.Join(base, "new", "data"), MakePrivateDir, false, 0o700},
		{"open dir", mk("open", 0o755, true), MakePrivateDir, true, 0o700},
		{"group-only dir", mk("group", 0o710, true), MakePrivateDir, true, 0o700},
		{"private dir", mk("private", 0o700, true), MakePrivateDir, false, 0o700},
		{"read-only private dir stays", mk("ro", 0o500, true), MakePrivateDir, false, 0o500},
		{"open file", mk("f-open", 0o644, false), MakeFilePrivate, true, 0o600},
		{"private file", mk("f-private", 0o600, false), MakeFilePrivate, false, 0o600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tightened, err := tt.private(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			if tightened != tt.wantTightened || fi.Mode().Perm() != tt.wantMode {
				t.Errorf("tightened %v, mode %v; want %v, %v", tightened, fi.Mode().Perm(), tt.wantTightened, tt.wantMode)
			}
		})
	}
	if _, err := MakePrivateDir(mk("a-file", 0o600, false)); err == nil {
		t.Error("MakePrivateDir of a file succeeded")
	}
	if _, err := MakeFilePrivate(filepath.Join(base, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("MakeFilePrivate of a missing file = %v, want fs.ErrNotExist", err)
	}
}

func TestErrnoClassification(t *testing.T) {
	full, lock := diskFullErrnos()[0], lockErrnos()[0]
	tests := []struct {
		name           string
		err            error
		isFull, isLock bool
	}{
		{"disk full, wrapped", fmt.Errorf("write: %w", full), true, false},
		{"disk full, only in the text", fmt.Errorf("badger: %+v", full.Error()), true, false},
		{"lock held", &os.PathError{Op: "flock", Path: "x", Err: lock}, false, true},
		{"badger's lock text", errors.New("Cannot acquire directory lock on x"), false, true},
		{"other", fs.ErrPermission, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isDiskFull(tt.err); got != tt.isFull {
				t.Errorf("isDiskFull(%v) = %v", tt.err, got)
			}
			if got := isLockErr(tt.err); got != tt.isLock {
				t.Errorf("isLockErr(%v) = %v", tt.err, got)
			}
		})
	}
}
