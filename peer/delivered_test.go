package peer

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

// slowMarks is a memStore whose durable marks wait for open to be closed,
// as a disk's sync would.
type slowMarks struct {
	*memStore
	open chan struct{}
}

func (s *slowMarks) MarkDelivered(ctx context.Context, seq uint64, devs ...crdt.DeviceID) error {
	select {
	case <-s.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.memStore.MarkDelivered(ctx, seq, devs...)
}

// A push goes out without waiting for the durable mark that records it;
// the node counts it as sent at once (Node.Delivered), and the mark
// follows.
func TestPushDoesNotWaitForMark(t *testing.T) {
	lib := newLib(t)
	a, b := newDevice(t, "A"), newDevice(t, "B")
	slow := &slowMarks{memStore: a.store, open: make(chan struct{})}
	a.start(t, lib, nil, quiet, func(c *Config) { c.Store = slow })
	b.start(t, lib, a.node.Addrs(), quiet)
	poll.Until(t, "B to connect", 10*time.Second, func() bool { return connectedTo(b.node, a.id) })
	if err := a.store.setPosition(bookKey(1), 42); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the push on B while A's mark waits", 10*time.Second, func() bool { return converged(a.store, b.store) })
	last, _ := a.store.Watch()
	if got := a.node.Delivered(DeviceIDOf(b.id)); got < last {
		t.Errorf("A counts %d as delivered to B after sending it %d", got, last)
	}
	if got := a.store.Delivered(DeviceIDOf(b.id)); got != 0 {
		t.Fatalf("A's durable mark for B is %d before its write finished", got)
	}
	close(slow.open)
	poll.Until(t, "A's mark to follow", 10*time.Second, func() bool { return a.store.Delivered(DeviceIDOf(b.id)) >= last })
}

// The marks are raised once a puller acknowledges what was sent, not as it
// is sent: sending notes the batch and wakes nothing, a good ack wakes the
// goroutine that raises them, a bad one does not.
func TestMarksFollowAcks(t *testing.T) {
	kicked := func(n *Node) bool {
		select {
		case <-n.sends.kick:
			return true
		default:
			return false
		}
	}
	for _, tc := range []struct {
		name string
		ack  uint64 // 0: none
		want bool
	}{
		{"sent, not acknowledged", 0, false},
		{"acknowledged", 10, true},
		{"acknowledged in part", 4, true},
		{"an ack past what was sent", 11, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &Node{progress: make(chan struct{}), sends: deliveries{kick: make(chan struct{}, 1)}}
			st := &peerState{device: 7}
			sa := newStreamAcks(0)
			n.sends.note(st.device, 10)
			sa.sentBatch(10)
			if tc.ack != 0 {
				_ = n.acked(st, sa, &wireAck{Seq: tc.ack})
			}
			if got := kicked(n); got != tc.want {
				t.Errorf("marks woken: %v, want %v", got, tc.want)
			}
			if got := n.sends.to(st.device); got != 10 {
				t.Errorf("counted as sent up to %d, want 10", got)
			}
		})
	}
}

// A puller that presents a cursor from a state of the store that is gone
// (the store was restored from an old copy, and has since numbered new
// changes under the numbers the puller passed) is sent everything again.
// If its stream ends before it merges a batch, it comes back with the same
// cursor: what was sent to it meanwhile must not vouch for that cursor,
// nor raise its mark, until it acknowledges a batch of this run.
func TestGoneCursorStaysGoneUntilAcked(t *testing.T) {
	ctx := context.Background()
	s := newMemStore(1)
	for i := range 38 {
		if err := s.setPosition(bookKey(i%8), uint64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	n := &Node{progress: make(chan struct{}), sends: deliveries{kick: make(chan struct{}, 1)}, store: s, log: slog.New(slog.DiscardHandler)}
	remote := lpeer.ID("a puller")
	dev := DeviceIDOf(remote)
	if err := s.MarkDelivered(ctx, 20, dev); err != nil { // what the old copy held
		t.Fatal(err)
	}
	const stale = 35 // the puller's cursor from the store before the restore
	hello := func(when string, cursor, want uint64) {
		t.Helper()
		from, err := n.storeWentBack(ctx, remote, cursor)
		if err != nil {
			t.Fatal(err)
		}
		if from != want {
			t.Errorf("%s: cursor %d sent from %d, want %d", when, cursor, from, want)
		}
	}
	hello("first hello", stale, 0)
	n.sends.check(dev)
	n.sends.note(dev, 38) // a batch sent, the stream cut before the puller merged it
	if err := n.flushMarks(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.Delivered(dev); got != 20 {
		t.Errorf("the suspect puller's mark was raised to %d", got)
	}
	hello("second hello, same cursor", stale, 0)

	sa := newStreamAcks(0)
	sa.sentBatch(38)
	if err := n.acked(&peerState{device: dev}, sa, &wireAck{Seq: 38}); err != nil {
		t.Fatal(err)
	}
	hello("after an ack of this run", 38, 38)
	n.sends.note(dev, 38)
	if err := n.flushMarks(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.Delivered(dev); got != 38 {
		t.Errorf("mark %d after the ack, want 38", got)
	}
}
