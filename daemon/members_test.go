package daemon

import (
	"context"
	"crypto/rand"
	"fmt"
	"github.com/danyue/danyue/internal/testport"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	lpeer "github.com/libp2p/go-libp2p/core/peer"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/internal/poll"
	"github.com/danyue/danyue/peer"
	"github.com/danyue/danyue/store"
)

// member returns the device id's entry in d's /v1/devices, if listed.
func member(t *testing.T, d *testDaemon, id string) (api.Member, bool) {
	t.Helper()
	list, err := d.client.Devices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list {
		if m.ID == id {
			return m, true
		}
	}
	return api.Member{}, false
}

// pairDevices pairs joiner into inviter's library by short code.
func pairDevices(t *testing.T, inviter, joiner *testDaemon) {
	t.Helper()
	ctx := ctxT(t)
	p := mustDo(inviter.client.Pair(ctx))(t)
	mustDo(joiner.client.JoinAt(ctx, p.Code, p.Addresses[0]))(t)
	if got := mustDo(inviter.client.Pairing(ctx, p.ID, true))(t); got.State != api.PairingPaired {
		t.Fatalf("pairing ended %+v", got)
	}
}

// Issue 15: a device that paired by short code is a member on both devices,
// added by its inviter, and each lists the other as connected.
func TestPairedDeviceIsAMember(t *testing.T) {
	a := startPairable(t, "laptop", nil)
	b := startPairable(t, "phone", nil)
	pairDevices(t, a, b)
	aID, bID := a.Device().String(), b.Device().String()
	// From the pairing on, before anything syncs: the joiner takes its
	// inviter's word (a new secret) only from a member, and holds the
	// inviter the pairing authenticated for one.
	if st := b.lib.Standing(a.Device()); !st.Member {
		t.Errorf("the joiner does not hold its inviter for a member once paired: %+v", st)
	}
	for _, d := range []*testDaemon{a, b} {
		poll.Until(t, "both devices listed on "+d.cfg.Name, 10*time.Second, func() bool {
			pa, okA := member(t, d, aID)
			pb, okB := member(t, d, bID)
			// The inviter added itself when it made the library, and
			// the joiner when it paired it.
			return okA && okB && pa.Name == "laptop" && pb.Name == "phone" && pb.AddedBy != nil && pa.AddedBy != nil && *pa.AddedBy == aID
		})
		list := mustDo(d.client.Devices(ctxT(t)))(t)
		if len(list) != 2 || !list[0].Self || list[0].ID != d.Device().String() {
			t.Fatalf("%s lists %+v, want two devices, itself first", d.cfg.Name, list)
		}
		pb, _ := member(t, d, bID)
		if *pb.AddedBy != aID || pb.AddedByName != "laptop" || pb.Removed || pb.AddedAt == nil {
			t.Errorf("%s: phone %+v, want added by laptop", d.cfg.Name, pb)
		}
		pa, _ := member(t, d, aID)
		if *pa.AddedBy != aID {
			t.Errorf("%s: laptop added by %s, want itself (it made the library)", d.cfg.Name, *pa.AddedBy)
		}
	}
	poll.Until(t, "each to list the other connected", 10*time.Second, func() bool {
		pa, _ := member(t, b, aID)
		pb, _ := member(t, a, bID)
		return pa.Connected && pb.Connected && pa.LastSeen != nil && pa.ClockOffsetMs != nil
	})
}

