package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// The syncer. A committed group is acknowledged once a sync that started
// after its commit has finished: a sync (syncFile) makes durable everything
// written to the file before it was called, so one sync covers every group
// committed before it, and a later one finishing covers earlier groups even
// if their own sync is still running. Syncs start as soon as there is
// committed data that no running sync covers, up to maxSyncs at once: the
// disks here complete concurrent syncs almost as fast as one, so a writer
// acknowledged by one sync has its next write covered by the next sync,
// already under way, instead of waiting for the one after.
//
// Groups are acknowledged in commit order, and LastSeq, Watch and Since
// advance only past acknowledged groups. A group that wrote nothing (its
// batches changed nothing, or failed) is acknowledged in order too: what
// made it a no-op may not be durable yet. So is a group that wrote only
// lazy batches (Batch.lazy): it starts no sync of its own, and the next
// sync, of any later group or the database's close, makes it durable.
//
// What is synced: badger runs with SyncWrites off and every value below
// ValueThreshold, so every write lands in the active memtable's WAL (an
// mmap'd *.mem file) and the value log stays empty. syncWAL syncs the
// newest WAL (which is what db.Sync's msync of it does; db.Sync would also
// msync the empty value log, a second disk flush per group). A group that
// fills the memtable makes badger rotate to a new WAL; db.Sync would not
// reach back to the old one, whose acknowledged writes would then be only in
// the page cache until its memtable is flushed to a table, so when a new WAL
// appears, syncWAL fsyncs the older ones still on disk and the directory.

const maxSyncs = 4

// committed hands a group from the writer to the syncer.
func (s *Store) committed(g *group) {
	s.smu.Lock()
	s.groups++
	g.id = s.groups
	s.pending = append(s.pending, g)
	done := s.ackLocked()
	s.kickLocked()
	s.smu.Unlock()
	s.finish(done)
}

// needsSync reports whether the group wrote something that must be durable
// before it is acknowledged: anything but batches that ride along with the
// next sync (Batch.lazy).
func (g *group) needsSync() bool {
	if g.fatal != nil {
		return false
	}
	for _, r := range g.written {
		if !r.b.lazy {
			return true
		}
	}
	return false
}

// kickLocked starts a sync if some committed group needs one that no running
// sync covers.
func (s *Store) kickLocked() {
	if s.inflight >= maxSyncs {
		return
	}
	var (
		upTo  uint64
		db    *badger.DB
		first = -1
	)
	for i, g := range s.pending {
		if g.id > s.covered && g.needsSync() {
			upTo, db = g.id, g.db
			if first < 0 {
				first = i
			}
		}
	}
	if upTo == 0 {
		return
	}
	s.covered = upTo
	s.inflight++
	s.syncWG.Add(1)
	s.syncs.Add(1)
	// The sync holds a reference of its own: a later sync that ends first
	// acknowledges this one's groups and releases theirs, and the idle
	// close would then close the database under it.
	s.retain()
	go s.runSync(db, upTo, journalOf(s.pending[first:]))
}

// runSync syncs the WAL and, beside it, the journal of what the sync
// acknowledges (acked.go), then acknowledges every group it made durable.
func (s *Store) runSync(db *badger.DB, upTo uint64, journal []ackEntry) {
	defer s.syncWG.Done()
	defer s.release()
	jerr := make(chan error, 1)
	go func() { jerr <- s.writeJournal(journal) }()
	err := s.syncWAL(db)
	if e := <-jerr; err == nil {
		err = e
	}
	s.smu.Lock()
	s.inflight--
	if err != nil {
		s.poison(ioErr(s.dir, "sync", err))
	} else {
		s.durable = max(s.durable, upTo)
	}
	done := s.ackLocked()
	s.kickLocked()
	s.smu.Unlock()
	s.finish(done)
}

// ackLocked takes the groups that can be acknowledged, in order, off the
// pending list and answers them; finish does the rest outside the lock.
func (s *Store) ackLocked() []*group {
	s.qmu.Lock()
	failed := s.failed
	s.qmu.Unlock()
	var done []*group
	for len(s.pending) > 0 {
		g := s.pending[0]
		durable := g.id <= s.durable || !g.needsSync()
		var err error
		switch {
		case g.fatal != nil:
			err = g.fatal
		case !durable && failed == nil:
			return done // wait for its sync
		case failed != nil && g.id > s.durable:
			// A commit or sync failed before this group was made durable,
			// and it was worked out on top of what failed.
			err = failed
		default:
			s.synced.Add(int64(len(g.written)))
			if g.snap != nil {
				s.snaps.ack(g.snap, g.seq)
				g.snap = nil
			}
			s.publish(g.seq, g.hw)
		}
		for _, r := range g.reqs {
			if r.err == nil {
				r.err = err
			}
		}
		for _, r := range g.reqs {
			if r.err != nil {
				r.res = Result{}
			}
			close(r.done)
		}
		s.pending[0] = nil
		s.pending = s.pending[1:]
		done = append(done, g)
	}
	return done
}

// finish releases the database references of acknowledged groups.
func (s *Store) finish(done []*group) {
	for _, g := range done {
		if g.snap != nil {
			s.snaps.put(g.snap) // a group that failed
		}
		if g.db != nil {
			s.release()
		}
	}
}

// poison makes the store refuse writes after a commit or sync failed.
func (s *Store) poison(err error) {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.failed == nil {
		s.failed = fmt.Errorf("%w: %s: a write could not be made durable (%v), so what is on disk is uncertain; restart danyue", ErrFailed, s.dir, err)
		s.log.Error("store write failed; refusing writes until restarted", "dir", s.dir, "err", err)
	}
}

// syncWAL makes every write committed so far durable (see above).
func (s *Store) syncWAL(db *badger.DB) error {
	if s.opt.syncErr != nil {
		if err := s.opt.syncErr(); err != nil {
			return err
		}
	}
	mems, err := s.memFiles()
	if err != nil || len(mems) == 0 {
		if err == nil {
			err = db.Sync() // no WAL file: not badger as this code knows it
		}
		return err
	}
	newest := mems[len(mems)-1]
	if err := syncFile(filepath.Join(s.dbDir, newest)); err != nil {
		return err
	}
	s.walMu.Lock()
	defer s.walMu.Unlock()
	if newest == s.lastMem {
		return nil
	}
	for _, m := range mems[:len(mems)-1] {
		if err := syncFile(filepath.Join(s.dbDir, m)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err // (a WAL that vanished was flushed to a table meanwhile)
		}
	}
	if err := syncDir(s.dbDir); err != nil {
		return err
	}
	s.lastMem = newest
	return nil
}

// memFiles lists badger's memtable WALs, oldest first.
func (s *Store) memFiles() ([]string, error) {
	ents, err := os.ReadDir(s.dbDir)
	if err != nil {
		return nil, err
	}
	var mems []string
	fid := func(name string) int {
		n, _ := strconv.Atoi(strings.TrimSuffix(name, ".mem"))
		return n
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".mem") {
			mems = append(mems, e.Name())
		}
	}
	// ReadDir sorts by name; badger pads fids to 5 digits, so sort by number.
	for i := 1; i < len(mems); i++ {
		for j := i; j > 0 && fid(mems[j]) < fid(mems[j-1]); j-- {
			mems[j], mems[j-1] = mems[j-1], mems[j]
		}
	}
	return mems, nil
}
