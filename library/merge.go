package library

import (
	"context"
	"errors"
	"sync"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/peer"
	"github.com/danyue/danyue/store"
)

// Batches from peers arrive through syncStore, which the peer layer writes
// to; they go through the clock, the store, then changed, as local writes
// do (write.go). changed keeps what the library derives from the store
// current (the shelf's counts, the names, the member set) and tells
// Config.OnEvent what other devices did.

// EventKind says what an Event is about.
type EventKind int

const (
	// BookChanged: a batch from a peer changed a book that is on the
	// shelf.
	BookChanged EventKind = iota + 1
	// BookDeleted: a batch from a peer took a book off the shelf.
	BookDeleted
	// PeerConnected: a device of the library connected and said hello.
	PeerConnected
	// PeerDisconnected: a device of the library went away.
	PeerDisconnected
)

// Event is something another device did, for the apps to be told. Events
// are for what other devices did: the app that made a local change already
// knows.
type Event struct {
	Kind EventKind
	// Book is the book's new state (BookChanged, BookDeleted).
	Book crdt.Book
	// Device and Name are the peer (PeerConnected, PeerDisconnected): its
	// name as its hello gave it.
	Device crdt.DeviceID
	Name   string
}

// Counts returns the books on the shelf and the deleted books this device
// holds (those with a winning tombstone, until they are collected).
func (l *Library) Counts() (visible, deleted int) { return l.counts.get() }

// shelfCounts are the books on the shelf and those with a winning
// tombstone: kept as batches commit, so that nobody scans the books to
// count them. It has a lock of its own, which keeps the two counts of one
// batch together.
type shelfCounts struct {
	mu               sync.Mutex
	visible, deleted int
}

// add moves the counts by the deltas of one batch.
func (c *shelfCounts) add(visible, deleted int) {
	c.mu.Lock()
	c.visible += visible
	c.deleted += deleted
	c.mu.Unlock()
}

func (c *shelfCounts) get() (visible, deleted int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.visible, c.deleted
}

// changed updates what the library derives from the store after a
// committed batch, and tells what other devices did (remote).
func (l *Library) changed(changes []store.Change, remote bool) {
	var (
		books []*crdt.Book // visible now, or deleted by this batch
		news  memberNews
		// The batch moves the counts at once, so that they never show
		// part of it.
		visible, deleted int
	)
	// A client that subscribes meanwhile did so after these changes.
	tell := remote && l.cfg.OnEvent != nil && (l.cfg.Listening == nil || l.cfg.Listening())
	for i := range changes {
		c := &changes[i]
		switch c.Entry.Kind {
		case crdt.KindDevice:
			l.names.set(c.Entry.Device.ID, c.Entry.Device.Name.Value)
		case crdt.KindMember:
			l.memberChanged(&c.Entry.Member, &news)
		case crdt.KindBook:
			existed := c.Prev != nil
			was, is := existed && c.Prev.Book.Visible(), c.Entry.Book.Visible()
			switch {
			case !existed:
			case was:
				visible--
			default:
				deleted--
			}
			if is {
				visible++
			} else {
				deleted++
			}
			if tell && (is || was) {
				books = append(books, &c.Entry.Book)
			}
		}
	}
	l.counts.add(visible, deleted)
	l.countMoves(changes)
	l.actOnMembers(news)
	for _, b := range books {
		kind := BookChanged
		if !b.Visible() {
			kind = BookDeleted
		}
		l.cfg.OnEvent(Event{Kind: kind, Book: *b})
	}
}

// syncStore adapts the store to what the peer layer needs, and routes every
// received batch through the clock and changed.
type syncStore struct{ l *Library }

var _ peer.Store = syncStore{}

func (s syncStore) Epoch() uint64 { return s.l.store.Epoch() }

func (s syncStore) Since(ctx context.Context, after uint64, limit int, fn func(seq uint64, data []byte) error) error {
	return s.l.store.Since(ctx, after, limit, fn)
}

func (s syncStore) Watch() (uint64, <-chan struct{}) { return s.l.store.Watch() }

