package peer

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/danyue/danyue/crdt"
)

// Relays in a mesh (protocol version 4). When device W writes, every peer
// that pulls from W merges the change, gives it a number of its own and
// would relay it to all its other peers: in a full mesh of N devices, N-1
// copies arrive directly and (N-1)(N-2) more as relays. A relay matters
// only to a puller that does not get the change from W itself.
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
//     lasted deferWindow (1 s): the sender asks the puller (Want) whether it has
//     all of each source's state as of the held records' numbers, and sends
//     what the answer (Have) says it lacks, skipping the rest;
//   - the answer does not come within wantTimeout: everything is sent.
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
// cursor that moves.

const (
	// deferWindow bounds how long a record or an empty cursor advance is
	// held back while the sender has nothing else for the puller. It is
	// also what a relay can lose when the puller's direct stream stalls
	// without ending (a short partition, where TCP retransmits with
	// backoff): short enough not to slow a heal down, long enough for a
	// change to arrive from its writer first. Each window that ends costs
	// a stream a Want, a Have and a cursor advance: at 0.5 s, testnet's 20
	// devices writing in turn spent more on those than on the records
	// (5.2-5.9 KB and 34 records per change, a write reaching all others
	// at p99 208-310 ms on 2 cores); at 1 s, 2.8-3.7 KB, 24-27 records,
	// 65-94 ms (both counted from before the mesh had settled, with the
	// event streams' probe writes; from a settled mesh, 1 s gives 1.9 KB
	// per change while the writes go on, 56 bytes per stream once they
	// stop, 19 records, 32-43 ms). The busier a device, the more a short
	// window costs. A longer one delays the marks that let a sender skip
	// what a puller has.
	deferWindow = time.Second
	// wantTimeout bounds the wait for an answer to a Want.
	wantTimeout = 2 * time.Second
	// deferBacklog is the backlog (in sequence numbers) up to which a
	// stream holds records back: a catch-up sends what it has.
	deferBacklog = 64
)

// directSet is, on the pull side, the devices this device pulls from on a
// version 4 stream at the moment, each with the epoch of its store.
type directSet struct {
	mu      sync.Mutex
	ver     uint64
	devs    map[crdt.DeviceID]*directPeer
	changed chan struct{} // closed and replaced when the set changes
}

type directPeer struct {
	epoch   uint64
	streams int
}

// add counts a pull stream from dev (its store of epoch) as started, and
// returns the function that counts it as ended.
func (d *directSet) add(dev crdt.DeviceID, epoch uint64) (remove func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.devs == nil {
		d.devs = make(map[crdt.DeviceID]*directPeer)
	}
	dp := d.devs[dev]
	if dp == nil || dp.epoch != epoch {
		dp = &directPeer{epoch: epoch}
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
			out = append(out, wireMark{Device: uint64(dev), Epoch: dp.epoch})
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

// answer answers a sender's Want (Ask from version 6): which of its items
// this store lacks.
func (p *puller) answer(f *wireFrame) error {
	w := f.Want
	switch {
	case p.version < 4 || (w != nil) != (p.version < 6):
		return protoErrorf("want frame of the wrong form on a version %d stream", p.version)
	case w == nil:
		var err error
		if w, err = f.Ask.want(p.asks + 1); err != nil {
			return err
		}
	}
	if w.N == 0 || len(w.Items) > maxWantItems {
		return protoErrorf("want %d of %d items", w.N, len(w.Items))
	}
	p.asks++
	p.mu.Lock()
	defer p.mu.Unlock()
	var lacks []uint64
	for i, it := range w.Items {
		if w.List != p.dirVer || it.Index >= uint64(len(p.dirList)) {
			lacks = append(lacks, uint64(i))
			continue
		}
		d := p.dirList[it.Index]
		if !p.n.kn.hasAll(crdt.DeviceID(d.Device), mark{d.Epoch, it.Seq}) {
			lacks = append(lacks, uint64(i))
		}
	}
	h := &wireHave{N: w.N, Lacks: lacks}
	if p.version >= 6 {
		h.N = 0
	}
	return p.sendLocked(&wireFrame{Have: h})
}

// fanout is, on the send side of one stream, what the puller said of the
// devices it pulls from itself, and the answers to this stream's Wants.
type fanout struct {
	mu       sync.Mutex
	list     []wireMark // the puller's direct list
	ver      uint64     // its version
	wake     chan struct{}
	answers  chan *wireHave
	asked    uint64 // Wants sent (sender only)
	answered uint64 // answers received (version 6: what numbers them)
}

func newFanout() *fanout {
	return &fanout{wake: make(chan struct{}, 1), answers: make(chan *wireHave, 1)}
}

// have takes a Have frame from the puller of a stream of version v
// (watchPuller).
func (fo *fanout) have(h *wireHave, v uint64) error {
	if v >= 6 && h.N != 0 {
		return protoErrorf("have frame numbered %d on a version %d stream", h.N, v)
	}
	if v >= 6 && h.List == 0 {
		fo.answered++
		h.N = fo.answered
	}
	if h.N != 0 {
		select {
		case <-fo.answers: // an answer nobody waits for any more
		default:
		}
		fo.answers <- h
		return nil
	}
	if len(h.Direct) > maxMarks || h.List == 0 {
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
			return d.Epoch == src.epoch
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
			if d.Device == m.Device && d.Epoch == m.Epoch {
				return true
			}
		}
		return false
	})
}

// ask asks the puller whether it has all of each device's state as of the
// sequence number held gives, and raises have for every item it has. No
// answer within wantTimeout leaves have as it was.
func (snd *sender) ask(ctx context.Context, held map[crdt.DeviceID]mark) error {
	fo := snd.fo
	fo.mu.Lock()
	ver := fo.ver
	var items []wireWantItem
	var marks []source
	for i, d := range fo.list {
		m, ok := held[crdt.DeviceID(d.Device)]
		if ok && m.epoch == d.Epoch && len(items) < maxWantItems {
			items = append(items, wireWantItem{Index: uint64(i), Seq: m.seq})
			marks = append(marks, source{crdt.DeviceID(d.Device), m})
		}
	}
	fo.mu.Unlock()
	if len(items) == 0 {
		return nil
	}
	fo.asked++
	f := &wireFrame{Want: &wireWant{N: fo.asked, List: ver, Items: items}}
	if snd.version >= 6 {
		f = &wireFrame{Ask: askOf(f.Want)}
	}
	snd.out.Reset()
	if err := appendFrameV(&snd.out, f, snd.version); err != nil {
		return err
	}
	if err := snd.n.writeFrame(snd.s, snd.out.Bytes()); err != nil {
		return fmt.Errorf("send want: %w", err)
	}
	t := time.NewTimer(wantTimeout)
	defer t.Stop()
	for {
		select {
		case h := <-fo.answers:
			if h.N != fo.asked {
				continue
			}
			lacks := make(map[uint64]bool, len(h.Lacks))
			for _, i := range h.Lacks {
				lacks[i] = true
			}
			for i, m := range marks {
				if old, ok := snd.have[m.device]; !lacks[uint64(i)] && (!ok || old.epoch != m.epoch || old.seq < m.seq) {
					snd.have[m.device] = m.mark
				}
			}
			return nil
		case <-t.C:
			snd.n.log.Debug("no answer to a want; sending the held records", "peer", snd.st.id)
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
