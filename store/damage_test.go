package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
	"github.com/danyue/danyue/internal/startproc"
	"github.com/danyue/danyue/internal/testfs"
)

// The damage matrix (issue 13): a store with acknowledged writes, some in
// tables and some only in the WAL, is copied as a crash would leave it,
// each copy is damaged in one way and opened in a child process (so that a
// panic in a badger goroutine fails the row instead of the test binary),
// and the outcome must be one of:
//
//   - refused: Open fails with ErrCorrupt, naming the damaged file and
//     saying what to do;
//   - reported: Open succeeds and Loss names every record whose
//     acknowledged state did not come back;
//   - intact: Open succeeds and nothing acknowledged is missing.
//
// Never a panic, never a silent loss.

const damageBooks = 200

// damageOutcome is what the child reports.
type damageOutcome struct {
	Err     string            `json:"err,omitempty"`
	Corrupt bool              `json:"corrupt,omitempty"`
	Lost    []string          `json:"lost,omitempty"` // LostRecord.Name of the loss found at open
	Changes uint64            `json:"changes,omitempty"`
	Books   map[int]bookState `json:"books,omitempty"`
}

type bookState struct {
	Wall uint64 `json:"wall"` // of the position
	Slot uint64 `json:"slot"` // this device's read time
}

func TestDamageMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("the damage matrix spawns processes")
	}
	base, acked := damageBase(t)
	walName := func(dir string) string {
		mems, _ := filepath.Glob(filepath.Join(dir, "db", "*.mem"))
		slices.Sort(mems)
		if len(mems) == 0 {
			t.Fatal("no WAL")
		}
		return mems[len(mems)-1]
	}
	sstName := func(dir string) string {
		ssts, _ := filepath.Glob(filepath.Join(dir, "db", "*.sst"))
		slices.Sort(ssts)
		if len(ssts) == 0 {
			t.Fatal("no table")
		}
		return ssts[len(ssts)-1]
	}
	manifest := func(dir string) string { return filepath.Join(dir, "db", "MANIFEST") }
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string) string // returns the damaged file
		want   string                                // "refused", "reported" (or intact), "any"
		advice string                                // in the refusal
	}{
		{"16 bit flips in the newest WAL", func(t *testing.T, dir string) string {
			p := walName(dir)
			flipBits(t, p, 16, walHeader, writtenLen(t, p))
			return p
		}, "reported", ""},
		{"WAL cut to half of what it holds", func(t *testing.T, dir string) string {
			p := walName(dir)
			truncate(t, p, writtenLen(t, p)/2)
			return p
		}, "reported", ""},
		{"WAL cut to 1 MiB", func(t *testing.T, dir string) string {
			p := walName(dir)
			truncate(t, p, min(1<<20, writtenLen(t, p)*3/4))
			return p
		}, "reported", ""},
		{"WAL cut to 0 bytes", func(t *testing.T, dir string) string {
			p := walName(dir)
			truncate(t, p, 0)
			return p
		}, "reported", ""},
		{"WAL deleted", func(t *testing.T, dir string) string {
			p := walName(dir)
			remove(t, p)
			return p
		}, "reported", ""},
		{"newest table cut in half", func(t *testing.T, dir string) string {
			p := sstName(dir)
			fi, _ := os.Stat(p)
			truncate(t, p, fi.Size()/2)
			return p
		}, "refused", "danyue repair"},
		{"newest table cut to 3 bytes", func(t *testing.T, dir string) string {
			p := sstName(dir)
			truncate(t, p, 3)
			return p
		}, "refused", "danyue repair"},
		{"16 bit flips in the newest table", func(t *testing.T, dir string) string {
			p := sstName(dir)
			fi, _ := os.Stat(p)
			flipBits(t, p, 16, 0, fi.Size())
			return p
		}, "refused", "danyue repair"},
		{"table deleted", func(t *testing.T, dir string) string {
			p := sstName(dir)
			remove(t, p)
			return p
		}, "refused", "danyue repair"},
		{"MANIFEST deleted", func(t *testing.T, dir string) string {
			remove(t, manifest(dir))
			return manifest(dir)
		}, "refused", "danyue repair"},
		{"16 bit flips in the MANIFEST", func(t *testing.T, dir string) string {
			fi, _ := os.Stat(manifest(dir))
			flipBits(t, manifest(dir), 16, 8, fi.Size())
			return manifest(dir)
		}, "refused", "danyue repair"},
		{"MANIFEST cut short", func(t *testing.T, dir string) string {
			fi, _ := os.Stat(manifest(dir))
			truncate(t, manifest(dir), fi.Size()-3)
			return manifest(dir)
		}, "any", "danyue repair"},
		{"value log cut to 0 bytes", func(t *testing.T, dir string) string {
			vlogs, _ := filepath.Glob(filepath.Join(dir, "db", "*.vlog"))
			slices.Sort(vlogs)
			truncate(t, vlogs[len(vlogs)-1], 0)
			return vlogs[len(vlogs)-1]
		}, "any", "danyue repair"},
		{"16 bit flips in the value log", func(t *testing.T, dir string) string {
			vlogs, _ := filepath.Glob(filepath.Join(dir, "db", "*.vlog"))
			slices.Sort(vlogs)
			p := vlogs[len(vlogs)-1]
			fi, _ := os.Stat(p)
			flipBits(t, p, 16, 0, min(fi.Size(), 4096))
			return p
		}, "any", "danyue repair"},
		{"KEYREGISTRY cut to 0 bytes", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "db", "KEYREGISTRY")
			truncate(t, p, 0)
			return p
		}, "any", "danyue repair"},
		{"16 bit flips in KEYREGISTRY", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "db", "KEYREGISTRY")
			fi, _ := os.Stat(p)
			flipBits(t, p, 16, 0, fi.Size())
			return p
		}, "any", "danyue repair"},
		{"DISCARD cut to 0 bytes", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "db", "DISCARD")
			truncate(t, p, 0)
			return p
		}, "any", "danyue repair"},
		{"secrets truncated", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, secretsFile)
			fi, _ := os.Stat(p)
			truncate(t, p, fi.Size()/2)
			return p
		}, "refused", "restore it from a backup"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			testfs.CopyTree(t, base, dir)
			file := tc.damage(t, dir)
			out := openInChild(t, dir)
			missing := missingBooks(acked, out.Books)
			t.Logf("outcome: err=%q lost=%d records (%d changes), missing=%d of %d books", out.Err, len(out.Lost), out.Changes, len(missing), len(acked))
			if out.Err != "" {
				if tc.want == "reported" {
					t.Errorf("refused to open, want it opened with the loss reported: %s", out.Err)
				}
				if !out.Corrupt || !strings.Contains(out.Err, file) || !strings.Contains(out.Err, tc.advice) {
					t.Errorf("refusal does not say ErrCorrupt, name %s and advise %q: %s", file, tc.advice, out.Err)
				}
				return
			}
			if tc.want == "refused" {
				t.Errorf("opened (lost %d records, %d books missing), want a refusal naming %s", len(out.Lost), len(missing), file)
			}
			var silent []int
			for _, b := range missing {
				if name := "book " + key(b).String(); !slices.Contains(out.Lost, name) {
					silent = append(silent, b)
				}
			}
			if len(silent) > 0 {
				t.Errorf("%d books lost acknowledged writes silently (not in the loss report), books %v", len(silent), silent[:min(len(silent), 10)])
			}
		})
	}
}

