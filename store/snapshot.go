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

// snapshot is a read transaction shared by readers.
type snapshot struct {
	db   *badger.DB
	txn  *badger.Txn
	refs int // readers using it
}

// snapshots holds the current snapshot, under its own lock: readers take
// it often and briefly.
type snapshots struct {
	mu  sync.Mutex
	cur *snapshot
}

// take returns the current snapshot of db, referenced, or nil if there is
// none.
func (ss *snapshots) take(db *badger.DB) *snapshot {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	sn := ss.cur
	if sn == nil || sn.db != db {
		return nil
	}
	sn.refs++
	return sn
}

// put releases a snapshot taken with take; the last reader of a snapshot
// that has been replaced discards it.
func (ss *snapshots) put(sn *snapshot) {
	ss.mu.Lock()
	sn.refs--
	done := sn.refs == 0 && ss.cur != sn
	ss.mu.Unlock()
	if done {
		sn.txn.Discard()
	}
}

// publish replaces the current snapshot with a new one of db, taken now.
// The caller's commits must have returned.
func (ss *snapshots) publish(db *badger.DB) {
	sn := &snapshot{db: db, txn: db.NewTransaction(false)}
	ss.mu.Lock()
	old := ss.cur
	ss.cur = sn
	done := old != nil && old.refs == 0
	ss.mu.Unlock()
	if done {
		old.txn.Discard()
	}
}

// drop discards the current snapshot, before its database is closed: no
// reader may be using it (the caller has checked that the database has no
// users).
func (ss *snapshots) drop() {
	ss.mu.Lock()
	old := ss.cur
	ss.cur = nil
	ss.mu.Unlock()
	if old != nil && old.refs == 0 {
		old.txn.Discard()
	}
}
