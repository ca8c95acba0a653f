package store

import (
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/danyue/danyue/crdt"
)

// The writer. One goroutine takes every batch queued so far (a group),
// works each out in turn against one badger transaction, so that each sees
// the batches before it and a failing batch leaves the others alone, and
// commits it; then it hands the group to the syncer (sync.go) and goes on
// with the next group without waiting for the sync.

func (s *Store) writer() {
	defer close(s.writerDone)
	for range s.wake {
		for {
			s.qmu.Lock()
			reqs, closing := s.queue, s.closing
			s.queue = nil
			s.qmu.Unlock()
			if len(reqs) == 0 {
				if closing {
					return
				}
				break
			}
			if g := s.commitGroup(reqs); g != nil {
				s.committed(g)
			}
		}
	}
}

// group is one group commit on its way through the writer and the syncer.
type group struct {
	s       *Store
	id      uint64     // groups are numbered in commit order
	db      *badger.DB // acquired by the writer, released once acknowledged
	txn     *badger.Txn
	snap    *snapshot // taken after its last commit, until acknowledged (snapshot.go)
	reqs    []*request
	seq     uint64         // last sequence number taken by the group
	hw      crdt.Timestamp // clock high-water mark including the group
	inTxn   []*request     // applied to txn, not yet committed
	written []*request     // committed, to be synced
	fatal   error          // a commit failed: every batch left fails
}

// commitGroup applies a group's batches and commits them. It returns nil if
// the group turned out empty (every batch was canceled).
func (s *Store) commitGroup(all []*request) *group {
	g := &group{s: s, reqs: make([]*request, 0, len(all)), seq: s.wseq, hw: s.whw}
	for _, r := range all {
		if r.state.CompareAndSwap(queued, taken) {
			g.reqs = append(g.reqs, r)
		}
	}
	if len(g.reqs) == 0 {
		return nil
	}
	s.qmu.Lock()
	failed := s.failed
	s.qmu.Unlock()
	if failed != nil {
		g.failAll(failed)
		return g
	}
	if min := s.opt.MinFreeBytes; min > 0 {
		if free := s.opt.freeSpace(s.dir); free < uint64(min) {
			g.failAll(diskFullErr(s.dir, fmt.Errorf("%d MiB free, the store keeps %d MiB", free>>20, min>>20)))
			return g
		}
	}
	db, err := s.acquireWrite()
	if err != nil {
		g.failAll(err)
		return g
	}
	g.db = db
	g.apply()
	if g.fatal != nil {
		s.poison(g.fatal)
	}
	s.wseq, s.whw = g.seq, g.hw
	return g
}

// apply adds every batch to the group's transaction and commits it. A
// panic (badger reading a damaged table) fails the group.
func (g *group) apply() {
	g.txn = g.db.NewTransaction(true)
	defer func() {
		g.txn.Discard()
		if v := recover(); v != nil {
			g.fail(corruptf(g.s.dir, "writing failed: %v", v))
			for _, r := range g.reqs {
				if r.err == nil {
					r.err = g.fatal
				}
			}
		}
	}()
	for _, r := range g.reqs {
		g.add(r)
	}
	if g.fatal == nil && len(g.inTxn) > 0 {
		g.commit()
	}
}

func (g *group) failAll(err error) {
	for _, r := range g.reqs {
		r.err = err
	}
}

// add works out one batch and adds its writes to the transaction.
func (g *group) add(r *request) {
	if g.fatal != nil {
		r.err = g.fatal
		return
	}
	p, err := g.plan(r.b)
	if err != nil {
		r.err = err
		return
	}
	r.res, r.writes = p.result, p.writes
	if len(r.writes) == 0 {
		return // nothing changed: done, nothing to wait for
	}
	if err := setAll(g.txn, r.writes); err != nil {
		// The batch is partly in the transaction: rebuild it without.
		g.txn.Discard()
		g.txn = g.db.NewTransaction(true)
		for _, q := range g.inTxn {
			if rerr := setAll(g.txn, q.writes); rerr != nil {
				g.fail(ioErr(g.s.dir, "rebuild a transaction", rerr))
				r.err = g.fatal
				return
			}
		}
		if errors.Is(err, badger.ErrTxnTooBig) && len(g.inTxn) > 0 {
			// Commit the batches before it, then try it alone.
			if g.commit(); g.fatal != nil {
				r.err = g.fatal
				return
			}
			if err = setAll(g.txn, r.writes); err != nil {
				g.txn.Discard()
				g.txn = g.db.NewTransaction(true)
			}
		}
		if errors.Is(err, badger.ErrTxnTooBig) {
			r.err = fmt.Errorf("apply to store %s: %d changed records: %w (split it into batches of at most %d records and %d KiB)",
				g.s.dir, len(r.res.Changed), ErrTooBig, MaxBatchEntries, MaxBatchBytes>>10)
			return
		}
		if err != nil {
			r.err = ioErr(g.s.dir, "write", err)
			return
		}
	}
	g.inTxn = append(g.inTxn, r)
	g.seq, g.hw = p.seq, p.hw
}

// commit commits the transaction and starts a new one.
func (g *group) commit() {
	err := g.txn.Commit()
	g.txn = g.db.NewTransaction(true)
	if err != nil {
		g.fail(ioErr(g.s.dir, "commit", err))
		return
	}
	g.written = append(g.written, g.inTxn...)
	var n int
	for _, r := range g.inTxn {
		for _, w := range r.writes {
			n += len(w.key) + len(w.val)
		}
	}
	g.s.written.Add(int64(n))
	g.inTxn = nil
	sn := g.s.snaps.publish(g.db)
	if g.snap != nil {
		g.s.snaps.put(g.snap)
	}
	g.snap = sn
}

// fail fails every batch the group has applied: a commit or sync error
// leaves their state on disk unknown.
func (g *group) fail(err error) {
	g.fatal = err
	for _, r := range g.written {
		r.err = err
	}
	for _, r := range g.inTxn {
		r.err = err
	}
}
