package library

import (
	"sync"
	"time"
)

// Bounds on what one device originates, as this device takes it in.
//
// A record's writer is the device of its newest stamp: the device whose
// write made the record what it is. Records arrive from any peer, relayed
// or not, and each one that would change this store is charged to its
// writer: a token of the writer's bucket, and, if the record would become
// the writer's (new here, or last written by another device), a place
// under the writer's total. A record over either bound is refused, and
// the rest of its batch is taken (merge.go, peer.ErrRecordsRefused).
// Records this device writes itself, through its API, are never checked.
//
// A stamp's device is what the record says: a member can stamp records
// with another device's id. So a writer counts as itself only when it is
// or was a member of the library; the records of every other writer share
// one bucket and one total (under the id 0), so that inventing ids buys
// nothing.
//
// The rule is pure: time comes in as wall milliseconds, so that tests
// drive it with literal times.

// Bounds are what one device may originate, as this device takes it in.
// A zero field takes its default.
type Bounds struct {
	// Burst is how many records of one writer are taken at once: what
	// its bucket holds when full. Default DefaultBurst.
	Burst int
	// PerMinute is how fast the bucket refills. Default DefaultPerMinute.
	PerMinute int
	// Total is how many records of the store may have one writer as their
	// last writer. Default DefaultTotal.
	Total int
	// Retry is how long a stream from a peer whose records were refused
	// runs before they are offered again (peer.Config.Reoffer).
	Retry time.Duration
}

// The default bounds sit well above what a person's devices do. The
// largest library the project measures is 100,000 books written through
// one device; a device that joins, or heals after a partition, takes such
// a library in one go, so the burst and the total are two and a half
// times that. A person writes a position every few seconds while reading;
// the refill lets a writer that spent its burst go on importing at a pace
// at which a second library of that size takes minutes, not hours. A
// flood is held to that pace, and by the total to a bounded size.
const (
	DefaultBurst     = 250_000
	DefaultPerMinute = 10_000
	DefaultTotal     = 250_000
)

// withDefaults fills the zero fields.
func (b Bounds) withDefaults() Bounds {
	if b.Burst <= 0 {
		b.Burst = DefaultBurst
	}
	if b.PerMinute <= 0 {
		b.PerMinute = DefaultPerMinute
	}
	if b.Total <= 0 {
		b.Total = DefaultTotal
	}
	return b
}

// minuteMs is a minute in milliseconds: a bucket counts in 1/minuteMs of a
// record, so that refilling is exact in integers.
const minuteMs = 60_000

// bucket is a token bucket of one writer. It starts full.
type bucket struct {
	parts uint64 // tokens, in 1/minuteMs of a record
	at    uint64 // wall ms of the last refill
	used  bool   // taken from before (a new bucket is full)
}

// refill adds what the time since the last refill gives. A clock that
// went back adds nothing and moves nothing.
func (k *bucket) refill(nowMs uint64, b Bounds) {
	full := uint64(b.Burst) * minuteMs
	if !k.used {
		k.parts, k.at, k.used = full, nowMs, true
		return
	}
	if nowMs <= k.at {
		return
	}
	// At most a full bucket's worth of elapsed time counts, which keeps
	// the product far from overflowing.
	elapsed := min(nowMs-k.at, uint64(b.Burst)*minuteMs)
	k.parts = min(full, k.parts+elapsed*uint64(b.PerMinute))
	k.at = nowMs
}

// take takes one record's token, if there is one.
func (k *bucket) take(nowMs uint64, b Bounds) bool {
	k.refill(nowMs, b)
	if k.parts < minuteMs {
		return false
	}
	k.parts -= minuteMs
	return true
}

// verdict is what the bounds say of a record.
type verdict uint8

const (
	admitted verdict = iota
	overRate
	overTotal
)

// reason names the bound for the API: "rate" or "total".
func (v verdict) reason() string {
	switch v {
	case overRate:
		return "rate"
	case overTotal:
		return "total"
	}
	return ""
}

func (v verdict) String() string {
	switch v {
	case overRate:
		return "more records per minute than any device writes"
	case overTotal:
		return "more records in all than any device writes"
	}
	return "admitted"
}

