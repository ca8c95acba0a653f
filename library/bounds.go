package library

import (
	"sync"
	"time"

	"github.com/danyue/danyue/crdt"
)

// Bounds on what one device originates, as this device takes it in.
//
// A record's writer is the device of its newest stamp: the device whose
// write made the record what it is. Records arrive from any peer, relayed
// or not, and each one that would change this store is charged to its
// writer's unit: the writer together with the devices that added it, up
// to one this device added itself (bounds_units.go says which and why). A
// record takes a token of the unit's bucket and, if it would become the
// unit's (new here, or last written by a device of another unit), a place
// under the unit's total. A record over either bound is refused, and the
// rest of its batch is taken (merge.go, peer.ErrRecordsRefused). Records
// this device writes itself, through its API, are never checked.
//
// A stamp's device is what the record says: a member can stamp records
// with another device's id. So a writer counts as itself only when it is
// or was a member of the library; the records of every other writer share
// one bucket and one total (under the id 0), so that inventing ids buys
// nothing.
//
// Residues of collected books (summaries.go) come without a cursor, from
// a member that hands over what others wrote: each one that would change
// this store takes a token of a bucket of residues of its sender's unit
// (Bounds.Residues), and, like any record, a place under its writer's
// unit's total.
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
	// Residues is how many residues of collected books one sender's unit
	// hands over at once: what its bucket of residues holds when full. It
	// refills in an hour. Default DefaultResidues.
	Residues int
}

// The default bounds sit well above what a person's devices do. The
// largest library the project measures is 100,000 books written through
// one device; a device that joins, or heals after a partition, takes such
// a library in one go, so the burst and the total are two and a half
// times that. A unit (bounds_units.go) may be every device of the library
// but this one and those it added: a whole library, as a join takes it,
// which is what these allow. A person writes a position every few seconds
// while reading; the refill lets a unit that spent its burst go on
// importing at a pace at which a second library of that size takes
// minutes, not hours. A flood is held to that pace, and by the total to a
// bounded size.
//
// A member hands another its residues once, when the other starts to pull
// its store from the start (new, wiped, restored), and one handing carries
// at most as many as the peer layer's residues stream does (1<<16): the
// bucket of residues holds one whole handing, and a second handing from
// the same member within the hour takes only what changes the store. A
// refill of a whole bucket an hour keeps a sender that hands residues
// over and over from filling a store at the pace of its records.
const (
	DefaultBurst     = 250_000
	DefaultPerMinute = 10_000
	DefaultTotal     = 250_000
	DefaultResidues  = 1 << 16
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
	if b.Residues <= 0 {
		b.Residues = DefaultResidues
	}
	return b
}