func (s syncStore) Cursor(ctx context.Context, from crdt.DeviceID) (epoch, seq uint64, err error) {
	c, _, err := s.l.store.Cursor(ctx, from)
	return c.Epoch, c.Seq, err
}

func (s syncStore) SkipPast(ctx context.Context, seq uint64) error {
	return s.l.store.SkipPast(ctx, seq)
}

func (s syncStore) Delivered(dev crdt.DeviceID) uint64 { return s.l.store.Delivered(dev) }

func (s syncStore) MarkDelivered(ctx context.Context, seq uint64, devs ...crdt.DeviceID) error {
	return s.l.store.MarkDelivered(ctx, seq, devs...)
}

func (s syncStore) ApplyRemote(ctx context.Context, from crdt.DeviceID, epoch, seq uint64, entries []crdt.Entry) error {
	return s.l.applyFrom(ctx, from, entries, &store.Cursor{Device: from, Epoch: epoch, Seq: seq})
}

// applyFrom merges entries received from device from, with the cursor
// into it if one is given.
func (l *Library) applyFrom(ctx context.Context, from crdt.DeviceID, entries []crdt.Entry, cursor *store.Cursor) error {
	// Every write made here from the moment these records can be read must
	// order after them, whatever the wall clocks say: so the clock observes
	// them before the store makes them visible. (Observing records that then
	// fail to apply only moves the clock ahead, which is harmless.) A stamp
	// more than crdt.MaxAhead ahead moves the clock only that far, and is
	// blamed on its writer, the stamp's device, not on from, which may only
	// have relayed it (hlc.observeAll says which stamps are blamed).
	for _, a := range l.clock.observeAll(entries, l.wallMs(), clockWarnAfterMs) {
		l.noteAhead(a, from)
	}
	// Residues (no cursor) spend the bounds of their sender's unit
	// (bounds.go): one refused makes the handing fail, and the sender
	// hands them over again with this device's next summary to it.
	var a *admission
	var err error
	if cursor != nil {
		a, err = l.admit(ctx, entries)
	} else {
		a, err = l.admitResidues(ctx, from, entries)
	}
	if err != nil {
		return err
	}
	entries = a.entries
	if a.refused != nil {
		// The cursor stays: what was refused is offered again
		// (peer.ErrRecordsRefused).
		cursor = nil
	}
	res, err := l.store.Apply(ctx, store.Batch{Entries: entries, Cursor: cursor})
	// After changed has counted the records committed, so that nothing
	// counts them nowhere meanwhile.
	defer l.settle(a, res.Changed...)
	if err != nil {
		return err
	}
	l.changed(res.Changed, true)
	if a.refused != nil {
		l.noteRefused(a, from)
		return errRefused(a)
	}
	if cursor != nil {
		// A batch may only move a cursor (every record in it skipped as
		// one this device has), which the store's sequence does not show:
		// this device's summary changed all the same.
		l.coll.wake()
	}
	return nil
}

// onPeerEvent tells of peers connecting and leaving, and logs what the
// user may have to act on in the library's terms.
func (l *Library) onPeerEvent(ev peer.Event) {
	p := ev.Peer
	switch ev.Kind {
	case peer.PeerConnected, peer.PeerDisconnected:
		kind := PeerDisconnected
		if ev.Kind == peer.PeerConnected {
			kind = PeerConnected
			l.joinW.served(p.Device)
		}
		// The peer layer has logged it.
		if l.cfg.OnEvent != nil {
			l.cfg.OnEvent(Event{Kind: kind, Device: p.Device, Name: p.Name})
		}
	case peer.PeerClockSkewed:
		l.log.Warn("a peer's clock is off", "device", p.Device, "name", p.Name, "offset", p.ClockOffset)
	case peer.PeerRefused:
		if errors.Is(ev.Err, peer.ErrNotMember) {
			l.joinW.refused(p.Device, ev.Err)
			// The peer layer has logged it, with the reason.
			return
		}
		l.log.Warn("a peer cannot sync with this device", "device", p.Device, "peer_id", p.ID, "err", ev.Err)
	}
}
