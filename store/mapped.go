package store

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/danyue/danyue/internal/resident"
)

// Mapped table pages. badger reads and writes its tables through shared
// memory maps and never unmaps a live table, so every page of every table
// it has written, compacted or read since it opened stays in the process's
// resident set: after a flood of a million records that is the whole
// database, several times the heap. The pages belong to the page cache,
// which the kernel reclaims under pressure, but they count as the daemon's
// RSS, and on a phone a process's RSS is what the system kills it for.
//
// So while the database is open, a trimmer checks the mapped file pages
// (a read of /proc/self/statm) and drops the tables' resident pages (and
// the memtables' logs', dropMappedPages) from the process's mappings when
// they have grown by trimAbove since it last did, and once more when a
// burst is over. It checks every trimFast while they grow, for a
// compaction maps tens of MB within a few hundred ms: checked every 100 ms
// above 4 MB, the table pages peaked at 28 MB in a flood of a million
// records and the process at 100-104 MB; every 25 ms above 2 MB, at 17 MB
// and 85-92 MB (85-95 MB with the back off). Every 10 ms above 1 MB, a
// device joining 100,000 books from two others peaked at 37.3-40.4 MB
// (median 38.6, 6 of 7 runs at 40 or less) instead of 38.3-43.9 (median
// 40.0, 4 of 8), bulk API writes at 36.0-41.4 MB (median 39.5, 7 runs)
// against 36.0-41.6 (37.9, 8), joins as fast (2.3-3.2 s; TestMeasureScale,
// alternating the builds). Each trim also drops the executable's pages
// (dropExecutable), which a burst maps again within a check: those count
// only while the tables grow (tableBytes). Counting them throughout,
// a million books joined with a peak of 67.5 MB instead of 70.7, the
// table pages at the sampled peak 19 MB instead of 29 (one run each).
// While they do not grow it backs off to trimSlow, as a tick every 25 ms
// doubled what an open, idle store costs: 1.8% of a core and 250 context
// switches a second with a check every 100 ms, 3.4% and 770 every 25 ms,
// 1.3% and 210 backing off (TestMeasureIdle, kept open).
//
// It drops the mappings (MADV_DONTNEED), which leaves the pages in the page
// cache: the next read of one maps it again without reading the disk, and
// the kernel reclaims the cache under pressure as it does any file's. That
// is safe only on a table that stays mapped meanwhile (a range badger has
// unmapped may hold other memory by then, which the advice would zero), so
// only tables pinned by an iterator lose their mappings (trim). Paging the
// tables out (MADV_PAGEOUT), which is safe on any range, also evicts them
// from the page cache, so every read after a trim came from the disk while
// compactions wrote to it: in a flood of a million records (testnet/cmd/
// flood, 2-core machine, same hour) the daemon took 4,100-4,300 records a
// second and single-book GETs during it 3.7-3.9 ms at the median and 47-50
// ms at the 99th percentile; dropping the mappings, 7,800-8,600 records a
// second, 2.1 ms and 40-42 ms. Only the tables a compaction is writing,
// which join the tree when it ends, are still paged out.
//
// Each table keeps its index and bloom filter mapped (the pages from where
// its data blocks end, tailOffsets): every point read consults them in
// every table it passes, and listing the tables (db.Tables, to pin them)
// reads a field of every table's index through its map. Dropped, the
// listing would map them again, and the kernel maps up to 64 KB around
// each fault (fault-around): 40 MB at once for a store of a million
// records, which the process's high-water mark would keep. Kept, they are
// 10 MB there (600 tables), 1 MB for 100,000 books: the flood's peak RSS
// was 113-116 MB with them, 106-114 MB paging everything out.
//
// Where the OS has no list of the mappings (dropMappedPages), the trimmer
// does nothing. It runs only while the database is open, so an idle store
// has no timer from it.
const (
	trimFast  = 10 * time.Millisecond
	trimSlow  = 400 * time.Millisecond
	trimAbove = 1 << 20
	// trimGrowing is the growth between two checks that keeps them
	// trimFast apart: a memtable's log grows by this much within a few
	// writes of a burst.
	trimGrowing = 64 << 10
	// settleAfter is how long the pages must not grow after a trim before
	// the burst that grew them counts as over (releaseMemory).
	settleAfter = 2 * time.Second
)

