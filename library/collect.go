package library

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/danyue/danyue/crdt"
)

// Tombstone collection (crdt/collect.go has the rule and why it is safe).
// Members gossip summaries of how far each has merged everyone (the peer
// layer's summary protocol): on every connection, and when this device's
// summary changed. One loop per library keeps the latest summary of each
// device (saved in the store when others' change, so that a member away
// during a restart still counts for what it last said), works out up to
// where every current member holds this store (crdt.Stable) after
// summaries, members or the store changed, and purges what that allows in
// bounded batches. It wakes only for a commit or an arriving summary, at
// most once per Config.SummaryEvery, and when the undo window
// (Config.KeepDeleted) of a delete every member holds has passed: an idle
// library with no such delete runs no timer.
//
// A deleted book is collected only once its undo window has passed as
// well (crdt.Stability.DeletedBy, by the tombstone's wall time), so that
// for that long it stays listed, readable and restorable (Restore) on this
// device whatever the other members do.

// DefaultKeepDeleted is the default undo window (Config.KeepDeleted): a
// month, long enough for a person to notice a book they did not mean to
// remove, short enough that a library with heavy churn does not carry a
// year of deleted books; a deleted book costs one record until then.
const DefaultKeepDeleted = 30 * 24 * time.Hour

// summaryEvery is the default shortest time between two rounds of the
// loop, so that a catch-up of thousands of batches gossips and purges a few
// times, not thousands; a shorter one purges sooner after the last member
// holds a delete, and wakes more often under a stream of writes.
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
	// stats adds up the rounds and what they purged since the library
	// opened.
	stats     CollectionStats
	forgotten map[crdt.DeviceID]bool // cursors dropped
	// handed: the store epoch of each device this one is handing or has
	// handed its residues to (once per epoch of the receiver, per run);
	// owed: the epoch of each device a handing failed for, which gets them
	// again with its next summary, whatever its cursors say by then.
	handed, owed map[crdt.DeviceID]uint64
	// purged is the UpTo of the last purge that went to the end; only the
	// loop reads and writes it. A deleted book is collectible once its
	// sequence number is at or below UpTo, and a book deleted or changed
	// later gets a number past it, so until UpTo moves on there is nothing
	// to collect, and no scan of every deleted book is worth making: with
	// a member away for days, that scan would hold the writer after every
	// round of writes. held is the earliest tombstone time (wall ms) that
	// the undo window alone kept at that purge (0: none): once the
	// window's end passes it, there is something to collect again with
	// UpTo where it was, and the loop wakes for it (heldDue).
	purged, held uint64
}

func newCollector() collector {
	return collector{known: crdt.Summaries{}, kick: make(chan struct{}, 1), forgotten: map[crdt.DeviceID]bool{},
		handed: map[crdt.DeviceID]uint64{}, owed: map[crdt.DeviceID]uint64{}}
}

