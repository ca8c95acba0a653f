package peer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/fxamacker/cbor/v2"
)

// The sync protocol's framing: every frame is a length followed by that
// many bytes of deterministic CBOR, one wireFrame holding exactly one of its
// fields. The length is 4 bytes big-endian up to version 4 and a minimal
// unsigned varint of at most 3 bytes from version 5 on (most frames of a
// busy mesh are one-record batches and acks of a few dozen bytes, for which
// the 4 bytes were a tenth of the traffic). The length is checked against
// MaxFrame before anything is allocated for the body, and the decoder's
// limits bound what a body of that size can make it allocate.

// MaxFrame bounds the body of one frame. A batch is cut well below it
// (maxBatchBytes of records), so a frame near the limit is already suspect.
const MaxFrame = 1 << 20

const (
	// maxBatchRecords bounds the records of one batch, on both sides: the
	// sender never puts more in a batch and the receiver's decoder refuses
	// more.
	maxBatchRecords = 512
	// maxBatchBytes is where the sender cuts a batch by size. One record is
	// at most crdt.MaxEncodedSize, so a batch stays below MaxFrame.
	maxBatchBytes = 256 << 10
	// maxErrorMessage bounds the human-readable text of an Error frame.
	maxErrorMessage = 512
)

// ErrProtocol is wrapped by every error about what a peer sent that breaks
// the protocol: an oversized or empty frame, malformed CBOR, an unexpected
// frame, a record that fails validation.
var ErrProtocol = errors.New("sync protocol violation")

// ErrFrameTooLarge is returned for a frame whose announced length exceeds
// MaxFrame; nothing of it is read.
var ErrFrameTooLarge = fmt.Errorf("%w: frame too large", ErrProtocol)

func protoErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...)
}

// Wire types. Keys are small integers and never reused; the domain side of
// the protocol (hello.go, sync_*.go) only sees them through this file.

type wireFrame struct {
	Hello *wireHello `cbor:"1,keyasint,omitempty"`
	Batch *wireBatch `cbor:"2,keyasint,omitempty"`
	Error *wireError `cbor:"3,keyasint,omitempty"`
	Ack   *wireAck   `cbor:"4,keyasint,omitempty"`
	// Version 4.
	Start  *wireStart  `cbor:"5,keyasint,omitempty"`
	Caught *wireCaught `cbor:"6,keyasint,omitempty"`
	Want   *wireWant   `cbor:"7,keyasint,omitempty"`
	Have   *wireHave   `cbor:"8,keyasint,omitempty"`
	// Version 6.
	Ask wireAsk `cbor:"9,keyasint,omitempty"`
}

// wireHello opens a stream in both directions. Key 0 (the version) must keep
// its meaning in every future version: it is read before anything else.
type wireHello struct {
	Version uint64 `cbor:"0,keyasint"`
	Library []byte `cbor:"1,keyasint"`
	Device  uint64 `cbor:"2,keyasint"`
	Name    string `cbor:"3,keyasint,omitempty"`
	Epoch   uint64 `cbor:"4,keyasint"`
	Last    uint64 `cbor:"5,keyasint,omitempty"`
	WallMs  uint64 `cbor:"6,keyasint"`
	// Want is set by the puller only: the epoch of the sender's store it
	// last synced from and its cursor in it.
	WantEpoch uint64 `cbor:"7,keyasint,omitempty"`
	WantSeq   uint64 `cbor:"8,keyasint,omitempty"`
	// From is set by the sender only: the sequence number its batches start
	// after. It is the puller's cursor, or 0 when the sender cannot resume
	// from it (another epoch, or a cursor past its end).
	From uint64 `cbor:"9,keyasint,omitempty"`
}

