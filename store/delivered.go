package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/dgraph-io/badger/v4"

	"github.com/danyue/danyue/crdt"
)

// The delivered marks: for each device, a sequence number that no change
// this store has sent to it is above, raised just behind what a sync
// sender sends (peer.Node). They live in the database, so a copy of the
// data directory restored later brings back the marks of the copy, below
// the cursors of the devices that pulled the lost changes: each of those
// is told from devices that pulled only what this store still holds,
// however many runs and changes the restored store has made since, and
// whichever devices it met first (peer.Node.Delivered).
//
// A device without a mark of its own has the base mark: 0 for a store made
// with marks, and for a store made before them its last change when it was
// first opened with them (everything it held may have been sent, as far as
// it can tell).
//
// A mark is written without a sync of its own (Batch.lazy): the store's
// next sync, of a change, a peer's batch or the close, makes it durable.
// A power cut before that brings back the mark before it, which the peer
// layer takes for a store that went back: it sends that device everything
// again, safe and only costly. A sync per mark would be a second sync for
// every change pushed to a peer, on a disk the push's own syncs wait for.

var keyDelivered = []byte("mdelivered") // the base mark; + device: its mark

func deliveredKey(d crdt.DeviceID) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), keyDelivered...), uint64(d))
}

// deliveredMarks is the store's copy of its delivered marks in memory.
// raising serializes MarkDelivered, so that while one is written the marks
// in memory are those in the database, and its plan needs to read none.
type deliveredMarks struct {
	raising sync.Mutex
	mu      sync.Mutex
	base    uint64
	// stored says the base mark is in the database; a store made before
	// the marks writes it with its first mark.
	stored bool
	to     map[crdt.DeviceID]uint64
}

// Delivered returns device dev's delivered mark.
func (s *Store) Delivered(dev crdt.DeviceID) uint64 {
	m := &s.delivered
	m.mu.Lock()
	defer m.mu.Unlock()
	return max(m.base, m.to[dev])
}

// reset sets the marks of a store just opened or created: base, and no
// device's own.
func (m *deliveredMarks) reset(base uint64, stored bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.base, m.stored, m.to = base, stored, make(map[crdt.DeviceID]uint64)
}

// deliveredReq is a MarkDelivered in a Batch.
type deliveredReq struct {
	seq  uint64
	devs []crdt.DeviceID
}

// MarkDelivered raises the delivered marks of devs to seq in one write,
// durable with the store's next sync (see above); it never lowers one, and
// seq may not pass LastSeq.
func (s *Store) MarkDelivered(ctx context.Context, seq uint64, devs ...crdt.DeviceID) error {
	m := &s.delivered
	m.raising.Lock()
	defer m.raising.Unlock()
	var raise []crdt.DeviceID
	for _, d := range devs {
		if d == 0 {
			return fmt.Errorf("mark store %s delivered: no device: %w", s.dir, crdt.ErrInvalid)
		}
		if seq > s.Delivered(d) {
			raise = append(raise, d)
		}
	}
	if len(raise) == 0 {
		return ctx.Err()
	}
	if last := s.LastSeq(); seq > last {
		return fmt.Errorf("mark store %s delivered up to %d, past its last change %d: %w", s.dir, seq, last, crdt.ErrInvalid)
	}
	if _, err := s.Apply(ctx, Batch{delivered: &deliveredReq{seq: seq, devs: raise}, lazy: true}); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stored = true
	for _, d := range raise {
		m.to[d] = max(m.to[d], seq)
	}
	return nil
}

// markDelivered works out a MarkDelivered in the writer's transaction:
// r.devs are the devices whose marks are below r.seq (MarkDelivered).
func (p *plan) markDelivered(r *deliveredReq) {
	m := &p.s.delivered
	m.mu.Lock()
	base, stored := m.base, m.stored
	m.mu.Unlock()
	if !stored {
		p.writes = append(p.writes, write{key: keyDelivered, val: u64(base)})
	}
	for _, d := range r.devs {
		p.writes = append(p.writes, write{key: deliveredKey(d), val: u64(r.seq)})
	}
}

// loadDelivered reads the delivered marks at open; last is the store's
// last change.
func (s *Store) loadDelivered(txn *badger.Txn, last uint64) error {
	m := &s.delivered
	m.reset(last, false)
	m.mu.Lock()
	defer m.mu.Unlock()
	it := txn.NewIterator(badger.IteratorOptions{Prefix: keyDelivered, PrefetchValues: false})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		k := item.Key()
		v, err := item.ValueCopy(nil)
		if err != nil {
			return ioErr(s.dir, "read a delivered mark", err)
		}
		seq, ok := parseU64(v)
		dev := k[len(keyDelivered):]
		switch {
		case !ok:
			return corruptf(s.dir, "malformed delivered mark (key %s)", keyName(k))
		case len(dev) == 0:
			m.base, m.stored = seq, true
		case len(dev) == 8 && binary.BigEndian.Uint64(dev) != 0:
			m.to[crdt.DeviceID(binary.BigEndian.Uint64(dev))] = seq
		default:
			return corruptf(s.dir, "malformed delivered mark key %s", keyName(k))
		}
	}
	return nil
}
