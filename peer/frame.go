package peer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/fxamacker/cbor/v2"
)

// The sync protocol's framing: every frame is a length, a minimal unsigned
// varint of at most 3 bytes, followed by that many bytes of deterministic
// CBOR, one wireFrame holding exactly one of its fields. Most frames of a
// busy mesh are one-record batches and acks of a few dozen bytes, which is
// why the length is a varint and why a batch and an ack leave out what the
// stream fixes. The length is checked against MaxFrame before anything is
// allocated for the body, and the decoder's limits bound what a body of
// that size can make it allocate (docs/design.md, on input from peers).
//
// A decoder ignores map keys it does not know, in every frame and in the
// hello, so that a later build can add optional fields an older one reads
// past; a frame that holds no message this build knows is refused, so a
// new kind of frame is only sent to a peer whose hello has the capability
// bit that announces it (hello.go). Arrays (wireMark, wireAsk) have a fixed
// form: what a later build adds goes in a map.

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
	// maxVarintPrefix is the longest frame length: MaxFrame needs 21 bits.
	maxVarintPrefix = 3
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
	Hello  *wireHello  `cbor:"1,keyasint,omitempty"`
	Batch  *wireBatch  `cbor:"2,keyasint,omitempty"`
	Error  *wireError  `cbor:"3,keyasint,omitempty"`
	Ack    *wireAck    `cbor:"4,keyasint,omitempty"`
	Start  *wireStart  `cbor:"5,keyasint,omitempty"`
	Caught *wireCaught `cbor:"6,keyasint,omitempty"`
	Have   *wireHave   `cbor:"8,keyasint,omitempty"`
	Ask    wireAsk     `cbor:"9,keyasint,omitempty"`
	// Addrs is sent only to a puller whose hello has capAddrs
	// (addrbook.go).
	Addrs []wireKnown `cbor:"10,keyasint,omitempty"`
}

// wireHello opens a stream in both directions.
type wireHello struct {
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
	// Caps holds a bit per optional ability the hello's sender has
	// (hello.go); bits this build does not know are ignored.
	Caps uint64 `cbor:"10,keyasint,omitempty"`
	// Ticket is set by a puller that is not a member of the library yet,
	// in its hello to the device whose long invite code it joined by: the
	// code's one-time ticket, which that device redeems (Config.Redeem).
	Ticket []byte `cbor:"11,keyasint,omitempty"`
	// Addrs is how to reach its sender and the other members it knows of,
	// the sender first (addrbook.go); a build without it skips it.
	Addrs []wireKnown `cbor:"12,keyasint,omitempty"`
	// Run is a random number its sender drew when its node started: what
	// a peer sent in one run is in its store for that run only (lineage,
	// knowledge.go). A build without it sends none, which stands for one
	// run.
	Run uint64 `cbor:"13,keyasint,omitempty"`
}

// wireBatch carries the sender's records with sequence numbers in (the
// previous batch's Seq, Seq], each record's current encoded state, so the
// receiver can advance its cursor to Seq once it has applied them. Records
// may be fewer than the sequence numbers covered (superseded changes, and
// records the receiver is known to have) and may even be empty.
//
// What the stream fixes is left out: the epoch (the sender's hello gave
// it), Last when it is Seq, and Gaps when the records have the last
// sequence numbers up to Seq (one record at Seq: a pushed change).
type wireBatch struct {
	Seq     uint64   `cbor:"1,keyasint"`
	Last    uint64   `cbor:"2,keyasint,omitempty"`
	Records [][]byte `cbor:"3,keyasint,omitempty"`
	// Gaps gives each record's sequence number in the sender's store, as
	// its gap from the previous record's (the first's from the stream's
	// cursor): what a record's provenance is (knowledge.go).
	Gaps []uint64 `cbor:"4,keyasint,omitempty"`
	// Whole says that the batch ends a pass that was not cut short, with
	// nothing newer in the sender's store: the receiver now includes all
	// of the sender's state as of Seq (fanout.go).
	Whole bool `cbor:"5,keyasint,omitempty"`
	// Left, optional, is how many records the sender has still to send
	// after this batch in its current catch-up, as it counted them at its
	// start (togo.go); absent when it did not count, and from older builds.
	Left uint64 `cbor:"6,keyasint,omitempty"`
}