// damageBase builds a store with acknowledged writes, first flushed to
// tables, then only in the WAL, and copies it while open (what a power cut
// leaves, since every write was synced). It returns the copy and the
// acknowledged state of every book.
func damageBase(t *testing.T) (string, map[int]bookState) {
	t.Helper()
	dir := t.TempDir()
	acked := map[int]bookState{}
	wall := uint64(1_700_000_000_000)
	write := func(s *Store, n int, rng *rand.Rand) {
		for range n {
			b := rng.IntN(damageBooks)
			st := acked[b]
			if rng.IntN(3) == 0 {
				ms := 1 + rng.Uint64N(1000)
				res := apply(t, s, Batch{Build: addReadTime(key(b), ms)})
				st.Slot = res.Changed[0].Entry.Book.ReadTime.Of(dev)
			} else {
				wall++
				apply(t, s, Batch{Entries: []crdt.Entry{pos(t, b, wall, wall%1000)}})
				st.Wall = wall
			}
			acked[b] = st
		}
	}
	rng := rand.New(rand.NewPCG(13, 13))
	for range 2 { // two tables
		s, err := Open(context.Background(), dir, Options{IdleClose: -1, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		write(s, 1500, rng)
		if err := s.Close(); err != nil { // flushes the memtable to a table
			t.Fatal(err)
		}
	}
	s := open(t, dir, Options{IdleClose: -1})
	if err := s.SetLibrary(context.Background(), Library{ID: [16]byte{1}, Secret: [32]byte{2}}); err != nil {
		t.Fatal(err)
	}
	write(s, 3000, rng)
	waitCompacted(t, s)
	base := filepath.Join(t.TempDir(), "base")
	testfs.CopyTree(t, dir, base)
	return base, acked
}

// inChildDirEnv names the directory a test run by runInChild works in.
const inChildDirEnv = "DANYUE_STORE_TEST_DIR"

// runInChild runs test t alone in a child process, in a directory of its
// own that is removed after the child exits, and fails t with the child's
// output if it did not pass.
func runInChild(t *testing.T) {
	t.Helper()
	out, err := childOutput([]string{"-test.run=^" + t.Name() + "$", "-test.v", "-test.count=1"}, inChildDirEnv+"="+t.TempDir())
	if err != nil || !bytes.Contains(out, []byte("--- PASS: "+t.Name())) {
		t.Fatalf("%s in a child process: %v; its output:\n%s", t.Name(), err, lastLines(string(out), 40))
	}
}

// openInChild opens dir in a child process (damageChild) and returns what
// it found; a child that panics or exits otherwise fails the test.
func openInChild(t *testing.T, dir string) damageOutcome {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := startproc.Run(func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=damage", "DANYUE_STORE_DIR="+dir)
		stdout.Reset()
		stderr.Reset()
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		return cmd
	})
	if err != nil {
		t.Fatalf("child opening the damaged store died (%v); stderr:\n%s", err, lastLines(stderr.String(), 30))
	}
	var out damageOutcome
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("child printed %q: %v", stdout.String(), err)
	}
	return out
}

