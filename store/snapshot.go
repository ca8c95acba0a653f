package store

import (
	"sync"

	"github.com/dgraph-io/badger/v4"
)

// Read snapshots. A badger read transaction takes as its read timestamp
// the last commit timestamp handed out, and first waits until every commit
// up to it has been written to the memtable; a commit that badger holds up
// (its memtable full and the flush behind, during a flood) holds up every
// read that starts meanwhile, a GET of one book included. So the writer,
// right after each commit returns, opens a read transaction, which then
// waits for nothing, and reads (view) share it until the next commit
// replaces it: a read sees every commit that returned before it started,
// so a write is visible to a read that starts after it is acknowledged,
// and it waits for no commit in progress.
//
// A snapshot belongs to one database handle; it is dropped before that
// handle closes (idle close, Close), and until the writer's next commit
// after a reopen, reads open their own transaction. Only the writer writes
// while the database is open (the writes at open are done before the
// writer starts), so no write can hide behind a snapshot.

// The acknowledged snapshot. Since lists records up to LastSeq, but a
// record changed again by a group committed and not yet acknowledged has
// left its sequence number in the writer's snapshot for one past LastSeq:
// a sync sender reading that snapshot would find nothing at the old number,
// move its cursor past it, and be acknowledged for a change it never sent,
// until the new number is published. So Since reads the snapshot taken at
// the commit of the last acknowledged group, which holds every record at
// the number LastSeq lists it under. Each group keeps the snapshot of its
// commit until it is acknowledged (or fails), and the acknowledgement hands
// it over. A database that is opened starts with one of its state then:
// nothing is pending at an open, since a group holds the database until it
// is acknowledged and a close waits for every holder.

// snapshot is a read transaction shared by readers.
type snapshot struct {
	db   *badger.DB
	txn  *badger.Txn
	refs int    // readers using it, the group it was made for, and acked
	seq  uint64 // as acked: the last sequence number it holds
}

// snapshots holds the writer's latest snapshot and the acknowledged one,
// under their own lock: readers take them often and briefly.
type snapshots struct {
	mu    sync.Mutex
	cur   *snapshot
	acked *snapshot // holds a reference of its own
}

// take returns the current snapshot of db, referenced, or nil if there is
// none.
func (ss *snapshots) take(db *badger.DB) *snapshot {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.refLocked(ss.cur, db)
}

// takeAcked returns the acknowledged snapshot of db, referenced, or nil if
// there is none.
func (ss *snapshots) takeAcked(db *badger.DB) *snapshot {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.refLocked(ss.acked, db)
}

func (ss *snapshots) refLocked(sn *snapshot, db *badger.DB) *snapshot {
	if sn == nil || sn.db != db {
		return nil
	}
	sn.refs++
	return sn
}

// put releases a reference taken with take, takeAcked or publish; the last
// reference to a snapshot that has been replaced discards it.
func (ss *snapshots) put(sn *snapshot) {
	ss.mu.Lock()
	sn.refs--
	done := sn.refs == 0 && ss.cur != sn
	ss.mu.Unlock()
	if done {
		sn.txn.Discard()
	}
}

// publish replaces the current snapshot with a new one of db, taken now,
// and returns it referenced for the group whose commit it follows. The
// caller's commits must have returned.
func (ss *snapshots) publish(db *badger.DB) *snapshot {
	sn := &snapshot{db: db, txn: db.NewTransaction(false), refs: 1}
	ss.mu.Lock()
	old := ss.cur
	ss.cur = sn
	done := old != nil && old.refs == 0
	ss.mu.Unlock()
	if done {
		old.txn.Discard()
	}
	return sn
}

// ack makes sn, a group's snapshot holding everything up to seq, the
// acknowledged one, taking over the group's reference. It is called before
// LastSeq moves to seq, so that a Since after LastSeq moved reads it.
func (ss *snapshots) ack(sn *snapshot, seq uint64) {
	ss.mu.Lock()
	sn.seq = seq
	old := ss.acked
	ss.acked = sn
	ss.mu.Unlock()
	if old != nil {
		ss.put(old)
	}
}

// opened starts the acknowledged snapshot of a database just opened, whose
// state holds everything up to seq.
func (ss *snapshots) opened(db *badger.DB, seq uint64) {
	ss.ack(&snapshot{db: db, txn: db.NewTransaction(false), refs: 1}, seq)
}

// drop discards the snapshots, before their database is closed: no reader
// and no group may be using them (the caller has checked that the database
// has no users).
func (ss *snapshots) drop() {
	ss.mu.Lock()
	cur, acked := ss.cur, ss.acked
	ss.cur, ss.acked = nil, nil
	ss.mu.Unlock()
	if cur != nil && cur.refs == 0 {
		cur.txn.Discard()
	}
	if acked != nil {
		ss.put(acked)
	}
}
