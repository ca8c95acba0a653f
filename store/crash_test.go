package store

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
)

// The crash test: a child process applies batches from several goroutines
// and prints each one after Apply returns; the parent kills it with SIGKILL
// after a random number of acknowledgements, reopens the store and checks
// that every acknowledged write is there and every record decodes.

const crashBooks = 200

func TestCrash(t *testing.T) { testCrash(t, false) }

// TestCrashCompacting kills the writer while memtables are flushed and
// level 0 is compacted: the child writes wide batches, so that memtables
// fill every few hundred of them, and compacts at two level-0 tables.
func TestCrashCompacting(t *testing.T) { testCrash(t, true) }

func testCrash(t *testing.T, compacting bool) {
	if testing.Short() {
		t.Skip("crash test spawns processes")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	positions := map[int]crdt.Timestamp{} // book -> latest acknowledged position write
	slot := map[int]uint64{}              // book -> largest acknowledged read-time slot
	var daily, lastSeq uint64
	for round := range 8 {
		killAfter := 20 + rng.IntN(2000)
		role := "crash"
		if compacting {
			killAfter, role = 5000+rng.IntN(50_000), "crash-compacting"
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+role, "DANYUE_STORE_DIR="+dir)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		acks := 0
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var (
				kind      string
				book      int
				a, b, seq uint64
			)
			if _, err := fmt.Sscan(sc.Text(), &kind, &book, &a, &b, &seq); err != nil {
				t.Fatalf("child printed %q: %v", sc.Text(), err)
			}
			switch kind {
			case "pos":
				if at := (crdt.Timestamp{Wall: a, Logical: uint32(b), Device: dev}); at.After(positions[book]) {
					positions[book] = at
				}
			case "rt":
				slot[book] = max(slot[book], a)
				daily += b
			default:
				t.Fatalf("child printed %q", sc.Text())
			}
			lastSeq = max(lastSeq, seq)
			if acks++; acks == killAfter {
				cmd.Process.Kill() // SIGKILL; lines already printed are still read
			}
		}
		err = cmd.Wait()
		tables, _ := filepath.Glob(filepath.Join(dir, "db", "*.sst"))
		slices.Sort(tables)
		newest := "none"
		if len(tables) > 0 {
			newest = filepath.Base(tables[len(tables)-1])
		}
		t.Logf("round %d: %d acknowledged writes, child: %v; %d tables, the newest %s", round, acks, err, len(tables), newest)
		if acks < killAfter {
			t.Fatalf("child exited after %d acknowledgements: %v", acks, err)
		}
		checkCrash(t, dir, positions, slot, daily, lastSeq)
	}
}

func checkCrash(t *testing.T, dir string, positions map[int]crdt.Timestamp, slot map[int]uint64, daily, lastSeq uint64) {
	t.Helper()
	s := open(t, dir, Options{})
	defer s.Close()
	if l, ok := s.Loss(); ok { // a kill leaves the page cache: nothing is lost
		t.Fatalf("a kill -9 reported a loss of acknowledged changes: %+v", l)
	}
	if s.LastSeq() < lastSeq {
		t.Fatalf("LastSeq %d after a crash, but %d was acknowledged", s.LastSeq(), lastSeq)
	}
	for b, at := range positions {
		e, ok := get(t, s, bookID(b))
		if !ok || e.Book.Position.At.Compare(at) < 0 {
			t.Errorf("book %d: position written at %v is acknowledged, store has %v", b, at, e.Book.Position.At)
		}
	}
	for b, ms := range slot {
		e, _ := get(t, s, bookID(b))
		if got := e.Book.ReadTime.Of(dev); got < ms {
			t.Errorf("book %d: read time %d acknowledged, store has %d", b, ms, got)
		}
	}
	days, err := s.Daily(context.Background(), "2000-01-01", "2100-01-01")
	if err != nil {
		t.Fatal(err)
	}
	var sum uint64
	for _, d := range days {
		sum += d.Ms
	}
	if sum < daily {
		t.Errorf("daily statistics hold %d ms, %d acknowledged", sum, daily)
	}
	// Every record decodes, once in the index, and the index matches the records.
	records := 0
	if err := s.Scan(context.Background(), crdt.KindBook, func(crdt.Entry) error { records++; return nil }); err != nil {
		t.Fatalf("Scan after a crash: %v", err)
	}
	seqs, _ := since(t, s, 0, 0)
	if len(seqs) != records || records < len(positions) {
		t.Errorf("%d index entries, %d records, %d books acknowledged", len(seqs), records, len(positions))
	}
}

// crashChild writes until it is killed, printing every acknowledged write:
// "pos BOOK WALL LOGICAL SEQ" or "rt BOOK SLOT ADDED SEQ".
func crashChild(dir string, compacting bool) error {
	ctx := context.Background()
	opt, wide := Options{}, 3
	if compacting {
		opt.l0Compact, wide = 2, 60
	}
	s, err := Open(ctx, dir, opt)
	if err != nil {
		return err
	}
	var (
		mu    sync.Mutex
		clock = crdt.NewClock(dev, s.ClockHighWater())
		errs  = make(chan error, 4)
	)
	now := func() crdt.Timestamp {
		mu.Lock()
		defer mu.Unlock()
		return clock.Now(uint64(time.Now().UnixMilli()))
	}
	ack := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	for w := range 4 {
		go func() {
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
			for {
				book := rng.IntN(crashBooks)
				if rng.IntN(2) == 0 {
					// A batch of several books, atomically.
					var entries []crdt.Entry
					var stamps []crdt.Timestamp
					for j := range wide {
						at := now()
						e, err := crdt.SetPosition(key((book+j)%crashBooks), at, rng.Uint64N(1<<30), 0.5)
						if err != nil {
							errs <- err
							return
						}
						entries, stamps = append(entries, e), append(stamps, at)
					}
					res, err := s.Apply(ctx, Batch{Entries: entries})
					if err != nil {
						errs <- err
						return
					}
					seq := s.LastSeq()
					if n := len(res.Changed); n > 0 {
						seq = res.Changed[n-1].Seq
					}
					for j, at := range stamps {
						ack("pos %d %d %d %d", (book+j)%crashBooks, at.Wall, at.Logical, seq)
					}
					continue
				}
				ms := 1 + rng.Uint64N(100)
				day := time.Now().Format(time.DateOnly)
				res, err := s.Apply(ctx, Batch{Build: addReadTime(key(book), ms), Daily: &DailyAdd{day, ms}})
				if err != nil {
					errs <- err
					return
				}
				c := res.Changed[0]
				ack("rt %d %d %d %d", book, c.Entry.Book.ReadTime.Of(dev), ms, c.Seq)
			}
		}()
	}
	return <-errs
}
