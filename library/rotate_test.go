package library

import (
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
	"github.com/danyue/danyue/peer"
	"github.com/danyue/danyue/store"
)

// library returns l's current library secret.
func library(l *Library) store.Library {
	lib, _ := l.store.Library()
	return lib
}

// sameSecret reports whether two devices hold the same secret of the same
// epoch (whoever handed it to each).
func sameSecret(a, b store.Library) bool {
	return a.ID == b.ID && a.Secret == b.Secret && a.Epoch == b.Epoch
}

// connected reports whether l is connected to o.
func connected(l, o *Library) bool {
	for _, p := range l.Peers() {
		if p.ID == o.PeerID() && p.Connected {
			return true
		}
	}
	return false
}

// joinByCode joins l to the library of inviter by its long invite code.
func joinByCode(t *testing.T, l, inviter *Library) {
	t.Helper()
	if _, err := l.Join(ctxT(t), mustDo(inviter.Invite())(t), ""); err != nil {
		t.Fatalf("join: %v", err)
	}
}

// Issue 15: two devices that rotate at the same moment, right after one
// joined the other's library, make two secrets for one epoch; they
// converge on the one that supersedes, whichever way the offers cross, and
// keep syncing.
func TestConcurrentRotationsConverge(t *testing.T) {
	a := openLibrary(t, "laptop", nil)
	c := openLibrary(t, "tablet", nil)
	joinByCode(t, c, a)
	// Devices that never connected cannot hand each other a secret: with
	// mDNS off, neither knows where the other's node on the old secret
	// listens. Once connected, each takes the other's secret: the device
	// that joined knows its inviter as a member from the join on, before
	// the inviter's own record reaches it, and the inviter parks an offer
	// of the joiner's until the joiner's membership arrives.
	poll.Until(t, "A and C to connect", 10*time.Second, func() bool { return connected(a, c) && connected(c, a) })
	old := library(a)
	errs := make(chan error, 2)
	for _, d := range []*Library{a, c} {
		go func() { errs <- d.rotate(ctxT(t), "test") }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, "A and C to agree on one secret", 60*time.Second, func() bool {
		la, lc := library(a), library(c)
		return sameSecret(la, lc) && la.Epoch == old.Epoch+1
	})
	key := crdt.MustParseBookKey("md5:0cc175b9c0f1b6a831c399e269772661")
	mustDo(c.SetPosition(ctxT(t), key, 9, 0.01, "tablet's book"))(t)
	poll.Until(t, "A to receive C's book", 20*time.Second, func() bool {
		b, err := a.Book(ctxT(t), key)
		return err == nil && b.Position.Char == 9
	})
}

// The devices of the rekey tests: a member, a device not known, and a
// forgotten member.
const (
	rekeyMember   crdt.DeviceID = 0x1111
	rekeyStranger crdt.DeviceID = 0x2222
	rekeyGone     crdt.DeviceID = 0x3333
)