// wireAck is sent by the puller after it has applied a batch: everything
// up to Seq of the sender's store (of the stream's epoch) is merged and
// durable here.
type wireAck struct {
	Seq uint64 `cbor:"1,keyasint"`
}

// wireStart is the puller's second frame, after the hellos: where the
// sender's batches start (Seq, of the sender's store Epoch as its hello
// gave it; at most its hello's Last) and the puller's full marks
// (knowledge.go), by which the sender skips records the puller has.
type wireStart struct {
	Epoch uint64     `cbor:"0,keyasint"`
	Seq   uint64     `cbor:"1,keyasint,omitempty"`
	Have  []wireMark `cbor:"2,keyasint,omitempty"`
}

// wireCaught follows a batch when the sender has sent everything up to its
// last sequence number Seq: the puller now includes the sender's whole
// state of that moment, and with it the sender's cursors (Cursors) and
// full marks (Full) that changed since the stream's previous Caught frame
// (all of them in the first).
type wireCaught struct {
	Epoch   uint64     `cbor:"0,keyasint"`
	Seq     uint64     `cbor:"1,keyasint,omitempty"`
	Cursors []wireMark `cbor:"2,keyasint,omitempty"`
	Full    []wireMark `cbor:"3,keyasint,omitempty"`
}

// wireAsk is a sender's question before it relays records that came from
// devices the puller pulls from itself (fanout.go): has the puller all of
// each listed device's state as of the given sequence number? It is a flat
// array, [List, Index, Seq, Index, Seq, ...], where each Index is into the
// puller's direct list of version List; a busy mesh sends one for most
// changes and streams, so it carries no map keys and no number: Asks and
// their answers are numbered by their place on the stream.
type wireAsk []uint64

// askItem is one question of an Ask: the device at index of the puller's
// direct list, as of its sequence number seq.
type askItem struct{ index, seq uint64 }

// maxAskItems bounds the items of an Ask, so that it stays within the
// decoder's array limit.
const maxAskItems = (maxBatchRecords - 1) / 2

// newAsk returns the Ask of items about direct list list.
func newAsk(list uint64, items []askItem) wireAsk {
	a := make(wireAsk, 0, 1+2*len(items))
	a = append(a, list)
	for _, it := range items {
		a = append(a, it.index, it.seq)
	}
	return a
}

// parse returns the direct list an Ask is about and its items.
func (a wireAsk) parse() (list uint64, items []askItem, err error) {
	if len(a) < 3 || len(a)%2 == 0 || len(a) > 1+2*maxAskItems {
		return 0, nil, protoErrorf("ask of %d numbers", len(a))
	}
	items = make([]askItem, 0, len(a)/2)
	for i := 1; i < len(a); i += 2 {
		items = append(items, askItem{index: a[i], seq: a[i+1]})
	}
	return a[0], items, nil
}

// wireHave is sent by a puller: either its direct list of version List
// (never 0): the devices it pulls from itself, with the epoch of each
// one's store (Seq unused); or, without a List, the answer to the stream's
// oldest unanswered Ask: the indices of its items the puller lacks.
type wireHave struct {
	Lacks  []uint64   `cbor:"1,keyasint,omitempty"`
	List   uint64     `cbor:"2,keyasint,omitempty"`
	Direct []wireMark `cbor:"3,keyasint,omitempty"`
}

// wireMark is a position in one device's change sequence of one lineage
// (knowledge.go).
type wireMark struct {
	_       struct{} `cbor:",toarray"`
	Device  uint64
	Lineage uint64
	Seq     uint64
}

