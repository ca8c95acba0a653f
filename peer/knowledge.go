package peer

import (
	"context"
	"encoding/binary"
	"slices"
	"sync"
	"time"

	"github.com/danyue/danyue/crdt"
)

// What this device knows that it has of other devices' stores, so that a
// record crosses the wire about once per receiving device however many
// devices offer it.
//
// A cursor (epoch E, seq S) of device D, as the stores keep it, means: every
// record whose last change in D's store (of epoch E) is numbered S or less
// is merged here, in that state or a later one. Records only move to higher
// numbers and a store only grows, so the statement stays true once it is
// true, whoever made it true. Two things follow.
//
//   - Cursors travel. When a puller has merged everything its sender had at
//     a moment when the sender's last sequence number was L (the sender has
//     sent all up to L and, looking after it read its own cursors, saw
//     nothing newer), then the puller's state includes the sender's state of
//     that moment, so each of the sender's cursors, read before that look,
//     is true of the puller as well. The sender says so in a Caught frame;
//     the puller starts its pull from D at the best of its own cursor and the
//     ones it was handed (a cursor is true of every lower number too, so one
//     past D's hello counts up to D's last; never across lineages, see
//     below). A device that joins a library therefore pulls everything from
//     the first device it meets (the others wait at the catch-up gate) and
//     from the others only what changed since.
//   - Whole states travel. "This store includes all of D's state of the
//     moment D's last was L" (a full mark) is what a Caught frame proves of
//     the sender, and, read before the look, of every full mark the sender
//     holds. A record whose state here is exactly the one D sent us as its
//     state at D-sequence s (batches number their records) is, by that, in
//     the state of any device whose full mark of D is s or more: a sender
//     skips it for a puller that said so in its Start frame. That is what
//     keeps a joining device from sending the library back to every device
//     it meets.
//
// Every mark here numbers D's states within one lineage (one run of D's
// node; see lineage), as a store restored from an old copy reuses its
// numbers. Only the cursor a store keeps of D, and sends in its hello, is
// by epoch: D checks that one against what it delivered (delivered.go),
// and cannot check one handed over.
//
// Only claims a device makes about its own store are used, and a puller's
// own past records are skipped only through the echo set of its run: a
// store restored from an old copy keeps its epoch, so what it sent before
// may not be there now. Everything here is a lower bound: knowledge that is
// lost (a restart, a full table) only costs records that are sent again;
// the property test (interleave_test.go) checks that no interleaving of
// streams, restarts and restores from old copies loses a record.

// mark is a position in another device's change sequence of one lineage.
type mark struct{ lineage, seq uint64 }

// lineage names the changes a device numbered in one run of its node
// (hello Run) in one epoch of its store: the two mixed, which keeps a
// store's epoch where its node sends none. Marks of what a store holds
// speak of lineages, not epochs, because a store restored from an old
// copy keeps its epoch, and numbers its new states with the numbers its
// lost ones had: a cursor handed over from the old run would start a pull
// past new states the puller lacks, and a full mark of the new run, held
// against the provenance of a lost state from the old run, would skip
// that state for a device that lacks it. Knowledge from before a device
// restarted no longer applies to it after, which only costs records sent
// again. A random run makes two lineages collide with a chance of 2^-64.
func lineage(epoch, run uint64) uint64 { return epoch ^ run }

// maxMarks bounds the devices a Start or Caught frame speaks of.
const maxMarks = 256

// knowledge is what this device holds of other devices' stores: cursors
// (weak) and full marks, each with the version of the table at which it
// last changed, so that a stream sends only what changed since it last
// spoke.
type knowledge struct {
	mu   sync.Mutex
	ver  uint64
	weak map[crdt.DeviceID]versioned
	full map[crdt.DeviceID]versioned
	// whole holds full marks learned from whole batches (fanout.go): not
	// versioned, as Caught frames do not carry them.
	whole map[crdt.DeviceID]mark
}

type versioned struct {
	mark
	ver uint64
}

