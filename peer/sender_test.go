package peer

import (
	"bytes"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
)

// The send side of the protocol on net.Pipe, with the test as the puller:
// it answers a hello with its own and what the puller has not merged, in
// batches that advance, and refuses a hello it cannot accept with an Error
// frame.
func TestSenderOverPipe(t *testing.T) {
	lib := newLib(t)
	puller := newDevice(t, "puller")
	a := newDevice(t, "A")
	if err := a.store.fill(5); err != nil {
		t.Fatal(err)
	}
	n := a.start(t, lib, nil)
	serve := func(h *wireHello) (net.Conn, chan error) {
		ours, theirs := net.Pipe()
		done := make(chan error, 1)
		go func() {
			_, err := n.serve(ours, func() { ours.Close() }, puller.id, ProtocolVersion)
			ours.Close()
			done <- err
		}()
		var b bytes.Buffer
		if err := appendFrame(&b, &wireFrame{Hello: h}); err != nil {
			t.Fatal(err)
		}
		theirs.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := theirs.Write(b.Bytes()); err != nil {
			t.Fatal(err)
		}
		return theirs, done
	}
	read := func(c net.Conn) *wireFrame {
		t.Helper()
		body, err := (&frameReader{r: c}).next()
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		f, err := decodeFrame(body)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	good := &wireHello{Version: ProtocolVersion, Library: lib.ID[:], Device: uint64(DeviceIDOf(puller.id)), Name: "puller", Epoch: 9, WantEpoch: a.store.Epoch(), WantSeq: 2}

	t.Run("resumes from the cursor", func(t *testing.T) {
		c, done := serve(good)
		h := read(c)
		if h.Hello == nil || h.Hello.From != 2 || h.Hello.Last != 5 {
			t.Fatalf("hello %+v, want one resuming from 2 of 5", h.Hello)
		}
		var seq uint64 = 2
		records := 0
		for seq < 5 {
			f := read(c)
			if f.Batch == nil || f.Batch.Seq <= seq {
				t.Fatalf("frame %+v does not advance from %d", f, seq)
			}
			for _, r := range f.Batch.Records {
				if _, err := crdt.Decode(r); err != nil {
					t.Fatalf("record: %v", err)
				}
			}
			records += len(f.Batch.Records)
			seq = f.Batch.Seq
		}
		if records != 3 {
			t.Errorf("%d records sent after the cursor, want 3", records)
		}
		c.Close()
		<-done
	})
	t.Run("another library is refused", func(t *testing.T) {
		bad := *good
		other := newLib(t)
		bad.Library = other.ID[:]
		c, done := serve(&bad)
		f := read(c)
		if f.Error == nil {
			t.Fatalf("answered %+v, want an Error frame", f)
		}
		if err := <-done; !errors.Is(err, ErrOtherLibrary) {
			t.Errorf("serve ended with %v, want ErrOtherLibrary", err)
		}
	})
	t.Run("a cursor past the end starts over", func(t *testing.T) {
		past := *good
		past.WantSeq = 99
		c, done := serve(&past)
		if h := read(c); h.Hello == nil || h.Hello.From != 0 {
			t.Fatalf("hello %+v, want one from 0", h.Hello)
		}
		c.Close()
		<-done
	})
}