// trimmer is the goroutine that drops table pages while one database
// handle is open.
type trimmer struct {
	stop chan struct{}
	done chan struct{}
	// Only the trimmer's goroutine uses these.
	tails  tailOffsets
	listed map[uint64]bool // the tables in db's tree at the last listing (trim)
}

// startTrimmer starts dropping the table pages of db, until halt.
func (s *Store) startTrimmer(db *badger.DB) *trimmer {
	t := newTrimmer(db)
	go t.run(s, db, s.mappedDir())
	return t
}

// newTrimmer returns a trimmer of db that has listed its tables.
func newTrimmer(db *badger.DB) *trimmer {
	return &trimmer{stop: make(chan struct{}), done: make(chan struct{}), listed: treeTables(db)}
}

// mappedDir is the database directory as the process's maps name it.
func (s *Store) mappedDir() string {
	if real, err := filepath.EvalSymlinks(s.dbDir); err == nil {
		return real
	}
	return s.dbDir
}

// closeDB closes db, whose trimmer has halted, paging its tables' data out
// as they grow meanwhile. Closing compacts level 0 into the base level
// (CompactL0OnClose), which reads every table of both and writes their
// successors: with nothing dropping their pages, the idle close of a
// device that had just joined 100,000 books mapped 23-24 MB of tables,
// and the process peaked at 73-76 MB, above the join itself; 50-56 MB with
// them paged out. No table is pinned (the database is closing), so the
// pages go out (MADV_PAGEOUT), each table's index kept mapped for the
// merge's seeks.
func (s *Store) closeDB(db *badger.DB) error {
	return s.pagingOutTables(db.Close)
}

// halt stops the trimmer and waits for it: the database may be closed
// after it returns.
func (t *trimmer) halt() {
	if t == nil {
		return
	}
	close(t.stop)
	<-t.done
}

func (t *trimmer) run(s *Store, db *badger.DB, dir string) {
	defer close(t.done)
	last, ok := mappedFileBytes()
	if !ok {
		return // the OS does not say, so dropMappedPages cannot work either
	}
	// last and lastTables: the mapped file pages after the last trim, all
	// and the tables' (tableBytes); prevTables: the tables' at the last
	// check that looked.
	lastTables := s.tableBytes(last)
	prevTables := lastTables
	prev, every := last, trimFast
	// busy: the store has done enough since the last release to trim (or
	// it has just opened, after the process's start-up or a reopen);
	// quiet: for how long the mapped pages have not grown since.
	busy, quiet := true, time.Duration(0)
	tick := time.NewTimer(every)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
		now, _ := mappedFileBytes()
		if now >= prev+trimGrowing {
			every, quiet = trimFast, 0
		} else {
			quiet += every
			every = min(2*every, trimSlow)
		}
		if now >= last+trimAbove { // the tables', or the executable's coming back
			busy = true
			tables := s.tableBytes(now)
			// In a burst (its tables growing since the last check) the
			// executable's pages count as well: dropping them at every
			// check keeps a device joining 100,000 books 2 MB lower.
			if tables >= lastTables+trimAbove || tables >= prevTables+trimGrowing {
				t.trimLogged(s, db, dir)
				s.dropExecutable()
				now, _ = mappedFileBytes()
				tables = s.tableBytes(now)
				last, lastTables = now, tables
			}
			prevTables = tables
		} else {
			last = min(last, now)
		}
		if busy && quiet >= settleAfter {
			// What the burst mapped since the last trim, less than
			// trimAbove, would otherwise stay until the next burst: the
			// pages of the last memtable logs written, 2-3 MB of an idle
			// device that has just joined 100,000 books.
			busy = false
			t.trimLogged(s, db, dir)
			s.releaseMemory()
		}
		prev = now
		tick.Reset(every)
	}
}

// trimLogged trims, logging a failure: the pages stay mapped, which costs
// memory but nothing else.
func (t *trimmer) trimLogged(s *Store, db *badger.DB, dir string) {
	if err := t.trim(db, dir); err != nil {
		s.log.Debug("dropping mapped table pages failed", "dir", s.dir, "err", err)
	}
}