// raise records m for dev in table t: it replaces a mark of another
// lineage (a wiped store, a restarted node) and raises one of the same.
func (k *knowledge) raise(t *map[crdt.DeviceID]versioned, dev crdt.DeviceID, m mark) {
	if m.lineage == 0 || dev == 0 {
		return
	}
	old, ok := (*t)[dev]
	if ok && old.lineage == m.lineage && old.seq >= m.seq {
		return
	}
	if *t == nil {
		*t = make(map[crdt.DeviceID]versioned)
	}
	if len(*t) >= maxMarks && !ok {
		return
	}
	k.ver++
	(*t)[dev] = versioned{m, k.ver}
}

// noteCursor records that this store has merged dev's changes up to m.
func (k *knowledge) noteCursor(dev crdt.DeviceID, m mark) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.raise(&k.weak, dev, m)
}

// noteFull records that this store includes dev's whole state at m.
func (k *knowledge) noteFull(dev crdt.DeviceID, m mark) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.raise(&k.full, dev, m)
}

// noteWhole records that this store includes dev's whole state at m,
// learned from a whole batch of dev's.
func (k *knowledge) noteWhole(dev crdt.DeviceID, m mark) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if old, ok := k.whole[dev]; ok && old.lineage == m.lineage && old.seq >= m.seq {
		return
	}
	if k.whole == nil {
		k.whole = make(map[crdt.DeviceID]mark)
	}
	if _, ok := k.whole[dev]; ok || len(k.whole) < maxMarks {
		k.whole[dev] = m
	}
}

// hasAll reports whether this store is known to include dev's whole state
// at m.
func (k *knowledge) hasAll(dev crdt.DeviceID, m mark) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	covers := func(have mark, ok bool) bool { return ok && have.lineage == m.lineage && have.seq >= m.seq }
	w, ok := k.whole[dev]
	f, fok := k.full[dev]
	return covers(w, ok) || covers(f.mark, fok)
}

// cursor returns the cursor known for dev, if any.
func (k *knowledge) cursor(dev crdt.DeviceID) (mark, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.weak[dev]
	return v.mark, ok
}

// fullMarks returns every full mark but except's, for a Start frame: those
// of Caught frames and those of whole batches (fanout.go), the higher of
// the two for a device. Whole marks say the same (this store includes all
// of the device's state as of the mark) and are the fresher ones right
// after writes, when Caught frames wait for a quiet second: a sender that
// has them skips what this device got from their devices, so a device that
// joins just after a burst of writes sends none of it back.
func (k *knowledge) fullMarks(except crdt.DeviceID) []wireMark {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := marksSince(k.full, 0, except)
	for i, m := range out {
		if w, ok := k.whole[crdt.DeviceID(m.Device)]; ok && w.lineage == m.Lineage && w.seq > m.Seq {
			out[i].Seq = w.seq
		}
	}
	for dev, w := range k.whole {
		if _, ok := k.full[dev]; !ok && dev != except && len(out) < maxMarks {
			out = append(out, wireMark{Device: uint64(dev), Lineage: w.lineage, Seq: w.seq})
		}
	}
	return out
}

// since returns the cursors and full marks that changed after version ver,
// leaving out the device a stream runs to, and the current version.
func (k *knowledge) since(ver uint64, except crdt.DeviceID) (weak, full []wireMark, now uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return marksSince(k.weak, ver, except), marksSince(k.full, ver, except), k.ver
}

func marksSince(t map[crdt.DeviceID]versioned, ver uint64, except crdt.DeviceID) []wireMark {
	var out []wireMark
	for dev, v := range t {
		if v.ver > ver && dev != except && len(out) < maxMarks {
			out = append(out, wireMark{Device: uint64(dev), Lineage: v.lineage, Seq: v.seq})
		}
	}
	return out
}

