package store

import (
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Compaction. badger's compactor goroutines each wake every 50 ms while the
// database is open, busy or not (levels.go; no option sets the period), and
// a process that wakes that often never lets a phone's CPU sleep. So the
// database opens without them (NumCompactors 0), which is all that reads
// and a reader's occasional write need: a memtable takes thousands of
// writes, and closing the database (the idle close) flushes it and
// compacts level 0 into the base level (CompactL0OnClose). Only a burst of
// writes that flushes memtables into level 0 needs the compactors: when
// level 0 holds l0Reopen tables, the writer reopens the database with them
// (startCompactors), and once the burst is over and they have caught up,
// the store closes it (settleCheck), so that the next open is without them
// again.
//
// Invariant: the writer never commits into a database without compactors
// whose level 0 holds l0Reopen tables or more. Without compactors nothing
// would drain level 0, and once it reached NumLevelZeroTablesStall
// badger's flusher, then every commit, would wait for ever.

// acquireWrite is acquire for the writer. It first reopens the database
// with compactors if level 0 has filled without them, then waits, for at
// most admitWait, while level 0 holds admitL0 tables or more: compaction is
// behind, and the writer would soon fill the memtables badger can no longer
// flush, each an arena in the heap, and then stall inside a commit. Waiting
// before the group commits keeps a flood's heap to the memtables badger is
// writing out, leaves the CPU to the compactors, and slows the writer, and
// through it the sync stream and its sender, to what compaction sustains.
// Reads do not wait for it (snapshot.go).
func (s *Store) acquireWrite() (*badger.DB, error) {
	db, err := s.acquire()
	if err != nil {
		return nil, err
	}
	// One look at the levels serves both checks when nothing waits:
	// badger works out every level's size and score to answer, for every
	// group commit.
	l0 := l0Tables(db)
	if l0 >= l0Reopen && !s.runsCompactors() {
		s.release()
		if err := s.startCompactors(); err != nil {
			return nil, err
		}
		if db, err = s.acquire(); err != nil {
			return nil, err
		}
		l0 = l0Tables(db)
	}
	deadline := time.Now().Add(admitWait)
	for l0 >= s.opt.admitL0() && time.Now().Before(deadline) {
		time.Sleep(admitPoll)
		l0 = l0Tables(db)
	}
	return db, nil
}

// runsCompactors reports whether the open database runs badger's
// compactors.
func (s *Store) runsCompactors() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.compactors
}

// startCompactors reopens the database with badger's compactors. It waits
// until nothing uses the database, holding off new users meanwhile: every
// user holds it briefly (a read, or a committed group until its sync), and
// none waits for the writer, which calls this holding no reference.
// Closing compacts level 0 into the base level (CompactL0OnClose), so what
// the reopened compactors start from is no deeper than the tree before the
// burst.
func (s *Store) startCompactors() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.db == nil || s.compactors {
		return nil // closed: the next acquire says so
	}
	s.reopening = true
	for s.users > 0 {
		s.idle.Wait()
	}
	s.reopening = false
	s.idle.Broadcast() // the users held off
	start := time.Now()
	if err := s.closeLocked(); err != nil {
		s.log.Warn("closing the store to start compaction failed", "dir", s.dir, "err", err)
	}
	s.log.Debug("store closed to start compaction", "dir", s.dir, "took", time.Since(start))
	return s.openLocked(true)
}

// armSettleLocked starts the settle timer of a database with compactors,
// unless the store keeps its database open (IdleClose < 0).
func (s *Store) armSettleLocked() {
	if s.opt.IdleClose < 0 {
		return
	}
	s.settledAt, s.deferredAt = s.written.Load(), time.Time{}
	if s.settle == nil {
		s.settle = time.AfterFunc(settleClose, s.settleCheck)
		return
	}
	s.settle.Reset(settleClose)
}

// maxCatchUp bounds how long a settled database waits for its compactors
// to catch up: if they cannot make progress (a full disk), it closes
// anyway, and the next burst takes over what they left.
const maxCatchUp = 5 * time.Minute

// settleCheck runs every settleClose while the database runs compactors.
// It closes the database once the burst is over: the writer committed less
// than quietBytes since the last check, nothing uses the database, and the
// compactors have caught up. Unlike the idle close it does not wait for
// the writes to stop, which a trickle of writes (a reader turning pages)
// would never do; the next use reopens the database without compactors.
func (s *Store) settleCheck() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.db == nil || !s.compactors {
		return
	}
	written := s.written.Load()
	quiet := written-s.settledAt < s.opt.quietBytes()
	s.settledAt = written
	if quiet && !s.caughtUp(s.db) {
		if s.deferredAt.IsZero() {
			s.deferredAt = time.Now()
		}
		quiet = time.Since(s.deferredAt) >= maxCatchUp
	}
	if !quiet || s.users > 0 {
		s.settle.Reset(settleClose)
		return
	}
	start := time.Now()
	if err := s.closeLocked(); err != nil {
		// Every acknowledged write was synced before it was acknowledged,
		// so nothing is lost; the next open replays what badger left.
		s.log.Warn("closing the store after a burst failed", "dir", s.dir, "err", err)
		return
	}
	s.log.Debug("store closed after a burst", "dir", s.dir, "took", time.Since(start))
}

// caughtUp reports whether no level of db needs compaction: the store may
// close it without leaving a deep level 0 to the next open, which has no
// compactors.
func (s *Store) caughtUp(db *badger.DB) bool {
	for _, l := range db.Levels() {
		if l.Score >= 1 {
			return false
		}
	}
	return true
}

// compacted reports whether no level needs compaction, or the database is
// closed. For tests.
func (s *Store) compacted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.db == nil || s.caughtUp(s.db)
}

func l0Tables(db *badger.DB) int {
	levels := db.Levels()
	if len(levels) == 0 {
		return 0
	}
	return levels[0].NumTables
}
