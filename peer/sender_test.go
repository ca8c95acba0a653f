package peer

import (
	"bytes"
	"errors"
	"fmt"
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
	// As if an earlier run had sent all five: the puller's cursor is then
	// one A can resume from (Node.Delivered).
	if err := a.store.MarkDelivered(t.Context(), 5, DeviceIDOf(puller.id)); err != nil {
		t.Fatal(err)
	}
	n := a.start(t, lib, nil)
	serve := func(h *wireHello) (net.Conn, chan error) {
		ours, theirs := net.Pipe()
		done := make(chan error, 1)
		go func() {
			_, err := n.serve(ours, func() { ours.Close() }, puller.id)
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
	good := &wireHello{Library: lib.ID[:], Device: uint64(DeviceIDOf(puller.id)), Name: "puller", Epoch: 9, WantEpoch: a.store.Epoch(), WantSeq: 2}
	start := func(c net.Conn, seq uint64, have ...wireMark) {
		t.Helper()
		var b bytes.Buffer
		if err := appendFrame(&b, &wireFrame{Start: &wireStart{Epoch: a.store.Epoch(), Seq: seq, Have: have}}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(b.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	// records reads batches up to seq 5 and the Caught frame that follows,
	// and returns how many records they held.
	records := func(c net.Conn, from uint64) int {
		t.Helper()
		seq, n := from, 0
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
			n += len(f.Batch.Records)
			seq = f.Batch.Seq
		}
		if f := read(c); f.Caught == nil || f.Caught.Seq != 5 || f.Caught.Epoch != a.store.Epoch() {
			t.Fatalf("after the batches: %+v, want a Caught frame at 5", f)
		}
		return n
	}

	t.Run("resumes from the cursor", func(t *testing.T) {
		c, done := serve(good)
		h := read(c)
		if h.Hello == nil || h.Hello.From != 2 || h.Hello.Last != 5 {
			t.Fatalf("hello %+v, want one resuming from 2 of 5", h.Hello)
		}
		start(c, 2)
		if n := records(c, 2); n != 3 {
			t.Errorf("%d records sent after the cursor, want 3", n)
		}
		c.Close()
		<-done
	})
	// A record whose state here is one device X sent in a batch up to X's
	// sequence 10 is skipped for a puller that has all of X's state at 10,
	// and sent to one that has it only at 9.
	other := crdt.DeviceID(77)
	var data [][]byte
	if err := a.store.Since(t.Context(), 0, 10, func(_ uint64, d []byte) error {
		data = append(data, bytes.Clone(d))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	entries, err := decodeRecords(data)
	if err != nil {
		t.Fatal(err)
	}
	n.prov.add(other, 3, func(int) uint64 { return 10 }, data, entries)
	for _, tc := range []struct {
		have mark
		want int
	}{{mark{3, 10}, 0}, {mark{3, 11}, 0}, {mark{3, 9}, 5}, {mark{4, 10}, 5}} {
		t.Run(fmt.Sprintf("a puller with all of X at %v", tc.have), func(t *testing.T) {
			c, done := serve(good)
			if h := read(c); h.Hello == nil {
				t.Fatalf("answered %+v, want a hello", h)
			}
			start(c, 0, wireMark{Device: uint64(other), Epoch: tc.have.epoch, Seq: tc.have.seq})
			if got := records(c, 0); got != tc.want {
				t.Errorf("%d records sent, want %d", got, tc.want)
			}
			c.Close()
			<-done
		})
	}
	for _, tc := range []struct {
		name  string
		start wireStart
	}{
		{"a start past the end", wireStart{Epoch: a.store.Epoch(), Seq: 6}},
		{"a start in another epoch", wireStart{Epoch: a.store.Epoch() + 1, Seq: 1}},
		{"a start of too many marks", wireStart{Epoch: a.store.Epoch(), Have: make([]wireMark, maxMarks+1)}},
	} {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			c, done := serve(good)
			if h := read(c); h.Hello == nil {
				t.Fatalf("answered %+v, want a hello", h)
			}
			var b bytes.Buffer
			if err := appendFrame(&b, &wireFrame{Start: &tc.start}); err != nil {
				t.Fatal(err)
			}
			c.Write(b.Bytes())
			if err := <-done; !errors.Is(err, ErrProtocol) {
				t.Errorf("serve ended with %v, want ErrProtocol", err)
			}
		})
	}
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