// releaseMemory hands back to the OS what a burst of work (a flood, a
// device joining, a listing of the whole shelf, the start-up) left the
// process holding that it no longer uses: the Go heap's free memory, which
// the runtime would otherwise return over minutes, and the pages of its
// own executable that the work mapped (package resident). A burst of
// writes at 100,000 books leaves 20-30 MB of free heap and most of the
// executable's 23 MB of code and read-only data resident; the next request
// maps what it uses again. It costs a full collection, once a burst is
// over.
func (s *Store) releaseMemory() {
	s.releases.Add(1)
	debug.FreeOSMemory()
	s.log.Debug("released memory after a burst of work", "dir", s.dir, "executable_pages", s.dropExecutable())
}

// openExecutable opens the executable's mappings for dropExecutable and
// tableBytes, or returns nil (and they do nothing) if the OS does not list
// them.
func openExecutable(log *slog.Logger) *resident.Executable {
	exe, err := resident.OpenExecutable()
	if err != nil {
		log.Debug("listing the executable's mappings failed", "err", err)
		return nil
	}
	return exe
}

// closeExecutable closes what openExecutable opened, once the database is
// closed.
func (s *Store) closeExecutable() {
	if s.exe != nil {
		s.exe.Close()
		s.exe = nil
	}
}

// dropExecutable drops the process's executable pages (package resident)
// and returns how many bytes it dropped. Each trim does it as well as the
// release at the end of a burst: a burst maps most of the executable
// within a second, and dropping it only at the end left it all in the
// peak. With it, the peaks at 100,000 books (TestMeasurePhases, 2-core
// machine, same hour) went from 55-57 MB to 50-53 MB for bulk writes and
// from 58 MB to 50-53 MB for a joining device. In a flood of a million
// records (testnet/cmd/flood) the executable is mapped again within
// milliseconds, so its peak stays within its noise (104-107 MB before,
// 90-121 MB after, medians 105 and 102), and single-book GETs during it
// took 33-46 ms at the 99th percentile instead of 38-40: each fault on a
// dropped page is minor, the page being still in the page cache.
func (s *Store) dropExecutable() int64 {
	if s.exe == nil {
		return 0
	}
	dropped, err := s.exe.Drop()
	if err != nil {
		s.log.Debug("dropping the executable's pages failed", "err", err)
	}
	return dropped
}

// pageOutTables pages out the data pages of every table in dir if the
// tables' mapped pages (tableBytes) have grown by trimAbove since
// they were last bytes, and returns what they are now.
func (s *Store) pageOutTables(dir string, last int64) int64 {
	now, _ := mappedFileBytes()
	if now < last+trimAbove {
		return min(last, now)
	}
	if s.tableBytes(now) < last+trimAbove {
		return last
	}
	err := dropMappedPages(dir, func(_ uint64, path string) (uint64, bool) { return dataLen(path), false })
	if err != nil {
		s.log.Debug("dropping mapped table pages failed", "dir", s.dir, "err", err)
	}
	s.dropExecutable()
	now, _ = mappedFileBytes()
	return s.tableBytes(now)
}

// tableBytes is mapped, what mappedFileBytes said, less the executable's
// pages (package resident): the tables' and the memtables' logs'. The
// executable's count among the process's mapped file pages too, and each
// trim drops them (dropExecutable), so they come back as the process runs:
// counted in, a device writing a few records a second trimmed each time
// its code did, dropping it again, and in a mesh of 20 devices on 2 cores
// (testnet many-devices) a write reached the others in 17-19 ms at the
// median and 58-62 ms at the 99th percentile (trims past 2 MB, checked
// every 25 ms) or 34 and 114-117 ms (past 1 MB, every 10 ms); counted in
// only while the tables grow, in 12.3-12.5 and 30-32 ms (two runs).
func (s *Store) tableBytes(mapped int64) int64 {
	if s.exe == nil {
		return mapped
	}
	exe, err := s.exe.Resident()
	if err != nil {
		return mapped
	}
	return max(0, mapped-exe)
}

// pagingOutTables runs fn while paging the tables' data out every
// trimFast as their mapped pages grow (pageOutTables), and returns what fn
// returned: while badger opens or closes the database, when no trimmer
// runs.
func (s *Store) pagingOutTables(fn func() error) error {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		last, ok := mappedFileBytes()
		if !ok {
			return
		}
		last = s.tableBytes(last)
		dir := s.mappedDir()
		tick := time.NewTicker(trimFast)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			last = s.pageOutTables(dir, last)
		}
	}()
	defer func() { // also if fn panics (badger, on a damaged file)
		close(stop)
		<-done
	}()
	return fn()
}

