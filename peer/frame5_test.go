package peer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/danyue/danyue/internal/poll"
)

// Version 5 frames: a varint length, minimal and at most 3 bytes, checked
// against MaxFrame before the body is read.
func TestVarintFrameLength(t *testing.T) {
	body := frameBody(t, &wireFrame{Ack: &wireAck{Seq: 300}})
	for _, tc := range []struct {
		name  string
		input []byte
		want  error // nil: the body comes back
	}{
		{"one byte", append([]byte{byte(len(body))}, body...), nil},
		{"empty", []byte{0}, ErrProtocol},
		{"not minimal", append([]byte{byte(len(body)) | 0x80, 0}, body...), ErrProtocol},
		{"four bytes", []byte{0xff, 0xff, 0xff, 0x01}, ErrFrameTooLarge},
		{"over MaxFrame", []byte{0x81, 0x80, 0x40}, ErrFrameTooLarge},
		{"cut in the length", []byte{0x81}, io.ErrUnexpectedEOF},
		{"cut in the body", append([]byte{byte(len(body))}, body[:2]...), io.ErrUnexpectedEOF},
		{"nothing", nil, io.EOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fr := frameReader{r: bytes.NewReader(tc.input), varint: true}
			got, err := fr.next()
			switch {
			case tc.want == nil && (err != nil || !bytes.Equal(got, body)):
				t.Fatalf("got %x, %v; want the body", got, err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	// A length of 2 and 3 bytes round-trips.
	for _, size := range []int{127, 128, 16383, 16384, MaxFrame - 16} {
		var buf bytes.Buffer
		rec := make([]byte, size)
		if err := appendFrameV(&buf, &wireFrame{Batch: &wireBatch{Seq: 1, Records: [][]byte{rec}}}, 5); err != nil {
			t.Fatal(err)
		}
		fr := frameReader{r: bytes.NewReader(buf.Bytes()), varint: true}
		got, err := fr.next()
		if err != nil {
			t.Fatalf("a record of %d bytes: %v", size, err)
		}
		if fm, err := decodeFrame(got); err != nil || len(fm.Batch.Records[0]) != size {
			t.Fatalf("a record of %d bytes: %v", size, err)
		}
	}
}

func TestTrailingGaps(t *testing.T) {
	for _, tc := range []struct {
		gaps []uint64
		span uint64
		want bool
	}{
		{[]uint64{1}, 1, true},
		{[]uint64{4}, 4, true},
		{[]uint64{2, 1, 1}, 4, true},
		{[]uint64{1}, 2, false}, // the record is not at the end
		{[]uint64{1, 2}, 3, false},
		{nil, 3, false},
		{[]uint64{1, 1}, 1, false},
	} {
		if got := trailingGaps(tc.gaps, tc.span); got != tc.want {
			t.Errorf("trailingGaps(%v, %d) = %v, want %v", tc.gaps, tc.span, got, tc.want)
		}
	}
}

// A version 5 puller fills in what a batch leaves out, and refuses a batch
// that says it anyway or could not hold its records.
func TestVersion5Batch(t *testing.T) {
	const epoch, cursor = 7, 10
	rec := []byte{1}
	for _, tc := range []struct {
		name     string
		b        wireBatch
		wantLast uint64
		wantGaps []uint64 // nil: refused
	}{
		{"one record at the end", wireBatch{Seq: 12, Records: [][]byte{rec}}, 12, []uint64{2}},
		{"records at the end", wireBatch{Seq: 14, Last: 20, Records: [][]byte{rec, rec, rec}}, 20, []uint64{2, 1, 1}},
		{"records with gaps", wireBatch{Seq: 14, Records: [][]byte{rec, rec}, Gaps: []uint64{1, 2}}, 14, []uint64{1, 2}},
		{"a cursor advance", wireBatch{Seq: 14}, 14, []uint64{}},
		{"an epoch", wireBatch{Epoch: epoch, Seq: 12, Records: [][]byte{rec}}, 0, nil},
		{"a last of seq", wireBatch{Seq: 12, Last: 12, Records: [][]byte{rec}}, 0, nil},
		{"a last before seq", wireBatch{Seq: 12, Last: 11}, 0, nil},
		{"more records than numbers", wireBatch{Seq: 11, Records: [][]byte{rec, rec}}, 0, nil},
		{"no advance", wireBatch{Seq: 10, Records: [][]byte{rec}}, 0, nil},
		{"going back", wireBatch{Seq: 9}, 0, nil},
		{"gaps past seq", wireBatch{Seq: 12, Records: [][]byte{rec}, Gaps: []uint64{3}}, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &puller{version: 5, theirs: hello{Epoch: epoch}, cursor: cursor}
			b := tc.b
			got, err := p.batch(&wireFrame{Batch: &b})
			if tc.wantGaps == nil {
				if !errors.Is(err, ErrProtocol) {
					t.Fatalf("got %+v, %v; want ErrProtocol", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Epoch != epoch || got.Last != tc.wantLast || fmt.Sprint(got.Gaps) != fmt.Sprint(tc.wantGaps) {
				t.Fatalf("got epoch %d last %d gaps %v; want %d, %d, %v", got.Epoch, got.Last, got.Gaps, epoch, tc.wantLast, tc.wantGaps)
			}
		})
	}
}

// A version 5 ack names no epoch; one that does is refused, and the rules
// of every version still hold.
func TestVersion5Ack(t *testing.T) {
	n := &Node{}
	for _, tc := range []struct {
		name string
		ack  wireAck
		ok   bool
	}{
		{"the stream's", wireAck{Seq: 12}, true},
		{"an epoch", wireAck{Epoch: 7, Seq: 12}, false},
		{"past what was sent", wireAck{Seq: 13}, false},
		{"going back", wireAck{Seq: 9}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sa := newStreamAcks(7, 5, 10)
			sa.sentBatch(12)
			err := n.acked(&peerState{}, sa, &tc.ack)
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrProtocol)) {
				t.Fatalf("got %v, want ok %v", err, tc.ok)
			}
			if tc.ok && sa.acked != 12 {
				t.Fatalf("acked %d, want 12", sa.acked)
			}
		})
	}
}

// Devices that speak versions 4 and 5 on different links of one chain
// converge: A pulls from B on version 4, C from B on version 5, and back.
func TestMixedVersionChain(t *testing.T) {
	_, devs := startDevices(t, "A", "B", "C")
	a, b, c := devs[0], devs[1], devs[2]
	for _, l := range []*pipeLink{
		openLink(a, b, 4), openLink(b, a, 4),
		openLink(c, b, ProtocolVersion), openLink(b, c, ProtocolVersion),
	} {
		t.Cleanup(l.cut)
	}
	for i, w := range []*device{a, c, b, a, c} {
		if err := w.store.setPosition(bookKey(i%2), uint64(i+1)*7); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, fmt.Sprintf("write %d everywhere", i), 10*time.Second, func() bool { return converged(a.store, b.store, c.store) })
	}
	// Held relays resolved: every puller's cursor at its sender's end.
	poll.Until(t, "cursors at every end", 3*(deferWindow+wantTimeout), func() bool {
		for _, pair := range [][2]*device{{a, b}, {b, a}, {b, c}, {c, b}} {
			last, _ := pair[1].store.Watch()
			if _, seq, _ := pair[0].store.Cursor(t.Context(), DeviceIDOf(pair[1].id)); seq != last {
				return false
			}
		}
		return true
	})
}
