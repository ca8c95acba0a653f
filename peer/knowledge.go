package peer

import (
	"context"
	"sync"
	"time"

	"github.com/danyue/danyue/crdt"
)

// What this device knows that it has of other devices' stores, so that a
// record crosses the wire about once per receiving device however many
// devices offer it (protocol version 4).
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
//     ones it was handed (never beyond D's last, never across epochs). A
//     device that joins a library therefore pulls everything from the first
//     device it meets and from the others only what changed since.
//   - Whole states travel. "This store includes all of D's state of the
//     moment D's last was L" (a full mark) is what a Caught frame proves of
//     the sender, and, read before the look, of every full mark the sender
//     holds. A record whose state here is exactly the one D sent us in a
//     batch up to D-sequence s is, by that, in the state of any device whose
//     full mark of D is s or more: a sender skips it for a puller that said
//     so in its Start frame. That is what keeps a joining device from
//     sending the library back to every device it meets.
//
// Everything here is a lower bound: knowledge that is lost (a restart, a
// full table) only costs records that are sent again.

// mark is a position in another device's change sequence.
type mark struct{ epoch, seq uint64 }

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
}

type versioned struct {
	mark
	ver uint64
}

// raise records m for dev in table t: it replaces a mark of another epoch
// (a wiped store starts over) and raises one of the same epoch.
func (k *knowledge) raise(t *map[crdt.DeviceID]versioned, dev crdt.DeviceID, m mark) {
	if m.epoch == 0 || dev == 0 {
		return
	}
	old, ok := (*t)[dev]
	if ok && old.epoch == m.epoch && old.seq >= m.seq {
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

// cursor returns the cursor known for dev, if any.
func (k *knowledge) cursor(dev crdt.DeviceID) (mark, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.weak[dev]
	return v.mark, ok
}

// fullMarks returns every full mark but except's, for a Start frame.
func (k *knowledge) fullMarks(except crdt.DeviceID) []wireMark {
	k.mu.Lock()
	defer k.mu.Unlock()
	return marksSince(k.full, 0, except)
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
			out = append(out, wireMark{Device: uint64(dev), Epoch: v.epoch, Seq: v.seq})
		}
	}
	return out
}

// provenance remembers, by a hash of its encoding, which device sent each
// record state merged here and up to which of its sequence numbers the
// batch ran: a sender skips the record for a puller whose full mark of that
// device covers it. Bounded like the echo sets: when full it is forgotten,
// which only costs records sent again.
type provenance struct {
	mu  sync.Mutex
	set map[[16]byte]source
}

type source struct {
	device crdt.DeviceID
	mark
}

// add remembers that dev sent records in a batch of its epoch up to seq.
// The first source of a state is kept: any one proves it.
func (p *provenance) add(dev crdt.DeviceID, m mark, records [][]byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.set == nil {
		p.set = make(map[[16]byte]source, len(records))
	}
	for _, r := range records {
		if len(p.set) >= maxEchoes {
			p.set = make(map[[16]byte]source)
		}
		k := echoKey(r)
		if _, ok := p.set[k]; !ok {
			p.set[k] = source{dev, m}
		}
	}
}

// coveredBy reports whether a puller whose full marks are have (by device)
// has the record state data, by what it said of the device that sent it
// here.
func (p *provenance) coveredBy(have map[crdt.DeviceID]mark, data []byte) bool {
	if len(have) == 0 {
		return false
	}
	p.mu.Lock()
	src, ok := p.set[echoKey(data)]
	p.mu.Unlock()
	if !ok {
		return false
	}
	m, ok := have[src.device]
	return ok && m.epoch == src.epoch && m.seq >= src.seq
}

// catchUpGate lets one pull stream at a time catch up on a large backlog,
// so that a device meeting several peers at once takes the library from
// one of them and from the others only what is newer (it starts them from
// the cursors the first one hands over). Waiting is bounded: a holder that
// never catches up costs duplicates, not a stalled device.
type catchUpGate struct {
	mu   sync.Mutex
	busy bool
	free chan struct{} // closed when the holder releases
}

// gateBacklog is the backlog (in sequence numbers) from which a pull
// stream waits for the gate: smaller catch-ups run at once.
const gateBacklog = 64

// gateWait bounds how long a pull stream waits for another's catch-up.
const gateWait = time.Minute

// acquire waits until no other stream holds the gate, or until gateWait has
// passed, and returns a release function (a no-op if it gave up waiting).
func (g *catchUpGate) acquire(ctx context.Context) (release func(), err error) {
	t := time.NewTimer(gateWait)
	defer t.Stop()
	for {
		g.mu.Lock()
		if !g.busy {
			g.busy, g.free = true, make(chan struct{})
			g.mu.Unlock()
			var once sync.Once
			return func() { once.Do(g.release) }, nil
		}
		free := g.free
		g.mu.Unlock()
		select {
		case <-free:
		case <-t.C:
			return func() {}, nil
		case <-ctx.Done():
			return func() {}, ctx.Err()
		}
	}
}

func (g *catchUpGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.busy = false
	close(g.free)
}
