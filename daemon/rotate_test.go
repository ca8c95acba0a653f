package daemon

import (
	"encoding/hex"
	"testing"
	"time"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/internal/poll"
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
func (d *testDaemon) previousNodes() int { return d.lib.Restricted() }

// restart closes d and starts it again on the same data dir, listening on
// the same peer address (as a device with a fixed --listen port does).
func restart(t *testing.T, d *testDaemon, down func()) *testDaemon {
	t.Helper()
	cfg := d.cfg
	cfg.Listen = nil
	for _, a := range d.lib.ListenAddrs() {
		cfg.Listen = append(cfg.Listen, a.String())
	}
	d.client.Close()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	down()
	nd, err := Start(ctxT(t), cfg)
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
	// Two dials more each: a keeper dials its peer one dial at a time, so
	// the first of the copy's two (it knows only A) was refused before the
	// second started; B, which lost A and C less than reconnectWindow
	// ago, redials each every second meanwhile. The copy's dials wait out
	// a backoff that doubles, so a third would take longer than the two
	// before it together.
	bDials, eDials := b.nodeStats().DialAttempts, e.nodeStats().DialAttempts
	poll.Until(t, "B and the copy to dial twice more", 60*time.Second, func() bool {
		return b.nodeStats().DialAttempts >= bDials+2 && e.nodeStats().DialAttempts >= eDials+2
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
