package peer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/danyue/danyue/crdt"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

type failReader struct{ t *testing.T }

func (r failReader) Read([]byte) (int, error) {
	r.t.Fatal("the body of an oversized frame was read")
	return 0, nil
}

func header(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

// STYLE.md habit 8: the length is checked against the limit before anything
// is read or allocated for the body.
func TestFrameTooLargeIsNotRead(t *testing.T) {
	fr := frameReader{r: io.MultiReader(bytes.NewReader(header(MaxFrame+1)), failReader{t})}
	if _, err := fr.next(); !errors.Is(err, ErrFrameTooLarge) || !errors.Is(err, ErrProtocol) {
		t.Fatalf("got %v, want ErrFrameTooLarge", err)
	}
	if cap(fr.buf) != 0 {
		t.Fatalf("allocated %d bytes for a refused frame", cap(fr.buf))
	}
}

func TestFrameLimits(t *testing.T) {
	body := bytes.Repeat([]byte{0}, MaxFrame)
	fr := frameReader{r: bytes.NewReader(append(header(MaxFrame), body...))}
	if got, err := fr.next(); err != nil || len(got) != MaxFrame {
		t.Fatalf("frame of exactly MaxFrame: %d bytes, %v", len(got), err)
	}
	fr = frameReader{r: bytes.NewReader(header(0))}
	if _, err := fr.next(); !errors.Is(err, ErrProtocol) {
		t.Fatalf("empty frame: %v", err)
	}
	fr = frameReader{r: bytes.NewReader(append(header(10), 1, 2, 3))}
	if _, err := fr.next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated frame: %v", err)
	}
	fr = frameReader{r: bytes.NewReader(nil)}
	if _, err := fr.next(); err != io.EOF {
		t.Fatalf("no frame: %v, want io.EOF (a clean end)", err)
	}
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

// Equal frames encode to equal bytes (deterministic CBOR).
func TestFrameDeterministic(t *testing.T) {
	f := &wireFrame{Hello: &wireHello{Version: 1, Library: make([]byte, 16), Device: 9, Name: "x", Epoch: 1, WallMs: 5, WantSeq: 3}}
	a, b := frameBody(t, f), frameBody(t, f)
	if !bytes.Equal(a, b) {
		t.Fatal("two encodings differ")
	}
	g, err := decodeFrame(a)
	if err != nil || !bytes.Equal(frameBody(t, g), a) {
		t.Fatalf("decode then encode changed the bytes: %v", err)
	}
}

func fuzzSeeds(t testing.TB) [][]byte {
	lib := Library{ID: [16]byte{1}, Secret: [32]byte{2}}
	e, _ := crdt.SetPosition(bookKey(3), crdt.Timestamp{Wall: 10, Device: 4}, 5, 0.5)
	rec, _ := e.Encode()
	var out [][]byte
	for _, f := range []*wireFrame{
		{Hello: &wireHello{Version: 1, Library: lib.ID[:], Device: 7, Name: "phone", Epoch: 3, Last: 9, WallMs: 1700000000000, WantEpoch: 2, WantSeq: 5}},
		{Batch: &wireBatch{Epoch: 3, Seq: 9, Last: 9, Records: [][]byte{rec, rec}}},
		{Batch: &wireBatch{Epoch: 3, Seq: 10}},
		{Error: &wireError{Code: codeVersion, MinVersion: 2, Version: 3, Message: "upgrade"}},
	} {
		body := frameBody(t, f)
		out = append(out, append(header(uint32(len(body))), body...))
	}
	out = append(out, bytes.Join(out, nil), header(MaxFrame+1), header(0), []byte{0, 0, 0, 5, 0xa1})
	// Version 5: varint lengths, a pushed record, a catch-up, an ack.
	var v5 bytes.Buffer
	for _, f := range []*wireFrame{
		{Batch: &wireBatch{Seq: 9, Records: [][]byte{rec}, Whole: true}},
		{Batch: &wireBatch{Seq: 12, Last: 40, Records: [][]byte{rec, rec}, Gaps: []uint64{1, 3}}},
		{Ack: &wireAck{Seq: 12}},
	} {
		if err := appendFrameV(&v5, f, 5); err != nil {
			t.Fatal(err)
		}
	}
	// Version 6: a relay question and its answer.
	for _, f := range []*wireFrame{
		{Ask: wireAsk{19, 0, 41, 2, 42}},
		{Have: &wireHave{Lacks: []uint64{1}}},
	} {
		if err := appendFrameV(&v5, f, 6); err != nil {
			t.Fatal(err)
		}
	}
	out = append(out, v5.Bytes(), []byte{0x80, 0x00}, []byte{0xff, 0xff, 0xff, 0x7f})
	return out
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
		// The framing of versions 1 to 4, then of version 5.
		for _, v := range []uint64{4, 5} {
			fr := frameReader{r: bytes.NewReader(data), varint: varintFrames(v)}
			for range 8 {
				body, err := fr.next()
				if err != nil {
					break
				}
				fuzzBody(t, body, v, lib, id)
			}
		}
	})
}

// fuzzBody decodes a frame body as a stream of version v would, and checks
// that what decodes re-encodes canonically in v's framing.
func fuzzBody(t *testing.T, body []byte, v uint64, lib Library, id lpeer.ID) {
	peekHelloVersion(body)
	readHello(body, lib, id)
	fm, err := decodeFrame(body)
	if err != nil {
		return
	}
	if fm.Batch != nil {
		decodeRecords(fm.Batch.Records)
		// A version 5 puller fills in what the batch leaves out, or
		// refuses it, whatever the numbers.
		b := *fm.Batch
		b.Gaps = slices.Clone(b.Gaps)
		p := &puller{version: v, theirs: hello{Epoch: 7}, cursor: b.Seq / 2}
		if got, err := p.batch(&wireFrame{Batch: &b}); err == nil && len(got.Gaps) != len(got.Records) && v >= 4 {
			t.Fatalf("batch accepted with %d gaps for %d records", len(got.Gaps), len(got.Records))
		}
	}
	if fm.Ask != nil {
		// An Ask is refused, or is the Want it says.
		if w, err := fm.Ask.want(1); err == nil && !slices.Equal(askOf(w), fm.Ask) {
			t.Fatalf("ask %v read as %+v", fm.Ask, w)
		}
	}
	var buf bytes.Buffer
	if err := appendFrameV(&buf, fm, v); err != nil {
		t.Fatalf("re-encode a decoded frame: %v", err)
	}
	fr := frameReader{r: bytes.NewReader(buf.Bytes()), varint: varintFrames(v)}
	again, err := fr.next()
	if err != nil {
		t.Fatalf("read a re-encoded frame: %v", err)
	}
	fa, err := decodeFrame(again)
	if err != nil {
		t.Fatalf("decode a re-encoded frame: %v", err)
	}
	var buf2 bytes.Buffer
	appendFrameV(&buf2, fa, v)
	if !bytes.Equal(buf.Bytes(), buf2.Bytes()) {
		t.Fatalf("encoding is not stable:\n%x\n%x", buf.Bytes(), buf2.Bytes())
	}
}
