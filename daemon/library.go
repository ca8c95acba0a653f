package daemon

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/peer"
	"github.com/danyue/danyue/store"
)

// The daemon's operations on the library: local writes go through the crdt
// operations and one durable store batch each; remote batches arrive through
// syncStore. Both end in changed(), which keeps the shelf counts and the
// device names current and publishes events.

// stamp returns a new timestamp from the hybrid clock.
func (d *Daemon) stamp() crdt.Timestamp {
	return d.clock.now(d.wallMs())
}

// write applies one local write to a record durably. build makes the change
// from a timestamp: it runs first with a reading of the clock, so that bad
// input is refused before anything is written, and again inside the store's
// write if the record then holds a stamp at or past that reading (one the
// clock did not follow, because it was more than crdt.MaxAhead ahead): the
// write then takes the next reading after the record's latest stamp, so that
// a write made after this device saw another one to the record still wins.
// Reading the record inside the write keeps a concurrent write from slipping
// between the check and the write.
func (d *Daemon) write(ctx context.Context, build func(at crdt.Timestamp) (crdt.Entry, error)) (store.Result, error) {
	at := d.stamp()
	e, err := build(at)
	if err != nil {
		return store.Result{}, err
	}
	id := e.AppendID(nil)
	return d.apply(ctx, store.Batch{Build: func(get func([]byte) (crdt.Entry, bool, error)) ([]crdt.Entry, error) {
		cur, ok, err := get(id)
		if err != nil {
			return nil, err
		}
		if !ok {
			return []crdt.Entry{e}, nil
		}
		next := crdt.StampAfter(at, cur.MaxTimestamp())
		if next == at {
			return []crdt.Entry{e}, nil
		}
		later, err := build(next)
		if err != nil {
			return nil, err
		}
		return []crdt.Entry{later}, nil
	}})
}

// apply writes one local change durably and returns the book's new state.
func (d *Daemon) apply(ctx context.Context, b store.Batch) (store.Result, error) {
	res, err := d.store.Apply(ctx, b)
	if err != nil {
		return res, err
	}
	d.changed(res.Changed, false)
	return res, nil
}

// setPosition moves the book to char/percent and, if title is not empty,
// names it, as one change.
func (d *Daemon) setPosition(ctx context.Context, key crdt.BookKey, char uint64, percent float64, title string) (crdt.Book, error) {
	res, err := d.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) {
		e, err := crdt.SetPosition(key, at, char, percent)
		if err != nil || title == "" {
			return e, err
		}
		t, err := crdt.SetTitle(key, at, title)
		if err != nil {
			return crdt.Entry{}, err
		}
		e.Book.Merge(&t.Book)
		return e, nil
	})
	return d.bookAfter(ctx, key, res, err)
}

// addReadTime adds ms of reading on this device. The new slot value is
// computed inside the store's write from the committed slot, so concurrent
// adds are never lost; dedup, if set, makes a retried request count once,
// and sum (a digest of the request) tells a retry from another request under
// the same key (store.ErrDedupMismatch).
func (d *Daemon) addReadTime(ctx context.Context, key crdt.BookKey, ms uint64, dedup string, sum []byte) (crdt.Book, error) {
	id := bookID(key)
	b := store.Batch{
		Dedup:    dedup,
		DedupSum: sum,
		Daily:    &store.DailyAdd{Day: d.now().Format(time.DateOnly), Ms: ms},
		Build: func(get func([]byte) (crdt.Entry, bool, error)) ([]crdt.Entry, error) {
			cur, ok, err := get(id)
			if err != nil {
				return nil, err
			}
			var local *crdt.Book
			if ok {
				local = &cur.Book
			}
			e, err := crdt.AddReadTime(key, local, d.self, ms)
			if err != nil {
				return nil, err
			}
			return []crdt.Entry{e}, nil
		},
	}
	book, err := d.applyBook(ctx, key, b)
	if errors.Is(err, store.ErrDuplicate) {
		return d.book(ctx, key)
	}
	return book, err
}

