package peer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
)

// offers collects the rekey offers a node receives.
type offers struct {
	mu   sync.Mutex
	from []crdt.DeviceID
	got  []Rekey
}

func (o *offers) take(from crdt.DeviceID, r Rekey) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.from, o.got = append(o.from, from), append(o.got, r)
	return true
}

func (o *offers) list() ([]crdt.DeviceID, []Rekey) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.from), slices.Clone(o.got)
}

// Issue 15: a restricted node (the one a device keeps on a superseded
// secret) connects only with the members it admits, offers them the new
// secret, and syncs nothing; a device it does not admit gets nothing, not
// even a connection.
func TestRestrictedNodeOffersOnlyToMembers(t *testing.T) {
	old := newLib(t)
	next := rotatedLib(t, old)
	a, b, c := newDevice(t, "A"), newDevice(t, "B"), newDevice(t, "C")
	bDev := DeviceIDOf(b.id)
	offer := Rekey{Library: next, Removed: []crdt.DeviceID{DeviceIDOf(c.id)}, Addrs: loopback}
	a.start(t, old, nil, func(cfg *Config) {
		cfg.Restricted = true
		cfg.Admit = func(d crdt.DeviceID) bool { return d == bDev }
		cfg.RekeyOffer = func(crdt.DeviceID) (Rekey, bool) { return offer, true }
	})
	var atB, atC offers
	if err := b.store.setPosition(bookKey(1), 7); err != nil {
		t.Fatal(err)
	}
	b.start(t, old, a.node.Addrs(), func(cfg *Config) { cfg.OnRekey = atB.take })
	c.start(t, old, a.node.Addrs(), func(cfg *Config) { cfg.OnRekey = atC.take })
	poll.Until(t, "B to receive the offer", 10*time.Second, func() bool { f, _ := atB.list(); return len(f) > 0 })
	from, got := atB.list()
	if from[0] != DeviceIDOf(a.id) || got[0].Library != next || !slices.Equal(got[0].Removed, offer.Removed) ||
		len(got[0].Addrs) != 1 || !got[0].Addrs[0].Equal(loopback[0]) {
		t.Fatalf("B received %v from %v, want %+v from A", got[0], from[0], offer)
	}
	dials := c.node.Stats().DialAttempts
	poll.Until(t, "C to dial A twice more", 30*time.Second, func() bool { return c.node.Stats().DialAttempts >= dials+2 })
	if f, _ := atC.list(); len(f) != 0 || len(a.node.host.Network().ConnsToPeer(c.id)) != 0 {
		t.Fatalf("a device the restricted node does not admit got %d offers", len(f))
	}
	if a.store.len() != 0 {
		t.Fatalf("the restricted node synced %d records", a.store.len())
	}
	// C is told why, whether its dial failed or the node dropped the
	// connection its side had already set up.
	poll.Until(t, "C to note that A refuses it", 30*time.Second, func() bool {
		for _, p := range c.node.Peers() {
			if p.ID == a.id {
				return !p.Connected && p.LastError != ""
			}
		}
		return false
	})
}

// OfferRekey reaches every connected peer but those skipped, and reports
// who took it.
func TestOfferRekey(t *testing.T) {
	lib := newLib(t)
	a, b, c := newDevice(t, "A"), newDevice(t, "B"), newDevice(t, "C")
	var atB, atC offers
	a.start(t, lib, nil)
	b.start(t, lib, a.node.Addrs(), func(cfg *Config) { cfg.OnRekey = atB.take })
	c.start(t, lib, a.node.Addrs(), func(cfg *Config) { cfg.OnRekey = atC.take })
	poll.Until(t, "B and C to connect to A", 10*time.Second, func() bool {
		return connectedTo(a.node, b.id) && connectedTo(a.node, c.id)
	})
	next := newLib(t)
	took := a.node.OfferRekey(t.Context(), Rekey{Library: next}, func(d crdt.DeviceID) bool { return d == DeviceIDOf(c.id) })
	if !slices.Equal(took, []crdt.DeviceID{DeviceIDOf(b.id)}) {
		t.Fatalf("took: %v, want B only", took)
	}
	if f, _ := atC.list(); len(f) != 0 {
		t.Fatal("a skipped peer got the offer")
	}
}

// A peer that refuses the offer made when it connects (the offerer is not
// a member there yet: the hello on the same connection has not made it one)
// is offered again, until it takes it or the retries run out.
func TestRekeyOfferedAgainAfterRefusal(t *testing.T) {
	lib := newLib(t)
	next := rotatedLib(t, lib)
	a, b := newDevice(t, "A"), newDevice(t, "B")
	var (
		mu      sync.Mutex
		refused int
		atB     offers
	)
	a.start(t, lib, nil, func(cfg *Config) {
		cfg.RekeyOffer = func(crdt.DeviceID) (Rekey, bool) { return Rekey{Library: next}, true }
	})
	b.start(t, lib, a.node.Addrs(), func(cfg *Config) {
		cfg.OnRekey = func(from crdt.DeviceID, r Rekey) bool {
			mu.Lock()
			defer mu.Unlock()
			if refused == 0 {
				refused++
				return false
			}
			return atB.take(from, r)
		}
	})
	poll.Until(t, "B to take the offer it refused once", 10*time.Second, func() bool { f, _ := atB.list(); return len(f) > 0 })
	if _, got := atB.list(); got[0].Library != next {
		t.Fatalf("B took %+v, want %+v", got[0].Library, next)
	}
}

