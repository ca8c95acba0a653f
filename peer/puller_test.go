package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

// The pull side of the protocol runs on any stream; here on net.Pipe, with
// the test as the sender, frame by frame, as syncthing tests its protocol.
// Each case is a sender's script: what it sends after the puller's hello,
// and what the puller must end with.
func TestPullerOverPipe(t *testing.T) {
	lib := newLib(t)
	senderDev := newDevice(t, "sender")
	rec := func(i int) []byte {
		e, err := crdt.SetPosition(bookKey(i), crdt.Timestamp{Wall: 1_700_000_000_000, Device: DeviceIDOf(senderDev.id)}, uint64(i), 0.5)
		if err != nil {
			t.Fatal(err)
		}
		b, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	theirHello := func(epoch, from uint64) *wireFrame {
		h := hello{Library: lib.ID, Device: DeviceIDOf(senderDev.id), Name: "sender", Epoch: epoch, Last: 9, From: from, Wall: time.Now()}
		return &wireFrame{Hello: h.wire()}
	}
	// The sender's last is 9: batches say so.
	batch := func(seq uint64, recs ...[]byte) *wireFrame {
		return &wireFrame{Batch: &wireBatch{Seq: seq, Last: 9, Records: recs, Gaps: ones(len(recs))}}
	}
	gapped := func(seq uint64, gaps []uint64, recs ...[]byte) *wireFrame {
		return &wireFrame{Batch: &wireBatch{Seq: seq, Last: 9, Records: recs, Gaps: gaps}}
	}
	caught := func(epoch, seq uint64, cursors, full []wireMark) *wireFrame {
		return &wireFrame{Caught: &wireCaught{Epoch: epoch, Seq: seq, Cursors: cursors, Full: full}}
	}
	x := crdt.DeviceID(77)
	handedOver := handedOverFrom(DeviceIDOf(senderDev.id), x)
	tests := []struct {
		name    string
		script  []*wireFrame
		want    error // what the puller ends with (after the script the sender hangs up: io.EOF)
		applied int   // records the puller's store holds afterwards
		acks    int   // Ack frames the puller sent
		check   func(*testing.T, *Node)
	}{
		{"caught up, with what the sender knew", []*wireFrame{theirHello(7, 0), batch(3, rec(1)),
			caught(7, 3, []wireMark{{Device: uint64(x), Lineage: 5, Seq: 42}}, []wireMark{{Device: uint64(x), Lineage: 5, Seq: 40}})}, io.EOF, 1, 1, handedOver},
		{"records at the batch's end", []*wireFrame{theirHello(7, 0), gapped(3, nil, rec(1), rec(2))}, io.EOF, 2, 1, nil},
		{"more records than sequence numbers", []*wireFrame{theirHello(7, 0), gapped(1, nil, rec(1), rec(2))}, ErrProtocol, 0, 0, nil},
		{"records numbered past the batch", []*wireFrame{theirHello(7, 0), gapped(3, []uint64{2, 2}, rec(1), rec(2))}, ErrProtocol, 0, 0, nil},
		{"records numbered twice", []*wireFrame{theirHello(7, 0), gapped(3, []uint64{1, 0}, rec(1), rec(2))}, ErrProtocol, 0, 0, nil},
		{"caught up behind the stream", []*wireFrame{theirHello(7, 0), batch(3, rec(1)), caught(7, 2, nil, nil)}, ErrProtocol, 1, 1, nil},
		{"caught up in another epoch", []*wireFrame{theirHello(7, 0), caught(8, 0, nil, nil)}, ErrProtocol, 0, 0, nil},
		{"two batches", []*wireFrame{theirHello(7, 0), batch(1, rec(1)), batch(3, rec(2), rec(3))}, io.EOF, 3, 2, nil},
		{"an empty batch advances", []*wireFrame{theirHello(7, 0), batch(4)}, io.EOF, 0, 1, nil},
		{"a batch that does not advance", []*wireFrame{theirHello(7, 0), batch(2, rec(1)), batch(2, rec(2))}, ErrProtocol, 1, 1, nil},
		{"a hello where a batch belongs", []*wireFrame{theirHello(7, 0), theirHello(7, 0)}, ErrProtocol, 0, 0, nil},
		{"a record that breaks the rules", []*wireFrame{theirHello(7, 0), batch(2, rec(1), []byte{0xa2, 0x00, 0x01, 0x01, 0xa0})}, ErrProtocol, 0, 0, nil},
		{"a sender resuming past the cursor", []*wireFrame{theirHello(7, 5)}, ErrProtocol, 0, 0, nil},
		{"a refusal", []*wireFrame{errorFrame(ErrOtherLibrary)}, ErrOtherLibrary, 0, 0, nil},
		{"a hello of another library", []*wireFrame{{Hello: (&hello{Library: newLib(t).ID, Device: DeviceIDOf(senderDev.id), Epoch: 7}).wire()}}, ErrOtherLibrary, 0, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newDevice(t, "A")
			n := a.start(t, lib, nil)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			theirs, done := pipePuller(ctx, n, senderDev.id)
			defer theirs.Close()
			acks := playSender(t, theirs, tc.script)
			theirs.Close()
			if err := <-done; !errors.Is(err, tc.want) {
				t.Errorf("the puller ended with %v, want %v", err, tc.want)
			}
			if got := a.store.len(); got != tc.applied {
				t.Errorf("the store holds %d records, want %d", got, tc.applied)
			}
			if acks != tc.acks {
				t.Errorf("%d acks, want %d", acks, tc.acks)
			}
			if tc.check != nil {
				tc.check(t, n)
			}
		})
	}
}

