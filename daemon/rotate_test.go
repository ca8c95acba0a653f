package daemon

import (
	"context"
	"encoding/hex"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/internal/poll"
	"github.com/danyue/danyue/peer"
	"github.com/danyue/danyue/store"
)

const keyC = "md5:e2fc714c4727ee9395f324cd2e7f331f"

// library returns d's current library secret.
func (d *testDaemon) library() store.Library {
	l, _ := d.store.Library()
	return l
}

// sameSecret reports whether two devices hold the same secret of the same
// epoch (whoever handed it to each).
func sameSecret(a, b store.Library) bool {
	return a.ID == b.ID && a.Secret == b.Secret && a.Epoch == b.Epoch
}

// previousNodes returns how many restricted nodes d runs.
func (d *testDaemon) previousNodes() int { return d.net.previousCount() }

// restart closes d and starts it again on the same data dir, listening on
// the same peer address (as a device with a fixed --listen port does).
func restart(t *testing.T, d *testDaemon, down func()) *testDaemon {
	t.Helper()
	cfg := d.cfg
	cfg.Listen = nil
	for _, a := range d.net.current().ListenAddrs() {
		cfg.Listen = append(cfg.Listen, a.String())
	}
	d.client.Close()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	down()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nd, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("restart %s: %v", cfg.Name, err)
	}
	return adopt(t, nd)
}

// threeDevices starts three daemons named names, pairs the second and the
// third into the first's library, and waits until the third knows the
// second by its name (which its own record brings, after the membership
// its inviter wrote), as the tests name it.
func threeDevices(t *testing.T, names [3]string) (a, b, c *testDaemon) {
	t.Helper()
	a, b, c = startPairable(t, names[0], nil), startPairable(t, names[1], nil), startPairable(t, names[2], nil)
	pairDevices(t, a, b)
	pairDevices(t, a, c)
	bID := b.Device().String()
	poll.Until(t, "the third device to know the second by name", 10*time.Second, func() bool {
		m, ok := member(t, c, bID)
		return ok && m.Name == names[1]
	})
	return a, b, c
}

// noConnectedPeers reports whether d is connected to nobody.
func noConnectedPeers(t *testing.T, d *testDaemon) bool {
	for _, p := range mustDo(d.client.Peers(ctxT(t)))(t) {
		if p.Connected {
			return false
		}
	}
	return true
}

