package store

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/startproc"
)

// childEnv makes the test binary act as a child process of a test (crash,
// lock, damage) instead of running tests.
const childEnv = "DANYUE_STORE_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(runChild(role))
	}
	code := m.Run()
	removeFixtures()
	if code == 0 {
		// A failed badger open leaves two of its goroutines running
		// (handle.go); TestTableDamagedWhileRunning fails one, in a child
		// process (runInChild) that runs this check too.
		if err := goleak.Find(
			goleak.IgnoreTopFunction("github.com/dgraph-io/ristretto/v2/z.(*AllocatorPool).freeupAllocators"),
			goleak.IgnoreTopFunction("github.com/dgraph-io/badger/v4.(*DB).monitorCache"),
		); err != nil {
			fmt.Fprintln(os.Stderr, "goleak: leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func runChild(role string) int {
	dir := os.Getenv("DANYUE_STORE_DIR")
	var err error
	switch role {
	case "lock":
		err = lockChild(dir)
	case "crash":
		err = crashChild(dir, false)
	case "crash-compacting":
		err = crashChild(dir, true)
	case "damage":
		err = damageChild(dir)
	default:
		err = fmt.Errorf("unknown child role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// childOutput runs this test binary with args and the extra environment
// env, and returns what it wrote to stdout and stderr, in one stream.
func childOutput(args []string, env ...string) ([]byte, error) {
	var out bytes.Buffer
	err := startproc.Run(func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), env...)
		out.Reset()
		cmd.Stdout, cmd.Stderr = &out, &out
		return cmd
	})
	return out.Bytes(), err
}

// tlog is an slog handler target that writes to t.Log.
type tlog struct{ t testing.TB }

func (w tlog) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tlog{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// open opens a store in dir for the test and closes it at cleanup.
func open(t testing.TB, dir string, opt Options) *Store {
	t.Helper()
	if opt.Logger == nil {
		opt.Logger = testLogger(t)
	}
	s, err := Open(context.Background(), dir, opt)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

const dev crdt.DeviceID = 0xd1

func key(i int) crdt.BookKey { return crdt.MustParseBookKey(fmt.Sprintf("md5:%032x", i)) }

func ts(wall uint64) crdt.Timestamp { return crdt.Timestamp{Wall: wall, Device: dev} }

// pos is a position write to book i at wall time wall.
func pos(t testing.TB, i int, wall, char uint64) crdt.Entry {
	t.Helper()
	e, err := crdt.SetPosition(key(i), ts(wall), char, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func idOf(e crdt.Entry) []byte { return e.AppendID(nil) }

func bookID(i int) []byte { return idOf(crdt.BookEntry(crdt.Book{Key: key(i)})) }

func apply(t testing.TB, s *Store, b Batch) Result {
	t.Helper()
	res, err := s.Apply(context.Background(), b)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return res
}

func get(t testing.TB, s *Store, id []byte) (crdt.Entry, bool) {
	t.Helper()
	e, ok, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return e, ok
}

// since collects Since's output, decoded.
func since(t testing.TB, s *Store, after uint64, limit int) (seqs []uint64, entries []crdt.Entry) {
	t.Helper()
	err := s.Since(context.Background(), after, limit, func(seq uint64, data []byte) error {
		e, err := crdt.Decode(data)
		if err != nil {
			return err
		}
		seqs, entries = append(seqs, seq), append(entries, e)
		return nil
	})
	if err != nil {
		t.Fatalf("Since: %v", err)
	}
	return seqs, entries
}

// fill writes n books in full batches.
func fill(t *testing.T, s *Store, n int) {
	t.Helper()
	for i := 0; i < n; i += MaxBatchEntries {
		entries := make([]crdt.Entry, 0, MaxBatchEntries)
		for j := i; j < min(n, i+MaxBatchEntries); j++ {
			entries = append(entries, book(t, j, 1_700_000_000_000))
		}
		apply(t, s, Batch{Entries: entries})
	}
}

// countBooks scans every book, checking that each decodes.
func countBooks(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	if err := s.Scan(context.Background(), crdt.KindBook, func(crdt.Entry) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}
