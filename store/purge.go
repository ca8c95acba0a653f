package store

import (
	"bytes"
	"context"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/danyue/danyue/crdt"
)

// Tombstone collection (crdt/collect.go has the rule and why it is safe).
// Purge removes deleted books that every current member holds, in bounded
// batches through the writer, so a purge is atomic and ordered with every
// other write: the record's index entry, id key and its three book index
// entries go, and the counts drop. The book's record, its residue (all of
// it: crdt/collect.go says why), is kept under a residue key (keys.go),
// which is the store's durable memory that the book was collected: it is
// not a record (not counted, listed, indexed or shipped by Since), and a
// later arrival of the book is decided against it (crdt.Absorbs): dropped,
// or the record is brought back as residue merged with it, taking a new
// sequence number like any change, and the residue goes.
//
// A purge takes no sequence number, but it may remove the record with the
// last one, from which Open works out LastSeq; so it raises the sequence
// floor (loss.go) to the writer's last number in the same transaction, and
// the sequence never goes back.

// MaxPurge bounds the books one Purge collects: each writes eight keys, so
// a purge fits a transaction like the largest batch.
const MaxPurge = MaxBatchEntries

// PurgeResult says what a Purge collected.
type PurgeResult struct {
	Records int   // books collected
	Bytes   int64 // bytes of keys and values removed, less the residues kept
	Kept    int64 // bytes of the residues written
	More    bool  // more books could be collected now: call Purge again
	// Held is the earliest tombstone wall time (ms) of the books every
	// member holds that the undo window alone kept (crdt.HeldByWindow),
	// 0 if none: nothing more is collectible under the same stability
	// until the window's end passes it. Complete only when More is false.
	Held uint64
}

// purgeReq is a purge on its way through the writer.
type purgeReq struct {
	st    crdt.Stability
	limit int
	res   PurgeResult
}

// Purge collects at most limit (at most MaxPurge; 0 means MaxPurge) of the
// deleted books that st allows (crdt.Collectible: every current member
// holds the book's current change), durably and atomically, and reports
// what it reclaimed. st must have been worked out (crdt.Stable) for this
// store's epoch and a last sequence number at or below LastSeq. The space
// is on disk again once badger compacts the tables that held the records.
func (s *Store) Purge(ctx context.Context, st crdt.Stability, limit int) (PurgeResult, error) {
	if limit <= 0 || limit > MaxPurge {
		limit = MaxPurge
	}
	if last := s.LastSeq(); st.UpTo > last {
		return PurgeResult{}, fmt.Errorf("purge store %s: stability up to %d, past the last change %d: %w", s.dir, st.UpTo, last, crdt.ErrInvalid)
	}
	req := &purgeReq{st: st, limit: limit}
	if _, err := s.Apply(ctx, Batch{purge: req}); err != nil {
		return PurgeResult{}, err
	}
	return req.res, nil
}

// purge works out a purge in the writer's transaction: it finds the
// collectible books by a keys-only scan of the deleted scope of the key
// index, and adds their removal to the plan's writes.
func (p *plan) purge(req *purgeReq) error {
	s := p.s
	var ids [][]byte
	it := p.txn.NewIterator(badger.IteratorOptions{Prefix: orderPrefix(OrderKey, scopeDeleted)})
	for it.Rewind(); it.Valid(); it.Next() {
		ids = append(ids, bytes.Clone(it.Item().Key()[3:]))
	}
	it.Close()
	var n uint64
	for _, id := range ids {
		e, seq, found, err := s.readRecord(p.txn, id)
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		if crdt.HeldByWindow(&e, seq, &req.st) {
			if w := e.Book.Deleted.Wall; req.res.Held == 0 || w < req.res.Held {
				req.res.Held = w
			}
			continue
		}
		if !crdt.Collectible(&e, seq, &req.st) {
			continue
		}
		if int(n) == req.limit {
			req.res.More = true
			break
		}
		old, err := e.Encode()
		if err != nil {
			return fmt.Errorf("purge store %s: %w", s.dir, err)
		}
		sk, rk, gk := seqKey(seq), recordKey(id), residueKey(id)
		freed := int64(len(sk) + len(old) + len(rk) + 8)
		p.writes = append(p.writes, write{key: sk, del: true}, write{key: rk, del: true}, write{key: gk, val: old})
		for _, o := range orders {
			k := indexKey(o, id, &e.Book)
			freed += int64(len(k))
			p.writes = append(p.writes, write{key: k, del: true})
		}
		kept := int64(len(gk) + len(old))
		req.res.Records++
		req.res.Bytes += freed - kept
		req.res.Kept += kept
		n++
	}
	if n == 0 {
		return nil
	}
	s.wresidues = true
	var counts [3]uint64
	for i, k := range [][]byte{countKey(crdt.KindBook), keyDeletedBooks, keyFloor} {
		v, err := getValue(p.txn, k)
		if err != nil {
			return ioErr(s.dir, "read a count", err)
		}
		var ok bool
		if counts[i], ok = parseU64(v); v != nil && !ok {
			return corruptf(s.dir, "malformed count under key %s", keyName(k))
		}
	}
	if counts[0] < n || counts[1] < n {
		return corruptf(s.dir, "%d deleted books of %d counted, fewer than the %d collected", counts[1], counts[0], n)
	}
	p.writes = append(p.writes,
		write{key: countKey(crdt.KindBook), val: u64(counts[0] - n)},
		write{key: keyDeletedBooks, val: u64(counts[1] - n)},
		write{key: keyFloor, val: u64(max(counts[2], p.seq))})
	return nil
}