// Provenance is a table of slots in sets of provenanceWays, hashed by
// state, that doubles while it is less than provenanceMax slots and three
// quarters full: 16 bytes a slot (80 bits of a hash of the state, and its
// sequence number with the index of its sender and lineage in a short list),
// where a Go map of the states, or a slot with the whole hash (and device
// and lineage), takes several times as much for a table that is a large part
// of a joining device's live heap. 80 bits keep a lookup's chance of finding
// another state's slot, which would skip a record the puller may lack,
// below 2^-76 (16 slots are compared). A small library's table takes what
// it needs.
const (
	provenanceWays = 8
	provenanceMin  = 1 << 10
	provenanceMax  = 1 << 17
	// provenanceKey is the bytes of a state's echoKey a slot keeps.
	provenanceKey = 10
)

// A slot packs a state's sequence number into the low seqBits of its 48
// bits of position and the index of its origin above them. maxOrigins
// bounds the distinct (device, lineage) pairs a table names: members (at
// most maxMarks) and their lineages are few, and reaching it (a device that
// meets hundreds of runs and store epochs) forgets the whole table. A state
// numbered past the bits (after 2^40 changes of one store) is not
// remembered. Either only costs records sent again.
const (
	atBits     = 48
	seqBits    = 40
	maxOrigins = 1 << (atBits - seqBits)
)

// provenance remembers, by a hash of its encoding, which device sent each
// record state merged here and at which of its sequence numbers (batches
// number their records): a sender
// skips the record for a puller whose full mark of that device covers it.
// Bounded: a full table forgets a state to make room for a new one, which
// only costs records sent again.
//
// Marks are statements about stores that only grow, and tombstone
// collection is the one way a store shrinks: it takes deleted books out.
// A device restored from an old copy that pulls from D after D collected
// gets nothing for the collected part of D's sequence, and still ends with
// a full mark of D past it. And a collected state comes back byte for byte
// (a device merges the restored device's old copy of the book with the
// residue it kept: that is the record it collected), here under the
// provenance of D's sequence number from before the collection. Skipping
// it by that mark would credit the restored device with the delete it is
// missing, and let every device collect it again while it keeps showing
// the book. So a state that collection may take out (crdt.MayBeCollected)
// gets no provenance: it is never skipped or held by a mark, only by the
// echo set of the connection it came on. What that costs: in a mesh a
// delete is relayed as every change was before relays were held back
// (fanout.go); deletes are rare next to reading positions.
type provenance struct {
	mu      sync.Mutex
	slots   []provenanceSlot // a power of two of them; an empty one has a zero key
	used    int
	origins []origin          // what the index in a slot's at points to
	index   map[origin]uint32 // the index of each of origins
}

type provenanceSlot struct {
	key [provenanceKey]byte // the start of the state's echoKey
	at  [atBits / 8]byte    // little-endian: the origin's index << seqBits | the sequence number
}

func newSlot(k [16]byte, at uint64) provenanceSlot {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], at)
	return provenanceSlot{[provenanceKey]byte(k[:]), [atBits / 8]byte(b[:])}
}

func (s *provenanceSlot) position() (origin uint64, seq uint64) {
	var b [8]byte
	copy(b[:], s.at[:])
	at := binary.LittleEndian.Uint64(b[:])
	return at >> seqBits, at & (1<<seqBits - 1)
}

// origin is a device's changes of one lineage.
type origin struct {
	device  crdt.DeviceID
	lineage uint64
}

type source struct {
	device crdt.DeviceID
	mark
}

// add remembers that dev sent records of its lineage, record i
// (decoded as entries[i]) being its state at dev's sequence number seq(i)
// (or earlier). The first source of a state is kept: any one proves it. A
// state that collection may take out of a store is not remembered (see
// provenance).
func (p *provenance) add(dev crdt.DeviceID, lineage uint64, seq func(i int) uint64, records [][]byte, entries []crdt.Entry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	o := uint64(p.originOf(origin{dev, lineage})) << seqBits
	for i, r := range records {
		s := seq(i)
		if crdt.MayBeCollected(&entries[i]) || s >= 1<<seqBits {
			continue
		}
		p.put(newSlot(echoKey(r), o|s))
	}
}

