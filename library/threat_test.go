package library

import (
	"context"
	"errors"
	"fmt"
	"github.com/danyue/danyue/internal/testport"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	libp2ppeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multiaddr"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
	"github.com/danyue/danyue/peer"
)

// The threat model (doc.go), a test for each line. Devices are libraries
// in this process on loopback, without mDNS: they meet as static peers.

// offline is a device whose store outlives its library: stopped and
// started again on the same data dir, as a device that goes offline.
type offline struct {
	t    *testing.T
	dir  string
	name string
	l    *Library
	stop func()
}

func newOffline(t *testing.T, name string) *offline {
	o := &offline{t: t, dir: t.TempDir(), name: name}
	t.Cleanup(func() {
		if o.stop != nil {
			o.stop()
		}
	})
	return o
}

// start opens and starts the device's library on its data dir.
func (o *offline) start(mod func(*Config)) *Library {
	o.t.Helper()
	cfg := testConfig(o.t, o.dir, o.name)
	if mod != nil {
		mod(&cfg)
	}
	l, err := Open(ctxT(o.t), cfg)
	if err != nil {
		cfg.Store.Close()
		o.t.Fatalf("open %s: %v", o.name, err)
	}
	o.l = l
	o.stop = func() {
		if err := l.Close(); err != nil {
			o.t.Errorf("close %s: %v", o.name, err)
		}
		if err := cfg.Store.Close(); err != nil {
			o.t.Errorf("close %s's store: %v", o.name, err)
		}
		o.l, o.stop = nil, nil
	}
	if err := l.Start(ctxT(o.t)); err != nil {
		o.t.Fatalf("start %s: %v", o.name, err)
	}
	return l
}

func (o *offline) halt() {
	o.t.Helper()
	o.stop()
}

// hasBook reports whether l holds a position of key.
func hasBook(t *testing.T, l *Library, key crdt.BookKey) bool {
	b, err := l.Book(ctxT(t), key)
	return err == nil && b.Position.Char > 0
}

// peerInfo returns what l knows of o as a peer.
func peerInfo(l, o *Library) (peer.PeerInfo, bool) {
	for _, p := range l.Peers() {
		if p.ID == o.PeerID() {
			return p, true
		}
	}
	return peer.PeerInfo{}, false
}