// loadResidue makes the residue of a collected book, if there is one, the
// batch's view of the record r, which the store does not hold: so a local
// write reads it (Batch.Build stamps after its tombstone and continues its
// read-time slot) and an arriving copy is decided against it.
func (p *plan) loadResidue(r *rec) error {
	if !p.s.wresidues || len(r.id) == 0 || r.id[0] != byte(crdt.KindBook) {
		return nil
	}
	gk := residueKey(r.id)
	v, err := getValue(p.txn, gk)
	if err != nil || v == nil {
		if err != nil {
			err = ioErr(p.s.dir, "read a residue", err)
		}
		return err
	}
	e, err := crdt.Decode(v)
	if err != nil || e.Kind != crdt.KindBook || !bytes.Equal(e.AppendID(nil), r.id) || !crdt.MayBeCollected(&e) {
		return corruptf(p.s.dir, "residue under key %s does not decode to one: %v", keyName(gk), err)
	}
	r.live, r.residue, r.cur = true, true, e
	return nil
}

// absorbed reports whether e equals the residue r (still collected).
// Otherwise it marks r changed, even if merging e adds nothing to it: e
// lacks what the residue holds (an old copy from a device restored or
// joining), and the record must be shipped again, to that device too.
func (p *plan) absorbed(r *rec, e *crdt.Entry) bool {
	if e.Kind == crdt.KindBook && crdt.Absorbs(&r.cur.Book, &e.Book) {
		return true
	}
	p.mark(r)
	return false
}

// holdsResidues reports whether db holds at least one residue.
func holdsResidues(db *badger.DB) (bool, error) {
	var found bool
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pResidue}})
		defer it.Close()
		it.Rewind()
		found = it.Valid()
		return nil
	})
	return found, err
}

// Residue returns what is kept of the collected book key, if it was
// collected and has not come back since.
func (s *Store) Residue(ctx context.Context, key crdt.BookKey) (crdt.Book, bool, error) {
	id := crdt.BookEntry(crdt.Book{Key: key})
	var (
		b     crdt.Book
		found bool
	)
	err := s.view(ctx, func(txn *badger.Txn) error {
		v, err := getValue(txn, residueKey(id.AppendID(nil)))
		if err != nil || v == nil {
			return err
		}
		e, err := crdt.Decode(v)
		if err != nil {
			return corruptf(s.dir, "residue of %s does not decode: %v", key, err)
		}
		b, found = e.Book, true
		return nil
	})
	return b, found, err
}

// Residues calls fn with the encoding of every residue (a valid book
// record, data valid only during the call), in id order: what a device
// sends a peer that pulls from it from the start (new, wiped, or after a
// loss), which may hold old copies of books the library collected.
func (s *Store) Residues(ctx context.Context, fn func(data []byte) error) error {
	return s.view(ctx, func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pResidue}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := it.Item().Value(fn); err != nil {
				return err
			}
		}
		return nil
	})
}