// wake makes the collection loop run a round (at most every summaryEvery).
func (c *collector) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// collectLoop runs until the library closes.
func (l *Library) collectLoop() {
	ctx, cancel := l.untilClosing(0)
	defer cancel()
	every := l.cfg.SummaryEvery
	l.loadSummaries(ctx)
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
		_, changed := l.store.Watch()
		// The only timer an idle library runs: until the undo window of the
		// earliest delete every member holds has passed.
		var due *time.Timer
		if wait, ok := l.collectRound(ctx); ok {
			due = time.NewTimer(wait)
		}
		select {
		case <-changed:
		case <-l.coll.kick:
		case <-timerC(due):
		case <-ctx.Done():
		}
		if due != nil {
			due.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// KeepDeleted returns the undo window (Config.KeepDeleted): a deleted book
// is kept at least that long after its delete; negative when none is kept.
func (l *Library) KeepDeleted() time.Duration { return l.cfg.KeepDeleted }

// timerC is t's channel, or nil (never ready) without a timer.
func timerC(t *time.Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C
}

// heldDue returns how long until the undo window of the earliest delete it
// kept at the last purge has passed, if it kept one; only the loop calls
// it.
func (l *Library) heldDue() (time.Duration, bool) {
	if l.coll.held == 0 {
		return 0, false
	}
	end := time.UnixMilli(int64(l.coll.held)).Add(l.cfg.KeepDeleted)
	return max(end.Sub(l.cfg.Now()), 0), true
}

// deletedBy is the end of the undo window at wall time now (ms), for
// crdt.Stability.DeletedBy: 0 (no bound) with no window.
func (l *Library) deletedBy(now uint64) uint64 {
	if l.cfg.KeepDeleted < 0 {
		return 0
	}
	w := uint64(l.cfg.KeepDeleted.Milliseconds())
	if now <= w {
		return 1 // a clock before 1970 plus the window: keep everything
	}
	return now - w
}

// collectRound gossips this device's summary if it changed (or others'
// did), drops the cursors into forgotten devices, and purges what every
// current member holds. It returns how long until the undo window of a
// delete it kept has passed, if it kept one (heldDue).
func (l *Library) collectRound(ctx context.Context) (time.Duration, bool) {
	l.forgetCursors(ctx)
	own, err := l.store.Summary(ctx, l.self, l.stamp())
	if err != nil {
		if ctx.Err() == nil {
			l.log.Warn("collection: read this device's summary", "err", err)
		}
		return l.heldDue()
	}
	l.coll.mu.Lock()
	prev, had := l.coll.known[l.self]
	save := l.coll.news
	gossip := l.coll.news || !had || !sameSummary(&prev, &own)
	if !had || !sameSummary(&prev, &own) {
		l.signSummary(&own)
		l.coll.known.Add(own)
	}
	l.coll.news = false
	// What this round saves is what it collects on: a summary that arrives
	// from here on waits for the next round, so once a purge is
	// acknowledged a restart never finds that collection went further than
	// the saved summaries say (the save rides the purge's sync, see
	// store.SaveSummaries).
	list := l.summariesLocked()
	l.coll.mu.Unlock()
	if node := l.net.current(); gossip && node != nil {
		if _, err := node.GossipSummaries(ctx, list); err != nil {
			l.log.Warn("collection: gossip summaries", "err", err)
		}
	}
	if save {
		others := slices.DeleteFunc(slices.Clone(list), func(s crdt.Summary) bool { return s.Device == l.self })
		if err := l.store.SaveSummaries(ctx, others); err != nil && ctx.Err() == nil {
			l.log.Warn("collection: save the members' summaries", "err", err)
		}
	}
	l.purge(ctx, list)
	wait, due := l.heldDue()
	l.coll.mu.Lock()
	l.coll.stats.Rounds++
	l.coll.mu.Unlock()
	return wait, due
}

// sameSummary reports whether a and b say the same, whenever made.
func sameSummary(a, b *crdt.Summary) bool {
	return a.Device == b.Device && a.Epoch == b.Epoch && a.Seq == b.Seq && slices.Equal(a.Cursors, b.Cursors)
}

// currentMembers returns the devices that are members now; none while
// this device's own addition has not reached it (a joiner that has not
// heard from its inviter yet may not know every member).
func (l *Library) currentMembers() []crdt.DeviceID {
	if m, _ := l.members.get(l.self); m.Added.IsZero() {
		return nil
	}
	return l.members.currentIDs()
}

// forgetCursors drops the cursors into removed devices (once each), so that
// if one ever comes back its whole store is pulled again.
func (l *Library) forgetCursors(ctx context.Context) {
	for _, id := range l.members.removedIDs() {
		if id == l.self || l.coll.forgotten[id] {
			continue
		}
		had, err := l.store.ForgetCursor(ctx, id)
		if err != nil {
			if ctx.Err() == nil {
				l.log.Warn("collection: drop the cursor into a forgotten device", "device", id, "err", err)
			}
			return
		}
		l.coll.forgotten[id] = true
		if had {
			l.log.Info("dropped the cursor into a forgotten device", "device", id)
		}
	}
}

// purge works out stability over the current members, on list (the
// summaries this round saved), and collects what it allows, batch by
// batch. It collects nothing while a member has no summary: that member
// holds everything back.
func (l *Library) purge(ctx context.Context, list []crdt.Summary) {
	members := l.currentMembers()
	if !slices.Contains(members, l.self) {
		return // forgotten, or not recorded as a member yet: it speaks for nobody
	}
	st, waiting := l.stability(members, list)
	if len(waiting) > 0 || st.UpTo == 0 {
		if len(waiting) > 0 {
			l.log.Debug("collection: members without a summary hold it back", "devices", waiting)
		}
		return
	}
	st.DeletedBy = l.deletedBy(l.wallMs())
	if st.UpTo <= l.coll.purged && (l.coll.held == 0 || l.coll.held > st.DeletedBy) {
		return
	}
	books, freed, held, done := l.purgeUpTo(ctx, st)
	if done {
		l.coll.purged, l.coll.held = st.UpTo, held
	}
	// Every book collected was counted deleted. Reading the store's counts
	// instead would be wrong while a batch is between its commit and
	// changed (a pull from a peer): they include it, and changed would
	// count it again.
	l.counts.add(0, -books)
	l.coll.mu.Lock()
	l.coll.stats.Scans++
	l.coll.stats.Books += books
	l.coll.stats.Bytes += freed
	l.coll.mu.Unlock()
	if books > 0 {
		l.log.Info("collected deleted books every member holds", "books", books, "bytes", freed, "up_to", st.UpTo, "members", len(members))
	}
}

// stability works out up to where every one of members holds this store
// on the summaries of list, keeps it for Collection, and returns it with
// the members that have no summary.
func (l *Library) stability(members []crdt.DeviceID, list []crdt.Summary) (crdt.Stability, []crdt.DeviceID) {
	known := make(crdt.Summaries, len(list))
	for _, s := range list {
		known[s.Device] = s
	}
	last := l.store.LastSeq()
	var waiting []crdt.DeviceID
	for _, m := range members {
		if _, ok := known[m]; !ok && m != l.self {
			waiting = append(waiting, m)
		}
	}
	st := crdt.Stable(l.self, l.store.Epoch(), last, members, known)
	if node := l.net.current(); node != nil {
		st.Distrust(l.self, l.store.Epoch(), known, node.Delivered)
	}
	l.coll.mu.Lock()
	l.coll.st, l.coll.last, l.coll.waiting = st, last, waiting
	l.coll.mu.Unlock()
	return st, waiting
}

// purgeUpTo collects what st allows, in bounded batches, and returns how
// many books and bytes that freed, the earliest tombstone the undo window
// kept (store.PurgeResult.Held), and whether it collected all st allows.
func (l *Library) purgeUpTo(ctx context.Context, st crdt.Stability) (books int, freed int64, held uint64, done bool) {
	for ctx.Err() == nil {
		res, err := l.store.Purge(ctx, st, 0)
		if err != nil {
			if ctx.Err() == nil {
				l.log.Warn("collection: purge", "err", err)
			}
			break
		}
		books += res.Records
		freed += res.Bytes
		if !res.More {
			return books, freed, res.Held, true
		}
	}
	return books, freed, 0, false
}

// Collection is how far a member holds this device's store, as the
// summaries it gossips say: deleted books are collected only once every
// current member holds them.
type Collection struct {
	// Cursor is the last of this device's changes the member is known to
	// hold (0 until its summary arrives), and Behind how many changes
	// after it this device has made.
	Cursor, Behind uint64
	// Summary: its summary has arrived.
	Summary bool
	// Holding: it holds collection back, having no summary yet or not
	// holding changes every other member holds.
	Holding bool
}

// CollectionStats adds up what tombstone collection did since the library
// opened.
type CollectionStats struct {
	Rounds int   // rounds of the loop run to their end
	Scans  int   // rounds that scanned the deleted books for what to collect
	Books  int   // deleted books collected
	Bytes  int64 // bytes their records freed
}

// CollectionStats returns what tombstone collection did since the library
// opened.
func (l *Library) CollectionStats() CollectionStats {
	l.coll.mu.Lock()
	defer l.coll.mu.Unlock()
	return l.coll.stats
}

// Collection returns how far member id holds this device's store, as the
// last round of collection worked it out.
func (l *Library) Collection(id crdt.DeviceID) Collection {
	l.coll.mu.Lock()
	defer l.coll.mu.Unlock()
	if slices.Contains(l.coll.waiting, id) {
		return Collection{Behind: l.coll.last, Holding: true}
	}
	for _, c := range l.coll.st.Members {
		if c.Device == id {
			return Collection{
				Cursor:  c.Seq,
				Behind:  l.coll.last - min(c.Seq, l.coll.last),
				Summary: true,
				Holding: slices.Contains(l.coll.st.Holding(l.coll.last), id),
			}
		}
	}
	return Collection{}
}
