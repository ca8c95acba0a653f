package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/danyue/danyue/crdt"
)

func TestOpenCreatesPrivateStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "store")
	s := open(t, dir, Options{})
	if s.Epoch() == 0 || s.LastSeq() != 0 || !s.ClockHighWater().IsZero() {
		t.Fatalf("new store: epoch %d, last seq %d, high water %v", s.Epoch(), s.LastSeq(), s.ClockHighWater())
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Windows has no mode bits: os.Stat derives them from the read-only
	// attribute.
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o700 {
		t.Errorf("data dir mode %v, want 0700", fi.Mode().Perm())
	}
	if _, ok := s.Identity(); ok {
		t.Error("new store has an identity")
	}
	if _, ok := s.Library(); ok {
		t.Error("new store has a library")
	}
}

func TestEpoch(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(context.Background(), dir, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	first := s.Epoch()
	apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 1, 10, 5)}})
	s.Close()

	s = open(t, dir, Options{})
	if s.Epoch() != first || s.LastSeq() != 1 {
		t.Fatalf("reopened: epoch %d last seq %d, want %d and 1", s.Epoch(), s.LastSeq(), first)
	}
	s.Close()

	// A wiped store is a new store: a new epoch voids every cursor into it.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, Options{})
	if s.Epoch() == first || s.LastSeq() != 0 {
		t.Fatalf("wiped store: epoch %d (old %d), last seq %d", s.Epoch(), first, s.LastSeq())
	}
}

// writeRaw writes key=value into the store's database with badger directly.
func writeRaw(t *testing.T, dir string, kv ...[]byte) {
	t.Helper()
	opt := Options{Logger: testLogger(t)}.withDefaults()
	db, err := badger.Open(opt.badger(filepath.Join(dir, "db")))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(txn *badger.Txn) error {
		for i := 0; i+1 < len(kv); i += 2 {
			if err := txn.Set(kv[i], kv[i+1]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestOpenRefuses(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  error
		text  string
	}{
		{"newer schema", func(t *testing.T, dir string) {
			s := open(t, dir, Options{})
			s.Close()
			writeRaw(t, dir, keySchema, binary.BigEndian.AppendUint32(nil, SchemaVersion+1))
		}, ErrNewerSchema, "upgrade danyue"},
		{"not a danyue store", func(t *testing.T, dir string) {
			writeRaw(t, dir, []byte("other"), []byte("data"))
		}, ErrCorrupt, "not a danyue store"},
		{"malformed epoch", func(t *testing.T, dir string) {
			s := open(t, dir, Options{})
			s.Close()
			writeRaw(t, dir, keyEpoch, []byte{1, 2})
		}, ErrCorrupt, "epoch"},
		{"malformed secrets", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "secrets"), []byte("{"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, ErrCorrupt, "secrets"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			_, err := Open(context.Background(), dir, Options{Logger: testLogger(t)})
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open: %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), tc.text) {
				t.Errorf("error %q does not name the dir %s and say %q", err, dir, tc.text)
			}
			// Refusing never resets: the same error again.
			if _, err2 := Open(context.Background(), dir, Options{Logger: testLogger(t)}); !errors.Is(err2, tc.want) {
				t.Errorf("second Open: %v", err2)
			}
		})
	}
}

func TestLockSameProcess(t *testing.T) {
	dir := t.TempDir()
	open(t, dir, Options{})
	_, err := Open(context.Background(), dir, Options{Logger: testLogger(t)})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if want := "another danyue daemon is probably running on " + dir; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

func TestLockOtherProcess(t *testing.T) {
	dir := t.TempDir()
	open(t, dir, Options{})
	out, err := childOutput([]string{"-test.run=^$"}, childEnv+"=lock", "DANYUE_STORE_DIR="+dir)
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("child: %s", bytes.TrimSpace(out))
}

// lockChild opens dir, which its parent holds open, and succeeds if that
// fails with ErrLocked.
func lockChild(dir string) error {
	s, err := Open(context.Background(), dir, Options{})
	if err == nil {
		s.Close()
		return errors.New("opened a store another process holds")
	}
	if !errors.Is(err, ErrLocked) {
		return err
	}
	os.Stdout.WriteString(err.Error() + "\n")
	return nil
}

func TestSecrets(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(context.Background(), dir, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lib := Library{ID: [16]byte{1, 2, 3}, Secret: [32]byte{4, 5, 6}}
	if err := s.SetIdentity(ctx, []byte("private key")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetLibrary(ctx, lib); err != nil {
		t.Fatal(err)
	}
	s.Close()

	path := filepath.Join(dir, "secrets")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	modes := runtime.GOOS != "windows" // Windows has no mode bits to check
	if modes && fi.Mode().Perm() != 0o600 {
		t.Errorf("secrets file mode %v, want 0600", fi.Mode().Perm())
	}
	// Loose permissions are tightened on open.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, Options{})
	if id, ok := s.Identity(); !ok || string(id) != "private key" {
		t.Errorf("Identity = %q, %v", id, ok)
	}
	if l, ok := s.Library(); !ok || l != lib {
		t.Errorf("Library = %v, %v", l, ok)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, dir: 0o700} {
		if fi, err := os.Stat(p); err != nil || modes && fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", p, fi.Mode().Perm(), err, want)
		}
	}
}

// Issue 49: badger makes its files with a mode of its own (0666 less the
// umask, no option for it), so the database directory is what keeps other
// users out: 0700, also when it existed open before.
func TestDatabaseDirIsPrivate(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("modes mean nothing on Windows; the data dir's DACL is inherited")
	}
	dir := filepath.Join(t.TempDir(), "store")
	if err := os.MkdirAll(filepath.Join(dir, "db"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "db"), 0o755); err != nil {
		t.Fatal(err)
	}
	open(t, dir, Options{})
	fi, err := os.Stat(filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("database dir mode %v, want 0700", fi.Mode().Perm())
	}
}