// originOf returns the index of o in p.origins, adding it if need be.
func (p *provenance) originOf(o origin) uint32 {
	if i, ok := p.index[o]; ok {
		return i
	}
	if len(p.origins) == maxOrigins {
		p.slots, p.used, p.origins, p.index = nil, 0, nil, nil
	}
	if p.index == nil {
		p.index = make(map[origin]uint32)
	}
	i := uint32(len(p.origins))
	p.origins = append(p.origins, o)
	p.index[o] = i
	return i
}

// put stores s unless its key is there already, in the emptier of the
// key's two sets (two choices keep the sets from overflowing before the
// table is nearly full). When both are full it grows the table, or at its
// bound moves a state of either set to its other set to make room, or
// when none can move overwrites a slot of the first set chosen by the
// key: what is forgotten is random, which keeps most of what was added
// last.
func (p *provenance) put(s provenanceSlot) {
	k := s.key
	if k == ([provenanceKey]byte{}) {
		return // the empty slot's key: not remembered
	}
	if len(p.slots) < provenanceMax && 4*(p.used+1) > 3*len(p.slots) {
		p.grow()
	}
	a, b := p.sets(k)
	has := func(s provenanceSlot) bool { return s.key == k }
	if slices.ContainsFunc(a, has) || slices.ContainsFunc(b, has) {
		return
	}
	set, i := a, freeSlot(a)
	if fb := freeSlot(b); fb < i {
		set, i = b, fb
	}
	if i == len(set) { // both sets are full
		if len(p.slots) < provenanceMax {
			p.grow()
			p.put(s)
			return
		}
		var ok bool
		if i, ok = p.makeRoom(a); ok {
			set = a
		} else if i, ok = p.makeRoom(b); ok {
			set = b
		} else {
			// k[7] is in neither set's index (their low bits).
			a[int(k[7])%provenanceWays] = s
			return
		}
	}
	set[i] = s
	p.used++
}

// freeSlot returns the index of an empty slot of set, or len(set).
func freeSlot(set []provenanceSlot) int {
	for i := range set {
		if set[i].key == ([provenanceKey]byte{}) {
			return i
		}
	}
	return len(set)
}

// makeRoom empties a slot of the full set by moving its state to the
// state's other set, if one of those has room, and returns the slot.
func (p *provenance) makeRoom(set []provenanceSlot) (int, bool) {
	for i := range set {
		a, b := p.sets(set[i].key)
		other := a
		if &a[0] == &set[0] {
			other = b
		}
		if &other[0] == &set[0] {
			continue
		}
		if f := freeSlot(other); f < len(other) {
			other[f], set[i] = set[i], provenanceSlot{}
			return i, true
		}
	}
	return 0, false
}

// grow doubles the table (or makes it), moving every state over.
func (p *provenance) grow() {
	old := p.slots
	p.slots = make([]provenanceSlot, max(provenanceMin, 2*len(old)))
	p.used = 0
	for _, s := range old {
		if s.key != ([provenanceKey]byte{}) {
			p.put(s)
		}
	}
}

// sets are k's two sets of slots, by its first and its last eight bytes
// (their low bits, which do not overlap at provenanceMax); the table must
// have some.
func (p *provenance) sets(k [provenanceKey]byte) (a, b []provenanceSlot) {
	mask := uint64(len(p.slots)/provenanceWays - 1)
	i := (binary.LittleEndian.Uint64(k[:8]) & mask) * provenanceWays
	j := (binary.LittleEndian.Uint64(k[provenanceKey-8:]) & mask) * provenanceWays
	return p.slots[i : i+provenanceWays], p.slots[j : j+provenanceWays]
}

// lookup returns the source stored under the state hashed to h, if any.
func (p *provenance) lookup(h [16]byte) (source, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := [provenanceKey]byte(h[:])
	if len(p.slots) == 0 || k == ([provenanceKey]byte{}) {
		return source{}, false
	}
	a, b := p.sets(k)
	for _, set := range [2][]provenanceSlot{a, b} {
		for i := range set {
			if set[i].key == k {
				oi, seq := set[i].position()
				o := p.origins[oi]
				return source{o.device, mark{o.lineage, seq}}, true
			}
		}
	}
	return source{}, false
}