// Issue 15: a forgotten device is refused at once by the device that forgot
// it and, as the removal replicates, by every other member: nothing it
// writes reaches the library any more, while the others keep syncing.
func TestForgottenDeviceIsRefused(t *testing.T) {
	a, b, c := threeDevices(t, [3]string{"laptop", "lost phone", "tablet"})
	ctx := ctxT(t)
	bID := b.Device().String()

	// C forgets B by name; A, which B syncs with, learns it from C.
	got := mustDo(c.client.Forget(ctx, "lost phone"))(t)
	if !got.Removed || got.ID != bID || got.RemovedBy == nil || *got.RemovedBy != c.Device().String() {
		t.Fatalf("forget answered %+v", got)
	}
	poll.Until(t, "A to learn of the removal and drop the phone", 10*time.Second, func() bool {
		m, _ := member(t, a, bID)
		return m.Removed && !m.Connected && len(a.nodeConns(b)) == 0
	})
	// Issue 49: the device was connected before it was forgotten; the
	// new library secret's node has not met it, but the member list still
	// says when it was last seen, not "never".
	if m, _ := member(t, a, bID); m.LastSeen == nil {
		t.Errorf("A lists the forgotten phone, which it synced with, as never seen: %+v", m)
	}
	// B keeps redialling A, its inviter; every attempt is refused, and
	// what it writes stays with it. C's writes still reach A.
	mustDo(b.client.SetPosition(ctx, keyB, 7, 0.01, "written after being forgotten"))(t)
	mustDo(c.client.SetPosition(ctx, keyA, 9, 0.01, "tablet's book"))(t)
	waitBook(t, a.client, keyA, "A to receive C's book", func(bk api.Book) bool { return bk.Position != nil })
	dials := b.nodeStats().DialAttempts
	poll.Until(t, "B to redial A twice more", 30*time.Second, func() bool { return b.nodeStats().DialAttempts >= dials+2 })
	if _, err := a.client.Book(ctx, keyB); err == nil {
		t.Fatal("a book the forgotten device wrote reached A")
	}
	if conns := a.nodeConns(b); len(conns) != 0 {
		t.Fatalf("A holds %d connections to the forgotten device", len(conns))
	}
	// Forgetting again changes nothing; forgetting itself or a stranger is
	// refused.
	if again := mustDo(a.client.Forget(ctx, bID))(t); !again.Removed || *again.RemovedBy != c.Device().String() {
		t.Fatalf("forgetting again gave %+v", again)
	}
	_, err := a.client.Forget(ctx, a.Device().String())
	wantAPIError(t, err, api.CodeInvalid)
	_, err = a.client.Forget(ctx, "no such device")
	wantAPIError(t, err, api.CodeNotFound)
}

// Issue 15: a rename replicates, and history keeps the name it was shown
// with: a position written before the rename shows the old name on every
// device, one written after it the new name.
func TestRenameKeepsHistory(t *testing.T) {
	a := startPairable(t, "laptop", nil)
	b := startPairable(t, "phone", nil)
	pairDevices(t, a, b)
	ctx := ctxT(t)
	mustDo(a.client.SetPosition(ctx, keyA, 100, 0.1, "Before"))(t)
	waitBook(t, b.client, keyA, "B to see A's first position", func(bk api.Book) bool { return bk.Position != nil })

	renamed := mustDo(a.client.Rename(ctx, "study laptop"))(t)
	if renamed.Name != "study laptop" || len(renamed.Names) != 2 || renamed.Names[0].Name != "laptop" {
		t.Fatalf("rename answered %+v", renamed)
	}
	mustDo(a.client.SetPosition(ctx, keyB, 200, 0.2, "After"))(t)
	aID := a.Device().String()
	poll.Until(t, "B to learn the new name", 10*time.Second, func() bool {
		m, _ := member(t, b, aID)
		return m.Name == "study laptop"
	})
	waitBook(t, b.client, keyB, "B to see A's second position", func(bk api.Book) bool { return bk.Position != nil })
	for _, d := range []*testDaemon{a, b} {
		before := mustDo(d.client.Book(ctx, keyA))(t)
		after := mustDo(d.client.Book(ctx, keyB))(t)
		if before.Position.DeviceName != "laptop" || after.Position.DeviceName != "study laptop" {
			t.Errorf("%s shows the position before the rename by %q, after it by %q; want laptop and study laptop",
				d.cfg.Name, before.Position.DeviceName, after.Position.DeviceName)
		}
	}
	if st := mustDo(a.client.Status(ctx))(t); st.Device.Name != "study laptop" {
		t.Errorf("status names the device %q", st.Device.Name)
	}
	if peers := mustDo(b.client.Peers(ctx))(t); len(peers) != 1 || peers[0].Name != "study laptop" {
		t.Errorf("B's peers %+v, want A as study laptop", peers)
	}
	_, err := a.client.Rename(ctx, "bad\nname")
	wantAPIError(t, err, api.CodeInvalid)
}

