package store

import (
	"context"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/danyue/danyue/crdt"
)

// Summary returns what this device (self) gossips about how far it has
// merged everyone (crdt.Summary), stamped at (a reading of its clock): its
// epoch, its last sequence number and its cursors into its peers, from one
// snapshot, so that holding this store up to Seq means holding all its
// cursors cover. It returns only once Seq is durable (LastSeq), so the
// summary never speaks of changes a power cut could take back.
func (s *Store) Summary(ctx context.Context, self crdt.DeviceID, at crdt.Timestamp) (crdt.Summary, error) {
	sm := crdt.Summary{Device: self, Epoch: s.epoch, At: at}
	err := s.view(ctx, func(txn *badger.Txn) error {
		seq, err := s.lastSeqIn(txn)
		if err != nil {
			return err
		}
		v, err := getValue(txn, keyFloor)
		if err != nil {
			return ioErr(s.dir, "read the sequence floor", err)
		}
		floor, _ := parseU64(v)
		sm.Seq = max(seq, floor, s.LastSeq())
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pCursor}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			v, err := item.ValueCopy(nil)
			if err != nil {
				return ioErr(s.dir, "read a cursor", err)
			}
			c, ok := parseCursor(item.Key(), v)
			if !ok {
				return corruptf(s.dir, "malformed cursor under key %s", keyName(item.Key()))
			}
			if c.Device != self && len(sm.Cursors) < crdt.MaxSummaryCursors {
				sm.Cursors = append(sm.Cursors, crdt.Cursor{Device: c.Device, Epoch: c.Epoch, Seq: c.Seq})
			}
		}
		return nil
	})
	if err != nil {
		return crdt.Summary{}, err
	}
	if err := sm.Validate(); err != nil {
		return crdt.Summary{}, fmt.Errorf("summary of store %s: %w", s.dir, err)
	}
	var prev <-chan struct{}
	for {
		last, changed := s.Watch()
		switch {
		case last >= sm.Seq:
			return sm, nil
		case changed == prev: // closed for good: the store closed
			return crdt.Summary{}, fmt.Errorf("store %s: %w", s.dir, ErrClosed)
		}
		prev = changed
		select {
		case <-changed:
		case <-ctx.Done():
			return crdt.Summary{}, ctx.Err()
		}
	}
}