// Issue 15: forgetting a device rotates the library secret. C forgets B
// while A is offline; when A comes back it meets C's node on the old
// secret, is handed the new one without pairing again, and A and C keep
// syncing. B, which kept the old secret, exchanges nothing with them, nor
// does a new identity made with B's secret (an old invite code), and C's
// node on the old secret closes once every member has the new one.
func TestForgetRotatesTheSecret(t *testing.T) {
	a, b, c := threeDevices(t, [3]string{"laptop", "lost phone", "tablet"})
	ctx := ctxT(t)
	bID, cID := b.Device().String(), c.Device().String()
	poll.Until(t, "A to know C", 10*time.Second, func() bool {
		mc, ok := member(t, a, cID)
		return ok && mc.Connected
	})
	oldCode := mustDo(a.client.Invite(ctx))(t)
	old := c.library()

	// A goes offline; C forgets B meanwhile.
	var forgotten api.Member
	a = restart(t, a, func() {
		forgotten = mustDo(c.client.Forget(ctx, "lost phone"))(t)
		if got := c.library(); got.Epoch != old.Epoch+1 || got.Secret == old.Secret || got.ID != old.ID {
			t.Fatalf("after forget C's library is %+v, want epoch %d and a new secret", got.Epoch, old.Epoch+1)
		}
		if c.previousNodes() != 1 {
			t.Fatalf("C runs %d nodes on the previous secret, want 1", c.previousNodes())
		}
	})
	if !forgotten.Removed {
		t.Fatalf("forget answered %+v", forgotten)
	}
	// A, back on the old secret, is brought over by C's node on it.
	poll.Until(t, "A to take C's new secret", 60*time.Second, func() bool { return sameSecret(a.library(), c.library()) })
	mustDo(c.client.SetPosition(ctx, keyA, 9, 0.01, "tablet's book"))(t)
	mustDo(a.client.SetPosition(ctx, keyB, 7, 0.01, "laptop's book"))(t)
	waitBook(t, a.client, keyA, "A to receive C's book", func(bk api.Book) bool { return bk.Position != nil })
	waitBook(t, c.client, keyB, "C to receive A's book", func(bk api.Book) bool { return bk.Position != nil })
	poll.Until(t, "A to learn that B was forgotten", 10*time.Second, func() bool { m, _ := member(t, a, bID); return m.Removed })
	poll.Until(t, "C to close its node on the old secret", 30*time.Second, func() bool {
		return c.previousNodes() == 0 && len(c.store.PreviousLibraries()) == 0
	})

	// B keeps the old secret and redials; nothing crosses either way.
	if got := b.library(); got.Secret != old.Secret {
		t.Fatal("the forgotten device learned the new secret")
	}
	mustDo(b.client.SetPosition(ctx, keyC, 3, 0.01, "written after being forgotten"))(t)
	// A fresh identity with B's secret, by the old invite code.
	e := startDaemon(t, func(cfg *Config) { cfg.Name = "copy of the phone" })
	mustDo(e.client.Join(ctx, oldCode))(t)
	mustDo(e.client.SetPosition(ctx, keyC, 4, 0.01, "a copy's book"))(t)
	bDials, eDials := b.nodeStats().DialAttempts, e.nodeStats().DialAttempts
	poll.Until(t, "B and the copy to dial three times more", 60*time.Second, func() bool {
		return b.nodeStats().DialAttempts >= bDials+3 && e.nodeStats().DialAttempts >= eDials+3
	})
	for _, d := range []*testDaemon{a, c} {
		if _, err := d.client.Book(ctx, keyC); err == nil {
			t.Errorf("%s received a book from the forgotten device or its copy", d.cfg.Name)
		}
		if _, ok := member(t, d, e.Device().String()); ok {
			t.Errorf("%s lists the copy as a member", d.cfg.Name)
		}
	}
	for _, d := range []*testDaemon{b, e} {
		if !noConnectedPeers(t, d) {
			t.Errorf("%s is connected to a device of the library", d.cfg.Name)
		}
		if _, err := d.client.Book(ctx, keyB); err == nil {
			t.Errorf("%s received a book written after the rotation", d.cfg.Name)
		}
	}
}

// Issue 15: a device that leaves removes itself, and the members that
// learn of it rotate the secret: they converge on one new secret (even if
// both rotate at once) and keep syncing, while the device that left is in
// a library of its own and knows none of it.
func TestLeaveRotatesTheSecret(t *testing.T) {
	a, b, c := threeDevices(t, [3]string{"laptop", "old phone", "tablet"})
	ctx := ctxT(t)
	bID := b.Device().String()
	old := a.library()

	left := mustDo(b.client.Leave(ctx))(t)
	if !left.Delivered || b.library().ID == old.ID || left.Library.ID == hex.EncodeToString(old.ID[:]) {
		t.Fatalf("leave answered %+v; B's library %x, the old one %x", left, b.library().ID, old.ID)
	}
	for _, d := range []*testDaemon{a, c} {
		poll.Until(t, d.cfg.Name+" to learn that the phone left", 10*time.Second, func() bool {
			m, _ := member(t, d, bID)
			return m.Removed && m.RemovedBy != nil && *m.RemovedBy == bID
		})
	}
	poll.Until(t, "A and C to agree on a new secret", 30*time.Second, func() bool {
		la, lc := a.library(), c.library()
		return sameSecret(la, lc) && la.Epoch > old.Epoch && la.Secret != old.Secret
	})
	mustDo(c.client.SetPosition(ctx, keyA, 9, 0.01, "tablet's book"))(t)
	waitBook(t, a.client, keyA, "A to receive C's book", func(bk api.Book) bool { return bk.Position != nil })
	if _, err := b.client.Book(ctx, keyA); err == nil {
		t.Fatal("the device that left received a book written after")
	}
	// A device paired now is handed the secret by the short code, and
	// learns its epoch from the first member it meets.
	d := startPairable(t, "new phone", nil)
	pairDevices(t, a, d)
	poll.Until(t, "the new device to learn the epoch", 10*time.Second, func() bool { return sameSecret(d.library(), a.library()) })
	// Leaving again leaves the library of its own, which has no one else.
	if again := mustDo(b.client.Leave(ctx))(t); again.Delivered {
		t.Errorf("a leave with nobody to tell says delivered")
	}
}

