package crdt

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"
)

// FormatVersion is the version of the record encoding, carried in every
// encoded entry. A decoder refuses versions it does not know rather than
// guess at fields it cannot merge.
const FormatVersion = 1

// ErrVersion is wrapped by decode errors for records in a format version this
// build does not know.
var ErrVersion = errors.New("unknown record format version")

// The wire form: deterministic CBOR (RFC 8949 core deterministic encoding)
// with small integer keys. Domain types above never carry CBOR tags, so the
// format can change only here, where the golden test watches it.

type wireEntry struct {
	Version uint64      `cbor:"0,keyasint"`
	Book    *wireBook   `cbor:"1,keyasint,omitempty"`
	Device  *wireDevice `cbor:"2,keyasint,omitempty"`
	// The kosync records (codec_kosync.go).
	KosyncUser     *wireKosyncUser     `cbor:"3,keyasint,omitempty"`
	KosyncProgress *wireKosyncProgress `cbor:"4,keyasint,omitempty"`
	KosyncLink     *wireKosyncLink     `cbor:"5,keyasint,omitempty"`
	Member         *wireMember         `cbor:"6,keyasint,omitempty"` // codec_member.go
}

type wireBook struct {
	Key      []byte        `cbor:"0,keyasint"`
	Position *wirePosition `cbor:"1,keyasint,omitempty"`
	Furthest *wirePosition `cbor:"2,keyasint,omitempty"` // absent when equal to Position, the common case
	ReadTime []wireSlot    `cbor:"3,keyasint,omitempty"`
	Deleted  *wireStamp    `cbor:"4,keyasint,omitempty"`
	Title    *wireText     `cbor:"5,keyasint,omitempty"`
}

type wireDevice struct {
	ID   uint64    `cbor:"0,keyasint"`
	Name *wireText `cbor:"1,keyasint,omitempty"`
}

type wireStamp struct {
	_       struct{} `cbor:",toarray"`
	Wall    uint64
	Logical uint32
	Device  uint64
}

type wirePosition struct {
	_       struct{} `cbor:",toarray"`
	Wall    uint64
	Logical uint32
	Device  uint64
	Char    uint64
	Percent uint32
}

type wireSlot struct {
	_      struct{} `cbor:",toarray"`
	Device uint64
	Ms     uint64
}

type wireText struct {
	_       struct{} `cbor:",toarray"`
	Wall    uint64
	Logical uint32
	Device  uint64
	Value   string
}

// MaxEncodedSize bounds one encoded entry. The largest valid record (a full
// title and MaxDevices read-time slots) is well under it.
const MaxEncodedSize = 64 << 10

var (
	encMode     = mustEncMode()
	decMode     = mustDecMode()
	versionMode = mustVersionMode()
)

func mustEncMode() cbor.EncMode {
	m, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err)
	}
	return m
}

func mustDecMode() cbor.DecMode {
	m, err := cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		MaxNestedLevels:   4,
		MaxArrayElements:  MaxDevices,
		MaxMapPairs:       16,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		UTF8:              cbor.UTF8RejectInvalid,
	}.DecMode()
	if err != nil {
		panic(err)
	}
	return m
}

// mustVersionMode decodes only the version of a record, skipping the rest: a
// record of another version may hold fields, kinds and nesting this build
// does not know, and must still be told apart from a broken one. Skipping
// allocates nothing, and MaxEncodedSize bounds the work.
func mustVersionMode() cbor.DecMode {
	m, err := cbor.DecOptions{
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
		MaxNestedLevels:  32,
		MaxArrayElements: MaxEncodedSize,
		MaxMapPairs:      MaxEncodedSize,
	}.DecMode()
	if err != nil {
		panic(err)
	}
	return m
}

// Encode returns the deterministic encoding of e: equal records always
// encode to equal bytes.
func (e *Entry) Encode() ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return e.encode()
}

// encode encodes a record that has been validated.
func (e *Entry) encode() ([]byte, error) {
	w := wireEntry{Version: FormatVersion}
	switch e.Kind {
	case KindBook:
		w.Book = e.Book.wire()
	case KindDevice:
		w.Device = &wireDevice{ID: uint64(e.Device.ID), Name: textWire(e.Device.Name)}
	case KindKosyncUser:
		w.KosyncUser = e.KosyncUser.wire()
	case KindKosyncProgress:
		w.KosyncProgress = e.KosyncProgress.wire()
	case KindKosyncLink:
		w.KosyncLink = e.KosyncLink.wire()
	case KindMember:
		w.Member = e.Member.wire()
	}
	return encMode.Marshal(&w)
}

// KindOfEncoded returns the kind of an encoded record without decoding it,
// 0 if b is not a record of this format version. It relies on the
// canonical encoding Encode makes: a map whose first key is the version
// and whose second is the record's kind number.
func KindOfEncoded(b []byte) Kind {
	if len(b) < 4 || b[0] != 0xa2 || b[1] != 0x00 || b[2] != FormatVersion || b[3] == 0 || b[3] > 0x17 {
		return 0
	}
	return Kind(b[3])
}

