package peer

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/danyue/danyue/crdt"
)

// Relays in a mesh. When device W writes, every peer that pulls from W
// merges the change, gives it a number of its own and would relay it to all
// its other peers: in a full mesh of N devices, N-1 copies arrive directly
// and (N-1)(N-2) more as relays. A relay matters only to a puller that does
// not get the change from W itself.
//
// So a puller tells each of its senders which devices it pulls from itself
// (its direct list, sent in a Have frame after its Start frame and again
// whenever it changes), and a sender holds back a record whose state came
// from one of them (provenance, knowledge.go) instead of relaying it. A
// held record keeps the stream's cursor before it: nothing past it is sent
// and the puller's cursor does not pass it, so holding can delay a record
// but never lose it. A hold ends when
//
//   - the puller's direct list drops the record's source (its stream from
//     the source ended): the record is sent at once;
//   - the sender has another record to send after it, or the hold has
//     lasted deferWindow: the sender asks the puller (Ask) whether it has
//     all of each source's state as of the held records' numbers, and sends
//     what the answer (Have) says it lacks, skipping the rest;
//   - the answer does not come within askTimeout: everything is sent.
//
// A puller knows it has all of W's state as of W's number S when it has
// applied a batch from W marked whole: the pass that made it was not cut
// short and W's store had nothing newer (the argument of the Caught frame,
// knowledge.go, for W's own state only). Those marks are not passed on in
// Caught frames: they change with every write, and only the sender that
// asks needs them.
//
// A stream's first catch-up holds nothing back: it is what a puller that
// meets several devices at once (after a heal) waits for before starting
// the others.
//
// A pass that would send a batch with no record (every change in it
// skipped, say one that came from the puller) is held the same way, so a
// busy mesh does not pay a frame and an ack per change and stream for a
// cursor that moves. hold.go holds these rules.

const (
	// deferWindow bounds how long a record or an empty cursor advance is
	// held back while the sender has nothing else for the puller. It is
	// also what a relay can lose when the puller's direct stream stalls
	// without ending (a short partition, where TCP retransmits with
	// backoff): short enough not to slow a heal down, long enough for a
	// change to arrive from its writer first. Each window that ends costs
	// a stream an Ask, a Have and a cursor advance, so the busier a
	// device, the more a short window costs; a longer one delays the marks
	// that let a sender skip what a puller has.
	deferWindow = time.Second
	// askTimeout bounds the wait for an answer to an Ask.
	askTimeout = 2 * time.Second
	// deferBacklog is the backlog (in sequence numbers) up to which a
	// stream holds records back: a catch-up sends what it has.
	deferBacklog = 64
)

// directSet is, on the pull side, the devices this device pulls from at
// the moment, each with the lineage of its changes (knowledge.go).
type directSet struct {
	mu      sync.Mutex
	ver     uint64
	devs    map[crdt.DeviceID]*directPeer
	changed chan struct{} // closed and replaced when the set changes
}

type directPeer struct {
	lineage uint64
	streams int
}

// add counts a pull stream from dev (its changes of lineage) as started, and
// returns the function that counts it as ended.
func (d *directSet) add(dev crdt.DeviceID, lineage uint64) (remove func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.devs == nil {
		d.devs = make(map[crdt.DeviceID]*directPeer)
	}
	dp := d.devs[dev]
	if dp == nil || dp.lineage != lineage {
		dp = &directPeer{lineage: lineage}
		d.devs[dev] = dp
		d.changedLocked()
	}
	dp.streams++
	var once sync.Once
	return func() {
		once.Do(func() {
			d.mu.Lock()
			defer d.mu.Unlock()
			if dp.streams--; dp.streams == 0 && d.devs[dev] == dp {
				delete(d.devs, dev)
				d.changedLocked()
			}
		})
	}
}

func (d *directSet) changedLocked() {
	d.ver++
	if d.changed != nil {
		close(d.changed)
	}
	d.changed = make(chan struct{})
}

// list returns the set but except (sorted, so that indices are stable for
// a version), its version and a channel closed when it next changes.
func (d *directSet) list(except crdt.DeviceID) ([]wireMark, uint64, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.changed == nil {
		d.changed = make(chan struct{})
	}
	var out []wireMark
	for dev, dp := range d.devs {
		if dev != except && len(out) < maxMarks {
			out = append(out, wireMark{Device: uint64(dev), Lineage: dp.lineage})
		}
	}
	slices.SortFunc(out, func(a, b wireMark) int {
		switch {
		case a.Device < b.Device:
			return -1
		case a.Device > b.Device:
			return 1
		}
		return 0
	})
	return out, d.ver, d.changed
}

