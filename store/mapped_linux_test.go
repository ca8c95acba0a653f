package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/danyue/danyue/crdt"
)

func TestParseMapsLine(t *testing.T) {
	tests := []struct {
		line       string
		start, end uint64
		path       string
		ok         bool
	}{
		{"7f1c2a000000-7f1c2a100000 rw-s 00000000 08:01 1234 /data/db/000012.sst", 0x7f1c2a000000, 0x7f1c2a100000, "/data/db/000012.sst", true},
		{"7f1c2a000000-7f1c2a100000 rw-s 00000000 08:01 1234                     /a dir/db/000012.sst", 0x7f1c2a000000, 0x7f1c2a100000, "/a dir/db/000012.sst", true},
		{"7f1c2a000000-7f1c2a100000 rw-s 00000000 08:01 1234 /data/db/000012.sst (deleted)", 0x7f1c2a000000, 0x7f1c2a100000, "/data/db/000012.sst (deleted)", true},
		{"c000000000-c004000000 rw-p 00000000 00:00 0 ", 0, 0, "", false},
		{"c000000000-c004000000 rw-p 00000000 00:00 0", 0, 0, "", false},
		{"7ffd5c1f1000-7ffd5c212000 rw-p 00000000 00:00 0                          [stack]", 0x7ffd5c1f1000, 0x7ffd5c212000, "[stack]", true},
		{"zz-7f rw-p 00000000 00:00 0 /x", 0, 0, "", false},
		{"7f-7e rw-p 00000000 00:00 0 /x", 0, 0, "", false},
		{"", 0, 0, "", false},
	}
	for _, tt := range tests {
		start, end, path, ok := parseMapsLine(tt.line)
		if ok != tt.ok || ok && (start != tt.start || end != tt.end || path != tt.path) {
			t.Errorf("parseMapsLine(%q) = %x, %x, %q, %v; want %x, %x, %q, %v",
				tt.line, start, end, path, ok, tt.start, tt.end, tt.path, tt.ok)
		}
	}
}

// residentTables is the resident size of this process's mappings of the
// tables in dir.
func residentTables(t *testing.T, dir string) (kb int64) {
	t.Helper()
	kb, err := residentKB(func(path string) bool { return filepath.Dir(path) == dir && strings.HasSuffix(path, ".sst") })
	if err != nil {
		t.Fatal(err)
	}
	return kb
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

// tablesOf returns the store's open database, held until cleanup, and
// the directory its tables are mapped from.
func tablesOf(t *testing.T, s *Store) (*badger.DB, string) {
	t.Helper()
	db, err := s.acquire()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.release)
	dir, err := filepath.EvalSymlinks(s.dbDir)
	if err != nil {
		t.Fatal(err)
	}
	return db, dir
}

// haltTrimmer stops the store's own trimmer, for a test that trims.
func haltTrimmer(s *Store) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trim.halt()
	s.trim = nil
}

// trimWay is one way the trimmer drops table pages.
type trimWay struct {
	name    string
	trim    func(s *Store, db *badger.DB, dir string) error
	pageout bool // works only where pageoutWorks
}

// trims are the ways the trimmer drops table pages: paging out every
// table, where the kernel can, else dropping the mappings of the tables an
// iterator pins, and the trimmer's own choice between the two. Each call
// makes a new trimmer, which probes the kernel at its first trim.
func trims() []trimWay {
	tr := new(trimmer)
	return []trimWay{
		{"page out", func(_ *Store, _ *badger.DB, dir string) error { return dropTablePages(dir, nil) }, true},
		{"pinned", func(_ *Store, db *badger.DB, dir string) error { return trimTables(db, dir) }, false},
		{"trimmer", tr.trim, false},
	}
}

