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

// pipeSender is a node A of five records that serves pulls on pipes, and
// the puller the test plays.
type pipeSender struct {
	lib    Library
	a      *device
	n      *Node
	puller *device
	good   *wireHello // a puller's hello A accepts, resuming from 2
}

func newPipeSender(t *testing.T) *pipeSender {
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
	good := &wireHello{Library: lib.ID[:], Device: uint64(DeviceIDOf(puller.id)), Name: "puller", Epoch: 9, WantEpoch: a.store.Epoch(), WantSeq: 2}
	return &pipeSender{lib: lib, a: a, n: n, puller: puller, good: good}
}

// serve opens a stream on a pipe with hello h, and returns the puller's
// end and where serve's result arrives.
func (ps *pipeSender) serve(t *testing.T, h *wireHello) (net.Conn, chan error) {
	ours, theirs := net.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := ps.n.serve(ours, func() { ours.Close() }, ps.puller.id)
		ours.Close()
		done <- err
	}()
	theirs.SetDeadline(time.Now().Add(10 * time.Second))
	ps.write(t, theirs, &wireFrame{Hello: h})
	return theirs, done
}

func (ps *pipeSender) write(t *testing.T, c net.Conn, f *wireFrame) {
	t.Helper()
	var b bytes.Buffer
	if err := appendFrame(&b, f); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(b.Bytes()); err != nil {
		t.Fatal(err)
	}
}

func (ps *pipeSender) read(t *testing.T, c net.Conn) *wireFrame {
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

// start sends the puller's Start frame at seq, with full marks have.
func (ps *pipeSender) start(t *testing.T, c net.Conn, seq uint64, have ...wireMark) {
	t.Helper()
	ps.write(t, c, &wireFrame{Start: &wireStart{Epoch: ps.a.store.Epoch(), Seq: seq, Have: have}})
}

// records reads batches up to seq 5 and the Caught frame that follows, and
// returns how many records they held.
func (ps *pipeSender) records(t *testing.T, c net.Conn, from uint64) int {
	t.Helper()
	seq, n := from, 0
	for seq < 5 {
		f := ps.read(t, c)
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
	if f := ps.read(t, c); f.Caught == nil || f.Caught.Seq != 5 || f.Caught.Epoch != ps.a.store.Epoch() {
		t.Fatalf("after the batches: %+v, want a Caught frame at 5", f)
	}
	return n
}

func TestSenderResumesFromCursor(t *testing.T) {
	ps := newPipeSender(t)
	c, done := ps.serve(t, ps.good)
	h := ps.read(t, c)
	if h.Hello == nil || h.Hello.From != 2 || h.Hello.Last != 5 {
		t.Fatalf("hello %+v, want one resuming from 2 of 5", h.Hello)
	}
	ps.start(t, c, 2)
	if n := ps.records(t, c, 2); n != 3 {
		t.Errorf("%d records sent after the cursor, want 3", n)
	}
	c.Close()
	<-done
}

// A record whose state here is one device X sent in a batch up to X's
// sequence 10 is skipped for a puller that has all of X's state at 10, and
// sent to one that has it only at 9.
func TestSenderSkipsWhatPullerHas(t *testing.T) {
	ps := newPipeSender(t)
	other := crdt.DeviceID(77)
	var data [][]byte
	if err := ps.a.store.Since(t.Context(), 0, 10, func(_ uint64, d []byte) error {
		data = append(data, bytes.Clone(d))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	entries, err := decodeRecords(data)
	if err != nil {
		t.Fatal(err)
	}
	ps.n.prov.add(other, 3, func(int) uint64 { return 10 }, data, entries)
	for _, tc := range []struct {
		have mark
		want int
	}{{mark{3, 10}, 0}, {mark{3, 11}, 0}, {mark{3, 9}, 5}, {mark{4, 10}, 5}} {
		t.Run(fmt.Sprintf("a puller with all of X at %v", tc.have), func(t *testing.T) {
			c, done := ps.serve(t, ps.good)
			if h := ps.read(t, c); h.Hello == nil {
				t.Fatalf("answered %+v, want a hello", h)
			}
			ps.start(t, c, 0, wireMark{Device: uint64(other), Lineage: tc.have.lineage, Seq: tc.have.seq})
			if got := ps.records(t, c, 0); got != tc.want {
				t.Errorf("%d records sent, want %d", got, tc.want)
			}
			c.Close()
			<-done
		})
	}
}

func TestSenderRefuses(t *testing.T) {
	ps := newPipeSender(t)
	epoch := ps.a.store.Epoch()
	for _, tc := range []struct {
		name  string
		start wireStart
	}{
		{"a start past the end", wireStart{Epoch: epoch, Seq: 6}},
		{"a start in another epoch", wireStart{Epoch: epoch + 1, Seq: 1}},
		{"a start of too many marks", wireStart{Epoch: epoch, Have: make([]wireMark, maxMarks+1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, done := ps.serve(t, ps.good)
			if h := ps.read(t, c); h.Hello == nil {
				t.Fatalf("answered %+v, want a hello", h)
			}
			ps.write(t, c, &wireFrame{Start: &tc.start})
			if err := <-done; !errors.Is(err, ErrProtocol) {
				t.Errorf("serve ended with %v, want ErrProtocol", err)
			}
		})
	}
	t.Run("another library", func(t *testing.T) {
		bad := *ps.good
		other := newLib(t)
		bad.Library = other.ID[:]
		c, done := ps.serve(t, &bad)
		if f := ps.read(t, c); f.Error == nil {
			t.Fatalf("answered %+v, want an Error frame", f)
		}
		if err := <-done; !errors.Is(err, ErrOtherLibrary) {
			t.Errorf("serve ended with %v, want ErrOtherLibrary", err)
		}
	})
}

func TestSenderStartsOverPastEnd(t *testing.T) {
	ps := newPipeSender(t)
	past := *ps.good
	past.WantSeq = 99
	c, done := ps.serve(t, &past)
	if h := ps.read(t, c); h.Hello == nil || h.Hello.From != 0 {
		t.Fatalf("hello %+v, want one from 0", h.Hello)
	}
	c.Close()
	<-done
}