// loopbackPort returns a loopback listen address on a port nothing
// listens on now, for a device that must come back where it was.
func loopbackPort(t *testing.T) []multiaddr.Multiaddr {
	return []multiaddr.Multiaddr{multiaddr.StringCast(fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", testport.Loopback(t)))}
}

// joinSoon joins l with code, waiting at most a moment for the inviter,
// which may be out of reach.
func joinSoon(t *testing.T, l *Library, code string) {
	ctx, cancel := context.WithTimeout(ctxT(t), time.Second)
	defer cancel()
	if _, err := l.Join(ctx, code, ""); err != nil {
		t.Logf("%s: join: %v", l.Name(), err)
	}
}

var (
	bookAfterForget = crdt.MustParseBookKey("md5:00000000000000000000000000000a47")
	bookOfC         = crdt.MustParseBookKey("md5:00000000000000000000000000000c47")
)

// Offline member (issue 47): A, B, C are a library; A, B and C each make a
// long code; C goes offline; A forgets B (the secret rotates) and writes a
// book. X joins with A's code (A refuses: the secret it carries is
// superseded), Y with the forgotten B's (B redeems it, as a thief holding B
// would). A goes offline too, so that nothing of it (its node on the old
// secret redials C's old address) reaches C early. C comes back, meets X
// and Y, and Z joins with C's own code then; then A is back, C meets A's
// node on the old secret and is brought over. None of X, Y, Z reads the book written after the forget,
// and neither A nor C holds any of them for a member: C adds nobody from a
// hello, and what it added during the partition (Z) it drops when it
// moves.
func TestOfflineMemberBringsNobodyBack(t *testing.T) {
	ctx := ctxT(t)
	offA := newOffline(t, "A")
	a, b := offA.start(nil), openLibrary(t, "B", nil)
	c := newOffline(t, "C")
	listenC := loopbackPort(t)
	c.start(func(cfg *Config) { cfg.Listen = listenC })
	joinByCode(t, b, a)
	joinByCode(t, c.l, a)
	poll.Until(t, "A, B and C to hold each other for members", 2*time.Minute, func() bool {
		return a.members.current(b.Self()) && a.members.current(c.l.Self()) && c.l.members.current(b.Self()) && b.members.current(c.l.Self())
	})
	codeA, codeB, codeC := mustDo(a.Invite())(t), mustDo(b.Invite())(t), mustDo(c.l.Invite())(t)
	cID := c.l.Self()
	c.halt()

	if _, err := a.Forget(ctx, b.Self().String()); err != nil {
		t.Fatal(err)
	}
	mustDo(a.SetPosition(ctx, bookAfterForget, 47, 0.47, "written after the forget"))(t)
	x, y, z := openLibrary(t, "X", nil), openLibrary(t, "Y", nil), openLibrary(t, "Z", nil)
	joinSoon(t, x, codeA)
	joinSoon(t, y, codeB)
	offA.halt()

	// C comes back among the newcomers, A offline; Z joins with C's code,
	// which C made before the forget.
	peers := append(append(x.Addrs(), y.Addrs()...), b.Addrs()...)
	c.start(func(cfg *Config) { cfg.Listen, cfg.Peers = listenC, peers })
	joinSoon(t, z, codeC)
	poll.Until(t, "C to meet X, Y and Z, and to add Z", 2*time.Minute, func() bool {
		for _, n := range []*Library{x, y} {
			// Met, and either pulled from (it holds the device for a
			// member) or given nothing.
			p, _ := peerInfo(c.l, n)
			if !p.Connected || (p.Name == "" && c.l.members.current(n.Self())) {
				return false
			}
		}
		return c.l.members.current(z.Self())
	})
	mustDo(c.l.SetPosition(ctx, bookOfC, 3, 0.03, "written by C when back"))(t)
	a = offA.start(nil)
	if err := c.l.net.current().Connect(ctx, a.net.previousAddrs()); err != nil {
		t.Logf("C dials A's node on the old secret: %v", err)
	}
	poll.Until(t, "C to be brought over, and A to have what C wrote", 2*time.Minute, func() bool {
		return hasBook(t, c.l, bookAfterForget) && hasBook(t, a, bookOfC)
	})
	// Everything C knew of the newcomers when it wrote its book has
	// reached A.
	for _, n := range []*Library{x, y, z} {
		if a.members.current(n.Self()) {
			t.Errorf("A holds %s for a member", n.Name())
		}
		if c.l.members.current(n.Self()) {
			t.Errorf("C holds %s for a member after it was brought over", n.Name())
		}
		if hasBook(t, n, bookAfterForget) {
			t.Errorf("%s read the book written after the forget", n.Name())
		}
	}
	if !a.members.current(cID) {
		t.Error("A does not hold C for a member")
	}
	if st := c.l.Standing(z.Self()); st.Member || !strings.Contains(st.Note, "pair it again") {
		t.Errorf("C's standing of Z, added during the partition: %+v", st)
	}
}

// Old code: a long code makes one device a member, once, at the device
// that made it; a second device that joins with it holds the secret and is
// told why it is not a member, and is given nothing. A cancelled code
// makes nobody a member.
func TestLongCodeWorksOnce(t *testing.T) {
	ctx := ctxT(t)
	a := openLibrary(t, "A", nil)
	book := crdt.MustParseBookKey("md5:00000000000000000000000000000c0d")
	mustDo(a.SetPosition(ctx, book, 5, 0.05, "A's book"))(t)
	code := mustDo(a.Invite())(t)
	b, c := openLibrary(t, "B", nil), openLibrary(t, "C", nil)
	if _, err := b.Join(ctx, code, ""); err != nil {
		t.Fatalf("the first join with the code: %v", err)
	}
	poll.Until(t, "A to hold B for a member, and B to have A's book", 2*time.Minute, func() bool {
		return a.members.current(b.Self()) && hasBook(t, b, book)
	})
	_, err := c.Join(ctx, code, "")
	if !errors.Is(err, ErrNotAdmitted) || !strings.Contains(err.Error(), "already used") {
		t.Fatalf("the second join with the code: %v, want a refusal saying it was used", err)
	}
	cancelled, inv := mustDo2(a.NewInvite(time.Hour))(t)
	if _, err := a.CancelLongInvite(inv.ID); err != nil {
		t.Fatal(err)
	}
	d := openLibrary(t, "D", nil)
	if _, err := d.Join(ctx, cancelled, ""); !errors.Is(err, ErrNotAdmitted) || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("a join with a cancelled code: %v, want a refusal saying so", err)
	}
	for _, n := range []*Library{c, d} {
		if a.members.current(n.Self()) || b.members.current(n.Self()) {
			t.Errorf("%s is held for a member", n.Name())
		}
		if hasBook(t, n, book) {
			t.Errorf("%s was given A's book", n.Name())
		}
	}
}

// Copy of a data dir: a copy of a forgotten device's data dir, started
// after the forget, is the forgotten device: refused, and given nothing
// written after it.
func TestCopyOfAForgottenDevice(t *testing.T) {
	ctx := ctxT(t)
	a := openLibrary(t, "A", nil)
	b := newOffline(t, "B")
	b.start(nil)
	joinByCode(t, b.l, a)
	poll.Until(t, "A to hold B for a member", 2*time.Minute, func() bool { return a.members.current(b.l.Self()) })
	bID := b.l.Self()
	b.halt()
	copyDir := t.TempDir()
	if err := os.CopyFS(copyDir, os.DirFS(b.dir)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Forget(ctx, bID.String()); err != nil {
		t.Fatal(err)
	}
	mustDo(a.SetPosition(ctx, bookAfterForget, 47, 0.47, "written after the forget"))(t)
	stolen := &offline{t: t, dir: copyDir, name: "copy of B"}
	t.Cleanup(func() {
		if stolen.stop != nil {
			stolen.stop()
		}
	})
	cp := stolen.start(func(cfg *Config) { cfg.Peers = append(a.Addrs(), a.net.previousAddrs()...) })
	if cp.Self() != bID {
		t.Fatalf("the copy is device %s, not %s", cp.Self(), bID)
	}
	// A's nodes see the copy dial them and refuse it; nothing is given.
	poll.Until(t, "A to refuse the copy", 2*time.Minute, func() bool {
		p, ok := peerInfo(cp, a)
		return ok && !p.Connected && p.LastError != ""
	})
	if hasBook(t, cp, bookAfterForget) {
		t.Error("the copy read the book written after the forget")
	}
	if library(cp).Secret == library(a).Secret {
		t.Error("the copy holds the library's current secret")
	}
	if a.members.current(bID) {
		t.Error("A holds the forgotten device for a member")
	}
}

// Rogue member: a summary one member presents for another counts only if
// the other signed it (it could make every device collect tombstones the
// other does not hold, or, stamped far ahead, hold collection back for
// good); the other's own summary counts, and so does its signed summary
// relayed by any member.
func TestRelayedSummaryCountsOnlySigned(t *testing.T) {
	d := openLibrary(t, "A", nil)
	ctx := ctxT(t)
	rogueKey, rogue := deviceKey(t)
	victimKey, victim := deviceKey(t)
	for _, id := range []crdt.DeviceID{rogue, victim} {
		if err := d.addMember(ctx, id, "test"); err != nil {
			t.Fatal(err)
		}
	}
	wall := uint64(d.cfg.Now().UnixMilli())
	summary := func(wall uint64, seq uint64, key crypto.PrivKey) crdt.Summary {
		s := crdt.Summary{Device: victim, Epoch: 7, Seq: 3, At: crdt.Timestamp{Wall: wall, Device: victim},
			Cursors: []crdt.Cursor{{Device: d.Self(), Epoch: d.store.Epoch(), Seq: seq}}}
		if key != nil {
			s.Sig = mustDo(key.Sign(mustDo(s.SigningBytes())(t)))(t)
			s.Key = mustDo(crypto.MarshalPublicKey(key.GetPublic()))(t)
		}
		return s
	}
	known := func() (crdt.Summary, bool) {
		d.coll.mu.Lock()
		defer d.coll.mu.Unlock()
		s, ok := d.coll.known[victim]
		return s, ok
	}
	yearAhead := wall + 365*24*3600*1000
	tampered := summary(yearAhead, 1, victimKey)
	tampered.Cursors[0].Seq = 1 << 40
	for name, s := range map[string]crdt.Summary{
		"unsigned":            summary(yearAhead, 1<<40, nil),
		"signed by the rogue": summary(yearAhead, 1<<40, rogueKey),
		"tampered with":       tampered,
		"signature of no key": func() crdt.Summary { s := summary(yearAhead, 1<<40, victimKey); s.Key = []byte{1, 2, 3}; return s }(),
	} {
		d.onSummaries(rogue, []crdt.Summary{s})
		if got, ok := known(); ok {
			t.Fatalf("a summary the rogue member presented for another, %s, counts: %+v", name, got)
		}
	}
	d.onSummaries(victim, []crdt.Summary{summary(wall, 0, nil)})
	if s, ok := known(); !ok || s.At.Wall != wall {
		t.Fatalf("the member's own summary: %+v, %v; want it kept", s, ok)
	}
	d.onSummaries(rogue, []crdt.Summary{summary(wall+1, 2, victimKey)})
	if s, ok := known(); !ok || s.At.Wall != wall+1 {
		t.Fatalf("the member's signed summary, relayed: %+v, %v; want it kept", s, ok)
	}
}

// deviceKey makes a device identity and its device id.
func deviceKey(t testing.TB) (crypto.PrivKey, crdt.DeviceID) {
	t.Helper()
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	return key, peer.DeviceIDOf(mustDo(libp2ppeer.IDFromPrivateKey(key))(t))
}
