package store

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/danyue/danyue/crdt"
)

// Batch is one atomic change to the store: records to merge, and what goes
// with them.
type Batch struct {
	// Entries are merged into the local records (crdt Entry.Merge).
	Entries []crdt.Entry

	// Build, if non-nil, runs inside the write, after Entries are merged
	// and after the writes of every batch applied before this one, and
	// returns more entries to merge. It is how read-modify-write operations
	// (new read-time slot = current slot + delta) stay correct under
	// concurrency. get reads a record as this batch would leave it so far
	// (a copy; id as made by Entry.AppendID). Build runs once, on the
	// store's writer goroutine: it must be quick and must not call the Store
	// (which would deadlock). A panic in Build fails the batch.
	Build func(get func(id []byte) (crdt.Entry, bool, error)) ([]crdt.Entry, error)

	// Cursor, if non-nil, is set in the same transaction: received from a
	// peer, it says up to where that device's changes are now merged. Within
	// one epoch a cursor only moves forward; a new epoch replaces it.
	Cursor *Cursor

	// Dedup, if not empty, is the idempotency key of the request: if it is
	// already recorded, nothing is applied and Apply returns ErrDuplicate,
	// or ErrDedupMismatch if it was recorded with another DedupSum.
	// Keys are kept for Options.DedupTTL (48 hours).
	Dedup string
	// DedupSum is a digest of the request that Dedup names, kept with it: a
	// key reused for another request is told from a retry. At most 64
	// bytes.
	DedupSum []byte

	// Daily, if non-nil, adds local reading time to a day's statistics.
	// It is never synced and takes no sequence number.
	Daily *DailyAdd

	purge *purgeReq // set by Purge alone (purge.go)
	// forget, set by ForgetCursor alone (cursor_forget.go), is the device
	// whose cursor goes.
	forget crdt.DeviceID
	// summaries, set by SaveSummaries alone (summaries.go), replace the
	// saved summaries.
	summaries []byte
	// skipPast, set by SkipPast alone (skip.go), is where the sequence
	// continues after.
	skipPast uint64
	// delivered, set by MarkDelivered alone (delivered.go), raises
	// delivered marks.
	delivered *deliveredReq
	// lazy: the batch is acknowledged once committed, without a sync of
	// its own; it becomes durable with the next sync (sync.go). Only for
	// what may be lost in a power cut at no cost but work (MarkDelivered,
	// SaveSummaries).
	lazy bool
	// known, set by SaveKnown alone (known.go), replaces the saved
	// address book.
	known []byte
}

// Result says what a batch changed.
type Result struct {
	// Changed holds the records whose state changed, in sequence order.
	Changed []Change
}

// Change is one record changed by a batch. Prev and Entry point at the
// batch's own copies, which nothing else holds, rather than copying each
// record twice more (a crdt.Entry is over 600 bytes, and a flood from a
// member changes hundreds of thousands); the caller reads them and does
// not change them.
type Change struct {
	Seq   uint64      // the record's new local sequence number
	Prev  *crdt.Entry // the record before the batch; nil if it is new
	Entry *crdt.Entry // the merged record
}

// Limits that make a batch always fit in one transaction. A peer that sends
// batches chunks them by these; Apply returns ErrTooBig for a batch that does
// not fit.
const (
	MaxBatchEntries = 512       // a changed record writes up to 9 keys (index.go)
	MaxBatchBytes   = 256 << 10 // sum of the changed records' encoded sizes
	maxDedupKey     = 256
	maxDedupSum     = 64
)

// request is a batch waiting for the writer.
type request struct {
	b      *Batch
	state  atomic.Int32 // queued, taken or cancelled
	writes []write      // the batch's writes, kept to rebuild a transaction
	res    Result
	err    error
	done   chan struct{}
}

const (
	queued int32 = iota
	taken
	cancelled
)

// Apply merges a batch durably and atomically: each entry is merged into
// its local record, each record whose state changed gets the next local
// sequence number (and its previous index entry is removed), and the cursor,
// dedup key, daily statistic and clock high-water mark are written, all in
// one transaction. When Apply returns nil the batch is on disk: a kill -9 or
// a power cut after that loses nothing. Concurrent callers share one sync
// (group commit).
//
// A batch with an invalid entry (Entry.Validate) fails with an error
// wrapping crdt.ErrInvalid and writes nothing. If ctx ends before the writer
// takes the batch, Apply returns ctx's error and nothing is applied; once
// taken, Apply waits for the outcome (one commit and sync).
func (s *Store) Apply(ctx context.Context, b Batch) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	for i := range b.Entries {
		if err := b.Entries[i].Validate(); err != nil {
			return Result{}, fmt.Errorf("apply to store %s: entry %d: %w", s.dir, i, err)
		}
	}
	r := &request{b: &b, done: make(chan struct{})}
	s.qmu.Lock()
	if s.closing {
		s.qmu.Unlock()
		return Result{}, fmt.Errorf("store %s: %w", s.dir, ErrClosed)
	}
	s.queue = append(s.queue, r)
	s.qmu.Unlock()
	s.signalWriter()

	select {
	case <-r.done:
	case <-ctx.Done():
		if r.state.CompareAndSwap(queued, cancelled) {
			return Result{}, ctx.Err()
		}
		<-r.done
	}
	return r.res, r.err
}

func (s *Store) signalWriter() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}