// An offer made on connecting that does not reach the peer (here: its
// node does not take rekey streams yet) is made again on the same
// connection: two devices that rotated at once meet on their restricted
// nodes once, and an offer lost there was lost for good.
func TestRekeyOfferedAgainAfterFailure(t *testing.T) {
	lib := newLib(t)
	next := rotatedLib(t, lib)
	a, b := newDevice(t, "A"), newDevice(t, "B")
	var (
		mu      sync.Mutex
		offered int
		restore func()
		atB     offers
	)
	a.start(t, lib, nil, func(cfg *Config) {
		cfg.RekeyOffer = func(crdt.DeviceID) (Rekey, bool) {
			mu.Lock()
			defer mu.Unlock()
			if offered++; offered == 2 {
				restore()
			}
			return Rekey{Library: next}, true
		}
	})
	b.start(t, lib, nil, func(cfg *Config) { cfg.OnRekey = atB.take })
	b.node.host.RemoveStreamHandler(RekeyProtocolID)
	mu.Lock()
	restore = func() { b.node.host.SetStreamHandler(RekeyProtocolID, b.node.handleRekey) }
	mu.Unlock()
	if err := a.node.Connect(t.Context(), b.node.Addrs()); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "B to take the offer that failed once", 10*time.Second, func() bool { f, _ := atB.list(); return len(f) > 0 })
	mu.Lock()
	defer mu.Unlock()
	if _, got := atB.list(); got[0].Library != next || offered != 2 {
		t.Fatalf("B took %+v after %d offers, want %+v after 2", got[0].Library, offered, next)
	}
}

func TestReadRekey(t *testing.T) {
	good := Rekey{Library: Library{ID: [16]byte{1}, Secret: [32]byte{2}, Epoch: 3}, Removed: []crdt.DeviceID{4}, Addrs: loopback, Members: []crdt.DeviceID{5, 6}}
	msg, err := encodeRekey(&good)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readRekey(bytes.NewReader(msg))
	if err != nil || got.Library != good.Library || !slices.Equal(got.Removed, good.Removed) || len(got.Addrs) != 1 || !slices.Equal(got.Members, good.Members) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	// The largest offer: every bound at once fits the message.
	full := good
	full.Removed, full.Members = make([]crdt.DeviceID, maxRekeyRemoved), make([]crdt.DeviceID, MaxRekeyMembers)
	for i := range full.Removed {
		full.Removed[i], full.Members[i] = crdt.DeviceID(^uint64(i)), crdt.DeviceID(^uint64(1<<20+i))
	}
	if msg, err := encodeRekey(&full); err != nil {
		t.Fatalf("the largest offer: %v", err)
	} else if got, err := readRekey(bytes.NewReader(msg)); err != nil || !slices.Equal(got.Members, full.Members) {
		t.Fatalf("the largest offer read back: %v", err)
	}
	full.Members = append(full.Members, 1)
	if _, err := encodeRekey(&full); err == nil {
		t.Error("an offer of more members than the bound was encoded")
	}
	noSecret, _ := encodeRekey(&Rekey{Library: Library{ID: [16]byte{1}}})
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"empty length", []byte{0, 0}},
		{"too long", []byte{0xff, 0xff}},
		{"not cbor", []byte{0, 2, 0xff, 0xff}},
		{"no secret", noSecret},
		{"an empty map", []byte{0, 1, 0xa0}},
	} {
		if _, err := readRekey(bytes.NewReader(tc.in)); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v, want ErrProtocol", tc.name, err)
		}
	}
	if _, err := readRekey(bytes.NewReader(msg[:len(msg)-1])); err == nil {
		t.Error("a cut offer was read")
	}
	// A later build's offer, with a field this build does not know.
	body := cborBody(t, map[uint64]any{1: good.Library.ID[:], 2: good.Library.Secret[:], 3: good.Library.Epoch, 99: "a field of the future"})
	got, err = readRekey(bytes.NewReader(append(binary.BigEndian.AppendUint16(nil, uint16(len(body))), body...)))
	if err != nil || got.Library != good.Library {
		t.Errorf("an offer with an unknown field: %+v, %v", got, err)
	}
}

// FuzzRekey feeds arbitrary bytes to the rekey offer's reader: it never
// panics, and an offer it reads encodes to one it reads the same.
func FuzzRekey(f *testing.F) {
	good := Rekey{Library: Library{ID: [16]byte{1}, Secret: [32]byte{2}, Epoch: 3}, Removed: []crdt.DeviceID{4}, Addrs: loopback}
	msg, err := encodeRekey(&good)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(msg)
	f.Add([]byte{0, 0})
	f.Add([]byte{0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := readRekey(bytes.NewReader(data))
		if err != nil {
			return
		}
		again, err := encodeRekey(&r)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", r, err)
		}
		r2, err := readRekey(bytes.NewReader(again))
		if err != nil || r2.Library != r.Library || !slices.Equal(r2.Removed, r.Removed) || len(r2.Addrs) != len(r.Addrs) || !slices.Equal(r2.Members, r.Members) {
			t.Fatalf("%+v read back as %+v, %v", r, r2, err)
		}
	})
}

// Issue 15: a node stops redialling a device once it is removed.
func TestRemovedDeviceNotRedialled(t *testing.T) {
	lib := newLib(t)
	a, b := newDevice(t, "A"), newDevice(t, "B")
	var removed removedSet
	b.start(t, lib, nil)
	a.start(t, lib, b.node.Addrs(), func(cfg *Config) { cfg.Removed = removed.has })
	poll.Until(t, "A to connect to B", 10*time.Second, func() bool { return connectedTo(a.node, b.id) })
	removed.add(DeviceIDOf(b.id))
	a.node.Disconnect(DeviceIDOf(b.id))
	poll.Until(t, "A to stop keeping B", 10*time.Second, func() bool {
		for _, p := range a.node.Peers() {
			if p.ID == b.id {
				return !p.Kept && !p.Connected
			}
		}
		return false
	})
}
