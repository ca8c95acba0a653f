package peer

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
	"github.com/fxamacker/cbor/v2"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

// A batch with one record that fails validation is refused whole; an
// oversized frame is refused before its body is read; a later good batch is
// applied with its cursor.
func TestHostileSenderChangesNothing(t *testing.T) {
	lib := newLib(t)
	r := rawHost(t, lib)
	rdev := DeviceIDOf(r.ID())
	at := crdt.Timestamp{Wall: 1_000_000, Device: rdev}
	e, err := crdt.SetPosition(bookKey(1), at, 10, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	good, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	// Well-formed CBOR, but a book key with an unknown algorithm.
	bad, err := cbor.Marshal(map[uint64]any{0: 1, 1: map[uint64]any{0: []byte{9, 1, 2}}})
	if err != nil {
		t.Fatal(err)
	}
	const epoch = 5
	a := newDevice(t, "A")
	var streams atomic.Int32
	var before [4]atomic.Int64 // A's records when stream i opened
	r.SetStreamHandler(ProtocolID, func(s network.Stream) {
		defer s.Reset()
		n := streams.Add(1)
		if n < 4 {
			before[n].Store(int64(a.store.len()))
		}
		if _, err := readRaw(s); err != nil {
			return
		}
		writeRaw(t, s, helloBody(t, &wireHello{Library: lib.ID[:], Device: uint64(rdev), Epoch: epoch, Last: 2}))
		batch := func(seq uint64, recs ...[]byte) {
			b := &wireBatch{Seq: seq, Records: recs}
			if seq < 2 {
				b.Last = 2
			}
			writeRaw(t, s, frameBody(t, &wireFrame{Batch: b}))
		}
		switch n {
		case 1:
			batch(2, good, bad)
		case 2:
			s.Write([]byte{0xff, 0xff, 0x7f}) // 2 MiB announced, nothing follows
		case 3:
			batch(1, good) // a correct batch
			batch(1, good) // that does not advance the cursor
		default:
			return
		}
		// Wait for the puller to give up on the stream. Until then it
		// writes (its start, acks), so read to the end: returning at its
		// first byte resets the stream, and a reset can overtake the
		// batches it has not read yet.
		s.SetReadDeadline(time.Now().Add(10 * time.Second))
		io.Copy(io.Discard, s)
	})
	a.start(t, lib, p2pAddrs(t, r))
	poll.Until(t, "the good batch", 10*time.Second, func() bool { return a.store.len() == 1 })
	if n := before[2].Load(); n != 0 {
		t.Errorf("a batch with a bad record was applied: %d records", n)
	}
	if n := before[3].Load(); n != 0 {
		t.Errorf("records after an oversized frame: %d", n)
	}
	ep, seq, _ := a.store.Cursor(t.Context(), rdev)
	if ep != epoch || seq != 1 {
		t.Fatalf("cursor (%d, %d), want (%d, 1)", ep, seq, epoch)
	}
	for _, p := range a.node.Peers() {
		t.Logf("peer %s: last error %q", p.ID, p.LastError)
	}
}

// A puller that opens with an oversized frame or garbage is cut off; the
// node keeps serving others.
func TestHostilePullerIsCutOff(t *testing.T) {
	lib := newLib(t)
	a := newDevice(t, "A")
	if err := a.store.fill(3); err != nil {
		t.Fatal(err)
	}
	a.start(t, lib, nil)
	r := rawHost(t, lib)
	r.SetStreamHandler(ProtocolID, func(s network.Stream) { readRaw(s); s.Reset() })
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := r.Connect(ctx, lpeer.AddrInfo{ID: a.id, Addrs: a.node.host.Addrs()}); err != nil {
		t.Fatal(err)
	}
	for _, opening := range [][]byte{
		{0xff, 0xff, 0xff, 0xff},
		{0},
		{3, 0xff, 0xff, 0xff},
	} {
		s, err := r.NewStream(ctx, a.id, ProtocolID)
		if err != nil {
			t.Fatal(err)
		}
		s.Write(opening)
		if f, err := readRaw(s); err == nil && f.Error == nil {
			t.Errorf("after %x: got %+v, want the stream refused", opening, f)
		}
		s.Reset()
	}
	b := newDevice(t, "B")
	b.start(t, lib, a.node.Addrs())
	poll.Until(t, "A to still serve B", 10*time.Second, func() bool { return converged(a.store, b.store) })
}
