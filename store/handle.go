package store

import (
	"errors"
	"fmt"
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
// docs/upstream.md has the change to the allocator pool that would stop its
// ticker while the pool is empty.
//
// Compaction is badger's own, leveled, but its compactors run only through
// a burst of writes (compact.go): the database opens without them, the
// writer reopens it with them once a memtable flush reaches level 0, and
// it is closed once the burst is over and they have caught up.

// acquire returns the open database, reopening it if it was closed for
// idleness. Every successful acquire must be paired with a release.
//
// A reopen that finds the database damaged (a table that changed on disk
// since it was verified) is not tried again: the damage stays until
// `danyue repair`, and every failed badger open leaves two goroutines and a
// mapped memtable behind (its cleanup after a failed Open releases neither).
func (s *Store) acquire() (*badger.DB, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.reopening && !s.closed {
		s.idle.Wait()
	}
	if s.closed {
		return nil, fmt.Errorf("store %s: %w", s.dir, ErrClosed)
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.damage != nil {
		return nil, s.damage
	}
	if s.db == nil {
		if err := s.openLocked(false); err != nil {
			return nil, err
		}
	}
	s.users++
	return s.db, nil
}

// openLocked opens the database, with badger's compactors if compactors is
// set.
func (s *Store) openLocked(compactors bool) error {
	start := time.Now()
	db, err := s.openDB(compactors)
	if errors.Is(err, ErrCorrupt) {
		s.damage = err
	}
	if err != nil {
		s.armIdleLocked()
		return err
	}
	s.db, s.compactors = db, compactors
	s.snaps.opened(db, s.LastSeq())
	s.opens++
	if compactors {
		s.armSettleLocked()
	}
	s.log.Debug("store reopened", "dir", s.dir, "compactors", compactors, "took", time.Since(start))
	return nil
}

// retain adds a reference to the open database for one who holds one
// already, so it cannot be closed in between; paired with a release.
func (s *Store) retain() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users++
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

// idleLocked reports whether the idle close may close the database: it is
// open and unused, has no compactors (a database with them has the settle
// timer instead, compact.go), and the writer is not waiting to reopen it
// with them (which makes it the writer's to close).
func (s *Store) idleLocked() bool {
	return !s.closed && s.users == 0 && s.db != nil && !s.compactors && !s.reopening
}

// armIdleLocked starts the idle timer if the database is idle (idleLocked).
func (s *Store) armIdleLocked() {
	if s.opt.IdleClose < 0 || !s.idleLocked() {
		return
	}
	if s.timer == nil {
		s.timer = time.AfterFunc(s.opt.IdleClose, s.closeIdle)
		return
	}
	s.timer.Reset(s.opt.IdleClose)
}

// closeIdle closes the database if it is still unused. A timer armed
// before the writer began to wait for a reopen (startCompactors) can fire
// while it waits, once the last user has left and before the writer runs
// again: the database is then left to the writer.
func (s *Store) closeIdle() {
	s.mu.Lock()
	if !s.idleLocked() {
		s.mu.Unlock()
		return
	}
	start := time.Now()
	err := s.closeLocked()
	s.mu.Unlock()
	if err != nil {
		// Every acknowledged write was synced before it was acknowledged,
		// so nothing is lost; the next open replays what badger left.
		s.log.Warn("closing the idle store failed", "dir", s.dir, "err", err)
		return
	}
	s.log.Debug("store closed while idle", "dir", s.dir, "took", time.Since(start))
}

// closeLocked closes the open database, which nothing uses.
func (s *Store) closeLocked() error {
	db := s.db
	s.db, s.compactors = nil, false
	s.snaps.drop()
	return s.closeDB(db)
}

// closeDB closes db.
func (s *Store) closeDB(db *badger.DB) error { return db.Close() }
