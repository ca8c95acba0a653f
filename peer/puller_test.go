package peer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
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
		h := hello{Version: ProtocolVersion, Library: lib.ID, Device: DeviceIDOf(senderDev.id), Name: "sender", Epoch: epoch, Last: 9, From: from, Wall: time.Now()}
		return &wireFrame{Hello: h.wire()}
	}
	batch := func(epoch, seq uint64, recs ...[]byte) *wireFrame {
		return &wireFrame{Batch: &wireBatch{Epoch: epoch, Seq: seq, Last: 9, Records: recs}}
	}
	tests := []struct {
		name    string
		script  []*wireFrame
		want    error // what the puller ends with (after the script the sender hangs up: io.EOF)
		applied int   // records the puller's store holds afterwards
		acks    int   // Ack frames the puller sent
	}{
		{"two batches", []*wireFrame{theirHello(7, 0), batch(7, 1, rec(1)), batch(7, 3, rec(2), rec(3))}, io.EOF, 3, 2},
		{"an empty batch advances", []*wireFrame{theirHello(7, 0), batch(7, 4)}, io.EOF, 0, 1},
		{"a batch that does not advance", []*wireFrame{theirHello(7, 0), batch(7, 2, rec(1)), batch(7, 2, rec(2))}, ErrProtocol, 1, 1},
		{"a batch of another epoch", []*wireFrame{theirHello(7, 0), batch(8, 1, rec(1))}, ErrProtocol, 0, 0},
		{"a hello where a batch belongs", []*wireFrame{theirHello(7, 0), theirHello(7, 0)}, ErrProtocol, 0, 0},
		{"a record that breaks the rules", []*wireFrame{theirHello(7, 0), batch(7, 1, rec(1), []byte{0xa2, 0x00, 0x01, 0x01, 0xa0})}, ErrProtocol, 0, 0},
		{"a sender resuming past the cursor", []*wireFrame{theirHello(7, 5)}, ErrProtocol, 0, 0},
		{"a refusal", []*wireFrame{errorFrame(ErrOtherLibrary)}, ErrOtherLibrary, 0, 0},
		{"a hello of another library", []*wireFrame{{Hello: (&hello{Version: ProtocolVersion, Library: newLib(t).ID, Device: DeviceIDOf(senderDev.id), Epoch: 7}).wire()}}, ErrOtherLibrary, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newDevice(t, "A")
			n := a.start(t, lib, nil)
			n.mu.Lock()
			st := n.peer(senderDev.id)
			n.mu.Unlock()
			ours, theirs := net.Pipe()
			defer theirs.Close()
			p := &puller{n: n, st: st, s: ours, version: ProtocolVersion}
			done := make(chan error, 1)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			go func() { done <- p.run(ctx); ours.Close() }()

			fr := &frameReader{r: theirs}
			body, err := fr.next()
			if err != nil {
				t.Fatalf("the puller's hello: %v", err)
			}
			f, err := decodeFrame(body)
			if err != nil || f.Hello == nil || f.Hello.Version != ProtocolVersion {
				t.Fatalf("the puller opened with %+v, %v", f, err)
			}
			acks := 0
			for _, sf := range tc.script {
				var b bytes.Buffer
				if err := appendFrame(&b, sf); err != nil {
					t.Fatal(err)
				}
				theirs.SetWriteDeadline(time.Now().Add(5 * time.Second))
				if _, err := theirs.Write(b.Bytes()); err != nil {
					break // the puller stopped reading: it refused
				}
				if sf.Batch != nil {
					// Every applied batch is acknowledged before the
					// next is read (net.Pipe has no buffer).
					theirs.SetReadDeadline(time.Now().Add(5 * time.Second))
					if body, err := fr.next(); err == nil {
						if f, err := decodeFrame(body); err == nil && f.Ack != nil {
							acks++
						}
					}
				}
			}
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
		})
	}
}