// deleteBook puts a tombstone on the book. Its read time is kept. A book
// this device has no record of is errNotFound, and nothing is written: a
// tombstone of a key no device knows would reach every device as an
// "(untitled)" deleted book. Records are never removed, so a book found here
// is still there when the tombstone is written.
func (d *Daemon) deleteBook(ctx context.Context, key crdt.BookKey) (crdt.Book, error) {
	if _, err := d.book(ctx, key); err != nil {
		return crdt.Book{}, err
	}
	res, err := d.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) { return crdt.Delete(key, at) })
	return d.bookAfter(ctx, key, res, err)
}

// applyBook applies a change to one book and returns its state after it.
func (d *Daemon) applyBook(ctx context.Context, key crdt.BookKey, b store.Batch) (crdt.Book, error) {
	res, err := d.apply(ctx, b)
	return d.bookAfter(ctx, key, res, err)
}

// bookAfter returns the state of book key after a change to it.
func (d *Daemon) bookAfter(ctx context.Context, key crdt.BookKey, res store.Result, err error) (crdt.Book, error) {
	if err != nil {
		return crdt.Book{}, err
	}
	for _, c := range res.Changed {
		if c.Entry.Kind == crdt.KindBook && c.Entry.Book.Key == key {
			return c.Entry.Book, nil
		}
	}
	// Nothing changed (the change was already known): the stored state is
	// the answer.
	return d.book(ctx, key)
}

// book returns the stored record of key, or ErrNotFound.
func (d *Daemon) book(ctx context.Context, key crdt.BookKey) (crdt.Book, error) {
	e, ok, err := d.store.Get(ctx, bookID(key))
	if err != nil {
		return crdt.Book{}, err
	}
	if !ok {
		return crdt.Book{}, errNotFound
	}
	return e.Book, nil
}

var errNotFound = errors.New("no such book")

func bookID(key crdt.BookKey) []byte {
	e := crdt.BookEntry(crdt.Book{Key: key})
	return e.AppendID(nil)
}

// changed updates what the daemon derives from the store and publishes the
// events of a committed batch. Events are for what other devices did: the
// app that made a local change already knows.
func (d *Daemon) changed(changes []store.Change, remote bool) {
	var (
		books []*crdt.Book // visible now, or deleted by this batch
		news  memberNews
		// The batch moves the counts at once, so that they never show
		// part of it.
		visible, deleted int
	)
	// A client that subscribes meanwhile did so after these changes.
	publish := remote && d.hub.active()
	for i := range changes {
		c := &changes[i]
		switch c.Entry.Kind {
		case crdt.KindDevice:
			d.names.set(c.Entry.Device.ID, c.Entry.Device.Name.Value)
		case crdt.KindMember:
			d.memberChanged(&c.Entry.Member, &news)
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
			if publish && (is || was) {
				books = append(books, &c.Entry.Book)
			}
		}
	}
	d.counts.add(visible, deleted)
	d.actOnMembers(news)
	if len(books) == 0 {
		return
	}
	// Rendered once the names of the batch are taken: a book is shown
	// with the names its writers had.
	v := d.viewer()
	for _, b := range books {
		if b.Visible() {
			d.hub.publish(Event{Type: "book", Data: v.book(b)})
		} else {
			d.hub.publish(Event{Type: "deleted", Data: v.deleted(b)})
		}
	}
}

// shelfCounts are the books on the shelf and those with a winning
// tombstone, as the API shows them: kept as batches commit, so that no
// request scans the books. It has a lock of its own, which keeps the two
// counts of one batch together.
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

// get returns the counts.
func (c *shelfCounts) get() (visible, deleted int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.visible, c.deleted
}

// viewer renders records with the name each write's device had when it
// made it.
func (d *Daemon) viewer() viewer {
	return viewer{self: d.self, name: d.names.at}
}

// syncStore adapts the store to what the peer layer needs, and routes every
// received batch through the clock and changed().
type syncStore struct{ d *Daemon }

