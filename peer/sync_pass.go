package peer

import (
	"context"
	"errors"
	"fmt"

	"github.com/danyue/danyue/crdt"
)

// passResult is what one pass over the store after a cursor found.
type passResult struct {
	records [][]byte
	gaps    []uint64 // each record's sequence number, as the gap from the one before
	seq     uint64   // the last sequence number visited
	full    bool     // cut short by the batch limits
	skipped uint64
	echoes  [][16]byte // records skipped because the puller sent them
	// Records held back (fanout.go): from heldFrom on, nothing is sent;
	// held gives, by source, the highest sequence number of a held record
	// state; later says a record to send came after one.
	heldFrom uint64
	held     map[crdt.DeviceID]mark
	later    bool
}

// pass reads one batch worth of changes after cursor, holding back relays
// if hold is set.
func (snd *sender) pass(ctx context.Context, cursor uint64, hold bool) (passResult, error) {
	var (
		p       = passResult{seq: cursor}
		arena   []byte
		size    int
		visited int
		prev    = cursor
	)
	err := snd.n.store.Since(ctx, cursor, maxBatchRecords, func(s uint64, data []byte) error {
		if size+len(data) > maxBatchBytes && len(p.records) > 0 {
			p.full = true
			return errBatchFull
		}
		visited++
		if k, ok := snd.echo.has(snd.peerLineage, data); ok || snd.n.prov.coveredBy(snd.have, data) {
			p.seq = s
			p.skipped++
			if ok && p.heldFrom == 0 {
				p.echoes = append(p.echoes, k)
			}
			return nil
		}
		if hold {
			if src, ok := snd.n.prov.source(data); ok && snd.fo.holds(src) {
				if p.heldFrom == 0 {
					p.heldFrom, p.held = s, map[crdt.DeviceID]mark{}
				}
				if m := p.held[src.device]; m.seq < src.seq {
					p.held[src.device] = src.mark
				}
				return nil
			}
		}
		if p.heldFrom != 0 {
			p.later = true
			return errBatchFull
		}
		p.seq = s
		// data is only valid during the call: copy it into chunks that
		// never move once written, small for the one-record pushes that
		// are most batches, growing for a catch-up.
		if cap(arena)-len(arena) < len(data) {
			arena = make([]byte, 0, max(min(2*cap(arena), 64<<10), 1<<10, len(data)))
		}
		arena = append(arena, data...)
		p.records = append(p.records, arena[len(arena)-len(data):len(arena):len(arena)])
		size += len(data)
		p.gaps = append(p.gaps, s-prev)
		prev = s
		return nil
	})
	if err != nil && !errors.Is(err, errBatchFull) {
		return p, fmt.Errorf("read changes: %w", err)
	}
	if visited == maxBatchRecords {
		p.full = true
	}
	return p, nil
}

// view is what the hold decision needs of p (hold.go).
func (p *passResult) view() passView {
	return passView{seq: p.seq, records: len(p.records), full: p.full, heldFrom: p.heldFrom, later: p.later}
}
