package store

import (
	"bytes"
	"context"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/danyue/danyue/crdt"
)

// view runs fn in a read-only transaction on the open database: the
// writer's latest snapshot if there is one (snapshot.go), so that the read
// does not wait for a commit in progress.
func (s *Store) view(ctx context.Context, fn func(*badger.Txn) error) error {
	return s.reading(ctx, func(db *badger.DB) error {
		if sn := s.snaps.take(db); sn != nil {
			defer s.snaps.put(sn)
			return fn(sn.txn)
		}
		return db.View(fn)
	})
}

// viewAcked runs fn in the acknowledged snapshot (snapshot.go), with the
// last sequence number it holds.
func (s *Store) viewAcked(ctx context.Context, fn func(txn *badger.Txn, upto uint64) error) error {
	return s.reading(ctx, func(db *badger.DB) error {
		sn := s.snaps.takeAcked(db)
		if sn == nil {
			// Every open starts one; a database without is a bug.
			return fmt.Errorf("store %s: no acknowledged snapshot of the open database", s.dir)
		}
		defer s.snaps.put(sn)
		return fn(sn.txn, sn.seq)
	})
}

// reading runs fn, a read, with the open database, reopening it if it was
// closed for idleness.
func (s *Store) reading(ctx context.Context, fn func(*badger.DB) error) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	db, err := s.acquire()
	if err != nil {
		return err
	}
	defer s.release()
	defer recoverCorrupt(s.dir, &err)
	return fn(db)
}

// recoverCorrupt turns a panic while reading the database (badger parsing a
// damaged table) into ErrCorrupt.
func recoverCorrupt(dir string, err *error) {
	if v := recover(); v != nil {
		*err = corruptf(dir, "reading the database failed: %v", v)
	}
}

// Get returns the record id (as made by Entry.AppendID), if there is one.
func (s *Store) Get(ctx context.Context, id []byte) (crdt.Entry, bool, error) {
	var (
		e     crdt.Entry
		found bool
	)
	if len(id) == 0 {
		return e, false, nil
	}
	err := s.view(ctx, func(txn *badger.Txn) (err error) {
		e, _, found, err = s.readRecord(txn, id)
		return err
	})
	return e, found, err
}

// Since calls fn with each record whose latest change came after sequence
// number after, in sequence order, at most limit records (no limit if
// limit <= 0): each record's state once, with its sequence number, as of
// an acknowledged group no older than the LastSeq of the moment of the
// call (snapshot.go), up to that group's sequence number. data is the
// stored encoding (crdt Entry.Encode), valid only during the call to fn, so
// that a sync sender ships it as it is.
//
// A record that changes again moves to a later sequence number, so a caller
// that has seen every record up to LastSeq (Watch's last) and calls Since
// again from there misses nothing; and every number up to LastSeq that
// Since does not list holds nothing that is not listed after it.
func (s *Store) Since(ctx context.Context, after uint64, limit int, fn func(seq uint64, data []byte) error) error {
	if after >= s.LastSeq() {
		return ctx.Err()
	}
	return s.viewAcked(ctx, func(txn *badger.Txn, upto uint64) error {
		if after >= upto {
			return nil
		}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pSeq}})
		defer it.Close()
		n, last := 0, seqKey(after)
		full := after == 0 && limit <= 0 // every record: the count can be checked
		for it.Seek(seqKey(after + 1)); it.Valid(); it.Next() {
			if limit > 0 && n >= limit {
				return nil
			}
			if n%256 == 255 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			item := it.Item()
			seq, ok := parseU64(item.Key()[1:])
			if !ok {
				return corruptf(s.dir, "malformed index key %s", keyName(item.Key()))
			}
			if seq > upto {
				if full {
					// Changes after the call: not shown, but counted.
					for ; it.Valid(); it.Next() {
						n++
					}
					return s.checkCount(txn, n, crdt.Kinds()...)
				}
				return nil
			}
			if err := item.Value(func(v []byte) error { return fn(seq, v) }); err != nil {
				return err
			}
			n++
			last = item.KeyCopy(last[:0])
		}
		if err := s.checkEnd(txn, []byte{pSeq}, last); err != nil || !full {
			return err
		}
		return s.checkCount(txn, n, crdt.Kinds()...)
	})
}

// checkCount returns ErrCorrupt unless a full scan found as many records as
// the store counts (of kinds): badger's iterators skip, silently, blocks
// they cannot read.
func (s *Store) checkCount(txn *badger.Txn, found int, kinds ...crdt.Kind) error {
	var want uint64
	for _, kind := range kinds {
		v, err := getValue(txn, countKey(kind))
		if err != nil {
			return ioErr(s.dir, "read a record count", err)
		}
		n, ok := parseU64(v)
		if v != nil && !ok {
			return corruptf(s.dir, "malformed record count under key %s", keyName(countKey(kind)))
		}
		want += n
	}
	if uint64(found) != want {
		return corruptf(s.dir, "a full scan found %d records where the store holds %d: the database could not be read", found, want)
	}
	return nil
}

// checkEnd returns ErrCorrupt if an iteration over prefix ran out of keys
// after key last although the prefix holds later ones: a badger iterator
// that cannot read a block ends as if the data ended, so a scan that merely
// stops could hide damage.
func (s *Store) checkEnd(txn *badger.Txn, prefix, last []byte) error {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: true})
	defer it.Close()
	it.Seek(append(bytes.Clone(prefix), bytes.Repeat([]byte{0xff}, 80)...))
	if !it.Valid() {
		return nil
	}
	if k := it.Item().Key(); last == nil || bytes.Compare(k, last) > 0 {
		return corruptf(s.dir, "a scan stopped after key %s, before the last key %s: the database could not be read", keyName(last), keyName(k))
	}
	return nil
}

// Cursor is how far this device has merged another device's changes: that
// device's store epoch and the last of its sequence numbers merged here.
type Cursor struct {
	Device crdt.DeviceID
	Epoch  uint64
	Seq    uint64
}

// Cursor returns the cursor of device, if there is one.
func (s *Store) Cursor(ctx context.Context, device crdt.DeviceID) (Cursor, bool, error) {
	var (
		c     Cursor
		found bool
	)
	err := s.view(ctx, func(txn *badger.Txn) error {
		k := cursorKey(device)
		v, err := getValue(txn, k)
		if err != nil || v == nil {
			return err
		}
		if c, found = parseCursor(k, v); !found {
			return corruptf(s.dir, "malformed cursor under key %s", keyName(k))
		}
		return nil
	})
	if err != nil {
		return Cursor{}, false, err
	}
	return c, found, nil
}

// Cursors returns every peer cursor, by device.
func (s *Store) Cursors(ctx context.Context) ([]Cursor, error) {
	var cs []Cursor
	err := s.view(ctx, func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pCursor}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			var c Cursor
			err := item.Value(func(v []byte) error {
				var ok bool
				if c, ok = parseCursor(item.Key(), v); !ok {
					return corruptf(s.dir, "malformed cursor under key %s", keyName(item.Key()))
				}
				return nil
			})
			if err != nil {
				return err
			}
			cs = append(cs, c)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return cs, nil
}