// nodeConns returns d's connections to o's peer id.
func (d *testDaemon) nodeConns(o *testDaemon) []string {
	var out []string
	for _, p := range d.lib.Peers() { // none while restarted on a new secret
		if p.ID == o.lib.PeerID() && p.Connected {
			out = append(out, p.ID.String())
		}
	}
	return out
}

func (d *testDaemon) nodeStats() peer.Stats {
	return traffic(d.Daemon) // none while restarted on a new secret
}

// A library of an older build upgrades cleanly: its devices added
// themselves when they started (no epoch) and learnt each other's records
// by sync; they stay members of each other. (A device that holds only the
// secret, with no record a member made, is given nothing: issue 47, a
// hello adds nobody; library.TestMemberRules.)
func TestMembersOfAnOlderLibrary(t *testing.T) {
	lib := store.Library{ID: [16]byte{0x47, 1}, Secret: [32]byte{0x47, 2}}
	keyA, devA := olderIdentity(t)
	keyB, devB := olderIdentity(t)
	wall := uint64(time.Now().UnixMilli())
	var older []crdt.Entry
	for _, d := range []crdt.DeviceID{devA, devB} {
		older = append(older, mustDo(crdt.AddMember(crdt.LibraryID(lib.ID), d, crdt.Timestamp{Wall: wall, Device: d}, 0))(t))
	}
	a := startDaemon(t, func(c *Config) {
		c.Name = "old laptop"
		seedOlderStore(t, c.DataDir, keyA, lib, older)
	})
	addrs := a.lib.Addrs()
	b := startDaemon(t, func(c *Config) {
		c.Name = "old phone"
		c.Peers = []string{addrs[0].String()}
		seedOlderStore(t, c.DataDir, keyB, lib, older)
	})
	if a.Device() != devA || b.Device() != devB {
		t.Fatalf("the devices are %s and %s, want %s and %s", a.Device(), b.Device(), devA, devB)
	}
	aID, bID := a.Device().String(), b.Device().String()
	for _, d := range []*testDaemon{a, b} {
		poll.Until(t, "both to be members on "+d.cfg.Name, 30*time.Second, func() bool {
			ma, okA := member(t, d, aID)
			mb, okB := member(t, d, bID)
			other := mb
			if d == b {
				other = ma
			}
			return okA && okB && ma.Member && mb.Member && other.Connected
		})
	}
}

// olderIdentity makes a device identity, as the store keeps it, and its
// device id.
func olderIdentity(t *testing.T) ([]byte, crdt.DeviceID) {
	t.Helper()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	raw := mustDo(crypto.MarshalPrivateKey(key))(t)
	id := mustDo(lpeer.IDFromPrivateKey(key))(t)
	return raw, peer.DeviceIDOf(id)
}