// trim drops the mappings of the resident data pages of db's live tables
// once, keeping their indexes mapped. A table must not be unmapped while
// its mapping is dropped (the range could be reused by other memory by
// then), so only tables pinned for the duration lose their mappings: an
// iterator holds a reference to every table of the tree when it was made,
// and a table listed both before and after the iterator was made was in
// the tree when it was (a table joins the tree once and leaves it once),
// so it stays mapped until the iterator closes, whatever the compactors do
// meanwhile. The listing before is the last trim's listing after: while
// a million books were joined (600 tables), listing the tables twice and
// pinning them took a median of 0.96 ms of each trim, once 0.56 ms. The
// others (the tables a compaction is writing, which join the tree only
// when it ends, tens of MB for a large one, and those that joined it since
// the last listing) are paged out (dropMappedPages).
func (t *trimmer) trim(db *badger.DB, dir string) error {
	txn := db.NewTransaction(false)
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{})
	defer it.Close()
	before, after := t.listed, treeTables(db)
	t.listed = after
	t.tails.keep(after)
	return dropMappedPages(dir, func(id uint64, path string) (uint64, bool) {
		if !before[id] || !after[id] { // not pinned
			// Maybe still being written: its footer is read again
			// next time.
			return dataLen(path), false
		}
		return t.tails.dataLen(id, path), true
	})
}

// treeTables lists the ids of the tables in db's tree.
func treeTables(db *badger.DB) map[uint64]bool {
	tables := db.Tables()
	ids := make(map[uint64]bool, len(tables))
	for _, tb := range tables {
		ids[tb.ID] = true
	}
	return ids
}

// tailOffsets remembers the dataLen of each table in the tree: tables never
// change once written, and their ids are never reused.
type tailOffsets map[uint64]uint64

// dataLen is dataLen(path), read the first time only.
func (o *tailOffsets) dataLen(id uint64, path string) uint64 {
	if n, ok := (*o)[id]; ok {
		return n
	}
	if *o == nil {
		*o = make(tailOffsets)
	}
	n := dataLen(path)
	(*o)[id] = n
	return n
}

// dataLen is the length of the table at path's data pages: its data blocks,
// rounded down to a page, without its index and bloom filter. If its footer
// does not tell (a damaged table, which badger fails to read anyway, or
// one still being written), it is the whole table.
func dataLen(path string) uint64 {
	n, err := tableDataLen(path)
	if err != nil {
		return math.MaxUint64
	}
	return n
}

// keep forgets the tables not in live once it holds twice as many as live:
// compactions replace every table in time.
func (o tailOffsets) keep(live map[uint64]bool) {
	if len(o) <= 2*len(live) {
		return
	}
	for id := range o {
		if _, ok := live[id]; !ok {
			delete(o, id)
		}
	}
}

// tableDataLen reads where the index of the badger table at path begins
// from its footer (..., index, index length, checksum, checksum length; the
// lengths big-endian uint32) and returns it rounded down to a page. It
// reads the file, not the table's mapping, so it maps nothing.
func tableDataLen(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	pos := fi.Size() - 4
	u32At := func(at int64) (int64, error) {
		var b [4]byte
		if at < 0 {
			return 0, fmt.Errorf("table %s: footer runs past the start of the file", path)
		}
		if _, err := f.ReadAt(b[:], at); err != nil {
			return 0, fmt.Errorf("table %s: read its footer: %w", path, err)
		}
		return int64(binary.BigEndian.Uint32(b[:])), nil
	}
	checksumLen, err := u32At(pos)
	if err != nil {
		return 0, err
	}
	pos -= checksumLen + 4
	indexLen, err := u32At(pos)
	if err != nil {
		return 0, err
	}
	start := pos - indexLen
	if start < 0 {
		return 0, fmt.Errorf("table %s: index of %d bytes runs past the start of the file", path, indexLen)
	}
	page := int64(os.Getpagesize())
	return uint64(start / page * page), nil
}
