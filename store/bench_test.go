package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
)

// Fixtures: populated stores shared by the benchmarks and measurements of
// one run, removed by TestMain.
var fixtures struct {
	sync.Mutex
	root string
	dirs map[int]string
}

// fixture returns a closed store holding n books, made once per run.
func fixture(tb testing.TB, n int) string {
	tb.Helper()
	fixtures.Lock()
	defer fixtures.Unlock()
	if dir, ok := fixtures.dirs[n]; ok {
		return dir
	}
	if fixtures.root == "" {
		root, err := os.MkdirTemp("", "danyue-store-fixtures-")
		if err != nil {
			tb.Fatal(err)
		}
		fixtures.root, fixtures.dirs = root, map[int]string{}
	}
	dir := filepath.Join(fixtures.root, fmt.Sprint(n))
	start := time.Now()
	populate(tb, dir, n)
	tb.Logf("populated a store with %d books in %v", n, time.Since(start))
	fixtures.dirs[n] = dir
	return dir
}

func removeFixtures() {
	if fixtures.root != "" {
		os.RemoveAll(fixtures.root)
	}
}

// book is a realistic record: a position, a title and two devices' read time.
func book(tb testing.TB, i int, wall uint64) crdt.Entry {
	e := pos(tb, i, wall, uint64(i)*1000)
	title, err := crdt.SetTitle(key(i), ts(wall), fmt.Sprintf("Collected Works, volume %d", i))
	if err != nil {
		tb.Fatal(err)
	}
	e.Book.Merge(&title.Book)
	e.Book.ReadTime = crdt.ReadTime{{Device: dev, Ms: 3_600_000}, {Device: dev + 1, Ms: 1_200_000}}
	return e
}

func populate(tb testing.TB, dir string, n int) {
	s, err := Open(context.Background(), dir, Options{IdleClose: -1})
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < n; i += MaxBatchEntries {
		entries := make([]crdt.Entry, 0, MaxBatchEntries)
		for j := i; j < min(n, i+MaxBatchEntries); j++ {
			entries = append(entries, book(tb, j, 1_700_000_000_000))
		}
		if _, err := s.Apply(context.Background(), Batch{Entries: entries}); err != nil {
			tb.Fatal(err)
		}
	}
	waitCompacted(tb, s)
}

func waitCompacted(tb testing.TB, s *Store) {
	poll.Until(tb, "compaction", time.Minute, s.compacted)
}

// benchApply measures acknowledged durable writes per second from writers
// concurrent callers, each write one position update of one of 10,000 books.
func benchApply(b *testing.B, writers int) {
	s := open(b, b.TempDir(), Options{Logger: testLogger(b)})
	var next atomic.Int64
	entries := make([]crdt.Entry, 10_000)
	for i := range entries {
		entries[i] = pos(b, i, 1, 1)
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				e := entries[i%int64(len(entries))]
				e.Book.Position.At.Wall = uint64(i) + 1
				e.Book.Furthest = e.Book.Position
				if _, err := s.Apply(context.Background(), Batch{Entries: []crdt.Entry{e}}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
	b.ReportMetric(float64(s.synced.Load())/float64(s.syncs.Load()), "writes/sync")
}

// BenchmarkApplyFlood measures records merged per second from a peer that
// sends new books in batches of 512, as the sync protocol does, while the
// store grows, its compactions included: with -benchtime=300000x the store
// grows well past its memtables, as under a flooding member.
func BenchmarkApplyFlood(b *testing.B) {
	s := open(b, b.TempDir(), Options{Logger: testLogger(b)})
	b.ResetTimer()
	for i := 0; i < b.N; i += 512 {
		n := min(b.N, i+512)
		entries := make([]crdt.Entry, 0, n-i)
		for j := i; j < n; j++ {
			entries = append(entries, book(b, j, 1_700_000_000_000))
		}
		c := &Cursor{Device: dev + 2, Epoch: 1, Seq: uint64(n)}
		if _, err := s.Apply(context.Background(), Batch{Entries: entries, Cursor: c}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

func BenchmarkApply1(b *testing.B)  { benchApply(b, 1) }
func BenchmarkApply16(b *testing.B) { benchApply(b, 16) }

// openFixture opens a copy-free fixture for reading and waits for any
// compaction its open started.
func openFixture(b *testing.B, n int) *Store {
	dir := fixture(b, n)
	s := open(b, dir, Options{IdleClose: -1, Logger: testLogger(b)})
	waitCompacted(b, s)
	return s
}

func BenchmarkSince100k(b *testing.B) {
	s := openFixture(b, 100_000)
	b.ResetTimer()
	records := 0
	for range b.N {
		err := s.Since(context.Background(), 0, 0, func(uint64, []byte) error { records++; return nil })
		if err != nil {
			b.Fatal(err)
		}
	}
	if records != b.N*100_000 {
		b.Fatalf("%d records in %d scans", records, b.N)
	}
	b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
}

func BenchmarkScan100k(b *testing.B) {
	s := openFixture(b, 100_000)
	b.ResetTimer()
	records := 0
	for range b.N {
		err := s.Scan(context.Background(), crdt.KindBook, func(crdt.Entry) error { records++; return nil })
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
}

func BenchmarkGet100k(b *testing.B) {
	s := openFixture(b, 100_000)
	b.ResetTimer()
	for i := range b.N {
		if _, ok, err := s.Get(context.Background(), bookID(i*7919%100_000)); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkReopen100k reports what the first read after an idle close
// costs a store of 100,000 books: the reopen that the first call pays once
// the database was closed for idleness (Options.IdleClose), beside the read
// itself (BenchmarkGet100k).
func BenchmarkReopen100k(b *testing.B) {
	s := openFixture(b, 100_000)
	_, before := s.state()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		s.closeIdle()
		b.StartTimer()
		if _, ok, err := s.Get(context.Background(), bookID(i*7919%100_000)); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
	b.StopTimer()
	if _, opens := s.state(); opens-before != b.N {
		b.Fatalf("%d reopens in %d reads after an idle close", opens-before, b.N)
	}
}

// BenchmarkOpen100k reports the time to open a store of 100,000 books.
func BenchmarkOpen100k(b *testing.B) {
	dir := fixture(b, 100_000)
	b.ResetTimer()
	var total time.Duration
	for range b.N {
		start := time.Now()
		s, err := Open(context.Background(), dir, Options{IdleClose: -1, Logger: testLogger(b)})
		if err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		b.StopTimer()
		waitCompacted(b, s)
		s.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "open-ms")
}
