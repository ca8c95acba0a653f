package store

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/table"
	"golang.org/x/sys/unix"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
	"github.com/danyue/danyue/internal/resident"
)

// residentTables is the resident size of this process's mappings of the
// tables in dir.
func residentTables(t *testing.T, dir string) (kb int64) {
	t.Helper()
	for _, n := range residentByTable(t, dir) {
		kb += n
	}
	return kb
}

// residentByTable is the resident size of each of this process's mappings
// of the tables in dir, by path.
func residentByTable(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	kb, err := residentKB(func(path string) bool { return filepath.Dir(path) == dir && strings.HasSuffix(path, ".sst") })
	if err != nil {
		t.Fatal(err)
	}
	return kb
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

// The store hands memory back (releaseMemory) once it has opened, and
// again once a burst of work that grew the mapped pages is over: a burst
// of writes and a scan of every book.
func TestReleaseAfterBurst(t *testing.T) {
	s := open(t, t.TempDir(), Options{IdleClose: -1})
	released := func(n int64) func() bool { return func() bool { return s.releases.Load() >= n } }
	poll.Until(t, "a release after the open", 30*time.Second, released(1))
	fill(t, s, 40_000)
	countBooks(t, s)
	poll.Until(t, "a release after the burst", 30*time.Second, released(2))
}

// Trimming an open database drops the mappings of its pinned tables'
// data; while it closes (and compacts level 0) no table is pinned, and
// their data pages are paged out. Either way the indexes stay mapped and
// every book reads as before.
func TestDropTablePages(t *testing.T) {
	tests := []struct {
		name string
		drop func(t *testing.T, s *Store, db *badger.DB, dir string)
	}{
		{"trim", func(t *testing.T, s *Store, db *badger.DB, dir string) {
			if err := newTrimmer(db).trim(db, dir); err != nil {
				t.Fatal(err)
			}
		}},
		{"page out while closing", func(t *testing.T, s *Store, db *badger.DB, dir string) {
			before, books := residentTables(t, dir), countBooks(t, s)
			now, _ := mappedFileBytes()
			if got := s.pageOutTables(dir, now); got > now {
				t.Errorf("mapped pages %d after no growth, were %d", got, now)
			}
			if after := residentTables(t, dir); after < before*3/4 {
				t.Errorf("resident tables %d KiB after a check with no growth, %d KiB before: paged out", after, before)
			}
			s.pageOutTables(dir, 0)
			if !pageOutWorks(t) {
				// Kernels before 5.4 refuse the advice, and an emulator
				// (qemu-user) may ignore it: the tables stay resident.
				t.Log("this system does not page file mappings out (MADV_PAGEOUT); checking only that nothing is lost")
				after := residentTables(t, dir)
				if got := countBooks(t, s); got != books || after > before {
					t.Errorf("%d books (want %d), resident tables %d KiB after paging out, %d KiB before", got, books, after, before)
				}
				t.SkipNow()
			}
		}},
	}
	for _, tt := range tests {
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
			tt.drop(t, s, db, dir)
			after := residentTables(t, dir)
			t.Logf("resident tables: %d KiB before, %d KiB after", before, after)
			if after > before/4 {
				t.Errorf("resident tables %d KiB after dropping, %d KiB before", after, before)
			}
			// The pages come back: nothing is lost.
			if got := countBooks(t, s); got != books {
				t.Errorf("%d books after dropping, want %d", got, books)
			}
		})
	}
}

// A trim pages the memtables' logs out too, and writes go on into them.
// (TestCrashCompacting checks that what a log held comes back on replay:
// the trimmers of its writers page their logs out as they go.)
func TestTrimPagesOutMemtableLogs(t *testing.T) {
	s := open(t, t.TempDir(), Options{IdleClose: -1})
	haltTrimmer(s)
	const books = 2000 // well inside one memtable
	fill(t, s, books)
	db, dir := tablesOf(t, s)
	logs := func() (kb int64) {
		t.Helper()
		byPath, err := residentKB(func(path string) bool { return filepath.Dir(path) == dir && strings.HasSuffix(path, ".mem") })
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range byPath {
			kb += n
		}
		return kb
	}
	before := logs()
	if before == 0 {
		t.Fatal("no memtable log resident after writing to it: nothing to test")
	}
	if err := newTrimmer(db).trim(db, dir); err != nil {
		t.Fatal(err)
	}
	after := logs()
	t.Logf("resident memtable logs: %d KiB before, %d KiB after", before, after)
	if pageOutWorks(t) && after > before/4 {
		t.Errorf("resident memtable logs %d KiB after a trim, %d KiB before", after, before)
	}
	fill(t, s, 2*books)
	if got := countBooks(t, s); got != 2*books {
		t.Errorf("%d books after writing on into a paged-out log, want %d", got, 2*books)
	}
}