// Decode parses and validates one encoded entry. It allocates no more than
// the input's size allows (the decoder's limits bound nesting, arrays and
// maps) and returns no partial record on error. It accepts only the
// encoding Encode makes, so that a record has exactly one byte form, and
// reports a record of another format version with ErrVersion rather than
// ErrInvalid, whatever else that record holds.
func Decode(data []byte) (Entry, error) {
	if len(data) > MaxEncodedSize {
		return Entry{}, invalidf("record of %d bytes exceeds %d", len(data), MaxEncodedSize)
	}
	var w wireEntry
	if err := decMode.Unmarshal(data, &w); err != nil || w.Version != FormatVersion {
		// A record of another version is likely to fail the strict decode
		// (it holds what this build does not know): read its version alone.
		var v struct {
			Version *uint64 `cbor:"0,keyasint"`
		}
		if versionMode.Unmarshal(data, &v) == nil && v.Version != nil && *v.Version != FormatVersion {
			return Entry{}, fmt.Errorf("%w %d (this build reads %d)", ErrVersion, *v.Version, FormatVersion)
		}
		if err == nil {
			err = errors.New("no format version")
		}
		return Entry{}, fmt.Errorf("%w: decode record: %w", ErrInvalid, err)
	}
	var e Entry
	if n := w.records(); n != 1 {
		return Entry{}, invalidf("record holds %d of book, device, kosync user, kosync progress, kosync link and member, not exactly one", n)
	}
	switch {
	case w.Book != nil:
		b, err := w.Book.domain()
		if err != nil {
			return Entry{}, err
		}
		e = BookEntry(b)
	case w.Device != nil:
		e = DeviceEntry(Device{ID: DeviceID(w.Device.ID), Name: w.Device.Name.domain()})
	case w.KosyncUser != nil:
		e = KosyncUserEntry(w.KosyncUser.domain())
	case w.KosyncProgress != nil:
		e = KosyncProgressEntry(w.KosyncProgress.domain())
	case w.KosyncLink != nil:
		l, err := w.KosyncLink.domain()
		if err != nil {
			return Entry{}, err
		}
		e = KosyncLinkEntry(l)
	case w.Member != nil:
		m, err := w.Member.domain()
		if err != nil {
			return Entry{}, err
		}
		e = MemberEntry(m)
	}
	if err := e.Validate(); err != nil {
		return Entry{}, err
	}
	// The decoder accepts second encodings of a record (integers in long
	// form, unsorted keys, explicit nulls, empty arrays); refusing them makes
	// decode-then-encode give back the input, so bytes can be compared,
	// hashed and stored as received.
	if canon, err := e.encode(); err != nil || !bytes.Equal(canon, data) {
		return Entry{}, invalidf("non-canonical record encoding")
	}
	return e, nil
}

func (b *Book) wire() *wireBook {
	key, _ := b.Key.AppendBinary(nil) // validated by the caller
	w := &wireBook{
		Key:      key,
		Position: positionWire(b.Position),
		Deleted:  stampWire(b.Deleted),
		Title:    textWire(b.Title),
	}
	if b.Furthest != b.Position {
		w.Furthest = positionWire(b.Furthest)
	}
	if len(b.ReadTime) > 0 {
		w.ReadTime = make([]wireSlot, len(b.ReadTime))
		for i, s := range b.ReadTime {
			w.ReadTime[i] = wireSlot{Device: uint64(s.Device), Ms: s.Ms}
		}
	}
	return w
}

func (w *wireBook) domain() (Book, error) {
	key, err := BookKeyFromBinary(w.Key)
	if err != nil {
		return Book{}, err
	}
	b := Book{
		Key:      key,
		Position: w.Position.domain(),
		Deleted:  w.Deleted.domain(),
		Title:    w.Title.domain(),
	}
	b.Furthest = b.Position
	if w.Furthest != nil {
		b.Furthest = w.Furthest.domain()
		// The encoder omits a furthest position equal to the position, so
		// an explicit equal one is a second encoding of the same record.
		if b.Furthest == b.Position {
			return Book{}, invalidf("non-canonical record: explicit furthest position equal to the position")
		}
	}
	if len(w.ReadTime) > 0 {
		b.ReadTime = make(ReadTime, len(w.ReadTime))
		for i, s := range w.ReadTime {
			b.ReadTime[i] = Slot{Device: DeviceID(s.Device), Ms: s.Ms}
		}
	}
	return b, nil
}

func stampWire(t Timestamp) *wireStamp {
	if t.IsZero() {
		return nil
	}
	return &wireStamp{Wall: t.Wall, Logical: t.Logical, Device: uint64(t.Device)}
}

func (w *wireStamp) domain() Timestamp {
	if w == nil {
		return Timestamp{}
	}
	return Timestamp{Wall: w.Wall, Logical: w.Logical, Device: DeviceID(w.Device)}
}

func positionWire(p Position) *wirePosition {
	if p.At.IsZero() {
		return nil
	}
	return &wirePosition{Wall: p.At.Wall, Logical: p.At.Logical, Device: uint64(p.At.Device), Char: p.Char, Percent: uint32(p.Percent)}
}

func (w *wirePosition) domain() Position {
	if w == nil {
		return Position{}
	}
	return Position{
		At:      Timestamp{Wall: w.Wall, Logical: w.Logical, Device: DeviceID(w.Device)},
		Char:    w.Char,
		Percent: Percent(w.Percent),
	}
}

func textWire(t Text) *wireText {
	if t.At.IsZero() {
		return nil
	}
	return &wireText{Wall: t.At.Wall, Logical: t.At.Logical, Device: uint64(t.At.Device), Value: t.Value}
}

func (w *wireText) domain() Text {
	if w == nil {
		return Text{}
	}
	return Text{At: Timestamp{Wall: w.Wall, Logical: w.Logical, Device: DeviceID(w.Device)}, Value: w.Value}
}