// residueRate is the rule of a bucket of residues: Residues at once,
// refilled in an hour (at least one a minute).
func (b Bounds) residueRate() Bounds {
	return Bounds{Burst: b.Residues, PerMinute: max(1, b.Residues/60)}
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

// writer is what the bounds keep of one charge unit (named writer, as
// it is one writer but for the devices added through it).
type writer struct {
	bucket
	live    int // records of the store whose last writer is of the unit
	pending int // records admitted in batches not yet committed
	refusal refusal
}

// sender is what the bounds keep of the residues of one sender's unit.
type sender struct {
	bucket
	refusal refusal
}

// writerBounds keeps the bounds of every unit. It has a lock of its own:
// batches from several peers are admitted while local writes and the API
// read it. Its size is bounded by the members the library ever had, plus
// one for every other writer.
type writerBounds struct {
	mu sync.Mutex
	b  Bounds
	// writers are the units' bounds, by unit.
	writers map[writerKey]*writer
	// live counts the records of the store by last writer, a device's
	// key: the units' live are its sums, worked out again when the units
	// change.
	live map[writerKey]int
	// unitOf is the unit of each device key that is not its own unit, as
	// the member set worked it out in generation unitsGen.
	unitOf   map[writerKey]writerKey
	unitsGen uint64
	// senders are the buckets of residues, by unit of the sender.
	senders map[writerKey]*sender
	// counted: live holds the counts of the store (the scan at start
	// finished); until then only the rates are checked.
	counted bool
}

// writerKey is a writer that is or was a member, or 0 for every other; a
// unit is named by the key of the device where its chain ends.
type writerKey = uint64

// unitLocked returns the unit of device key k.
func (w *writerBounds) unitLocked(k writerKey) writerKey {
	if u, ok := w.unitOf[k]; ok {
		return u
	}
	return k
}

// setUnitsLocked takes the units of generation gen (device to unit, of
// every device that counts), if it is newer than those held, and sums the
// units' live records again.
func (w *writerBounds) setUnitsLocked(gen uint64, units map[crdt.DeviceID]crdt.DeviceID) {
	if gen <= w.unitsGen {
		return
	}
	w.unitsGen = gen
	w.unitOf = make(map[writerKey]writerKey)
	for d, u := range units {
		if d != u {
			w.unitOf[writerKey(d)] = writerKey(u)
		}
	}
	for _, wr := range w.writers {
		wr.live = 0
	}
	for k, n := range w.live {
		w.get(w.unitLocked(k)).live += n
	}
}

// get returns the bounds of unit u.
func (w *writerBounds) get(u writerKey) *writer { return entry(&w.writers, u) }

// sender returns the bucket of residues of unit u.
func (w *writerBounds) sender(u writerKey) *sender { return entry(&w.senders, u) }

// entry returns (*m)[k], adding a zero value (and the map) if missing.
func entry[V any](m *map[writerKey]*V, k writerKey) *V {
	if *m == nil {
		*m = make(map[writerKey]*V)
	}
	v, ok := (*m)[k]
	if !ok {
		v = new(V)
		(*m)[k] = v
	}
	return v
}

// admitLocked decides on one record of unit u that would change the
// store; claims says whether it would become u's. An admitted record that
// claims a place is pending until settleLocked.
func (w *writerBounds) admitLocked(u writerKey, claims bool, nowMs uint64) verdict {
	return w.admitWithLocked(&w.get(u).bucket, w.b, u, claims, nowMs)
}

// admitResidueLocked decides on one residue that would change the store,
// of a record of unit u, handed over by a device of unit from: a token of
// from's residues, a place of u's.
func (w *writerBounds) admitResidueLocked(from, u writerKey, claims bool, nowMs uint64) verdict {
	return w.admitWithLocked(&w.sender(from).bucket, w.b.residueRate(), u, claims, nowMs)
}

func (w *writerBounds) admitWithLocked(k *bucket, rate Bounds, u writerKey, claims bool, nowMs uint64) verdict {
	wr := w.get(u)
	if claims && w.counted && wr.live+wr.pending >= w.b.Total {
		return overTotal
	}
	if !k.take(nowMs, rate) {
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
	for u, n := range pending {
		wr := w.get(u)
		wr.pending = max(0, wr.pending-n)
	}
}

// movedLocked counts a record whose last writer went from one device key
// to another (had, has: whether there was one before and is one now).
func (w *writerBounds) movedLocked(from writerKey, had bool, to writerKey, has bool) {
	if had && has && from == to {
		return
	}
	if had {
		w.addLiveLocked(from, -1)
	}
	if has {
		w.addLiveLocked(to, 1)
	}
}

// addLiveLocked counts n more records (or fewer) whose last writer is
// device key k.
func (w *writerBounds) addLiveLocked(k writerKey, n int) {
	if w.live == nil {
		w.live = make(map[writerKey]int)
	}
	w.live[k] = max(0, w.live[k]+n)
	wr := w.get(w.unitLocked(k))
	wr.live = max(0, wr.live+n)
}

// refusal is what was refused of one unit, for the log and the status.
type refusal struct {
	total    uint64    // records refused since the library opened
	unlogged uint64    // refused since the last log line
	why      verdict   // the latest reason
	writer   writerKey // the device of the latest record refused
	firstMs  uint64    // wall ms of the first refusal
	lastMs   uint64    // of the latest
	loggedMs uint64    // of the latest log line; 0: none yet
}

// note notes n records of device key k refused for why, and reports
// whether a log line is due: the first refusal, then at most one a minute.
func (f *refusal) note(k writerKey, n int, why verdict, nowMs uint64) (r refusal, logNow bool) {
	if f.total == 0 {
		f.firstMs = nowMs
	}
	f.total += uint64(n)
	f.unlogged += uint64(n)
	f.why, f.writer, f.lastMs = why, k, nowMs
	if f.loggedMs == 0 || nowMs >= f.loggedMs+minuteMs {
		r = *f
		f.loggedMs, f.unlogged = max(nowMs, 1), 0
		return r, true
	}
	return *f, false
}

// refusedLocked notes n records of device key k, of unit u, refused.
func (w *writerBounds) refusedLocked(u, k writerKey, n int, why verdict, nowMs uint64) (refusal, bool) {
	return w.get(u).refusal.note(k, n, why, nowMs)
}

// residuesRefusedLocked notes n residues handed over by device key k, of
// unit u, refused.
func (w *writerBounds) residuesRefusedLocked(u, k writerKey, n int, why verdict, nowMs uint64) (refusal, bool) {
	return w.sender(u).refusal.note(k, n, why, nowMs)
}

// reserveLocked takes n tokens and, if the totals are counted, n places
// of unit u at once, if there are that many; it is the quick path of a
// batch whose records u's bounds allow whatever they turn out to change.
func (w *writerBounds) reserveLocked(u writerKey, n int, nowMs uint64) bool {
	wr := w.get(u)
	wr.bucket.refill(nowMs, w.b)
	if wr.parts < uint64(n)*minuteMs || (w.counted && wr.live+wr.pending+n > w.b.Total) {
		return false
	}
	wr.parts -= uint64(n) * minuteMs
	wr.pending += n
	return true
}

// refundLocked gives n tokens back to unit u: records reserved that
// changed nothing.
func (w *writerBounds) refundLocked(u writerKey, n int) {
	wr := w.get(u)
	wr.parts = min(uint64(w.b.Burst)*minuteMs, wr.parts+uint64(n)*minuteMs)
}

// refundResiduesLocked gives n tokens of residues back to unit u.
func (w *writerBounds) refundResiduesLocked(u writerKey, n int) {
	s := w.sender(u)
	s.parts = min(uint64(w.b.Residues)*minuteMs, s.parts+uint64(n)*minuteMs)
}