// source returns where the record state data came from, if known.
func (p *provenance) source(data []byte) (source, bool) {
	return p.lookup(echoKey(data))
}

// coveredBy reports whether a puller whose full marks are have (by device)
// has the record state data, by what it said of the device that sent it
// here.
func (p *provenance) coveredBy(have map[crdt.DeviceID]mark, data []byte) bool {
	if len(have) == 0 {
		return false
	}
	src, ok := p.lookup(echoKey(data))
	if !ok {
		return false
	}
	m, ok := have[src.device]
	return ok && m.lineage == src.lineage && m.seq >= src.seq
}

// catchUpGate lets one peer at a time catch up on a large backlog, so that
// a device meeting several peers at once takes the library from one of them
// and from the others only what is newer (it starts them from the cursors
// the first one hands over). The gate belongs to a peer, not to a stream:
// when the holder's stream breaks before it has caught up (at a join,
// connections are often replaced as both sides dial), its next stream has
// gateGrace to take the gate back before another peer gets it. Waiting is
// bounded: a holder that stops making progress costs duplicates, not a
// stalled device.
type catchUpGate struct {
	mu     sync.Mutex
	holder *peerState
	gen    uint64        // counts acquisitions, so a late grace timer is ignored
	free   chan struct{} // closed when the holder lets go
	moved  time.Time     // when the holder last took a batch, or took the gate
	wait   time.Duration // gateWait if zero; for tests
}

// gateBacklog is the backlog (in sequence numbers) from which a pull
// stream waits for the gate: smaller catch-ups run at once.
const gateBacklog = 64

// gateWait bounds how long a pull stream waits for another peer's
// catch-up while that one takes no batch. A bound on the whole wait
// instead would let a device joining a library large enough to take
// longer pull it all again from every other device it met.
const gateWait = 15 * time.Second

// gateGrace is how long a holder whose stream broke keeps the gate for its
// next stream.
const gateGrace = 3 * time.Second

// acquire waits until no other peer holds the gate, or until its holder
// has taken no batch for gateWait, and returns a release function (a no-op
// if it gave up waiting): release(true) once caught up, release(false)
// when the stream ends first.
func (g *catchUpGate) acquire(ctx context.Context, st *peerState) (release func(caught bool), err error) {
	wait := g.wait
	if wait == 0 {
		wait = gateWait
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		g.mu.Lock()
		if g.holder == nil || g.holder == st {
			if g.holder == nil {
				g.free = make(chan struct{})
			}
			g.holder = st
			g.moved = time.Now()
			g.gen++
			gen := g.gen
			g.mu.Unlock()
			var once sync.Once
			return func(caught bool) { once.Do(func() { g.release(gen, caught) }) }, nil
		}
		free := g.free
		g.mu.Unlock()
		select {
		case <-free:
		case <-t.C:
			g.mu.Lock()
			still := wait - time.Since(g.moved)
			g.mu.Unlock()
			if still <= 0 {
				return func(bool) {}, nil
			}
			t.Reset(still) // the holder took a batch meanwhile
		case <-ctx.Done():
			return func(bool) {}, ctx.Err()
		}
	}
}

// progress tells the gate that st took a batch: if st holds it, whoever
// waits goes on waiting.
func (g *catchUpGate) progress(st *peerState) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.holder == st {
		g.moved = time.Now()
	}
}

// release lets go of the hold of acquisition gen: at once if its stream
// caught up, after gateGrace if it broke and no new stream of the same peer
// took the gate again in the meantime.
func (g *catchUpGate) release(gen uint64, caught bool) {
	if !caught {
		time.AfterFunc(gateGrace, func() { g.release(gen, true) })
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gen != gen || g.holder == nil {
		return
	}
	g.holder = nil
	close(g.free)
}