// wireBatch carries the sender's records with sequence numbers in (the
// previous batch's Seq, Seq], each record's current encoded state, so the
// receiver can advance its cursor to Seq once it has applied them. Records
// may be fewer than the sequence numbers covered (superseded changes, and
// records the receiver is known to have) and may even be empty.
//
// From version 5 on, the fields the stream already fixes are left out:
// Epoch is absent (the sender's hello gave it), Last is absent when it is
// Seq, and Gaps is absent when the records have the last sequence numbers
// up to Seq (one record at Seq: a pushed change).
type wireBatch struct {
	Epoch   uint64   `cbor:"0,keyasint,omitempty"`
	Seq     uint64   `cbor:"1,keyasint"`
	Last    uint64   `cbor:"2,keyasint,omitempty"`
	Records [][]byte `cbor:"3,keyasint,omitempty"`
	// Gaps (version 4) gives each record's sequence number in the sender's
	// store, as its gap from the previous record's (the first's from the
	// stream's cursor): what a record's provenance is (knowledge.go).
	Gaps []uint64 `cbor:"4,keyasint,omitempty"`
	// Whole (version 4) says that the batch ends a pass that was not cut
	// short, with nothing newer in the sender's store: the receiver now
	// includes all of the sender's state as of Seq (fanout.go).
	Whole bool `cbor:"5,keyasint,omitempty"`
}

// wireAck is sent by the puller, on streams of protocol version 2 and
// later, after it has applied a batch: everything up to Seq of the sender's
// store (of Epoch) is merged and durable here. From version 5 on Epoch is
// absent: it is the stream's.
type wireAck struct {
	Epoch uint64 `cbor:"0,keyasint,omitempty"`
	Seq   uint64 `cbor:"1,keyasint"`
}

// wireStart is the puller's second frame on a stream of version 4 and
// later, after the hellos: where the sender's batches start (Seq, of the
// sender's store Epoch as its hello gave it; at most its hello's Last) and
// the puller's full marks (knowledge.go), by which the sender skips records
// the puller has.
type wireStart struct {
	Epoch uint64     `cbor:"0,keyasint"`
	Seq   uint64     `cbor:"1,keyasint,omitempty"`
	Have  []wireMark `cbor:"2,keyasint,omitempty"`
}

// wireCaught follows a batch, on streams of version 4 and later, when the
// sender has sent everything up to its last sequence number Seq: the puller
// now includes the sender's whole state of that moment, and with it the
// sender's cursors (Cursors) and full marks (Full) that changed since the
// stream's previous Caught frame (all of them in the first).
type wireCaught struct {
	Epoch   uint64     `cbor:"0,keyasint"`
	Seq     uint64     `cbor:"1,keyasint,omitempty"`
	Cursors []wireMark `cbor:"2,keyasint,omitempty"`
	Full    []wireMark `cbor:"3,keyasint,omitempty"`
}

// wireWant (version 4) is a sender's question before it relays records
// that came from devices the puller pulls from itself (fanout.go): has the
// puller all of each listed device's state as of the given sequence number?
// Items index the puller's direct list of version List.
type wireWant struct {
	N     uint64         `cbor:"0,keyasint"`
	List  uint64         `cbor:"1,keyasint"`
	Items []wireWantItem `cbor:"2,keyasint,omitempty"`
}

type wireWantItem struct {
	_     struct{} `cbor:",toarray"`
	Index uint64
	Seq   uint64
}

// wireAsk (version 6) is a Want in a flat array, [List, Index, Seq,
// Index, Seq, ...], numbered by its place among the stream's Asks: a busy
// mesh sends one for most changes and stream, and the map keys, the item
// arrays and the number were a third of it.
type wireAsk []uint64

// maxWantItems bounds the items of a Want, so that its Ask stays within
// the decoder's array limit.
const maxWantItems = (maxBatchRecords - 1) / 2

// want returns a as a Want numbered n.
func (a wireAsk) want(n uint64) (*wireWant, error) {
	if len(a) < 3 || len(a)%2 == 0 || len(a) > 1+2*maxWantItems {
		return nil, protoErrorf("ask of %d numbers", len(a))
	}
	w := &wireWant{N: n, List: a[0], Items: make([]wireWantItem, 0, len(a)/2)}
	for i := 1; i < len(a); i += 2 {
		w.Items = append(w.Items, wireWantItem{Index: a[i], Seq: a[i+1]})
	}
	return w, nil
}