// probePageout asks pageoutWorks in dir, checking that it leaves no file
// there.
func probePageout(t *testing.T, dir string) bool {
	t.Helper()
	names := func() []string {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}
	was := names()
	works, err := pageoutWorks(dir)
	if err != nil {
		t.Fatal(err)
	}
	if now := names(); !slices.Equal(now, was) {
		t.Errorf("probing left %v in the store's directory, which held %v", now, was)
	}
	return works
}

// trimOrSkip trims, skipping the test where the kernel cannot page out.
func trimOrSkip(t *testing.T, trim func(*Store, *badger.DB, string) error, s *Store, db *badger.DB, dir string) error {
	t.Helper()
	err := trim(s, db, dir)
	if errors.Is(err, errNoPageout) {
		t.Skip("the kernel does not know MADV_PAGEOUT")
	}
	return err
}

func TestTrimTablesDropsResidentPages(t *testing.T) {
	for _, tt := range trims() {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t, t.TempDir(), Options{IdleClose: -1})
			haltTrimmer(s)
			const books = 10_000
			fill(t, s, books)
			db, dir := tablesOf(t, s)
			if got := countBooks(t, s); got != books { // reads every table
				t.Fatalf("%d books, want %d", got, books)
			}
			before := residentTables(t, dir)
			if before < 1024 {
				t.Fatalf("only %d KiB of tables resident after a full scan: nothing to test", before)
			}
			works := true
			if tt.pageout {
				works = probePageout(t, filepath.Dir(dir))
			}
			if err := trimOrSkip(t, tt.trim, s, db, dir); err != nil {
				t.Fatal(err)
			}
			after := residentTables(t, dir)
			t.Logf("resident tables: %d KiB before, %d KiB after", before, after)
			// The pages come back from the page cache or the disk:
			// nothing is lost.
			if got := countBooks(t, s); got != books {
				t.Errorf("%d books after trimming, want %d", got, books)
			}
			// The probe must agree with what the advice did to the
			// tables: it decides whether the trimmer uses it.
			switch dropped := after <= before/4; {
			case dropped && !works:
				t.Errorf("resident tables %d KiB after paging out, %d KiB before, yet pageoutWorks says the advice does nothing here", after, before)
			case !dropped && !works:
				t.Skipf("MADV_PAGEOUT is accepted and does nothing here (as under qemu's user-mode emulation; %d KiB of tables still resident): the trimmer drops the pinned tables' mappings instead", after)
			case !dropped:
				t.Errorf("resident tables %d KiB after trimming, %d KiB before", after, before)
			}
		})
	}
}

// Trimming while compactions replace tables and readers read them must
// neither lose nor damage anything (a table unmapped under the advice
// would, or crash the process).
func TestTrimTablesUnderCompaction(t *testing.T) {
	for _, tt := range trims() {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t, t.TempDir(), Options{IdleClose: -1, l0Compact: 2})
			db, dir := tablesOf(t, s)
			if err := trimOrSkip(t, tt.trim, s, db, dir); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := tt.trim(s, db, dir); err != nil {
						t.Error(err)
						return
					}
					time.Sleep(time.Millisecond)
				}
			})
			const books, rounds = 4000, 5
			for r := range rounds {
				for i := 0; i < books; i += MaxBatchEntries {
					entries := make([]crdt.Entry, 0, MaxBatchEntries)
					for j := i; j < min(books, i+MaxBatchEntries); j++ {
						entries = append(entries, book(t, j, uint64(1_700_000_000_000+r)))
					}
					apply(t, s, Batch{Entries: entries})
				}
				if got := countBooks(t, s); got != books {
					t.Fatalf("round %d: %d books, want %d", r, got, books)
				}
			}
			close(stop)
			wg.Wait()
			for i := range books {
				e, ok := get(t, s, bookID(i))
				if !ok || e.Book.Title.Value != fmt.Sprintf("Collected Works, volume %d", i) {
					t.Fatalf("book %d after trimming under compaction: %v %+v", i, ok, e.Book.Title)
				}
			}
		})
	}
}
