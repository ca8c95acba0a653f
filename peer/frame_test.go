package peer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/danyue/danyue/crdt"
	"github.com/fxamacker/cbor/v2"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

type failReader struct{ t *testing.T }

func (r failReader) Read([]byte) (int, error) {
	r.t.Fatal("the body of an oversized frame was read")
	return 0, nil
}

// header is the length prefix of a frame of n bytes.
func header(n uint32) []byte { return binary.AppendUvarint(nil, uint64(n)) }

// frameBody is the body of f, without its length.
func frameBody(t testing.TB, f *wireFrame) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := appendFrame(&buf, f); err != nil {
		t.Fatal(err)
	}
	_, n := binary.Uvarint(buf.Bytes())
	return buf.Bytes()[n:]
}

// The length is checked against the limit before anything is read or
// allocated for the body (docs/design.md, on input from peers).
func TestFrameTooLargeIsNotRead(t *testing.T) {
	fr := frameReader{r: io.MultiReader(bytes.NewReader(header(MaxFrame+1)), failReader{t})}
	if _, err := fr.next(); !errors.Is(err, ErrFrameTooLarge) || !errors.Is(err, ErrProtocol) {
		t.Fatalf("got %v, want ErrFrameTooLarge", err)
	}
	if cap(fr.buf) != 0 {
		t.Fatalf("allocated %d bytes for a refused frame", cap(fr.buf))
	}
}

