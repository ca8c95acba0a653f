package store

import (
	"context"
	"fmt"

	"github.com/danyue/danyue/crdt"
)

// The delivered mark: a sequence number that no change this store has sent
// to another device is above, raised durably before a sync sender sends
// past it (peer.Node). It lives in the database, so a copy of the data
// directory restored later brings back the mark of the copy, below the
// cursors of the devices that pulled the lost changes; they are told from
// devices that pulled only what this store still holds, however many runs
// and changes the restored store has made since (peer.Node.Delivered).

var keyDelivered = []byte("mdelivered")

// Delivered returns the delivered mark.
func (s *Store) Delivered() uint64 { return s.delivered.Load() }

// MarkDelivered raises the delivered mark to seq, durably; it never lowers
// it, and seq may not pass LastSeq.
func (s *Store) MarkDelivered(ctx context.Context, seq uint64) error {
	if seq <= s.Delivered() {
		return ctx.Err()
	}
	if last := s.LastSeq(); seq > last {
		return fmt.Errorf("mark store %s delivered up to %d, past its last change %d: %w", s.dir, seq, last, crdt.ErrInvalid)
	}
	if _, err := s.Apply(ctx, Batch{delivered: seq}); err != nil {
		return err
	}
	for {
		old := s.delivered.Load()
		if seq <= old || s.delivered.CompareAndSwap(old, seq) {
			return nil
		}
	}
}

// markDelivered works out a MarkDelivered in the writer's transaction.
func (p *plan) markDelivered(seq uint64) error {
	v, err := getValue(p.txn, keyDelivered)
	if err != nil {
		return ioErr(p.s.dir, "read the delivered mark", err)
	}
	if old, ok := parseU64(v); ok && old >= seq {
		return nil
	}
	p.writes = append(p.writes, write{key: keyDelivered, val: u64(seq)})
	return nil
}

// loadDelivered reads the delivered mark at open. A store made before the
// mark existed holds none: everything it holds may have been sent, as far
// as it can tell.
func (s *Store) loadDelivered(v []byte, last uint64) error {
	if v == nil {
		s.delivered.Store(last)
		return nil
	}
	d, ok := parseU64(v)
	if !ok {
		return corruptf(s.dir, "malformed delivered mark (key %s)", keyName(keyDelivered))
	}
	s.delivered.Store(d)
	return nil
}
