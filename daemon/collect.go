package daemon

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/peer"
)

// Tombstone collection (crdt/collect.go has the rule and why it is safe).
// Members gossip summaries of how far each has merged everyone (the peer
// layer's summary protocol): on every connection, and when this device's
// summary changed. One loop per daemon keeps the latest summary of each
// device (saved in the store when others' change, so that a member away
// during a restart still counts for what it last said), works out up to where every current member holds this store
// (crdt.Stable) after summaries, members or the store changed, and purges
// what that allows in bounded batches. It wakes only for a commit or an
// arriving summary, at most once per summaryEvery: an idle library runs no
// timer.

// summaryEvery is the shortest time between two rounds of the loop, so
// that a catch-up of thousands of batches gossips and purges a few times,
// not thousands.
const summaryEvery = 2 * time.Second

// collector is the loop's state. It has a lock of its own: the peer layer
// hands summaries in on its goroutines.
type collector struct {
	mu    sync.Mutex
	known crdt.Summaries // the latest of every device, this one's included
	// news: summaries arrived that the loop has not gossiped or
	// collected on yet.
	news bool
	kick chan struct{}
	// st and last are the latest Stability worked out and the sequence
	// number it was for; waiting names the members with no summary.
	st      crdt.Stability
	last    uint64
	waiting []crdt.DeviceID
	// collected and freed add up what was purged since start.
	collected int
	freed     int64
	forgotten map[crdt.DeviceID]bool // cursors dropped
	// handed: the store epoch of each device this one is handing or has
	// handed its residues to (once per epoch of the receiver, per run);
	// owed: the epoch of each device a handing failed for, which gets them
	// again with its next summary, whatever its cursors say by then.
	handed, owed map[crdt.DeviceID]uint64
}

func newCollector() collector {
	return collector{known: crdt.Summaries{}, kick: make(chan struct{}, 1), forgotten: map[crdt.DeviceID]bool{},
		handed: map[crdt.DeviceID]uint64{}, owed: map[crdt.DeviceID]uint64{}}
}

// summaries is what this device gossips (peer.Config.Summaries): its own
// summary and the latest known of every other device.
func (d *Daemon) summaries() []crdt.Summary {
	d.coll.mu.Lock()
	defer d.coll.mu.Unlock()
	return d.summariesLocked()
}

func (d *Daemon) summariesLocked() []crdt.Summary {
	list := d.coll.known.List()
	return slices.DeleteFunc(list, func(s crdt.Summary) bool { return s.Device != d.self && !d.members.current(s.Device) })
}

// onSummaries takes what a peer gossiped (peer.Config.OnSummaries). Only a
// current member's word counts. A summary that shows a device's store
// behind what it said before (restored from an old copy) makes the next
// pull from that device start from 0, so its old copies meet the residues
// here; a member's cursor into this store past its end (this one was
// restored) makes its later changes take numbers after that cursor.
func (d *Daemon) onSummaries(from crdt.DeviceID, list []crdt.Summary) {
	if !d.admitted(from) {
		d.log.Debug("summaries from a removed device: ignored", "device", from)
		return
	}
	var (
		behind    []crdt.DeviceID
		hand      bool
		handEpoch uint64
		skipPast  uint64 // the furthest cursor into this store
	)
	d.coll.mu.Lock()
	added := false
	for _, s := range list {
		if s.Device == from && d.coll.handed[from] != s.Epoch {
			// A device that has merged nothing of this store's epoch pulls
			// it from the start, and gets no collected book that way.
			if c, ok := s.CursorInto(d.self); !ok || c.Epoch != d.store.Epoch() || d.coll.owed[from] == s.Epoch {
				d.coll.handed[from], hand, handEpoch = s.Epoch, true, s.Epoch
			}
		}
		// This device knows itself better; a device that is not a current
		// member holds nothing back, and keeping only members' bounds what
		// is kept and gossiped.
		if s.Device == d.self || !d.members.current(s.Device) {
			continue
		}
		if c, ok := s.CursorInto(d.self); ok && c.Epoch == d.store.Epoch() && c.Seq > skipPast {
			skipPast = c.Seq
		}
		old, had := d.coll.known[s.Device]
		if !d.coll.known.Add(s) {
			continue
		}
		added = true
		if had && old.Epoch == s.Epoch && old.Seq > s.Seq {
			behind = append(behind, s.Device)
		}
	}
	if added {
		d.coll.news = true
	}
	d.coll.mu.Unlock()
	if node := d.currentNode(); node != nil {
		for _, b := range behind {
			node.PullAllFrom(b)
		}
	}
	if last := d.store.LastSeq(); skipPast > last {
		// A member has merged this store further than it holds: it went
		// back (restored from an old copy). Later changes take numbers past
		// that cursor, so that no device that saw the lost state passes
		// them; the peer layer sends each puller whose cursor is past what
		// it can have had everything again.
		d.log.Warn("a member has merged this device's store further than it holds (restored from an old copy?); numbering later changes after its cursor",
			"from", from, "cursor", skipPast, "last", last)
		ctx, cancel := d.untilClosing(time.Minute)
		defer cancel()
		if err := d.store.SkipPast(ctx, skipPast); err != nil {
			d.log.Warn("number changes after a member's cursor", "err", err)
		}
	}
	if hand {
		d.spawn(func() { d.handResidues(from, handEpoch) })
	}
	if added {
		d.coll.wake()
	}
}

