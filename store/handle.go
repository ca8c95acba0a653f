package store

import (
	"fmt"
	"runtime/debug"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// The database handle. badger keeps timers running while it is open (a 2 s
// allocator-pool ticker and two 1-minute tickers, none of which an option
// turns off), so an idle store closes it: every use of the database holds a
// reference (acquire/release), and when the last one is released a timer
// of Options.IdleClose starts; if it fires with no user, the database is
// closed, and the next acquire reopens it. The directory lock, the epoch,
// LastSeq, the clock high-water mark and Watch stay in memory throughout.
//
// Compaction: badger runs with no compactor goroutines (each would tick every
// 50 ms forever). After every group commit and every open, the store looks
// at level 0; when it holds Options.l0Compact tables, a goroutine runs
// db.Flatten, which compacts until the tree is one level, and exits. It
// holds a reference, so the database stays open while it runs.

// acquire returns the open database, reopening it if it was closed for
// idleness. Every successful acquire must be paired with a release.
func (s *Store) acquire() (*badger.DB, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("store %s: %w", s.dir, ErrClosed)
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.db == nil {
		start := time.Now()
		db, err := s.openDB()
		if err != nil {
			s.armIdleLocked()
			return nil, err
		}
		s.db = db
		s.opens++
		s.log.Debug("store reopened", "dir", s.dir, "took", time.Since(start))
		s.maybeCompactLocked(db)
	}
	s.users++
	return s.db, nil
}

func (s *Store) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users--
	if s.users == 0 {
		s.idle.Broadcast()
		s.armIdleLocked()
	}
}

// armIdleLocked starts the idle timer if nothing uses the database.
func (s *Store) armIdleLocked() {
	if s.opt.IdleClose < 0 || s.closed || s.users > 0 || s.db == nil {
		return
	}
	if s.timer == nil {
		s.timer = time.AfterFunc(s.opt.IdleClose, s.closeIdle)
		return
	}
	s.timer.Reset(s.opt.IdleClose)
}

// closeIdle closes the database if it is still unused.
func (s *Store) closeIdle() {
	s.mu.Lock()
	if s.closed || s.users > 0 || s.db == nil {
		s.mu.Unlock()
		return
	}
	start := time.Now()
	db := s.db
	s.db = nil
	err := db.Close()
	s.mu.Unlock()
	if err != nil {
		// Every acknowledged write was synced before it was acknowledged,
		// so nothing is lost; the next open replays what badger left.
		s.log.Warn("closing the idle store failed", "dir", s.dir, "err", err)
		return
	}
	// The database's memory (memtable arena, blocks and records of the last
	// reads) is garbage now: hand it back to the OS at once rather than over
	// the next minutes, since the process is going idle.
	debug.FreeOSMemory()
	s.log.Debug("store closed while idle", "dir", s.dir, "took", time.Since(start))
}

// maybeCompactLocked starts a compaction if level 0 has grown to the
// threshold and none is running.
func (s *Store) maybeCompactLocked(db *badger.DB) {
	if s.compacting || s.closed || l0Tables(db) < s.opt.l0Compact {
		return
	}
	s.compacting = true
	s.users++
	s.maint.Add(1)
	go s.compact(db)
}

func (s *Store) maybeCompact(db *badger.DB) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maybeCompactLocked(db)
}

func (s *Store) compact(db *badger.DB) {
	defer s.maint.Done()
	defer func() {
		s.mu.Lock()
		s.compacting = false
		s.mu.Unlock()
		s.release()
	}()
	for n := l0Tables(db); n >= s.opt.l0Compact; n = l0Tables(db) {
		start := time.Now()
		if err := db.Flatten(1); err != nil {
			s.log.Warn("compaction failed", "dir", s.dir, "err", err)
			return
		}
		s.log.Debug("compacted", "dir", s.dir, "l0_tables", n, "took", time.Since(start))
		s.qmu.Lock()
		closing := s.closing
		s.qmu.Unlock()
		if closing {
			return
		}
	}
}

func l0Tables(db *badger.DB) int {
	levels := db.Levels()
	if len(levels) == 0 {
		return 0
	}
	return levels[0].NumTables
}
