package peer

import (
	"context"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
)

// collect purges the deleted book key as tombstone collection does: the
// record leaves the store and the sequence log, and its residue stays.
func (s *memStore) collect(key crdt.BookKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := crdt.BookEntry(crdt.Book{Key: key})
	id := string(e.AppendID(nil))
	rec := s.recs[id]
	if rec == nil || rec.e.Kind != crdt.KindBook || rec.e.Book.Visible() {
		return false
	}
	if s.residues == nil {
		s.residues = make(map[string]crdt.Entry)
	}
	s.residues[id] = crdt.BookEntry(rec.e.Book.Clone())
	delete(s.recs, id)
	rec.seq = 0 // its log entry is no longer listed
	return true
}

// A device restored from a copy made before a delete that every device has
// since collected gets the delete back: a device that meets its old copy
// of the book merges it with the residue, which makes exactly the record
// that was collected, byte for byte, and sends it. Knowledge of what the
// restored device holds must not skip it: the restored device has heard
// from the deleting device up to past the delete (an empty batch over the
// collected range), but that proves nothing about a state that had been
// collected there.
func TestCollectedDeleteReachesRestoredDevice(t *testing.T) {
	lib, devs := startDevices(t, "A", "B", "C")
	a, b, c := devs[0], devs[1], devs[2]
	key := bookKey(7)
	if err := a.store.fill(1); err != nil {
		t.Fatal(err)
	}
	if err := a.store.setPosition(key, 700); err != nil {
		t.Fatal(err)
	}
	links := []*pipeLink{openLink(b, a), openLink(c, a)}
	poll.Until(t, "A's books on B and C", 10*time.Second, func() bool { return converged(a.store, b.store, c.store) })
	backup := c.store.copyStore()

	del, err := crdt.Delete(key, a.store.now())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.store.write(del); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the delete on B and C", 10*time.Second, func() bool { return converged(a.store, b.store, c.store) })
	for _, l := range links {
		l.cut()
	}
	for _, d := range devs {
		if !d.store.collect(key) {
			t.Fatalf("%s: nothing to collect", d.name)
		}
	}

	// C is restored from its copy and starts again, knowing nothing of
	// the others. It hears from A up to A's end: nothing, as A collected
	// what came after C's cursor.
	c.stop(t)
	c.store = backup
	c.start(t, lib, nil, quiet)
	fromA := openLink(c, a)
	defer fromA.cut()
	aLast, _ := a.store.Watch()
	poll.Until(t, "C to hear from A up to A's end", 10*time.Second, func() bool {
		return c.node.kn.hasAll(DeviceIDOf(a.id), mark{a.lineage(), aLast})
	})
	// B pulls C's old copy (C is behind B's cursor into it, so from the
	// start) and brings the book back as the delete it collected.
	fromC := openLink(b, c)
	defer fromC.cut()
	poll.Until(t, "B to bring the book back as deleted", 10*time.Second, func() bool {
		bk, ok := b.store.book(key)
		return ok && !bk.Visible()
	})
	fromB := openLink(c, b)
	defer fromB.cut()
	bLast, _ := b.store.Watch()
	poll.Until(t, "C to merge B's store to its end", 10*time.Second, func() bool {
		_, seq, _ := c.store.Cursor(context.Background(), DeviceIDOf(b.id))
		return seq >= bLast
	})
	if bk, ok := c.store.book(key); !ok || bk.Visible() {
		t.Errorf("restored C still shows the book every device collected (present %v): B skipped the delete it brought back", ok)
	}
}