// wake makes the collection loop run a round (at most every summaryEvery).
func (c *collector) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (d *Daemon) currentNode() *peer.Node { return d.net.current() }

// collectLoop runs until the daemon closes.
func (d *Daemon) collectLoop() {
	ctx, cancel := d.untilClosing(0)
	defer cancel()
	every := d.cfg.summaryEvery
	if every <= 0 {
		every = summaryEvery
	}
	d.loadSummaries(ctx)
	var next time.Time
	for {
		if wait := time.Until(next); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
		next = time.Now().Add(every)
		_, changed := d.store.Watch()
		d.collectRound(ctx)
		select {
		case <-changed:
		case <-d.coll.kick:
		case <-ctx.Done():
			return
		}
	}
}

// collectRound gossips this device's summary if it changed (or others'
// did), drops the cursors into forgotten devices, and purges what every
// current member holds.
func (d *Daemon) collectRound(ctx context.Context) {
	d.forgetCursors(ctx)
	own, err := d.store.Summary(ctx, d.self, d.stamp())
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("collection: read this device's summary", "err", err)
		}
		return
	}
	d.coll.mu.Lock()
	prev, had := d.coll.known[d.self]
	save := d.coll.news
	gossip := d.coll.news || !had || !sameSummary(&prev, &own)
	if !had || !sameSummary(&prev, &own) {
		d.coll.known.Add(own)
	}
	d.coll.news = false
	// What this round saves is what it collects on: a summary that arrives
	// from here on waits for the next round, so a restart never finds that
	// collection went further than the saved summaries say.
	list := d.summariesLocked()
	d.coll.mu.Unlock()
	if node := d.currentNode(); gossip && node != nil {
		if _, err := node.GossipSummaries(ctx, list); err != nil {
			d.log.Warn("collection: gossip summaries", "err", err)
		}
	}
	if save {
		others := slices.DeleteFunc(slices.Clone(list), func(s crdt.Summary) bool { return s.Device == d.self })
		if err := d.store.SaveSummaries(ctx, others); err != nil && ctx.Err() == nil {
			d.log.Warn("collection: save the members' summaries", "err", err)
		}
	}
	d.purge(ctx, list)
}

// loadSummaries takes the other members' summaries saved before a restart,
// so that a member away now counts for what it last said it holds. Any
// summary that arrived since is later and stays.
func (d *Daemon) loadSummaries(ctx context.Context) {
	list, err := d.store.Summaries(ctx)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("collection: the saved summaries are ignored; members count again once they gossip", "err", err)
		}
		return
	}
	d.coll.mu.Lock()
	defer d.coll.mu.Unlock()
	for _, s := range list {
		if s.Device != d.self && d.members.current(s.Device) {
			d.coll.known.Add(s)
		}
	}
}

// sameSummary reports whether a and b say the same, whenever made.
func sameSummary(a, b *crdt.Summary) bool {
	return a.Device == b.Device && a.Epoch == b.Epoch && a.Seq == b.Seq && slices.Equal(a.Cursors, b.Cursors)
}

// currentMembers returns the devices that are members and not removed.
func (d *Daemon) currentMembers() []crdt.DeviceID {
	var out []crdt.DeviceID
	for _, m := range d.members.list() {
		if !m.Added.IsZero() && !m.IsRemoved() && d.members.current(m.ID) {
			out = append(out, m.ID)
		}
	}
	return out
}

// forgetCursors drops the cursors into removed devices (once each), so that
// if one ever comes back its whole store is pulled again.
func (d *Daemon) forgetCursors(ctx context.Context) {
	for _, id := range d.members.removedIDs() {
		if id == d.self || d.coll.forgotten[id] {
			continue
		}
		had, err := d.store.ForgetCursor(ctx, id)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("collection: drop the cursor into a forgotten device", "device", id, "err", err)
			}
			return
		}
		d.coll.forgotten[id] = true
		if had {
			d.log.Info("dropped the cursor into a forgotten device", "device", id)
		}
	}
}

