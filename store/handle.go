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
//
// Compaction is badger's own, leveled (options.go): its compactor
// goroutines tick while the database is open and stop when it closes. An
// idle close that would leave level 0 at its threshold waits for them
// (maxIdleDefer at most), so that level 0 does not grow by a table
// with every idle close.

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
		start := time.Now()
		db, err := s.openDB()
		if errors.Is(err, ErrCorrupt) {
			s.damage = err
		}
		if err != nil {
			s.armIdleLocked()
			return nil, err
		}
		s.db = db
		s.opens++
		s.log.Debug("store reopened", "dir", s.dir, "took", time.Since(start))
	}
	s.users++
	return s.db, nil
}

// acquireWrite is acquire for the writer, which then also waits, for at
// most admitWait, while level 0 is deeper than admitL0 tables: compaction
// is behind, and badger would soon stall the commit itself once it has
// taken its commit timestamp, and every read waits for every commit that
// has one (badger's read timestamp waits for them), so a flood would stall
// every GET with it. Waiting here, before the group has a timestamp, keeps
// reads going while the writer, and through it the sync stream and its
// sender, slows down to what compaction sustains.
func (s *Store) acquireWrite() (*badger.DB, error) {
	db, err := s.acquire()
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(admitWait)
	for s.behind(db) && time.Now().Before(deadline) {
		time.Sleep(admitPoll)
	}
	return db, nil
}

// behind reports whether badger is behind the writer: level 0 is deeper
// than admitL0 tables.
func (s *Store) behind(db *badger.DB) bool {
	return l0Tables(db) >= s.opt.admitL0()
}

// closeDB closes db.
func (s *Store) closeDB(db *badger.DB) error { return db.Close() }

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

// maxIdleDefer bounds how long closeIdle waits for level 0 to be
// compacted: if compaction cannot make progress (a full disk), the store
// still goes idle.
const maxIdleDefer = 5 * time.Minute

// closeIdle closes the database if it is still unused and level 0 needs
// no compaction (or has waited maxIdleDefer for it).
func (s *Store) closeIdle() {
	s.mu.Lock()
	if s.closed || s.users > 0 || s.db == nil {
		s.mu.Unlock()
		return
	}
	if l0Full(s.db) {
		if s.deferredAt.IsZero() {
			s.deferredAt = time.Now()
		}
		if time.Since(s.deferredAt) < maxIdleDefer {
			s.armIdleLocked()
			s.mu.Unlock()
			return
		}
	}
	s.deferredAt = time.Time{}
	start := time.Now()
	db := s.db
	s.db = nil
	s.snaps.drop()
	err := s.closeDB(db)
	s.mu.Unlock()
	if err != nil {
		// Every acknowledged write was synced before it was acknowledged,
		// so nothing is lost; the next open replays what badger left.
		s.log.Warn("closing the idle store failed", "dir", s.dir, "err", err)
		return
	}
	s.log.Debug("store closed while idle", "dir", s.dir, "took", time.Since(start))
}

// l0Full reports whether level 0 holds as many tables as start a
// compaction (badger's compactor 0 always takes level 0 then).
func l0Full(db *badger.DB) bool {
	levels := db.Levels()
	return len(levels) > 0 && levels[0].Score >= 1
}

// compacted reports whether level 0 needs no compaction, or the database
// is closed. For tests.
func (s *Store) compacted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.db == nil || !l0Full(s.db)
}

func l0Tables(db *badger.DB) int {
	levels := db.Levels()
	if len(levels) == 0 {
		return 0
	}
	return levels[0].NumTables
}