// writer is what the bounds keep of one writer.
type writer struct {
	bucket
	live    int // records of the store whose last writer it is
	pending int // records admitted in batches not yet committed
	refusal refusal
}

// writerBounds keeps the bounds of every writer. It has a lock of its
// own: batches from several peers are admitted while local writes and the
// API read it. Its size is bounded by the members the library ever had,
// plus one for every other writer.
type writerBounds struct {
	mu      sync.Mutex
	b       Bounds
	writers map[writerKey]*writer
	// counted: live holds the counts of the store (the scan at start
	// finished); until then only the rate is checked.
	counted bool
}

// writerKey is a writer that is or was a member, or 0 for every other.
type writerKey = uint64

func (w *writerBounds) get(k writerKey) *writer {
	if w.writers == nil {
		w.writers = make(map[writerKey]*writer)
	}
	wr, ok := w.writers[k]
	if !ok {
		wr = &writer{}
		w.writers[k] = wr
	}
	return wr
}

// admitLocked decides on one record of writer k that would change the
// store; claims says whether it would become k's. An admitted record that
// claims a place is pending until settleLocked.
func (w *writerBounds) admitLocked(k writerKey, claims bool, nowMs uint64) verdict {
	wr := w.get(k)
	if claims && w.counted && wr.live+wr.pending >= w.b.Total {
		return overTotal
	}
	if !wr.bucket.take(nowMs, w.b) {
		return overRate
	}
	if claims {
		wr.pending++
	}
	return admitted
}

// settleLocked ends the pending places of a batch, committed or not: a
// committed batch's records are counted by movedLocked.
func (w *writerBounds) settleLocked(pending map[writerKey]int) {
	for k, n := range pending {
		wr := w.get(k)
		wr.pending = max(0, wr.pending-n)
	}
}

// movedLocked counts a record whose last writer went from one key to
// another (had, has: whether there was one before and is one now).
func (w *writerBounds) movedLocked(from writerKey, had bool, to writerKey, has bool) {
	if had && has && from == to {
		return
	}
	if had {
		wr := w.get(from)
		wr.live = max(0, wr.live-1)
	}
	if has {
		w.get(to).live++
	}
}

// refusal is what was refused of one writer, for the log and the status.
type refusal struct {
	total    uint64  // records refused since the library opened
	unlogged uint64  // refused since the last log line
	why      verdict // the latest reason
	firstMs  uint64  // wall ms of the first refusal
	lastMs   uint64  // of the latest
	loggedMs uint64  // of the latest log line; 0: none yet
}

// refusedLocked notes n records of k refused for why, and reports whether
// a log line is due: the first refusal, then at most one a minute.
func (w *writerBounds) refusedLocked(k writerKey, n int, why verdict, nowMs uint64) (r refusal, logNow bool) {
	wr := w.get(k)
	f := &wr.refusal
	if f.total == 0 {
		f.firstMs = nowMs
	}
	f.total += uint64(n)
	f.unlogged += uint64(n)
	f.why, f.lastMs = why, nowMs
	if f.loggedMs == 0 || nowMs >= f.loggedMs+minuteMs {
		r = *f
		f.loggedMs, f.unlogged = max(nowMs, 1), 0
		return r, true
	}
	return *f, false
}

// reserveLocked takes n tokens and, if the totals are counted, n places
// of k at once, if there are that many; it is the quick path of a batch
// whose records k's bounds allow whatever they turn out to change.
func (w *writerBounds) reserveLocked(k writerKey, n int, nowMs uint64) bool {
	wr := w.get(k)
	wr.bucket.refill(nowMs, w.b)
	if wr.parts < uint64(n)*minuteMs || (w.counted && wr.live+wr.pending+n > w.b.Total) {
		return false
	}
	wr.parts -= uint64(n) * minuteMs
	wr.pending += n
	return true
}

// refundLocked gives n tokens back to k: records reserved that changed
// nothing.
func (w *writerBounds) refundLocked(k writerKey, n int) {
	wr := w.get(k)
	wr.parts = min(uint64(w.b.Burst)*minuteMs, wr.parts+uint64(n)*minuteMs)
}
