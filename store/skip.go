package store

import (
	"context"
	"fmt"

	"github.com/danyue/danyue/crdt"
)

// SkipPast makes every later change of this store take a sequence number
// above seq, durably: the sequence floor (loss.go) rises to seq, and LastSeq
// with it. It is for a store found to have gone back in time under its own
// epoch, which only another device can see: a peer's cursor into this
// store lies past what the store holds (its whole data directory restored
// from an old copy, journal and all, or the last changes before a power cut
// lost). Without it, the changes made from then on would take sequence
// numbers that peer already holds cursors past, and it would never pull
// them. It does nothing if LastSeq is at seq or past it.
func (s *Store) SkipPast(ctx context.Context, seq uint64) error {
	if seq <= s.LastSeq() {
		return ctx.Err()
	}
	if seq > maxSkip {
		return fmt.Errorf("skip store %s past %d: %w", s.dir, seq, crdt.ErrInvalid)
	}
	_, err := s.Apply(ctx, Batch{skipPast: seq})
	return err
}

// maxSkip keeps a sequence number that a peer sends from moving this
// store's sequence so far that it could run out: a million changes a second
// for ten thousand years stays below it.
const maxSkip = 1 << 58

// skip works out a SkipPast in the writer's transaction.
func (p *plan) skip(seq uint64) error {
	if seq <= p.seq {
		return nil
	}
	v, err := getValue(p.txn, keyFloor)
	if err != nil {
		return ioErr(p.s.dir, "read the sequence floor", err)
	}
	floor, ok := parseU64(v)
	if v != nil && !ok {
		return corruptf(p.s.dir, "malformed sequence floor under key %s", keyName(keyFloor))
	}
	p.seq = max(seq, floor)
	p.writes = append(p.writes, write{key: keyFloor, val: u64(p.seq)})
	return nil
}