// pageOutWorks reports whether MADV_PAGEOUT takes a page of a shared file
// mapping out of this process's resident set here.
func pageOutWorks(t *testing.T) bool {
	t.Helper()
	path := filepath.Join(t.TempDir(), "probe")
	const size = 64 << 10
	if err := os.WriteFile(path, make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	sum := 0
	for i := 0; i < size; i += os.Getpagesize() {
		sum += int(m[i])
	}
	resident := func() int64 {
		kb, err := residentKB(func(p string) bool { return p == path })
		if err != nil {
			t.Fatal(err)
		}
		return kb[path]
	}
	before := resident()
	if err := unix.Madvise(m, unix.MADV_PAGEOUT); err != nil {
		return false
	}
	return before > 0 && resident() < before && sum == 0
}

// While the store opens (and closes) no trimmer runs: what it maps of the
// tables meanwhile (badger reading every table's index when it opens, and
// the pages the kernel maps around them) is paged out as it grows, down to
// the indexes.
func TestPagingOutTables(t *testing.T) {
	if !pageOutWorks(t) {
		t.Skip("this system does not page file mappings out (MADV_PAGEOUT)")
	}
	s := open(t, t.TempDir(), Options{IdleClose: -1})
	haltTrimmer(s)
	const books = 20_000
	fill(t, s, books)
	db, dir := tablesOf(t, s)
	unix.Sync() // the kernel pages out no dirty page
	if err := newTrimmer(db).trim(db, dir); err != nil {
		t.Fatal(err)
	}
	indexes := residentTables(t, dir)
	const slack = trimAbove >> 10 // KiB mapped since the last page-out
	err := s.pagingOutTables(func() error {
		if got := countBooks(t, s); got != books { // reads every table
			return fmt.Errorf("%d books, want %d", got, books)
		}
		poll.Until(t, "the tables' data pages to be paged out", 10*time.Second, func() bool { return residentTables(t, dir) <= indexes+slack })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Without it, the same scan keeps them.
	countBooks(t, s)
	if scanned := residentTables(t, dir); scanned < indexes+2*slack {
		t.Fatalf("%d KiB of tables resident after a full scan, %d KiB of indexes: nothing to test", scanned, indexes)
	}
}

// After a trim the tables' indexes stay mapped, so that pinning them again
// (db.Tables reads every table's index) maps nothing more: dropped, every
// table would come back with the pages the kernel maps around a fault.
func TestTrimKeepsIndexesMapped(t *testing.T) {
	s := open(t, t.TempDir(), Options{IdleClose: -1})
	haltTrimmer(s)
	fill(t, s, 10_000)
	db, dir := tablesOf(t, s)
	countBooks(t, s)
	tr := newTrimmer(db)
	if err := tr.trim(db, dir); err != nil {
		t.Fatal(err)
	}
	trimmed := residentByTable(t, dir)
	db.Tables()
	listed := residentByTable(t, dir)
	n := 0
	for path, kb := range trimmed {
		if was, ok := listed[path]; ok {
			n++
			if was > kb {
				t.Errorf("%s: %d KiB resident after a trim, %d KiB after listing the tables", filepath.Base(path), kb, was)
			}
		}
	}
	if n == 0 {
		t.Fatal("no table mapped through both reads: nothing to test")
	}
	if len(tr.tails) == 0 {
		t.Error("the trimmer remembers no table's index")
	}
}

// A trim drops the mappings (pins) only of the tables listed at the last
// trim as well as at this one: a table that joined the tree since is paged
// out instead, and pinned from the next trim on.
func TestTrimPinsTablesListedTwice(t *testing.T) {
	s := open(t, t.TempDir(), Options{IdleClose: -1})
	haltTrimmer(s)
	fill(t, s, 10_000)
	db, dir := tablesOf(t, s)
	tr := newTrimmer(db)
	first := tr.listed
	if len(first) == 0 {
		t.Fatal("no table after writing 10,000 books: nothing to test")
	}
	fill(t, s, 40_000)
	joined := func() (ids []uint64) {
		for id := range treeTables(db) {
			if !first[id] {
				ids = append(ids, id)
			}
		}
		return ids
	}
	if len(joined()) == 0 {
		t.Fatal("no table joined the tree after writing 30,000 more books: nothing to test")
	}
	if err := tr.trim(db, dir); err != nil {
		t.Fatal(err)
	}
	for id := range tr.tails {
		if !first[id] {
			t.Errorf("table %d, listed for the first time, was pinned", id)
		}
	}
	if err := tr.trim(db, dir); err != nil {
		t.Fatal(err)
	}
	pinned := 0
	for _, id := range joined() {
		if _, ok := tr.tails[id]; ok {
			pinned++
		}
	}
	if pinned == 0 {
		t.Error("no table that joined the tree was pinned at the trim after it was first listed")
	}
}

func TestTableDataLen(t *testing.T) {
	s := open(t, t.TempDir(), Options{IdleClose: -1})
	fill(t, s, 10_000)
	db, dir := tablesOf(t, s)
	page := uint64(os.Getpagesize())
	// The memtables reach level 0 in the background.
	var tables []badger.TableInfo
	for deadline := time.Now().Add(10 * time.Second); len(tables) == 0; tables = db.Tables() {
		if time.Now().After(deadline) {
			t.Fatal("no tables after 10 s: nothing to test")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, tb := range tables {
		path := table.NewFilename(tb.ID, dir)
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		size := uint64(fi.Size())
		n, err := tableDataLen(path)
		if err != nil {
			t.Fatal(err)
		}
		// The index ends 8 bytes and a checksum of a few bytes before
		// the end of the file.
		indexStart := size - uint64(tb.IndexSz) - 8
		if n%page != 0 || n > indexStart || n+page+64 < indexStart {
			t.Errorf("table %d (%d bytes, index of %d bytes): data length %d, want the index's start rounded down to a page", tb.ID, size, tb.IndexSz, n)
		}
	}

	bad := filepath.Join(t.TempDir(), "000001.sst")
	for _, footer := range [][]byte{
		{1, 2},                            // shorter than a length
		{0, 0, 0, 0xff, 0, 0, 0, 0},       // a checksum longer than the file
		{0, 0, 0xff, 0, 0, 0, 0, 0, 0, 0}, // an index longer than the file
	} {
		if err := os.WriteFile(bad, footer, 0o600); err != nil {
			t.Fatal(err)
		}
		if n, err := tableDataLen(bad); err == nil {
			t.Errorf("footer %x: data length %d, want an error", footer, n)
		}
	}
}

// A table that a compaction deletes between the reading of the process's
// mappings and the advice to it (ENOMEM: its range is no longer mapped)
// must not stop the other tables' pages from being dropped.
func TestDropTablePagesOutlivesAnUnmappedTable(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const size = 256 << 10
	maps := make(map[uint64][]byte)
	t.Cleanup(func() {
		for _, m := range maps {
			unix.Munmap(m)
		}
	})
	for _, id := range []uint64{1, 2} {
		path := table.NewFilename(id, dir)
		if err := os.WriteFile(path, make([]byte, size), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		maps[id] = m
		// Each page is read and the sum used, so the loads stay.
		var sum byte
		for i := 0; i < size; i += os.Getpagesize() {
			sum += m[i]
		}
		if sum != 0 {
			t.Fatalf("%s reads back %d, not zeros", path, sum)
		}
	}
	for path, kb := range residentByTable(t, dir) {
		if kb == 0 {
			t.Fatalf("%s not resident after reading it: nothing to test", filepath.Base(path))
		}
	}
	var gone uint64
	err = dropMappedPages(dir, func(id uint64, path string) (uint64, bool) {
		if gone == 0 { // the first one met is deleted under the trimmer
			gone = id
			if err := unix.Munmap(maps[id]); err != nil {
				t.Fatal(err)
			}
			delete(maps, id)
			return size, false
		}
		return size, true
	})
	if err != nil {
		t.Errorf("dropMappedPages: %v", err)
	}
	if gone == 0 {
		t.Fatal("no table met: nothing to test")
	}
	for path, kb := range residentByTable(t, dir) {
		if kb > 0 {
			t.Errorf("%s: %d KiB still resident", filepath.Base(path), kb)
		}
	}
}

// Trimming while compactions replace tables and readers read them must
// neither lose nor damage anything (a table unmapped under the advice
// would, or crash the process).
func TestTrimTablesUnderCompaction(t *testing.T) {
	s := open(t, t.TempDir(), Options{IdleClose: -1, l0Compact: 2})
	db, dir := tablesOf(t, s)
	tr := new(trimmer)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := tr.trim(db, dir); err != nil {
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
}

// residentKB is the resident size of this process's mappings of the files
// whose path match says true of, by path, from /proc/self/smaps.
func residentKB(match func(path string) bool) (map[string]int64, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	kb := make(map[string]int64)
	var in string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "Rss:"); ok {
			if in != "" {
				n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				if err != nil {
					return nil, fmt.Errorf("smaps: %q: %w", line, err)
				}
				kb[in] += n
			}
			continue
		}
		// A mapping's first line; the fields of one have a name ending in
		// a colon.
		if f := strings.Fields(line); len(f) >= 5 && !strings.HasSuffix(f[0], ":") {
			m, _ := resident.ParseMapsLine(line)
			in = ""
			if match(m.Path) {
				in = m.Path
			}
		}
	}
	return kb, sc.Err()
}
