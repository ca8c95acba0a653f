package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Repair moves the database of the store in dir aside, with its
// acknowledged journal, into DIR/damaged/<time>, and returns where it went.
// The next Open starts a new database with a new epoch, so every peer sends
// the whole library again; DIR/secrets (the device identity and the library)
// is left as it is. Nothing is deleted: the old database may hold books no
// other device has. It fails with ErrLocked while the store is open, here
// or in another process.
func Repair(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("repair store %s: %w", dir, err)
	}
	s := &Store{dir: abs, dbDir: filepath.Join(abs, "db")}
	if _, err := os.Stat(s.dbDir); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("repair store %s: there is no database to move aside; start danyue and it makes a new one", abs)
	}
	if err := s.lockDir(); err != nil {
		return "", err
	}
	defer s.lock.Close()
	aside := filepath.Join(abs, damagedDir, time.Now().UTC().Format("20060102T150405.000Z"))
	if err := os.MkdirAll(aside, 0o700); err != nil {
		return "", ioErr(abs, "make "+aside, err)
	}
	if err := os.Rename(s.dbDir, filepath.Join(aside, "db")); err != nil {
		return "", ioErr(abs, "move the database aside", err)
	}
	err = os.Rename(filepath.Join(abs, ackedFile), filepath.Join(aside, ackedFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", ioErr(abs, "move "+ackedFile+" aside", err)
	}
	if err := syncDir(abs); err != nil {
		return "", ioErr(abs, "move the database aside", err)
	}
	return aside, nil
}
