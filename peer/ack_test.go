package peer

import (
	"errors"
	"testing"
	"time"

	"github.com/danyue/danyue/internal/poll"
)

// An ack may only confirm what its stream sent, in order.
func TestAckRules(t *testing.T) {
	for _, tc := range []struct {
		name    string
		acked   uint64 // before
		ack     wireAck
		wantErr bool
	}{
		{"in range", 3, wireAck{Seq: 8}, false},
		{"same again", 3, wireAck{Seq: 3}, false},
		{"all that was sent", 3, wireAck{Seq: 10}, false},
		{"past what was sent", 3, wireAck{Seq: 11}, true},
		{"going back", 3, wireAck{Seq: 2}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &Node{progress: make(chan struct{})}
			st := &peerState{acked: tc.acked}
			sa := newStreamAcks(tc.acked)
			sa.sentBatch(10)
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
				return state.Settled && p.Delivered && p.CaughtUp
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
	// B cannot apply (and so acknowledge) anything while its store is
	// locked: the new change is not delivered until it can.
	b.store.mu.Lock()
	if err := a.store.setPosition(bookKey(1), 99); err != nil {
		b.store.mu.Unlock()
		t.Fatal(err)
	}
	stillDelivered := delivered(a.node, b)
	b.store.mu.Unlock()
	if stillDelivered {
		t.Fatal("a new change counts as delivered before B acknowledged it")
	}
	poll.Until(t, "the new change to be acknowledged", 10*time.Second, func() bool { return delivered(a.node, b) })
}