// handedOverFrom checks that a node that pulled from sender got X's cursor
// at 42 and full mark at 40 (of epoch 5) from it, and the sender's own full
// mark at 3 (of epoch 7).
func handedOverFrom(sender, x crdt.DeviceID) func(*testing.T, *Node) {
	return func(t *testing.T, n *Node) {
		if m, ok := n.kn.cursor(x); !ok || m != (mark{5, 42}) {
			t.Errorf("cursor of X %+v, %v; want 42 of epoch 5 handed over", m, ok)
		}
		full := n.kn.fullMarks(0)
		want := map[wireMark]bool{{Device: uint64(x), Lineage: 5, Seq: 40}: true, {Device: uint64(sender), Lineage: 7, Seq: 3}: true}
		if len(full) != len(want) || !want[full[0]] || !want[full[1]] {
			t.Errorf("full marks %+v, want X's at 40 and the sender's at 3", full)
		}
	}
}

// playSender plays a sender's script on the sender's end of a pipe to a
// puller, frame by frame, checks what the puller says between them, and
// returns how many batches it acknowledged.
func playSender(t *testing.T, theirs net.Conn, script []*wireFrame) (acks int) {
	t.Helper()
	fr := &frameReader{r: theirs}
	theirs.SetReadDeadline(time.Now().Add(5 * time.Second))
	if f, err := readFrame(fr); err != nil || f.Hello == nil {
		t.Fatalf("the puller opened with %+v, %v", f, err)
	}
	for i, sf := range script {
		var b bytes.Buffer
		if err := appendFrame(&b, sf); err != nil {
			t.Fatal(err)
		}
		theirs.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := theirs.Write(b.Bytes()); err != nil {
			break // the puller stopped reading: it refused
		}
		if sf.Hello != nil && i == 0 {
			// The puller says where to start (at its cursor, 0 here), and
			// then which devices it pulls from itself (fanout.go).
			f, err := readFrame(fr)
			if err != nil {
				continue
			}
			if f.Error == nil && (f.Start == nil || f.Start.Epoch != sf.Hello.Epoch || f.Start.Seq != 0) {
				t.Errorf("after the hellos the puller sent %+v; want a Start from 0", f)
			}
			if f.Start != nil {
				if f, err := readFrame(fr); err == nil && (f.Have == nil || f.Have.List == 0) {
					t.Errorf("after its Start the puller sent %+v; want its direct list", f)
				}
			}
		}
		if sf.Batch != nil {
			// Every applied batch is acknowledged before the next is read
			// (net.Pipe has no buffer).
			if f, err := readFrame(fr); err == nil && f.Ack != nil {
				acks++
			}
		}
	}
	return acks
}

// readFrame reads and decodes the next frame of fr.
func readFrame(fr *frameReader) (*wireFrame, error) {
	body, err := fr.next()
	if err != nil {
		return nil, err
	}
	return decodeFrame(body)
}

// ones is the Gaps of a batch of n records numbered one after the other
// from the stream's cursor.
func ones(n int) []uint64 {
	g := make([]uint64, n)
	for i := range g {
		g[i] = 1
	}
	return g
}

// A puller starts from the best cursor it has into the sender's store: its
// own, or one another device handed over, at most the sender's last (a
// cursor handed over may be past it: the sender's store grew while the
// stream waited), never one of another epoch.
func TestPullerStartsFromHandedOverCursor(t *testing.T) {
	lib := newLib(t)
	senderDev := newDevice(t, "sender")
	for _, tc := range []struct {
		handed mark
		want   uint64
	}{{mark{7, 5}, 5}, {mark{7, 12}, 9}, {mark{8, 5}, 0}} {
		t.Run(fmt.Sprintf("%+v", tc.handed), func(t *testing.T) {
			a := newDevice(t, "A")
			n := a.start(t, lib, nil, quiet)
			n.kn.noteCursor(DeviceIDOf(senderDev.id), tc.handed)
			theirs, done := pipePuller(t.Context(), n, senderDev.id)
			defer theirs.Close()
			theirs.SetDeadline(time.Now().Add(10 * time.Second))
			fr := &frameReader{r: theirs}
			if _, err := fr.next(); err != nil {
				t.Fatalf("the puller's hello: %v", err)
			}
			h := hello{Library: lib.ID, Device: DeviceIDOf(senderDev.id), Epoch: 7, Last: 9, Wall: time.Now()}
			var b bytes.Buffer
			if err := appendFrame(&b, &wireFrame{Hello: h.wire()}); err != nil {
				t.Fatal(err)
			}
			if _, err := theirs.Write(b.Bytes()); err != nil {
				t.Fatal(err)
			}
			body, err := fr.next()
			if err != nil {
				t.Fatalf("the puller's start: %v", err)
			}
			f, err := decodeFrame(body)
			if err != nil || f.Start == nil || f.Start.Epoch != 7 || f.Start.Seq != tc.want {
				t.Errorf("the puller sent %+v, %v; want a Start from %d of epoch 7", f.Start, err, tc.want)
			}
			theirs.Close()
			<-done
		})
	}
}

// pipePuller runs n's pull side of a stream from sender on net.Pipe, and
// returns the sender's end and where the pull's result arrives.
func pipePuller(ctx context.Context, n *Node, sender lpeer.ID) (net.Conn, <-chan error) {
	n.mu.Lock()
	st := n.peer(sender)
	n.mu.Unlock()
	ours, theirs := net.Pipe()
	p := &puller{n: n, st: st, s: ours}
	done := make(chan error, 1)
	go func() { done <- p.run(ctx); ours.Close() }()
	return theirs, done
}