// wireError is the last frame of a refused stream.
type wireError struct {
	Code    uint64 `cbor:"0,keyasint"`
	Message string `cbor:"3,keyasint,omitempty"`
}

var (
	frameEncMode = mustFrameEncMode()
	frameDecMode = mustFrameDecMode()
)

func mustFrameEncMode() cbor.EncMode {
	m, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err)
	}
	return m
}

// mustFrameDecMode is the decoding of every message of the peer protocols.
// Unknown map keys are skipped (the default: no ExtraDecErrorUnknownField),
// which is what lets a later build add optional fields. The limits bound
// what a body can make the decoder allocate, with room for such fields: a
// frame nests a mark array four levels deep.
func mustFrameDecMode() cbor.DecMode {
	m, err := cbor.DecOptions{
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
		IndefLength:      cbor.IndefLengthForbidden,
		TagsMd:           cbor.TagsForbidden,
		MaxNestedLevels:  8,
		MaxArrayElements: maxBatchRecords,
		MaxMapPairs:      32,
		UTF8:             cbor.UTF8RejectInvalid,
	}.DecMode()
	if err != nil {
		panic(err)
	}
	return m
}

// appendFrame appends the length-prefixed encoding of f to buf.
func appendFrame(buf *bytes.Buffer, f *wireFrame) error {
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
	prefix := hdr[:binary.PutUvarint(hdr[:], uint64(n))]
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
	hdr [1]byte
	buf []byte
	// started, if set, is called between a frame's first byte and the
	// rest: a reader waits for the next frame for as long as it takes
	// (push streams are idle most of the time), but a frame once begun
	// must arrive in bounded time.
	started func()
	// finished, if set, is called after a whole frame of size bytes (the
	// body) and its length prefix of prefix bytes was read.
	finished func(size, prefix int)
}

// next returns the body of the next frame, valid until the following call.
func (fr *frameReader) next() ([]byte, error) {
	n, prefix, err := fr.length()
	if err != nil {
		return nil, err
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

// length reads a frame length: minimal (no trailing zero byte), at most
// maxVarintPrefix bytes. The first byte may take as long as it takes; the
// rest are part of the frame begun.
func (fr *frameReader) length() (uint32, int, error) {
	var v uint32
	for i := range maxVarintPrefix {
		if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
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

// decodeFrame decodes a frame body that must hold exactly one message this
// build knows.
func decodeFrame(body []byte) (*wireFrame, error) {
	var f wireFrame
	if err := frameDecMode.Unmarshal(body, &f); err != nil {
		return nil, protoErrorf("decode frame: %w", err)
	}
	n := 0
	for _, set := range []bool{f.Hello != nil, f.Batch != nil, f.Error != nil, f.Ack != nil, f.Start != nil, f.Caught != nil, f.Have != nil, f.Ask != nil, f.Addrs != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, protoErrorf("frame holds %d messages, want exactly 1", n)
	}
	return &f, nil
}

// newFrameReader reads frames from s, giving each frame frameTimeout to
// arrive once it has begun.
func (n *Node) newFrameReader(s stream) *frameReader {
	fr := &frameReader{r: s}
	fr.started = func() { s.SetReadDeadline(time.Now().Add(frameTimeout)) }
	fr.finished = func(size, prefix int) {
		s.SetReadDeadline(time.Time{})
		n.stats.framesReceived.Add(1)
		n.stats.bytesReceived.Add(uint64(prefix + size))
	}
	return fr
}

// writeFrame writes one encoded frame within frameTimeout.
func (n *Node) writeFrame(s stream, frame []byte) error {
	s.SetWriteDeadline(time.Now().Add(frameTimeout))
	_, err := s.Write(frame)
	s.SetWriteDeadline(time.Time{})
	if err != nil {
		return err
	}
	n.stats.sent(frame)
	return nil
}