// Issue 15: two devices that rotate at the same moment, right after they
// paired, make two secrets for one epoch; they converge on the one that
// supersedes, whichever way the offers cross, and keep syncing.
func TestConcurrentRotationsConverge(t *testing.T) {
	a := startPairable(t, "laptop", nil)
	c := startPairable(t, "tablet", nil)
	pairDevices(t, a, c)
	// Devices that never connected cannot hand each other a secret: with
	// mDNS off, neither knows where the other's node on the old secret
	// listens. Once connected, each takes the other's secret at once: the
	// device that paired knows its inviter as a member from the pairing on,
	// before the inviter's own record reaches it.
	poll.Until(t, "A and C to connect", 10*time.Second, func() bool {
		return len(a.nodeConns(c)) > 0 && len(c.nodeConns(a)) > 0
	})
	old := a.library()
	errs := make(chan error, 2)
	for _, d := range []*testDaemon{a, c} {
		go func() { errs <- d.rotate(context.Background(), "test") }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, "A and C to agree on one secret", 60*time.Second, func() bool {
		la, lc := a.library(), c.library()
		return sameSecret(la, lc) && la.Epoch == old.Epoch+1
	})
	ctx := ctxT(t)
	mustDo(c.client.SetPosition(ctx, keyA, 9, 0.01, "tablet's book"))(t)
	waitBook(t, a.client, keyA, "A to receive C's book", func(bk api.Book) bool { return bk.Position != nil })
}