// askOf returns w as an Ask: its number is its place on the stream.
func askOf(w *wireWant) wireAsk {
	a := make(wireAsk, 0, 1+2*len(w.Items))
	a = append(a, w.List)
	for _, it := range w.Items {
		a = append(a, it.Index, it.Seq)
	}
	return a
}

// wireHave (version 4) is sent by a puller: either the answer to Want N,
// the indices of its items the puller lacks (Lacks), or (N 0) its direct
// list of version List: the devices it pulls from itself, with the epoch
// of each one's store (Seq unused). From version 6 an answer has no N (it
// answers the stream's oldest unanswered Ask) and no List, which a direct
// list always has.
type wireHave struct {
	N      uint64     `cbor:"0,keyasint,omitempty"`
	Lacks  []uint64   `cbor:"1,keyasint,omitempty"`
	List   uint64     `cbor:"2,keyasint,omitempty"`
	Direct []wireMark `cbor:"3,keyasint,omitempty"`
}

// wireMark is a position in one device's change sequence.
type wireMark struct {
	_      struct{} `cbor:",toarray"`
	Device uint64
	Epoch  uint64
	Seq    uint64
}

// wireError is the last frame of a refused stream.
type wireError struct {
	Code       uint64 `cbor:"0,keyasint"`
	MinVersion uint64 `cbor:"1,keyasint,omitempty"`
	Version    uint64 `cbor:"2,keyasint,omitempty"`
	Message    string `cbor:"3,keyasint,omitempty"`
}

var (
	frameEncMode = mustFrameEncMode()
	frameDecMode = mustFrameDecMode(true)
	// helloPeekMode reads only the version of a hello of any version: it
	// ignores fields it does not know, so a newer peer's hello still yields
	// a clear "too new" instead of "unknown field".
	helloPeekMode = mustFrameDecMode(false)
)

func mustFrameEncMode() cbor.EncMode {
	m, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err)
	}
	return m
}

func mustFrameDecMode(strict bool) cbor.DecMode {
	opts := cbor.DecOptions{
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
		IndefLength:      cbor.IndefLengthForbidden,
		TagsMd:           cbor.TagsForbidden,
		MaxNestedLevels:  4,
		MaxArrayElements: maxBatchRecords,
		MaxMapPairs:      16,
		UTF8:             cbor.UTF8RejectInvalid,
	}
	if strict {
		opts.ExtraReturnErrors = cbor.ExtraDecErrorUnknownField
	} else {
		opts.MaxNestedLevels = 16
		opts.MaxMapPairs = 256
	}
	m, err := opts.DecMode()
	if err != nil {
		panic(err)
	}
	return m
}

// varintFrames reports whether frames of a stream of version v have a
// varint length.
func varintFrames(v uint64) bool { return v >= 5 }

// maxVarintPrefix is the longest varint length: MaxFrame needs 21 bits.
const maxVarintPrefix = 3

// appendFrame appends the encoding of f with a 4-byte length to buf: the
// framing of versions 1 to 4.
func appendFrame(buf *bytes.Buffer, f *wireFrame) error {
	return appendFrameV(buf, f, 4)
}

// appendFrameV appends the length-prefixed encoding of f to buf, framed
// for a stream of version v.
func appendFrameV(buf *bytes.Buffer, f *wireFrame, v uint64) error {
	start := buf.Len()
	if err := frameEncMode.NewEncoder(buf).Encode(f); err != nil {
		buf.Truncate(start)
		return fmt.Errorf("encode frame: %w", err)
	}
	n := buf.Len() - start
	if n > MaxFrame {
		buf.Truncate(start)
		return fmt.Errorf("encode frame: %d bytes exceeds %d", n, MaxFrame)
	}
	var hdr [binary.MaxVarintLen32]byte
	var prefix []byte
	if varintFrames(v) {
		prefix = hdr[:binary.PutUvarint(hdr[:], uint64(n))]
	} else {
		binary.BigEndian.PutUint32(hdr[:], uint32(n))
		prefix = hdr[:4]
	}
	// Shift the body up to make room for the length, which is only known
	// once the body is encoded.
	buf.Write(prefix)
	b := buf.Bytes()[start:]
	copy(b[len(prefix):], b[:n])
	copy(b, prefix)
	return nil
}