// announceDirect sends the puller's direct list on its stream whenever it
// changes, until ctx ends. The first list goes out at once.
func (p *puller) announceDirect(ctx context.Context) {
	for {
		list, ver, changed := p.n.dir.list(p.st.device)
		p.mu.Lock()
		p.dirList, p.dirVer = list, ver
		err := p.sendLocked(&wireFrame{Have: &wireHave{List: ver, Direct: list}})
		p.mu.Unlock()
		if err != nil {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// answer answers a sender's Ask: which of its items this store lacks. It
// answers the Asks of a stream in order, so the answer needs no number.
func (p *puller) answer(a wireAsk) error {
	list, items, err := a.parse()
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var lacks []uint64
	for i, it := range items {
		if list != p.dirVer || it.index >= uint64(len(p.dirList)) {
			lacks = append(lacks, uint64(i))
			continue
		}
		d := p.dirList[it.index]
		if !p.n.kn.hasAll(crdt.DeviceID(d.Device), mark{d.Lineage, it.seq}) {
			lacks = append(lacks, uint64(i))
		}
	}
	return p.sendLocked(&wireFrame{Have: &wireHave{Lacks: lacks}})
}

// fanout is, on the send side of one stream, what the puller said of the
// devices it pulls from itself, and the answers to this stream's Asks.
type fanout struct {
	mu       sync.Mutex
	list     []wireMark // the puller's direct list
	ver      uint64     // its version
	wake     chan struct{}
	answers  chan answer
	asked    uint64 // Asks sent (sender only)
	answered uint64 // answers received: what numbers them (watchPuller only)
}

// answer is the puller's answer to the stream's Ask number n: the indices
// of its items the puller lacks.
type answer struct {
	n     uint64
	lacks []uint64
}

func newFanout() *fanout {
	return &fanout{wake: make(chan struct{}, 1), answers: make(chan answer, 1)}
}

// have takes a Have frame from the puller (watchPuller): its direct list,
// or the answer to the oldest Ask it has not answered yet.
func (fo *fanout) have(h *wireHave) error {
	if h.List == 0 {
		fo.answered++
		select {
		case <-fo.answers: // an answer nobody waits for any more
		default:
		}
		fo.answers <- answer{n: fo.answered, lacks: h.Lacks}
		return nil
	}
	if len(h.Direct) > maxMarks {
		return protoErrorf("direct list %d of %d devices", h.List, len(h.Direct))
	}
	fo.mu.Lock()
	fo.list, fo.ver = h.Direct, h.List
	fo.mu.Unlock()
	select {
	case fo.wake <- struct{}{}:
	default:
	}
	return nil
}

// holds reports whether a record state that came here from src may be held
// back: the puller pulls from its source's store itself.
func (fo *fanout) holds(src source) bool {
	fo.mu.Lock()
	defer fo.mu.Unlock()
	for _, d := range fo.list {
		if crdt.DeviceID(d.Device) == src.device {
			return d.Lineage == src.lineage
		}
	}
	return false
}

// indirect returns the marks of devices the puller does not pull from
// itself.
func (fo *fanout) indirect(marks []wireMark) []wireMark {
	fo.mu.Lock()
	defer fo.mu.Unlock()
	return slices.DeleteFunc(marks, func(m wireMark) bool {
		for _, d := range fo.list {
			if d.Device == m.Device && d.Lineage == m.Lineage {
				return true
			}
		}
		return false
	})
}

// ask asks the puller whether it has all of each device's state as of the
// sequence number held gives, and raises have for every item it has. No
// answer within askTimeout leaves have as it was.
func (snd *sender) ask(ctx context.Context, held map[crdt.DeviceID]mark) error {
	fo := snd.fo
	fo.mu.Lock()
	ver := fo.ver
	var items []askItem
	var marks []source
	for i, d := range fo.list {
		m, ok := held[crdt.DeviceID(d.Device)]
		if ok && m.lineage == d.Lineage && len(items) < maxAskItems {
			items = append(items, askItem{index: uint64(i), seq: m.seq})
			marks = append(marks, source{crdt.DeviceID(d.Device), m})
		}
	}
	fo.mu.Unlock()
	if len(items) == 0 {
		return nil
	}
	fo.asked++
	snd.out.Reset()
	if err := appendFrame(&snd.out, &wireFrame{Ask: newAsk(ver, items)}); err != nil {
		return err
	}
	if err := snd.n.writeFrame(snd.s, snd.out.Bytes()); err != nil {
		return fmt.Errorf("send ask: %w", err)
	}
	t := time.NewTimer(askTimeout)
	defer t.Stop()
	for {
		select {
		case h := <-fo.answers:
			if h.n != fo.asked {
				continue
			}
			lacks := make(map[uint64]bool, len(h.lacks))
			for _, i := range h.lacks {
				lacks[i] = true
			}
			for i, m := range marks {
				if old, ok := snd.have[m.device]; !lacks[uint64(i)] && (!ok || old.lineage != m.lineage || old.seq < m.seq) {
					snd.have[m.device] = m.mark
				}
			}
			return nil
		case <-t.C:
			snd.n.log.Debug("no answer to an ask; sending the held records", "peer", snd.st.id)
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
