package peer

import (
	"context"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

// A later build adds optional fields and capability bits; this one syncs
// with it all the same, in both directions (this test and the next). The
// later build is played by hand: its hello has a capability bit and a
// field this build does not know, and so does every frame it sends.
const future = 99 // a key no message of this build has

// This build pulls from a later one.
func TestPullFromLaterBuild(t *testing.T) {
	lib := newLib(t)
	r := rawHost(t, lib)
	rdev := DeviceIDOf(r.ID())
	e, err := crdt.SetPosition(bookKey(1), crdt.Timestamp{Wall: 1_000_000, Device: rdev}, 10, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	const epoch = 5
	acked := make(chan uint64, 1)
	// What goes wrong on the stream shows as no ack below; the handler
	// must not report into a test that may have ended.
	hello := futureHello(t, lib, rdev, map[uint64]any{4: uint64(epoch), 5: uint64(1)})
	batch := cborBody(t, map[uint64]any{2: map[uint64]any{1: uint64(1), 3: [][]byte{rec}, future: "more"}})
	r.SetStreamHandler(ProtocolID, func(s network.Stream) {
		defer s.Reset()
		if f, err := readRaw(s); err != nil || f.Hello == nil {
			return
		}
		s.Write(append(header(uint32(len(hello))), hello...))
		if f, err := readRaw(s); err != nil || f.Start == nil {
			return
		}
		s.Write(append(header(uint32(len(batch))), batch...))
		for {
			f, err := readRaw(s)
			if err != nil {
				return
			}
			if f.Ack != nil {
				select {
				case acked <- f.Ack.Seq:
				default: // a later stream's
				}
				return
			}
		}
	})
	a := newDevice(t, "A")
	a.start(t, lib, p2pAddrs(t, r))
	select {
	case seq := <-acked:
		if seq != 1 {
			t.Errorf("ack of %d, want 1", seq)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the batch of a later build was not acknowledged")
	}
	if a.store.len() != 1 {
		t.Errorf("A holds %d records, want the 1 sent", a.store.len())
	}
	if ep, seq, _ := a.store.Cursor(t.Context(), rdev); ep != epoch || seq != 1 {
		t.Errorf("cursor (%d, %d), want (%d, 1)", ep, seq, epoch)
	}
}

// A later build pulls from this one.
func TestSendToLaterBuild(t *testing.T) {
	lib := newLib(t)
	r := rawHost(t, lib)
	rdev := DeviceIDOf(r.ID())
	a := newDevice(t, "A")
	if err := a.store.fill(3); err != nil {
		t.Fatal(err)
	}
	a.start(t, lib, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := r.Connect(ctx, lpeer.AddrInfo{ID: a.id, Addrs: a.node.host.Addrs()}); err != nil {
		t.Fatal(err)
	}
	s, err := r.NewStream(ctx, a.id, ProtocolID)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Reset()
	writeRaw(t, s, futureHello(t, lib, rdev, map[uint64]any{7: a.store.Epoch()}))
	if f, err := readRaw(s); err != nil || f.Hello == nil || f.Hello.Epoch != a.store.Epoch() {
		t.Fatalf("A's hello: %+v, %v", f, err)
	}
	writeRaw(t, s, cborBody(t, map[uint64]any{5: map[uint64]any{0: a.store.Epoch(), future: []any{"x", 1}}}))
	last, _ := a.store.Watch()
	var got int
	for seq := uint64(0); seq < last; {
		f, err := readRaw(s)
		if err != nil {
			t.Fatalf("after %d of %d: %v", seq, last, err)
		}
		if f.Batch == nil {
			continue // a Caught frame, say
		}
		got += len(f.Batch.Records)
		seq = f.Batch.Seq
		writeRaw(t, s, cborBody(t, map[uint64]any{4: map[uint64]any{1: seq, future: true}}))
	}
	if got != 3 {
		t.Errorf("%d records sent, want 3", got)
	}
	poll.Until(t, "A to count the later build's acks", 10*time.Second, func() bool {
		for _, p := range a.node.Peers() {
			if p.ID == r.ID() {
				return p.Delivered
			}
		}
		return false
	})
}