// frameReader reads frames from one stream, reusing its buffer.
type frameReader struct {
	r   io.Reader
	hdr [4]byte
	buf []byte
	// started, if set, is called between a frame's length and its body: a
	// reader waits for the next frame for as long as it takes (push streams
	// are idle most of the time), but a frame once begun must arrive in
	// bounded time.
	started func()
	// finished, if set, is called after a whole frame of size bytes (the
	// body) and its length prefix of prefix bytes was read.
	finished func(size, prefix int)
	// varint: the stream's frames have a varint length (version 5).
	varint bool
}

// next returns the body of the next frame, valid until the following call.
func (fr *frameReader) next() ([]byte, error) {
	var n uint32
	prefix := 4
	if fr.varint {
		var err error
		if n, prefix, err = fr.varintLength(); err != nil {
			return nil, err
		}
	} else {
		if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
			return nil, err
		}
		n = binary.BigEndian.Uint32(fr.hdr[:])
		if fr.started != nil {
			fr.started()
		}
	}
	if n == 0 {
		return nil, protoErrorf("empty frame")
	}
	if n > MaxFrame {
		return nil, fmt.Errorf("%w: %d bytes announced, limit %d", ErrFrameTooLarge, n, MaxFrame)
	}
	// Reuse the buffer, but do not keep a large one for an idle stream
	// because of one large frame.
	if cap(fr.buf) < int(n) || (cap(fr.buf) > 64<<10 && n <= 64<<10) {
		fr.buf = make([]byte, max(n, 4<<10))
	}
	body := fr.buf[:n]
	if _, err := io.ReadFull(fr.r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read frame body: %w", err)
	}
	if fr.finished != nil {
		fr.finished(len(body), prefix)
	}
	return body, nil
}

// varintLength reads a varint frame length: minimal (no trailing zero
// byte), at most maxVarintPrefix bytes. The first byte may take as long as
// it takes; the rest are part of the frame begun.
func (fr *frameReader) varintLength() (uint32, int, error) {
	var v uint32
	for i := range maxVarintPrefix {
		if _, err := io.ReadFull(fr.r, fr.hdr[:1]); err != nil {
			if i > 0 && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, 0, err
		}
		if i == 0 && fr.started != nil {
			fr.started()
		}
		c := fr.hdr[0]
		v |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			if c == 0 && i > 0 {
				return 0, 0, protoErrorf("frame length not minimally encoded")
			}
			return v, i + 1, nil
		}
	}
	return 0, 0, fmt.Errorf("%w: a length of more than %d bytes", ErrFrameTooLarge, maxVarintPrefix)
}

// decodeFrame decodes a frame body that must hold exactly one message.
func decodeFrame(body []byte) (*wireFrame, error) {
	var f wireFrame
	if err := frameDecMode.Unmarshal(body, &f); err != nil {
		return nil, protoErrorf("decode frame: %w", err)
	}
	n := 0
	for _, set := range []bool{f.Hello != nil, f.Batch != nil, f.Error != nil, f.Ack != nil, f.Start != nil, f.Caught != nil, f.Want != nil, f.Have != nil, f.Ask != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, protoErrorf("frame holds %d messages, want exactly 1", n)
	}
	return &f, nil
}

// peekHelloVersion returns the version of a hello frame of any version, and
// whether the body is a hello at all.
func peekHelloVersion(body []byte) (uint64, bool) {
	var f struct {
		Hello *struct {
			Version uint64 `cbor:"0,keyasint"`
		} `cbor:"1,keyasint"`
	}
	if err := helloPeekMode.Unmarshal(body, &f); err != nil || f.Hello == nil {
		return 0, false
	}
	return f.Hello.Version, true
}