func (s syncStore) Epoch() uint64 { return s.d.store.Epoch() }

func (s syncStore) Since(ctx context.Context, after uint64, limit int, fn func(seq uint64, data []byte) error) error {
	return s.d.store.Since(ctx, after, limit, fn)
}

func (s syncStore) Watch() (uint64, <-chan struct{}) { return s.d.store.Watch() }

func (s syncStore) Cursor(ctx context.Context, from crdt.DeviceID) (epoch, seq uint64, err error) {
	c, _, err := s.d.store.Cursor(ctx, from)
	return c.Epoch, c.Seq, err
}

func (s syncStore) SkipPast(ctx context.Context, seq uint64) error {
	return s.d.store.SkipPast(ctx, seq)
}

func (s syncStore) Delivered(dev crdt.DeviceID) uint64 { return s.d.store.Delivered(dev) }

func (s syncStore) MarkDelivered(ctx context.Context, seq uint64, devs ...crdt.DeviceID) error {
	return s.d.store.MarkDelivered(ctx, seq, devs...)
}

func (s syncStore) ApplyRemote(ctx context.Context, from crdt.DeviceID, epoch, seq uint64, entries []crdt.Entry) error {
	return s.d.applyFrom(ctx, from, entries, &store.Cursor{Device: from, Epoch: epoch, Seq: seq})
}

// applyFrom merges entries received from device from, with the cursor
// into it if one is given.
func (d *Daemon) applyFrom(ctx context.Context, from crdt.DeviceID, entries []crdt.Entry, cursor *store.Cursor) error {
	// Every write made here from the moment these records can be read must
	// order after them, whatever the wall clocks say: so the clock observes
	// them before the store makes them visible. (Observing records that then
	// fail to apply only moves the clock ahead, which is harmless.) A stamp
	// more than crdt.MaxAhead ahead moves the clock only that far, and is
	// blamed on its writer, the stamp's device, not on from, which may only
	// have relayed it (hlc.observeAll says which stamps are blamed).
	for _, a := range d.clock.observeAll(entries, d.wallMs(), clockWarnAfterMs) {
		w, first := d.warns.note(a.ts, a.aheadMs, from, d.names.get(a.ts.Device))
		if !first {
			continue
		}
		d.log.Warn("received a write stamped ahead of this device's clock; the writer's clock is wrong",
			"writer", w.stamp.Device, "writer_name", w.name, "ahead", aheadText(w.aheadMs), "ahead_ms", w.aheadMs,
			"stamp", rfc3339(w.stamp.Wall), "via", w.via)
	}
	res, err := d.store.Apply(ctx, store.Batch{Entries: entries, Cursor: cursor})
	if err != nil {
		return err
	}
	d.changed(res.Changed, true)
	if cursor != nil {
		// A batch may only move a cursor (every record in it skipped as
		// one this device has), which the store's sequence does not show:
		// this device's summary changed all the same.
		d.coll.wake()
	}
	return nil
}

var _ peer.Store = syncStore{}

// onPeerEvent publishes peers connecting and leaving, and logs what the user
// may have to act on in the daemon's terms.
func (d *Daemon) onPeerEvent(ev peer.Event) {
	p := ev.Peer
	switch ev.Kind {
	case peer.PeerConnected, peer.PeerDisconnected:
		if ev.Kind == peer.PeerConnected {
			d.noteHello(p.Device)
		}
		// The peer layer has logged it.
		d.hub.publish(Event{Type: "peer", Data: api.PeerEvent{Device: p.Device.String(), Name: p.Name, Connected: ev.Kind == peer.PeerConnected}})
	case peer.PeerClockSkewed:
		d.log.Warn("a peer's clock is off", "device", p.Device, "name", p.Name, "offset", p.ClockOffset)
	case peer.PeerRefused:
		d.log.Warn("a peer cannot sync with this device", "device", p.Device, "peer_id", p.ID, "err", ev.Err)
	}
}
