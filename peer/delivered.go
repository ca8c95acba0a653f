package peer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/danyue/danyue/crdt"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

// What this store has sent to whom. A puller's cursor into this store's
// epoch is one the store can have given it only up to what was sent to it;
// a cursor past that is from a state of the store that is gone (it was
// restored from an old copy, or lost its last changes in a power cut), and
// resuming there would skip the changes the store has made since under the
// same numbers (storeWentBack).
//
// Within a run the store does not go back, so what was sent in this run is
// known exactly (deliveries.sent). Across runs it is the store's delivered
// marks (Store.Delivered), which a background goroutine raises behind the
// sends, each time to the store's last change and for every device checked
// in this run at once: one durable write covers every batch to every
// puller until the store changes again, and a burst of writes costs one or
// two. A store that goes back brings back its marks of then.
//
// The goroutine is set off when a puller acknowledges a batch (or a send
// stream ends), not when the batch goes out: a batch's way to the puller's
// store is what a user waits for, and a mark written meanwhile would take
// the CPU and, on a device that runs both ends, the disk from the puller's
// own commit and sync. By the ack that way is over.
//
// The trade-off: a push does not wait for a durable write before it goes
// out, and the store makes a mark durable only with its next sync
// (Store.MarkDelivered), so a process that dies between a send and the
// mark that covers it (a round trip to the puller and one write's time),
// or a device that loses power before the store syncs again, finds, at the
// puller's next hello, a cursor past the mark, and takes its store for one
// that went back: it sends that puller everything again and numbers its
// later changes past the cursor. Both are safe, only costly; a mark that
// ran ahead of what was sent, which would not be, never happens (marks
// never pass the store's last change).

// deliveries is what one node sent in this run.
type deliveries struct {
	mu sync.Mutex
	// sent holds, for every device whose cursor a send stream has checked
	// in this run, how far it was sent.
	sent map[crdt.DeviceID]uint64
	// gone holds the pullers whose cursor was found to be from a state of
	// the store that is gone (storeWentBack) and which have not
	// acknowledged a batch of this run since: until they merge what is sent
	// again, the cursor they present is still that one, so what was sent to
	// them does not vouch for it, and their marks are not raised.
	gone map[crdt.DeviceID]bool
	// unmarked: something was sent that the durable marks may not cover.
	unmarked bool
	kick     chan struct{}
}

// check notes dev as a puller of this run, whose mark is raised with the
// others from now on.
func (d *deliveries) check(dev crdt.DeviceID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sent == nil {
		d.sent = make(map[crdt.DeviceID]uint64)
	}
	if _, ok := d.sent[dev]; !ok {
		d.sent[dev] = 0
	}
}

// note notes that a batch up to seq goes to dev; the marks follow once
// it is acknowledged (settle).
func (d *deliveries) note(dev crdt.DeviceID, seq uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sent == nil {
		d.sent = make(map[crdt.DeviceID]uint64)
	}
	d.sent[dev] = max(d.sent[dev], seq)
	d.unmarked = true
}

// wentBack notes that dev presented a cursor from a state of the store
// that is gone.
func (d *deliveries) wentBack(dev crdt.DeviceID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.gone == nil {
		d.gone = make(map[crdt.DeviceID]bool)
	}
	d.gone[dev] = true
}

// ackedBy notes that dev merged a batch of this run: the cursor it holds
// is of the store as it is now.
func (d *deliveries) ackedBy(dev crdt.DeviceID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.gone, dev)
}

// isGone reports whether dev's cursor is still one from a state of the
// store that is gone.
func (d *deliveries) isGone(dev crdt.DeviceID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.gone[dev]
}

// settle wakes the goroutine that raises the marks: a puller acknowledged
// a batch, or a send stream ended.
func (d *deliveries) settle() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// to returns how far dev was sent in this run.
func (d *deliveries) to(dev crdt.DeviceID) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sent[dev]
}

// markDelivered raises the delivered marks behind the sends until the node
// closes (Close raises them a last time).
func (n *Node) markDelivered() {
	for {
		select {
		case <-n.sends.kick:
			if err := n.flushMarks(n.ctx); err != nil && n.ctx.Err() == nil {
				n.log.Warn("could not record what was sent to peers", "err", err)
			}
		case <-n.ctx.Done():
			return
		}
	}
}

// markTimeout bounds the last raising of the marks, when the node closes.
const markTimeout = 10 * time.Second

// flushMarks raises the delivered mark of every device checked in this
// run to the store's last change, if something was sent since the last
// time.
func (n *Node) flushMarks(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markTimeout)
	defer cancel()
	d := &n.sends
	d.mu.Lock()
	if !d.unmarked {
		d.mu.Unlock()
		return nil
	}
	d.unmarked = false
	devs := slices.Collect(maps.Keys(d.sent))
	devs = slices.DeleteFunc(devs, func(dev crdt.DeviceID) bool { return d.gone[dev] })
	d.mu.Unlock()
	// The last change now is at least what was sent: a batch is sent only
	// of what the store committed.
	last, _ := n.store.Watch()
	if err := n.store.MarkDelivered(ctx, last, devs...); err != nil {
		d.mu.Lock()
		d.unmarked = true
		d.mu.Unlock()
		return fmt.Errorf("record what is sent: %w", err)
	}
	return nil
}

// storeWentBack checks a puller's cursor into our store's epoch against
// how far it can have pulled it (Delivered). A cursor past that is from a
// state of our store that is gone: then our changes since may sit at
// sequence numbers the puller has passed, so this puller gets everything
// again, and the store numbers its later changes past the cursor, so that
// no other device that saw the lost state passes them either
// (store.Store.SkipPast). A puller found so stays suspect until it
// acknowledges a batch of this run: a stream cut before it merged one
// leaves it with the same cursor, which what was sent to it since would
// otherwise seem to cover. It returns where to send from.
func (n *Node) storeWentBack(ctx context.Context, remote lpeer.ID, cursor uint64) (uint64, error) {
	dev := DeviceIDOf(remote)
	known := n.Delivered(dev)
	if cursor == 0 || (cursor <= known && !n.sends.isGone(dev)) {
		return cursor, nil
	}
	n.sends.wentBack(dev)
	last, _ := n.store.Watch()
	n.log.Warn("a peer has pulled this device's store further than it now holds (restored from an old copy?); numbering later changes after its cursor and sending it everything",
		"peer", remote, "its_cursor", cursor, "our_last", last, "known", known)
	if err := n.store.SkipPast(ctx, cursor); err != nil {
		return 0, fmt.Errorf("number changes after a peer's cursor: %w", err)
	}
	return 0, nil
}

// Delivered returns how far device dev can have merged this device's
// store, if the store never went back: what this node sent it, or its
// delivered mark (Store.Delivered). A cursor of dev's into this store's
// epoch past it is from a state of the store that is gone (storeWentBack),
// and says nothing of what dev holds of the store now.
func (n *Node) Delivered(dev crdt.DeviceID) uint64 {
	return max(n.store.Delivered(dev), n.sends.to(dev))
}
