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
// So while the database is open, a trimmer pages out the tables' resident
// pages every trimEvery, when the mapped file pages have grown by
// trimAbove since it last did: MADV_PAGEOUT (Linux 5.4 and later) writes
// back what is dirty and lets the kernel reclaim the pages, and it never
// discards data, so it is safe on any range, even one that badger has
// unmapped and the process reused since the maps were read. The next read
// of such a page is read from the disk again. It needs no list of the
// tables, which matters: listing them (db.Tables) reads a field of every
// table's index through its map, and the kernel maps up to 64 KB around
// each fault (fault-around), so a listing puts 64 KB of every table back in
// the resident set at once, about 40 MB for a store of a million records,
// which the process's high-water mark keeps.
//
// On older kernels the trimmer falls back to MADV_DONTNEED, which only
// drops this process's mappings (the pages stay in the page cache) but is
// safe only on a table that stays mapped meanwhile, hence the listing
// (trimTables). Where the OS has no list of the mappings (dropTablePages),
// the trimmer does nothing. It runs only while the database is open, so an
// idle store has no timer from it.
const (
	trimEvery = 100 * time.Millisecond
	trimAbove = 4 << 20
)

// errNoPageout is dropTablePages saying that the kernel does not know
// MADV_PAGEOUT.
var errNoPageout = errors.New("the kernel cannot page out mapped file pages")

// trimmer is the goroutine that drops table pages while one database
// handle is open.
type trimmer struct {
	stop chan struct{}
	done chan struct{}
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
	tick := time.NewTicker(trimEvery)
	defer tick.Stop()
	pageout := true // until the kernel says it cannot
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
		if now, _ := mappedFileBytes(); now < last+trimAbove {
			last = min(last, now)
			continue
		}
		var err error
		if pageout {
			if err = dropTablePages(dir, nil); errors.Is(err, errNoPageout) {
				pageout = false
			}
		}
		if !pageout {
			err = trimTables(db, dir)
		}
		if err != nil {
			s.log.Debug("dropping mapped table pages failed", "dir", s.dir, "err", err)
		}
		last, _ = mappedFileBytes()
	}
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