// purge works out stability over the current members, on list (the
// summaries this round saved), and collects what it allows, batch by batch. It collects nothing while a member has no
// summary: that member holds everything back.
func (d *Daemon) purge(ctx context.Context, list []crdt.Summary) {
	members := d.currentMembers()
	if !slices.Contains(members, d.self) {
		return // forgotten, or not recorded as a member yet: it speaks for nobody
	}
	known := make(crdt.Summaries, len(list))
	for _, s := range list {
		known[s.Device] = s
	}
	last := d.store.LastSeq()
	var waiting []crdt.DeviceID
	for _, m := range members {
		if _, ok := known[m]; !ok && m != d.self {
			waiting = append(waiting, m)
		}
	}
	st := crdt.Stable(d.self, d.store.Epoch(), last, members, known)
	if node := d.currentNode(); node != nil {
		st.Distrust(d.self, d.store.Epoch(), known, node.Delivered)
	}
	d.coll.mu.Lock()
	d.coll.st, d.coll.last, d.coll.waiting = st, last, waiting
	d.coll.mu.Unlock()
	if len(waiting) > 0 || st.UpTo == 0 {
		if len(waiting) > 0 {
			d.log.Debug("collection: members without a summary hold it back", "devices", waiting)
		}
		return
	}
	var (
		books int
		freed int64
	)
	for ctx.Err() == nil {
		res, err := d.store.Purge(ctx, st, 0)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("collection: purge", "err", err)
			}
			break
		}
		books += res.Records
		freed += res.Bytes
		if !res.More {
			break
		}
	}
	if books == 0 {
		return
	}
	// Every book collected was counted deleted. Reading the store's counts
	// instead would be wrong while a batch is between its commit and
	// changed (a pull from a peer): they include it, and changed would
	// count it again.
	d.counts.add(0, -books)
	d.coll.mu.Lock()
	d.coll.collected += books
	d.coll.freed += freed
	d.coll.mu.Unlock()
	d.log.Info("collected deleted books every member holds", "books", books, "bytes", freed, "up_to", st.UpTo, "members", len(members))
}

// collectionView is what /v1/devices shows of collection for device id:
// how far it holds this store, how far behind that is, and whether it
// holds collection back.
func (d *Daemon) collectionView(id crdt.DeviceID) (covers, behind uint64, holding, known bool) {
	d.coll.mu.Lock()
	defer d.coll.mu.Unlock()
	if slices.Contains(d.coll.waiting, id) {
		return 0, d.coll.last, true, false
	}
	for _, c := range d.coll.st.Members {
		if c.Device == id {
			covers = c.Seq
			known = true
		}
	}
	if !known {
		return 0, 0, false, false
	}
	return covers, d.coll.last - min(covers, d.coll.last), slices.Contains(d.coll.st.Holding(d.coll.last), id), true
}

// handResidues hands device to (of store epoch) what is left of the books
// this device collected: it pulls this store from the start, which lists
// none of them, and should hold their deletes (crdt/collect.go).
func (d *Daemon) handResidues(to crdt.DeviceID, epoch uint64) {
	ctx, cancel := d.untilClosing(2 * time.Minute)
	defer cancel()
	var records [][]byte
	err := d.store.Residues(ctx, func(data []byte) error {
		records = append(records, slices.Clone(data))
		return nil
	})
	node := d.currentNode()
	if err != nil || len(records) == 0 || node == nil {
		if err != nil {
			d.log.Warn("collection: read the residues to hand over", "device", to, "err", err)
		}
		return
	}
	if err := node.SendResidues(ctx, to, records); err != nil {
		d.log.Info("collection: residues not handed over; again with its next summary", "device", to, "err", err)
		d.coll.mu.Lock()
		delete(d.coll.handed, to)
		d.coll.owed[to] = epoch
		d.coll.mu.Unlock()
		return
	}
	d.coll.mu.Lock()
	if d.coll.owed[to] == epoch {
		delete(d.coll.owed, to)
	}
	d.coll.mu.Unlock()
	d.log.Info("handed what is left of collected books to a device that pulls this one from the start", "device", to, "books", len(records))
}

// onResidues merges residues a member handed over (peer.Config.OnResidues).
func (d *Daemon) onResidues(ctx context.Context, from crdt.DeviceID, entries []crdt.Entry) error {
	if !d.admitted(from) {
		return fmt.Errorf("residues from device %s, which was removed from the library", from)
	}
	return d.applyFrom(ctx, from, entries, nil)
}
