package store

import (
	"errors"
	"path/filepath"
	"time"

	"github.com/dgraph-io/badger/v4"
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
// (a read of /proc/self/statm) and pages out the tables' resident pages
// when they have grown by trimAbove since it last did. It checks every
// trimFast while they grow, for a compaction maps tens of MB within a few
// hundred ms: checked every 100 ms above 4 MB, the table pages peaked at
// 28 MB in a flood of a million records and the process at 100-104 MB;
// every 25 ms above 2 MB, at 17 MB and 85-92 MB (85-95 MB with the back
// off). While they do not grow it backs off to trimSlow, as a tick every
// 25 ms doubled what an open, idle store costs: 1.8% of a core and 250
// context switches a second with a check every 100 ms, 3.4% and 770 every
// 25 ms, 1.3% and 210 backing off (TestMeasureIdle, kept open).
//
// MADV_PAGEOUT (Linux 5.4 and later) writes back what is dirty and lets
// the kernel reclaim the pages, and it never discards data, so it is safe
// on any range, even one that badger has unmapped and the process reused
// since the maps were read. The next read of such a page is read from the
// disk again. It needs no list of the tables, which matters: listing them
// (db.Tables) reads a field of every table's index through its map, and the
// kernel maps up to 64 KB around each fault (fault-around), so a listing
// puts 64 KB of every table back in the resident set at once, about 40 MB
// for a store of a million records, which the process's high-water mark
// keeps.
//
// Where the advice does nothing, the trimmer falls back to MADV_DONTNEED,
// which only drops this process's mappings (the pages stay in the page
// cache) but is safe only on a table that stays mapped meanwhile, hence the
// listing (trimTables). That is on kernels before 5.4, which refuse
// MADV_PAGEOUT, and under qemu's user-mode emulation (an arm64 build run on
// another machine), which accepts it and does nothing: so the first time
// it trims, the trimmer tries the advice on a file of its own
// (pageoutWorks). Where the OS has no list of the mappings
// (dropTablePages), the trimmer does nothing. It runs only while the
// database is open, so an idle store has no timer from it.
const (
	trimFast  = 25 * time.Millisecond
	trimSlow  = 400 * time.Millisecond
	trimAbove = 2 << 20
	// trimGrowing is the growth between two checks that keeps them
	// trimFast apart: a memtable's log grows by this much within a few
	// writes of a burst.
	trimGrowing = 64 << 10
)

// errNoPageout is dropTablePages saying that the kernel does not know
// MADV_PAGEOUT.
var errNoPageout = errors.New("the kernel cannot page out mapped file pages")

// trimmer is the goroutine that drops table pages while one database
// handle is open.
type trimmer struct {
	stop chan struct{}
	done chan struct{}
	// Whether the kernel pages out is asked at the first trim, not
	// before: most opens of a store never trim. Only the trimmer's
	// goroutine uses these.
	probed, noPageout bool
}

// startTrimmer starts dropping the table pages of db, until halt.
func (s *Store) startTrimmer(db *badger.DB) *trimmer {
	t := &trimmer{stop: make(chan struct{}), done: make(chan struct{})}
	dir := s.dbDir
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real // the maps name files by their resolved path
	}
	go t.run(s, db, dir)
	return t
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
		return // the OS does not say, so dropTablePages cannot work either
	}
	prev, every := last, trimFast
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
			every = trimFast
		} else {
			every = min(2*every, trimSlow)
		}
		if now >= last+trimAbove {
			if err := t.trim(s, db, dir); err != nil {
				s.log.Debug("dropping mapped table pages failed", "dir", s.dir, "err", err)
			}
			now, _ = mappedFileBytes()
			last = now
		} else {
			last = min(last, now)
		}
		prev = now
		tick.Reset(every)
	}
}

// trim drops the resident pages of the tables in dir once: it pages them
// all out where the kernel does, else it drops the mappings of db's
// pinned tables.
func (t *trimmer) trim(s *Store, db *badger.DB, dir string) error {
	if !t.probed {
		t.probed = true
		// In the store's directory, resolved as dir is: badger's own
		// holds only its files.
		works, err := pageoutWorks(filepath.Dir(dir))
		switch {
		case err != nil:
			s.log.Debug("could not tell whether the kernel pages out; trying it on the tables", "dir", s.dir, "err", err)
		case !works:
			t.noPageout = true
			s.log.Debug("the kernel does not page out mapped file pages; dropping the tables' mappings instead", "dir", s.dir)
		}
	}
	if !t.noPageout {
		err := dropTablePages(dir, nil)
		if !errors.Is(err, errNoPageout) {
			return err
		}
		t.noPageout = true
	}
	return trimTables(db, dir)
}

// trimTables drops the mapped pages of db's live tables. A table must not
// be unmapped while its range is advised (the range could be reused by
// other memory by then), so only tables pinned for the duration are
// touched: an iterator holds a reference to every table of the tree when
// it was made, and a table listed both before and after the iterator was
// made was in the tree when it was, so it stays mapped until the iterator
// closes, whatever the compactors do meanwhile.
func trimTables(db *badger.DB, dir string) error {
	before := db.Tables()
	txn := db.NewTransaction(false)
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{})
	defer it.Close()
	after := db.Tables()
	pinned := make(map[uint64]bool, len(after))
	for _, t := range after {
		pinned[t.ID] = false
	}
	for _, t := range before {
		if _, ok := pinned[t.ID]; ok {
			pinned[t.ID] = true
		}
	}
	return dropTablePages(dir, func(id uint64) bool { return pinned[id] })
}