// rekeyLibrary opens a library whose other members are rekeyMember and
// rekeyGone, which it forgot.
func rekeyLibrary(t *testing.T) *Library {
	t.Helper()
	d := openLibrary(t, "laptop", nil)
	ctx := ctxT(t)
	for _, id := range []crdt.DeviceID{rekeyMember, rekeyGone} {
		if err := d.addMember(ctx, id, "test"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Forget(ctx, rekeyGone.String()); err != nil {
		t.Fatal(err)
	}
	return d
}

func secretOf(b byte) [32]byte { return [32]byte{b, 1, 2, 3} }

func offerOf(l store.Library) peer.Rekey { return peer.Rekey{Library: peerLibrary(l)} }

// removeMember writes the removal of device id, as if synced from device
// by.
func removeMember(t *testing.T, d *Library, id, by crdt.DeviceID) {
	t.Helper()
	lib := d.members.library()
	if _, err := d.write(ctxT(t), func(at crdt.Timestamp) (crdt.Entry, error) {
		at.Device = by
		return crdt.RemoveMember(lib, id, at, d.members.epoch())
	}); err != nil {
		t.Fatal(err)
	}
}

// A device takes a new secret only from a current member, never one that
// is implausibly far ahead, and hears of the secret it has only from a
// member, which cannot make it another epoch's.
func TestRekeyPolicy(t *testing.T) {
	d := rekeyLibrary(t)
	cur := library(d)
	for _, tc := range []struct {
		name string
		from crdt.DeviceID
		lib  store.Library
		want bool
	}{
		{"another library", rekeyMember, store.Library{ID: [16]byte{9}, Secret: secretOf(1), Epoch: cur.Epoch + 1}, false},
		{"an older epoch", rekeyMember, store.Library{ID: cur.ID, Secret: secretOf(2), Epoch: cur.Epoch - 1}, false},
		{"from a stranger", rekeyStranger, store.Library{ID: cur.ID, Secret: secretOf(3), Epoch: cur.Epoch + 1}, false},
		{"from a removed device", rekeyGone, store.Library{ID: cur.ID, Secret: secretOf(4), Epoch: cur.Epoch + 1}, false},
		{"too far ahead", rekeyMember, store.Library{ID: cur.ID, Secret: secretOf(5), Epoch: cur.Epoch + maxEpochJump + 1}, false},
		{"the same secret, from a stranger", rekeyStranger, store.Library{ID: cur.ID, Secret: cur.Secret, Epoch: cur.Epoch}, false},
		{"the same secret, from a member", rekeyMember, store.Library{ID: cur.ID, Secret: cur.Secret, Epoch: cur.Epoch}, true},
		{"the same secret of another epoch", rekeyMember, store.Library{ID: cur.ID, Secret: cur.Secret, Epoch: cur.Epoch + 100}, false},
	} {
		if got := d.onRekey(tc.from, offerOf(tc.lib)); got != tc.want {
			t.Errorf("%s: took %v, want %v", tc.name, got, tc.want)
		}
		if got := library(d); got != cur {
			t.Fatalf("%s: the library became %+v", tc.name, got)
		}
	}
}

// A new secret from a device whose membership arrives after its offer
// (right after a pairing) is kept, and taken once it is a member; one from
// a device that is then removed is forgotten, never taken.
func TestRekeyFromLateMembers(t *testing.T) {
	d := rekeyLibrary(t)
	cur := library(d)
	late := store.Library{ID: cur.ID, Secret: secretOf(7), Epoch: cur.Epoch + 1}
	if d.onRekey(rekeyStranger, offerOf(late)) {
		t.Fatal("a stranger's new secret was taken at once")
	}
	if got := library(d); got != cur {
		t.Fatalf("a stranger's offer moved the library to %+v", got)
	}
	if err := d.addMember(ctxT(t), rekeyStranger, "test"); err != nil {
		t.Fatal(err)
	}
	late.From = uint64(rekeyStranger)
	poll.Until(t, "the device to take the secret offered before its sender was a member", 10*time.Second, func() bool { return library(d) == late })
	cur = late
	removedLater := crdt.DeviceID(0x4444)
	if d.onRekey(removedLater, offerOf(store.Library{ID: cur.ID, Secret: secretOf(8), Epoch: cur.Epoch + 1})) {
		t.Fatal("a stranger's new secret was taken at once")
	}
	removeMember(t, d, removedLater, d.Self())
	poll.Until(t, "the removed device's offer to be forgotten", 10*time.Second, func() bool {
		return !d.parked.has(removedLater)
	})
	if got := library(d); got != cur {
		t.Fatalf("a removed device's offer moved the library to %+v", got)
	}
}

// A secret handed over by a member later found removed is rotated again.
func TestRekeyFromRemovedMember(t *testing.T) {
	d := rekeyLibrary(t)
	cur := library(d)
	next := store.Library{ID: cur.ID, Secret: secretOf(6), Epoch: cur.Epoch + 1}
	if !d.onRekey(rekeyMember, offerOf(next)) {
		t.Fatal("a member's new secret was refused")
	}
	next.From = uint64(rekeyMember)
	poll.Until(t, "the device to take the member's secret", 10*time.Second, func() bool { return library(d) == next })
	// That member turns out to have been removed (the record, as if
	// synced from another device): the secret rotates again.
	removeMember(t, d, rekeyMember, rekeyStranger)
	poll.Until(t, "a rotation away from the removed member's secret", 10*time.Second, func() bool {
		got := library(d)
		return got.Epoch > next.Epoch && got.From == 0
	})
}

// A node being replaced by one on a new secret still meets devices on the
// old one: they do not count as brought over, and the restricted nodes
// that would bring them stay until they are.
func TestOldNodeDoesNotCountDevicesAsBroughtOver(t *testing.T) {
	d := openLibrary(t, "laptop", nil)
	ctx := ctxT(t)
	m := crdt.DeviceID(0x1111)
	if err := d.addMember(ctx, m, "test"); err != nil {
		t.Fatal(err)
	}
	old := library(d)
	if err := d.rotate(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	if d.Restricted() != 1 {
		t.Fatalf("%d restricted nodes after a rotation, want 1", d.Restricted())
	}
	seen := func() bool { return d.net.seen(m) }
	d.mainOffer(peerLibrary(old), m)
	if seen() {
		t.Fatal("a device met on the old secret counts as on the new one")
	}
	d.mainOffer(peerLibrary(library(d)), m)
	if !seen() {
		t.Fatal("a device met on the current secret does not count")
	}
	poll.Until(t, "the restricted node to close once every member is on the new secret", 10*time.Second, func() bool { return d.Restricted() == 0 })
}

// Issue 15: a device that leaves is in a library of its own; the member
// that learns of the leave rotates the secret, and the device that left
// knows none of it.
func TestLeaveRotates(t *testing.T) {
	a, b := openLibrary(t, "laptop", nil), openLibrary(t, "phone", nil)
	joinByCode(t, b, a)
	poll.Until(t, "the two to connect", 10*time.Second, func() bool { return connected(a, b) && connected(b, a) })
	old := library(a)
	left := mustDo(b.Leave(ctxT(t)))(t)
	if !left.Delivered || left.Library == a.ID() || b.ID() != left.Library {
		t.Fatalf("leave gave %+v, the phone is in %x, the laptop in %x", left, b.ID(), a.ID())
	}
	poll.Until(t, "the laptop to learn that the phone left", 10*time.Second, func() bool {
		m, _ := a.Member(b.Self())
		return m.IsRemoved() && m.Removed.Device == b.Self()
	})
	poll.Until(t, "the laptop to rotate its secret", 10*time.Second, func() bool {
		got := library(a)
		return got.Epoch > old.Epoch && got.Secret != old.Secret
	})
	if lb := library(b); lb.Secret == library(a).Secret || lb.ID == old.ID {
		t.Error("the device that left knows the library's secret")
	}
}

// A member that merges the removal and drops the leaving device before
// Leave first looks still counts as told: Leave takes the members it is
// connected to before it writes.
func TestLeaveDroppedAtOnce(t *testing.T) {
	a, b := openLibrary(t, "laptop", nil), openLibrary(t, "phone", nil)
	joinByCode(t, b, a)
	poll.Until(t, "the two to connect", 10*time.Second, func() bool { return connected(a, b) && connected(b, a) })
	b.leaveWritten = func() {
		poll.Until(t, "the laptop to drop the phone", 10*time.Second, func() bool { return !connected(b, a) })
	}
	if left := mustDo(b.Leave(ctxT(t)))(t); !left.Delivered {
		t.Fatalf("leave gave %+v, want it delivered: the laptop dropped the phone on merging its removal", left)
	}
}
