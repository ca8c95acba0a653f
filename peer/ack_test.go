package peer

import (
	"errors"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
	"github.com/libp2p/go-libp2p/core/network"
)

// An ack may only confirm what its stream sent, in order, for its epoch, on
// a stream of version 2.
func TestAckRules(t *testing.T) {
	for _, tc := range []struct {
		name    string
		enabled bool
		acked   uint64 // before
		ack     wireAck
		wantErr bool
	}{
		{"in range", true, 3, wireAck{Epoch: 7, Seq: 8}, false},
		{"same again", true, 3, wireAck{Epoch: 7, Seq: 3}, false},
		{"all that was sent", true, 3, wireAck{Epoch: 7, Seq: 10}, false},
		{"past what was sent", true, 3, wireAck{Epoch: 7, Seq: 11}, true},
		{"going back", true, 3, wireAck{Epoch: 7, Seq: 2}, true},
		{"another epoch", true, 3, wireAck{Epoch: 6, Seq: 5}, true},
		{"on a version 1 stream", false, 3, wireAck{Epoch: 7, Seq: 5}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &Node{progress: make(chan struct{})}
			st := &peerState{acked: tc.acked}
			sa := &streamAcks{epoch: 7, enabled: tc.enabled, acked: tc.acked}
			sa.sent.Store(10)
			err := n.acked(st, sa, &tc.ack)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			want := tc.acked
			if !tc.wantErr {
				want = tc.ack.Seq
			}
			if err != nil && !errors.Is(err, ErrProtocol) {
				t.Errorf("err = %v, want a protocol error", err)
			}
			if st.acked != want || sa.acked != want {
				t.Errorf("acked %d (stream %d), want %d", st.acked, sa.acked, want)
			}
		})
	}
}

// Each side learns from the other's acks that everything it wrote has been
// merged there, and SyncState wakes its waiters on every step.
func TestDeliveryAcknowledged(t *testing.T) {
	lib := newLib(t)
	a, b := newDevice(t, "A"), newDevice(t, "B")
	if err := a.store.fill(700); err != nil { // more than one batch
		t.Fatal(err)
	}
	a.start(t, lib, nil)
	_, changed := a.node.SyncState()
	b.start(t, lib, a.node.Addrs())
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("SyncState did not signal a change when a peer connected")
	}
	delivered := func(n *Node, d *device) bool {
		state, _ := n.SyncState()
		for _, p := range state.Peers {
			if p.ID == d.id {
				return state.Settled && p.Acknowledges && p.Delivered && p.CaughtUp
			}
		}
		return false
	}
	poll.Until(t, "A to know B has everything", 10*time.Second, func() bool { return delivered(a.node, b) })
	poll.Until(t, "B to know A has everything", 10*time.Second, func() bool { return delivered(b.node, a) })
	if !converged(a.store, b.store) {
		t.Fatalf("delivered but not converged: %s", diffStores(a.store, b.store))
	}
	p := a.node.Peers()[0]
	if p.RecordsOut != 700 || p.RecordsIn != 0 {
		t.Errorf("A sent %d records and received %d, want 700 and 0", p.RecordsOut, p.RecordsIn)
	}
	if err := a.store.setPosition(bookKey(1), 99); err != nil {
		t.Fatal(err)
	}
	if delivered(a.node, b) {
		t.Fatal("a new change counts as delivered before B acknowledged it")
	}
	poll.Until(t, "the new change to be acknowledged", 10*time.Second, func() bool { return delivered(a.node, b) })
}

// A sender that speaks only protocol 1 gets a version 1 hello and no acks:
// a build with acks still syncs with one without.
func TestVersion1SenderGetsNoAcks(t *testing.T) {
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
	type result struct {
		version uint64
		after   *wireFrame // what the puller sent after the batch
	}
	done := make(chan result, 1)
	r.SetStreamHandler("/danyue/sync/1", func(s network.Stream) {
		defer s.Reset()
		f, err := readRaw(s)
		if err != nil || f.Hello == nil {
			return
		}
		writeRaw(t, s, helloBody(t, &wireHello{Version: 1, Library: lib.ID[:], Device: uint64(rdev), Epoch: 3, Last: 1}))
		writeRaw(t, s, frameBody(t, &wireFrame{Batch: &wireBatch{Epoch: 3, Seq: 1, Last: 1, Records: [][]byte{rec}}}))
		// A puller of protocol 1 sends nothing more; ending our side makes
		// it end the stream, so whatever it sent in between comes first.
		s.CloseWrite()
		after, _ := readRaw(s)
		done <- result{f.Hello.Version, after}
	})
	a := newDevice(t, "A")
	a.start(t, lib, p2pAddrs(t, r))
	select {
	case res := <-done:
		if res.version != 1 {
			t.Errorf("hello of version %d on a version 1 stream", res.version)
		}
		if res.after != nil {
			t.Errorf("puller sent %+v on a version 1 stream", res.after)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no version 1 sync stream")
	}
	if a.store.len() != 1 {
		t.Errorf("A has %d records, want the 1 sent", a.store.len())
	}
}