// damageChild opens the store and prints a damageOutcome.
func damageChild(dir string) error {
	var out damageOutcome
	s, err := Open(context.Background(), dir, Options{IdleClose: -1})
	if err != nil {
		out.Err, out.Corrupt = err.Error(), errors.Is(err, ErrCorrupt)
		return json.NewEncoder(os.Stdout).Encode(out)
	}
	defer s.Close()
	if l, ok := s.Loss(); ok {
		out.Changes = l.Changes()
		for _, r := range l.Records {
			out.Lost = append(out.Lost, r.Name())
		}
	}
	out.Books = map[int]bookState{}
	for b := range damageBooks {
		e, ok, err := s.Get(context.Background(), bookID(b))
		if err != nil {
			return err
		}
		if ok {
			out.Books[b] = bookState{Wall: e.Book.Position.At.Wall, Slot: e.Book.ReadTime.Of(dev)}
		}
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// missingBooks lists the books whose acknowledged state is not all there.
func missingBooks(acked, got map[int]bookState) []int {
	var missing []int
	for b, want := range acked {
		if g := got[b]; g.Wall < want.Wall || g.Slot < want.Slot {
			missing = append(missing, b)
		}
	}
	slices.Sort(missing)
	return missing
}

// writtenLen returns the length of a WAL up to its last non-zero byte
// (badger preallocates it).
func writtenLen(t *testing.T, path string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := len(bytes.TrimRight(data, "\x00"))
	if n <= walHeader {
		t.Fatalf("%s holds nothing", path)
	}
	return int64(n)
}

// flipBits flips n random bits of path within [from, to).
func flipBits(t *testing.T, path string, n int, from, to int64) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(len(data)), 16))
	for range n {
		data[from+rng.Int64N(to-from)] ^= 1 << rng.IntN(8)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, path string, size int64) {
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, path string) {
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprint(strings.Join(lines, "\n"))
}

// A table damaged while the store runs, after it was verified at open (so
// the next open in this process does not verify it again), must fail the
// reads of what it holds, not hand them back altered: a changed byte in a
// title still decodes.
//
// The test runs in a child process: the reopen that finds the damage fails,
// and badger's failed open keeps the damaged table's file open (and two
// goroutines running) until the process exits. On Windows an open file
// cannot be deleted, so the directory is the parent's, removed once the
// child is gone.
func TestTableDamagedWhileRunning(t *testing.T) {
	dir := os.Getenv(inChildDirEnv)
	if dir == "" {
		runInChild(t)
		return
	}
	s := open(t, dir, Options{IdleClose: 20 * time.Millisecond})
	ctx := context.Background()
	const title = "The Story of the Stone, volume one"
	var entries []crdt.Entry
	for i := range 50 {
		e, err := crdt.SetTitle(key(i), ts(10), title)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	apply(t, s, Batch{Entries: entries})
	// The first idle close writes the tables, the reopen for this read
	// verifies them, the second close leaves them as they are.
	closed := func() bool { open, _ := s.state(); return !open }
	poll.Until(t, "the idle store to close", 5*time.Second, closed)
	get(t, s, bookID(0))
	poll.Until(t, "the idle store to close again", 5*time.Second, closed)

	ssts, _ := filepath.Glob(filepath.Join(dir, "db", "*.sst"))
	damaged := 0
	for _, p := range ssts {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i := bytes.Index(data, []byte(title)); i >= 0; {
			data[i] ^= 'T' ^ 'P' // "The" -> "Phe", still valid text
			damaged++
			j := bytes.Index(data[i+1:], []byte(title))
			if j < 0 {
				break
			}
			i += 1 + j
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if damaged == 0 {
		t.Fatalf("no title found in the %d tables", len(ssts))
	}
	failed := 0
	for i := range 50 {
		e, ok, err := s.Get(ctx, bookID(i))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("book %d: %v, want ErrCorrupt", i, err)
			}
			failed++
			continue
		}
		if !ok {
			t.Errorf("book %d missing without an error", i)
			continue
		}
		if got := e.Book.Title.Value; got != title {
			t.Fatalf("book %d read back with title %q, want %q or an error", i, got, title)
		}
	}
	if failed == 0 {
		t.Errorf("no read failed after %d titles were damaged", damaged)
	}
}