// A device takes a new secret only from a current member (one offered
// before its sender's membership arrived is taken when it arrives), never
// one that is implausibly far ahead, and learns the epoch of the secret it
// has from anyone on it; a secret handed over by a device later found
// removed is rotated again.
func TestRekeyPolicy(t *testing.T) {
	d := startDaemon(t, nil)
	ctx := ctxT(t)
	member, stranger, gone := crdt.DeviceID(0x1111), crdt.DeviceID(0x2222), crdt.DeviceID(0x3333)
	for _, id := range []crdt.DeviceID{member, gone} {
		if err := d.addMember(ctx, id, "test"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.forget(ctx, gone.String()); err != nil {
		t.Fatal(err)
	}
	cur := d.library()
	secret := func(b byte) [32]byte { return [32]byte{b, 1, 2, 3} }
	offer := func(l store.Library) peer.Rekey { return peer.Rekey{Library: peerLibrary(l)} }
	for _, tc := range []struct {
		name string
		from crdt.DeviceID
		lib  store.Library
		want bool
	}{
		{"another library", member, store.Library{ID: [16]byte{9}, Secret: secret(1), Epoch: cur.Epoch + 1}, false},
		{"an older epoch", member, store.Library{ID: cur.ID, Secret: secret(2), Epoch: cur.Epoch - 1}, false},
		{"from a stranger", stranger, store.Library{ID: cur.ID, Secret: secret(3), Epoch: cur.Epoch + 1}, false},
		{"from a removed device", gone, store.Library{ID: cur.ID, Secret: secret(4), Epoch: cur.Epoch + 1}, false},
		{"too far ahead", member, store.Library{ID: cur.ID, Secret: secret(5), Epoch: cur.Epoch + maxEpochJump + 1}, false},
		{"the same secret", stranger, store.Library{ID: cur.ID, Secret: cur.Secret, Epoch: cur.Epoch}, true},
	} {
		if got := d.onRekey(tc.from, offer(tc.lib)); got != tc.want {
			t.Errorf("%s: took %v, want %v", tc.name, got, tc.want)
		}
		if got := d.library(); got != cur {
			t.Fatalf("%s: the library became %+v", tc.name, got)
		}
	}
	// The epoch of the secret it has, from anyone on it.
	if !d.onRekey(stranger, offer(store.Library{ID: cur.ID, Secret: cur.Secret, Epoch: cur.Epoch + 100})) {
		t.Fatal("the epoch of the current secret was refused")
	}
	cur.Epoch += 100
	if got := d.library(); got != cur {
		t.Fatalf("after learning the epoch: %+v, want %+v", got, cur)
	}
	// A new secret from a device whose membership arrives after its offer
	// (right after a pairing): kept, and taken once it is a member.
	late := store.Library{ID: cur.ID, Secret: secret(7), Epoch: cur.Epoch + 1}
	if d.onRekey(stranger, offer(late)) {
		t.Fatal("a stranger's new secret was taken at once")
	}
	if got := d.library(); got != cur {
		t.Fatalf("a stranger's offer moved the library to %+v", got)
	}
	if err := d.addMember(ctx, stranger, "test"); err != nil {
		t.Fatal(err)
	}
	late.From = uint64(stranger)
	poll.Until(t, "the device to take the secret offered before its sender was a member", 10*time.Second, func() bool { return d.library() == late })
	cur = late
	// One from a device that is then removed is forgotten, never taken.
	removedLater := crdt.DeviceID(0x4444)
	if d.onRekey(removedLater, offer(store.Library{ID: cur.ID, Secret: secret(8), Epoch: cur.Epoch + 1})) {
		t.Fatal("a stranger's new secret was taken at once")
	}
	if _, err := d.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) {
		return crdt.RemoveMember(d.members.library(), removedLater, at)
	}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the removed device's offer to be forgotten", 10*time.Second, func() bool {
		return !d.parked.has(removedLater)
	})
	if got := d.library(); got != cur {
		t.Fatalf("a removed device's offer moved the library to %+v", got)
	}
	// A new secret from a member.
	next := store.Library{ID: cur.ID, Secret: secret(6), Epoch: cur.Epoch + 1}
	if !d.onRekey(member, offer(next)) {
		t.Fatal("a member's new secret was refused")
	}
	next.From = uint64(member)
	poll.Until(t, "the device to take the member's secret", 10*time.Second, func() bool { return d.library() == next })
	// That member turns out to have been removed (the record, as if
	// synced from another device): the secret rotates again.
	lib := d.members.library()
	if _, err := d.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) {
		at.Device = stranger
		return crdt.RemoveMember(lib, member, at)
	}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "a rotation away from the removed member's secret", 10*time.Second, func() bool {
		got := d.library()
		return got.Epoch > next.Epoch && got.From == 0
	})
}

// A node being replaced by one on a new secret still meets devices on the
// old one: they do not count as brought over, and the restricted nodes
// that would bring them stay until they are.
func TestOldNodeDoesNotCountDevicesAsBroughtOver(t *testing.T) {
	d := startDaemon(t, nil)
	ctx := ctxT(t)
	m := crdt.DeviceID(0x1111)
	if err := d.addMember(ctx, m, "test"); err != nil {
		t.Fatal(err)
	}
	old := d.library()
	if err := d.rotate(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	if d.previousNodes() != 1 {
		t.Fatalf("%d restricted nodes after a rotation, want 1", d.previousNodes())
	}
	seen := func() bool { return d.net.seen(m) }
	d.mainOffer(peerLibrary(old), m)
	if seen() {
		t.Fatal("a device met on the old secret counts as on the new one")
	}
	d.mainOffer(peerLibrary(d.library()), m)
	if !seen() {
		t.Fatal("a device met on the current secret does not count")
	}
	poll.Until(t, "the restricted node to close once every member is on the new secret", 10*time.Second, func() bool { return d.previousNodes() == 0 })
}