// seedOlderStore makes, in dataDir, the store of an older build's device:
// its identity, the library, and the member records given.
func seedOlderStore(t *testing.T, dataDir string, key []byte, lib store.Library, records []crdt.Entry) {
	t.Helper()
	if _, err := store.MakePrivateDir(dataDir); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, storeDir(dataDir), store.Options{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.SetIdentity(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := st.SetLibrary(ctx, lib); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Apply(ctx, store.Batch{Entries: records}); err != nil {
		t.Fatal(err)
	}
}

// Issue 49: a device remembers where its members were. Restarted while the
// other is down, it lists it as unreachable, with the addresses it learned
// from it and kept in its store, when it was last seen and why the dial
// failed; and meets it again, with no --peer and no mDNS, once it is back.
func TestMemberAddressesOutliveARestart(t *testing.T) {
	// Each listens on a port of its own that stays the same, as a default
	// listen address (the port of the last run) does.
	fixed := func(c *Config) { c.Listen = []string{fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", testport.Loopback(t))} }
	a := startPairable(t, "laptop", fixed)
	bDir := tempDir(t)
	bPort := testport.Loopback(t)
	bCfg := func(c *Config) {
		c.DataDir = filepath.Join(bDir, "data")
		c.Listen = []string{fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", bPort)}
	}
	b := startPairable(t, "phone", bCfg)
	pairDevices(t, a, b)
	bID := b.Device().String()
	poll.Until(t, "each to list the other connected", 10*time.Second, func() bool {
		pb, _ := member(t, a, bID)
		return pb.Connected && pb.State == "connected"
	})
	var bAddrs []string
	poll.Until(t, "the laptop to keep the phone's addresses", 10*time.Second, func() bool {
		known, err := a.store.KnownAddrs(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range known {
			if peer.DeviceIDOf(mustDo(lpeer.Decode(k.Peer))(t)).String() == bID {
				bAddrs = k.Addrs
			}
		}
		return len(bAddrs) > 0
	})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	aCfg := a.cfg
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a = adopt(t, mustDo(Start(ctxT(t), aCfg))(t))
	poll.Until(t, "the laptop to list the phone as unreachable, with why", 10*time.Second, func() bool {
		for _, p := range mustDo(a.client.Peers(ctxT(t)))(t) {
			if p.Device == bID {
				return p.State == "unreachable" && !p.Connected && p.LastSeen != nil && p.LastError != "" &&
					len(p.Addresses) > 0 && slices.Contains(bAddrs, p.Addresses[0])
			}
		}
		return false
	})
	pb, _ := member(t, a, bID)
	if pb.State != "unreachable" || len(pb.Addresses) == 0 || pb.LastError == "" {
		t.Errorf("/v1/devices lists the phone as %+v, want unreachable with its addresses and the dial error", pb)
	}
	// The phone comes back on its data dir, with no --peer: the laptop
	// (or the phone, from its own book) dials it.
	b = startPairable(t, "phone", bCfg)
	poll.Until(t, "the two to meet again", 20*time.Second, func() bool {
		pb, _ := member(t, a, bID)
		return pb.Connected
	})
}

// Issue 49: a member this device has never reached and knows no address
// of is listed by /v1/peers and /v1/devices as never met, apart from one
// that is unreachable.
func TestNeverMetMemberIsListed(t *testing.T) {
	lib := store.Library{ID: [16]byte{0x49, 1}, Secret: [32]byte{0x49, 2}}
	keyA, devA := olderIdentity(t)
	_, devB := olderIdentity(t)
	wall := uint64(time.Now().UnixMilli())
	var records []crdt.Entry
	for _, d := range []crdt.DeviceID{devA, devB} {
		records = append(records, mustDo(crdt.AddMember(crdt.LibraryID(lib.ID), d, crdt.Timestamp{Wall: wall, Device: devA}, 0))(t))
	}
	a := startDaemon(t, func(c *Config) {
		c.Name = "laptop"
		seedOlderStore(t, c.DataDir, keyA, lib, records)
	})
	var got api.Peer
	for _, p := range mustDo(a.client.Peers(ctxT(t)))(t) {
		if p.Device == devB.String() {
			got = p
		}
	}
	if got.State != "never-met" || got.Connected || got.LastSeen != nil || len(got.Addresses) != 0 {
		t.Fatalf("/v1/peers lists the member never met as %+v, want never-met", got)
	}
	if m, _ := member(t, a, devB.String()); m.State != "never-met" {
		t.Fatalf("/v1/devices lists it as %+v, want never-met", m)
	}
}