// A frame length is a minimal varint of at most 3 bytes, checked against
// MaxFrame before the body is read.
func TestFrameLength(t *testing.T) {
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
			fr := frameReader{r: bytes.NewReader(tc.input)}
			got, err := fr.next()
			switch {
			case tc.want == nil && (err != nil || !bytes.Equal(got, body)):
				t.Fatalf("got %x, %v; want the body", got, err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	// Lengths of 1, 2 and 3 bytes round-trip, up to MaxFrame.
	for _, size := range []int{1, 127, 128, 16383, 16384, MaxFrame - 16} {
		var buf bytes.Buffer
		if err := appendFrame(&buf, &wireFrame{Batch: &wireBatch{Seq: 1, Records: [][]byte{make([]byte, size)}}}); err != nil {
			t.Fatal(err)
		}
		fr := frameReader{r: bytes.NewReader(buf.Bytes())}
		got, err := fr.next()
		if err != nil {
			t.Fatalf("a record of %d bytes: %v", size, err)
		}
		if fm, err := decodeFrame(got); err != nil || len(fm.Batch.Records[0]) != size {
			t.Fatalf("a record of %d bytes: %v", size, err)
		}
	}
	// A frame of exactly MaxFrame is read.
	fr := frameReader{r: bytes.NewReader(append(header(MaxFrame), make([]byte, MaxFrame)...))}
	if got, err := fr.next(); err != nil || len(got) != MaxFrame {
		t.Fatalf("frame of exactly MaxFrame: %d bytes, %v", len(got), err)
	}
}

func TestFrameLimits(t *testing.T) {
	// The decoder refuses a batch over the record limit.
	recs := make([][]byte, maxBatchRecords+1)
	for i := range recs {
		recs[i] = []byte{0}
	}
	if _, err := decodeFrame(frameBody(t, &wireFrame{Batch: &wireBatch{Seq: 1, Records: recs}})); !errors.Is(err, ErrProtocol) {
		t.Fatalf("batch of %d records: %v", len(recs), err)
	}
	if _, err := decodeFrame(frameBody(t, &wireFrame{Batch: &wireBatch{Seq: 1, Records: recs[:maxBatchRecords]}})); err != nil {
		t.Fatalf("batch of %d records: %v", maxBatchRecords, err)
	}
	// Two messages in one frame, and none.
	for _, f := range []*wireFrame{{Batch: &wireBatch{}, Error: &wireError{}}, {}} {
		if _, err := decodeFrame(frameBody(t, f)); !errors.Is(err, ErrProtocol) {
			t.Fatalf("%+v: %v", f, err)
		}
	}
}

// cborBody encodes v, a frame as a build of this protocol might send it
// (maps of integer keys), as a frame body.
func cborBody(t testing.TB, v any) []byte {
	t.Helper()
	b, err := cbor.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A later build adds optional fields to a message and new capability bits:
// a decoder reads past the fields it does not know, whatever their type,
// and a frame of a kind it does not know is refused (a later build sends
// one only to a peer whose hello has the bit for it).
func TestUnknownFieldsIgnored(t *testing.T) {
	future := map[any]any{99: "a field of the future", "text key": []any{1, 2, map[uint64]any{3: 4}}}
	with := func(m map[uint64]any) map[uint64]any {
		for k, v := range future {
			if k, ok := k.(int); ok {
				m[uint64(k)] = v
			}
		}
		return m
	}
	for _, tc := range []struct {
		name  string
		body  []byte
		check func(*wireFrame) bool
	}{
		{"hello", cborBody(t, map[uint64]any{1: with(map[uint64]any{1: make([]byte, 16), 2: 9, 4: 1, 6: 1, 10: uint64(1) << 63})}),
			func(f *wireFrame) bool { return f.Hello != nil && f.Hello.Device == 9 && f.Hello.Caps == 1<<63 }},
		{"batch", cborBody(t, map[uint64]any{2: with(map[uint64]any{1: 12, 2: 40})}),
			func(f *wireFrame) bool { return f.Batch != nil && f.Batch.Seq == 12 && f.Batch.Last == 40 }},
		{"ack", cborBody(t, map[uint64]any{4: with(map[uint64]any{1: 12})}),
			func(f *wireFrame) bool { return f.Ack != nil && f.Ack.Seq == 12 }},
		{"start", cborBody(t, map[uint64]any{5: with(map[uint64]any{0: 7, 1: 3})}),
			func(f *wireFrame) bool { return f.Start != nil && f.Start.Epoch == 7 && f.Start.Seq == 3 }},
		{"caught", cborBody(t, map[uint64]any{6: with(map[uint64]any{0: 7, 1: 3})}),
			func(f *wireFrame) bool { return f.Caught != nil && f.Caught.Seq == 3 }},
		{"have", cborBody(t, map[uint64]any{8: with(map[uint64]any{1: []uint64{2}})}),
			func(f *wireFrame) bool { return f.Have != nil && slices.Equal(f.Have.Lacks, []uint64{2}) }},
		{"error", cborBody(t, map[uint64]any{3: with(map[uint64]any{0: codeBusy})}),
			func(f *wireFrame) bool { return f.Error != nil && f.Error.Code == codeBusy }},
		{"a known message beside an unknown one", cborBody(t, map[uint64]any{4: map[uint64]any{1: 12}, 77: map[uint64]any{1: 2}}),
			func(f *wireFrame) bool { return f.Ack != nil && f.Ack.Seq == 12 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := decodeFrame(tc.body)
			if err != nil || !tc.check(f) {
				t.Fatalf("got %+v, %v", f, err)
			}
		})
	}
	if f, err := decodeFrame(cborBody(t, map[uint64]any{77: map[uint64]any{1: 2}})); !errors.Is(err, ErrProtocol) {
		t.Fatalf("a frame of an unknown kind: %+v, %v; want ErrProtocol", f, err)
	}
}

// Equal frames encode to equal bytes (deterministic CBOR).
func TestFrameDeterministic(t *testing.T) {
	f := &wireFrame{Hello: &wireHello{Library: make([]byte, 16), Device: 9, Name: "x", Epoch: 1, WallMs: 5, WantSeq: 3}}
	a, b := frameBody(t, f), frameBody(t, f)
	if !bytes.Equal(a, b) {
		t.Fatal("two encodings differ")
	}
	g, err := decodeFrame(a)
	if err != nil || !bytes.Equal(frameBody(t, g), a) {
		t.Fatalf("decode then encode changed the bytes: %v", err)
	}
}

// The frames of a change's path through a mesh are small: a pushed record
// with no more than its record, its ack, and the relay question and its
// answer of a device of a 20-device mesh (three sources held). A size that
// grows is a change of the protocol, not a detail.
func TestFrameSizes(t *testing.T) {
	e, err := crdt.SetPosition(bookKey(3), crdt.Timestamp{Wall: 1_700_000_000_000, Device: 4}, 5, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	size := func(f *wireFrame) int {
		var buf bytes.Buffer
		if err := appendFrame(&buf, f); err != nil {
			t.Fatal(err)
		}
		return buf.Len()
	}
	for _, tc := range []struct {
		name string
		f    *wireFrame
		want int
	}{
		{"push", &wireFrame{Batch: newBatch(41, 42, 42, [][]byte{rec}, []uint64{1}, true)}, len(rec) + 13},
		{"ack", &wireFrame{Ack: &wireAck{Seq: 42}}, 7},
		{"ask", &wireFrame{Ask: newAsk(19, []askItem{{0, 41}, {2, 42}, {7, 40}})}, 14},
		{"answer", &wireFrame{Have: &wireHave{}}, 4},
	} {
		if got := size(tc.f); got != tc.want {
			t.Errorf("%s: %d bytes, want %d", tc.name, got, tc.want)
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

// A puller fills in what a batch leaves out, and refuses a batch that says
// its last anyway or could not hold its records.
func TestBatchFilledIn(t *testing.T) {
	const cursor = 10
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
		{"gaps that need not be said", wireBatch{Seq: 12, Records: [][]byte{rec}, Gaps: []uint64{2}}, 12, []uint64{2}},
		{"a cursor advance", wireBatch{Seq: 14}, 14, []uint64{}},
		{"a last of seq", wireBatch{Seq: 12, Last: 12, Records: [][]byte{rec}}, 0, nil},
		{"a last before seq", wireBatch{Seq: 12, Last: 11}, 0, nil},
		{"more records than numbers", wireBatch{Seq: 11, Records: [][]byte{rec, rec}}, 0, nil},
		{"fewer gaps than records", wireBatch{Seq: 14, Records: [][]byte{rec, rec}, Gaps: []uint64{1}}, 0, nil},
		{"no advance", wireBatch{Seq: 10, Records: [][]byte{rec}}, 0, nil},
		{"going back", wireBatch{Seq: 9}, 0, nil},
		{"gaps past seq", wireBatch{Seq: 12, Records: [][]byte{rec}, Gaps: []uint64{3}}, 0, nil},
		{"a gap of 0", wireBatch{Seq: 12, Records: [][]byte{rec, rec}, Gaps: []uint64{1, 0}}, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &puller{cursor: cursor}
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
			if got.Last != tc.wantLast || fmt.Sprint(got.Gaps) != fmt.Sprint(tc.wantGaps) {
				t.Fatalf("got last %d gaps %v; want %d, %v", got.Last, got.Gaps, tc.wantLast, tc.wantGaps)
			}
		})
	}
}

// A relay question is a flat array, [list, index, seq, ...], of at most
// maxAskItems items, that the decoder's array limit lets through whole.
func TestAskForm(t *testing.T) {
	for _, tc := range []struct {
		name string
		ask  wireAsk
		ok   bool
	}{
		{"one item", wireAsk{3, 0, 41}, true},
		{"three items", wireAsk{19, 0, 41, 2, 42, 7, 40}, true},
		{"the most items", make(wireAsk, 1+2*maxAskItems), true},
		{"no item", wireAsk{3}, false},
		{"half an item", wireAsk{3, 0, 41, 2}, false},
		{"too many items", make(wireAsk, 3+2*maxAskItems), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list, items, err := tc.ask.parse()
			if !tc.ok {
				if !errors.Is(err, ErrProtocol) {
					t.Fatalf("got %d %v, %v; want ErrProtocol", list, items, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(newAsk(list, items), tc.ask) {
				t.Fatalf("%v became %d %v", tc.ask, list, items)
			}
			f, err := decodeFrame(frameBody(t, &wireFrame{Ask: tc.ask}))
			if err != nil || !slices.Equal(f.Ask, tc.ask) {
				t.Fatalf("round trip: %v, %v", f, err)
			}
		})
	}
}

func fuzzSeeds(t testing.TB) [][]byte {
	lib := Library{ID: [16]byte{1}, Secret: [32]byte{2}}
	e, _ := crdt.SetPosition(bookKey(3), crdt.Timestamp{Wall: 10, Device: 4}, 5, 0.5)
	rec, _ := e.Encode()
	var all bytes.Buffer
	var out [][]byte
	for _, f := range []*wireFrame{
		{Hello: &wireHello{Library: lib.ID[:], Device: 7, Name: "phone", Epoch: 3, Last: 9, WallMs: 1700000000000, WantEpoch: 2, WantSeq: 5, Caps: 1 << 40}},
		{Start: &wireStart{Epoch: 3, Seq: 2, Have: []wireMark{{Device: 9, Lineage: 4, Seq: 5}}}},
		{Batch: &wireBatch{Seq: 9, Records: [][]byte{rec}, Whole: true}},
		{Batch: &wireBatch{Seq: 12, Last: 40, Records: [][]byte{rec, rec}, Gaps: []uint64{1, 3}}},
		{Batch: &wireBatch{Seq: 13}},
		{Ack: &wireAck{Seq: 12}},
		{Caught: &wireCaught{Epoch: 3, Seq: 13, Cursors: []wireMark{{Device: 9, Lineage: 4, Seq: 5}}}},
		{Ask: wireAsk{19, 0, 41, 2, 42}},
		{Have: &wireHave{Lacks: []uint64{1}}},
		{Have: &wireHave{List: 2, Direct: []wireMark{{Device: 9, Lineage: 4}}}},
		{Error: &wireError{Code: codeLibrary, Message: "another library"}},
	} {
		var buf bytes.Buffer
		if err := appendFrame(&buf, f); err != nil {
			t.Fatal(err)
		}
		out = append(out, buf.Bytes())
		all.Write(buf.Bytes())
	}
	return append(out, all.Bytes(), header(MaxFrame+1), header(0), []byte{5, 0xa1},
		[]byte{0x80, 0x00}, []byte{0xff, 0xff, 0xff, 0x7f})
}

// FuzzFrame feeds arbitrary bytes to the frame reader and decoders: they
// never panic, and whatever decodes re-encodes canonically.
func FuzzFrame(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	lib := Library{ID: [16]byte{1}, Secret: [32]byte{2}}
	id, _ := lpeer.Decode("12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN")
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 256<<10 {
			return // the size limits have their own tests; keep minimization fast
		}
		fr := frameReader{r: bytes.NewReader(data)}
		for range 8 {
			body, err := fr.next()
			if err != nil {
				break
			}
			fuzzBody(t, body, lib, id)
		}
	})
}

// fuzzBody decodes a frame body as a stream would, and checks that what
// decodes re-encodes canonically.
func fuzzBody(t *testing.T, body []byte, lib Library, id lpeer.ID) {
	readHello(body, lib, id)
	fm, err := decodeFrame(body)
	if err != nil {
		return
	}
	if fm.Batch != nil {
		decodeRecords(fm.Batch.Records)
		// A puller fills in what the batch leaves out, or refuses it,
		// whatever the numbers.
		b := *fm.Batch
		b.Gaps = slices.Clone(b.Gaps)
		p := &puller{cursor: b.Seq / 2}
		if got, err := p.batch(&wireFrame{Batch: &b}); err == nil && len(got.Gaps) != len(got.Records) {
			t.Fatalf("batch accepted with %d gaps for %d records", len(got.Gaps), len(got.Records))
		}
	}
	if fm.Ask != nil {
		// An Ask is refused, or is the question it says.
		if list, items, err := fm.Ask.parse(); err == nil && !slices.Equal(newAsk(list, items), fm.Ask) {
			t.Fatalf("ask %v read as %d %v", fm.Ask, list, items)
		}
	}
	var buf bytes.Buffer
	if err := appendFrame(&buf, fm); err != nil {
		t.Fatalf("re-encode a decoded frame: %v", err)
	}
	fr := frameReader{r: bytes.NewReader(buf.Bytes())}
	again, err := fr.next()
	if err != nil {
		t.Fatalf("read a re-encoded frame: %v", err)
	}
	fa, err := decodeFrame(again)
	if err != nil {
		t.Fatalf("decode a re-encoded frame: %v", err)
	}
	var buf2 bytes.Buffer
	appendFrame(&buf2, fa)
	if !bytes.Equal(buf.Bytes(), buf2.Bytes()) {
		t.Fatalf("encoding is not stable:\n%x\n%x", buf.Bytes(), buf2.Bytes())
	}
}
