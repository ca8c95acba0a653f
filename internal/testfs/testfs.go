// Package testfs holds file helpers for tests that damage or crash a data
// directory: copying one as a crash would leave it.
package testfs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// CopyTree copies the directories and regular files under from to to
// (private modes), skipping sockets and other special files. Copying a
// store that is open, with no write in flight, gives what a power cut
// would leave of it: every acknowledged write was synced, and the copy
// reads the page cache. A file that another handle holds open exclusively
// is left out too: on Windows that is badger's directory lock, which it
// opens unshared and deletes when its handle closes, so that a crash
// leaves none behind either.
func CopyTree(t testing.TB, from, to string) {
	t.Helper()
	if err := Copy(from, to); err != nil {
		t.Fatal(err)
	}
}

// Copy is CopyTree returning its error, for callers that are not a
// testing.TB (a rapid.T); unlike cp, it needs no command, so it runs on
// every OS.
func Copy(from, to string) error {
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, 0o700)
		case !d.Type().IsRegular():
			return nil
		}
		data, err := os.ReadFile(p)
		if heldExclusively(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o600)
	})
	if err != nil {
		return fmt.Errorf("copy %s: %w", from, err)
	}
	return nil
}
