package crdt

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"
)

// The wire form of gossiped summaries: deterministic CBOR like the records,
// a map with a format version and a list of summaries, each a map with
// small integer keys, each cursor a fixed array.
//
//	{0 version, 1 [{0 device, 1 epoch, 2 seq, 3 [wall, logical, device],
//	               4 [[device, epoch, seq]...], 5 sig, 6 key}...]}

// SummaryFormatVersion is the version of the summaries encoding.
const SummaryFormatVersion = 1

// Limits on an encoded list of summaries, checked before anything is
// decoded: a library has at most a few dozen devices.
const (
	MaxSummaries         = 256
	MaxEncodedSummaries  = 256 << 10
	maxSummaryNestLevels = 5
)

type wireSummaries struct {
	Version uint64        `cbor:"0,keyasint"`
	List    []wireSummary `cbor:"1,keyasint,omitempty"`
}

type wireSummary struct {
	Device  uint64       `cbor:"0,keyasint"`
	Epoch   uint64       `cbor:"1,keyasint"`
	Seq     uint64       `cbor:"2,keyasint,omitempty"`
	At      wireStamp    `cbor:"3,keyasint"`
	Cursors []wireCursor `cbor:"4,keyasint,omitempty"`
	// Sig and Key: optional, added after the format's first release (an
	// older build refuses them, so they go only to devices whose hello
	// says they read them: peer/summary.go).
	Sig []byte `cbor:"5,keyasint,omitempty"`
	Key []byte `cbor:"6,keyasint,omitempty"`
}

type wireCursor struct {
	_      struct{} `cbor:",toarray"`
	Device uint64
	Epoch  uint64
	Seq    uint64
}

var summaryDecMode = mustSummaryDecMode()

func mustSummaryDecMode() cbor.DecMode {
	m, err := cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		MaxNestedLevels:   maxSummaryNestLevels,
		MaxArrayElements:  MaxSummaryCursors,
		MaxMapPairs:       16,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
	}.DecMode()
	if err != nil {
		panic(err)
	}
	return m
}

// EncodeSummaries returns the deterministic encoding of a list of
// summaries, as gossiped between members. Each must be valid, and the list
// sorted by device with one summary per device, as Summaries.List makes it.
func EncodeSummaries(list []Summary) ([]byte, error) {
	if err := checkSummaries(list); err != nil {
		return nil, err
	}
	w := wireSummaries{Version: SummaryFormatVersion, List: make([]wireSummary, len(list))}
	for i, s := range list {
		ws := wireSummary{
			Device: uint64(s.Device), Epoch: s.Epoch, Seq: s.Seq,
			At:  wireStamp{Wall: s.At.Wall, Logical: s.At.Logical, Device: uint64(s.At.Device)},
			Sig: s.Sig, Key: s.Key,
		}
		if len(s.Cursors) > 0 {
			ws.Cursors = make([]wireCursor, len(s.Cursors))
			for j, c := range s.Cursors {
				ws.Cursors[j] = wireCursor{Device: uint64(c.Device), Epoch: c.Epoch, Seq: c.Seq}
			}
		}
		w.List[i] = ws
	}
	b, err := encMode.Marshal(&w)
	if err == nil && len(b) > MaxEncodedSummaries {
		err = invalidf("%d summaries encode to %d bytes, more than %d", len(list), len(b), MaxEncodedSummaries)
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}

// DecodeSummaries parses and validates an encoded list of summaries. It
// returns either every summary or an error and none, accepts only the
// encoding EncodeSummaries makes, and reports another format version with
// ErrVersion.
func DecodeSummaries(data []byte) ([]Summary, error) {
	if len(data) > MaxEncodedSummaries {
		return nil, invalidf("summaries of %d bytes exceed %d", len(data), MaxEncodedSummaries)
	}
	var w wireSummaries
	if err := summaryDecMode.Unmarshal(data, &w); err != nil || w.Version != SummaryFormatVersion {
		var v struct {
			Version *uint64 `cbor:"0,keyasint"`
		}
		if versionMode.Unmarshal(data, &v) == nil && v.Version != nil && *v.Version != SummaryFormatVersion {
			return nil, fmt.Errorf("%w %d of summaries (this build reads %d)", ErrVersion, *v.Version, SummaryFormatVersion)
		}
		if err == nil {
			err = errors.New("no format version")
		}
		return nil, fmt.Errorf("%w: decode summaries: %w", ErrInvalid, err)
	}
	if len(w.List) > MaxSummaries {
		return nil, invalidf("%d summaries, more than %d", len(w.List), MaxSummaries)
	}
	list := make([]Summary, len(w.List))
	for i, ws := range w.List {
		s := Summary{
			Device: DeviceID(ws.Device), Epoch: ws.Epoch, Seq: ws.Seq,
			At:  ws.At.domain(),
			Sig: ws.Sig, Key: ws.Key,
		}
		if len(ws.Cursors) > 0 {
			s.Cursors = make([]Cursor, len(ws.Cursors))
			for j, c := range ws.Cursors {
				s.Cursors[j] = Cursor{Device: DeviceID(c.Device), Epoch: c.Epoch, Seq: c.Seq}
			}
		}
		list[i] = s
	}
	if err := checkSummaries(list); err != nil {
		return nil, err
	}
	if canon, err := EncodeSummaries(list); err != nil || !bytes.Equal(canon, data) {
		return nil, invalidf("non-canonical summaries encoding")
	}
	return list, nil
}

// checkSummaries validates each summary and that they are sorted by
// device, one per device (Summaries.List), so that a set of summaries has
// one byte form.
func checkSummaries(list []Summary) error {
	if len(list) > MaxSummaries {
		return invalidf("%d summaries, more than %d", len(list), MaxSummaries)
	}
	for i := range list {
		if err := list[i].Validate(); err != nil {
			return err
		}
		if i > 0 && list[i-1].Device >= list[i].Device {
			return invalidf("summaries not sorted by device, or two of device %s", list[i].Device)
		}
	}
	return nil
}
