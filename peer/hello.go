package peer

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// ProtocolID is the libp2p protocol of danyue sync at the newest version this
// build speaks; protocolIDs lists every version it speaks, newest first.
// Each version has its own libp2p protocol id, so that libp2p's protocol
// negotiation picks the newest both sides speak before the first frame.
const ProtocolID = "/danyue/sync/6"

var protocolIDs = []protocol.ID{ProtocolID, "/danyue/sync/5", "/danyue/sync/4", "/danyue/sync/3", "/danyue/sync/2", "/danyue/sync/1"}

// ProtocolVersion is the version of the sync protocol this build speaks, sent
// in every hello. A peer outside [MinProtocolVersion, ProtocolVersion] is
// refused with an Error frame that says which side is too old. Version 2
// adds the puller's Ack frames (see wireAck); version 3 the kosync link
// records, which older versions would refuse and so are not sent to them
// (knowsKind); version 4 the member records, likewise, and the puller's
// Start frame and the sender's Caught frames, by which a record crosses the
// wire about once per receiving device (knowledge.go); version 5 the same
// frames, smaller: a varint length, and batches and acks without what the
// stream fixes (frame.go); version 6 the relay questions, smaller: a Want
// in a flat array (Ask) and its answer numbered by their place on the
// stream. A stream's version is the one its protocol id names.
const (
	ProtocolVersion    = 6
	MinProtocolVersion = 1
)

// streamVersion is the sync protocol version agreed for s.
func streamVersion(s network.Stream) uint64 {
	for i, id := range protocolIDs {
		if s.Protocol() == id {
			return ProtocolVersion - uint64(i)
		}
	}
	return ProtocolVersion
}

// knowsKind reports whether a puller of protocol version v can take
// records of kind k.
func knowsKind(v uint64, k crdt.Kind) bool {
	switch k {
	case crdt.KindKosyncLink:
		return v >= 3
	case crdt.KindMember:
		return v >= 4
	}
	return true
}

// Errors of the hello exchange, seen from this device. Both sides of a
// refused stream log them, and callers branch on them (a version mismatch is
// not retried until the connection is replaced).
var (
	// ErrPeerTooOld: the peer speaks a sync protocol older than this build
	// accepts; the peer needs an upgrade.
	ErrPeerTooOld = errors.New("peer speaks an older sync protocol")
	// ErrPeerTooNew: the peer speaks a newer sync protocol than this build
	// knows; this device needs an upgrade.
	ErrPeerTooNew = errors.New("peer speaks a newer sync protocol")
	// ErrOtherLibrary: the peer completed the private-network handshake but
	// names another library (the same secret under two library ids).
	ErrOtherLibrary = errors.New("peer belongs to another library")
	// ErrDeviceMismatch: the hello's device id is not the one derived from
	// the peer's authenticated identity.
	ErrDeviceMismatch = errors.New("device id does not match the peer identity")
	// ErrRefused: the peer refused the stream for another reason, given in
	// the message.
	ErrRefused = errors.New("peer refused the sync stream")
)

// Error frame codes.
const (
	codeProtocol = 1
	codeVersion  = 2
	codeLibrary  = 3
	codeDevice   = 4
	// codeBusy: too many streams at once; unlike the others, worth retrying.
	codeBusy = 5
)

// hello is the domain form of a wireHello.
type hello struct {
	Version   uint64
	Library   [16]byte
	Device    crdt.DeviceID
	Name      string
	Epoch     uint64 // the store epoch of the hello's sender
	Last      uint64 // its last sequence number
	Wall      time.Time
	WantEpoch uint64 // puller only: the epoch and cursor it wants to resume from
	WantSeq   uint64
	From      uint64 // sender only: where its batches start
}

func (h *hello) wire() *wireHello {
	return &wireHello{
		Version:   h.Version,
		Library:   bytes.Clone(h.Library[:]),
		Device:    uint64(h.Device),
		Name:      h.Name,
		Epoch:     h.Epoch,
		Last:      h.Last,
		WallMs:    uint64(max(h.Wall.UnixMilli(), 0)),
		WantEpoch: h.WantEpoch,
		WantSeq:   h.WantSeq,
		From:      h.From,
	}
}

// readHello interprets the first frame of a stream, from the peer remote: a
// hello that must match lib and the peer's identity, or an Error frame by
// which the peer refuses the stream.
func readHello(body []byte, lib Library, remote lpeer.ID) (hello, error) {
	// The version comes first, read leniently: a newer peer's hello may hold
	// fields this build rejects, and "upgrade" is the useful answer then.
	if v, ok := peekHelloVersion(body); ok && (v < MinProtocolVersion || v > ProtocolVersion) {
		return hello{}, versionError(v)
	}
	f, err := decodeFrame(body)
	if err != nil {
		return hello{}, err
	}
	if f.Error != nil {
		return hello{}, refusal(f.Error)
	}
	if f.Hello == nil {
		return hello{}, protoErrorf("first frame is not a hello")
	}
	w := f.Hello
	if !bytes.Equal(w.Library, lib.ID[:]) {
		return hello{}, fmt.Errorf("%w: library %x, ours is %x", ErrOtherLibrary, w.Library, lib.ID)
	}
	if want := DeviceIDOf(remote); crdt.DeviceID(w.Device) != want {
		return hello{}, fmt.Errorf("%w: hello says %s, identity gives %s", ErrDeviceMismatch, crdt.DeviceID(w.Device), want)
	}
	if len(w.Name) > crdt.MaxDeviceNameBytes {
		return hello{}, protoErrorf("device name of %d bytes", len(w.Name))
	}
	if w.WallMs > crdt.MaxWall {
		return hello{}, protoErrorf("wall clock %d ms is past the year 9999", w.WallMs)
	}
	h := hello{
		Version:   w.Version,
		Device:    crdt.DeviceID(w.Device),
		Name:      w.Name,
		Epoch:     w.Epoch,
		Last:      w.Last,
		Wall:      time.UnixMilli(int64(w.WallMs)),
		WantEpoch: w.WantEpoch,
		WantSeq:   w.WantSeq,
		From:      w.From,
	}
	copy(h.Library[:], w.Library)
	return h, nil
}

func versionError(v uint64) error {
	if v < MinProtocolVersion {
		return fmt.Errorf("%w: version %d, this build accepts %d to %d", ErrPeerTooOld, v, MinProtocolVersion, ProtocolVersion)
	}
	return fmt.Errorf("%w: version %d, this build speaks %d to %d", ErrPeerTooNew, v, MinProtocolVersion, ProtocolVersion)
}

// refusal turns a peer's Error frame into the error this side reports.
func refusal(e *wireError) error {
	msg := truncateText(e.Message, maxErrorMessage)
	switch e.Code {
	case codeVersion:
		if e.MinVersion > ProtocolVersion {
			return fmt.Errorf("%w: the peer accepts versions %d to %d, this build speaks %d", ErrPeerTooNew, e.MinVersion, e.Version, ProtocolVersion)
		}
		return fmt.Errorf("%w: the peer speaks versions %d to %d, this build accepts %d to %d", ErrPeerTooOld, e.MinVersion, e.Version, MinProtocolVersion, ProtocolVersion)
	case codeLibrary:
		return fmt.Errorf("%w: %s", ErrOtherLibrary, msg)
	case codeBusy:
		return fmt.Errorf("peer is busy: %s", msg)
	}
	return fmt.Errorf("%w: code %d: %s", ErrRefused, e.Code, msg)
}

// errorFrame is the Error frame that refuses a stream because of err.
func errorFrame(err error) *wireFrame {
	e := &wireError{Code: codeProtocol, Message: truncateText(err.Error(), maxErrorMessage)}
	switch {
	case errors.Is(err, ErrPeerTooOld), errors.Is(err, ErrPeerTooNew):
		e.Code, e.MinVersion, e.Version = codeVersion, MinProtocolVersion, ProtocolVersion
	case errors.Is(err, ErrOtherLibrary):
		e.Code = codeLibrary
	case errors.Is(err, ErrDeviceMismatch):
		e.Code = codeDevice
	}
	return &wireFrame{Error: e}
}

// isRefusal reports whether err means that this peer and this device cannot
// sync at all (versions, library, identity), so retrying on the same
// connection is pointless.
func isRefusal(err error) bool {
	return errors.Is(err, ErrPeerTooOld) || errors.Is(err, ErrPeerTooNew) ||
		errors.Is(err, ErrOtherLibrary) || errors.Is(err, ErrDeviceMismatch) || errors.Is(err, ErrRefused)
}

// clockOffset estimates how far the peer's wall clock is ahead of ours from
// its hello's wall time, read at remote, and the local times just before our
// hello was sent and just after its answer arrived: the peer read its clock
// about halfway through the round trip.
func clockOffset(remote, sent, received time.Time) time.Duration {
	mid := sent.Add(received.Sub(sent) / 2)
	return remote.Sub(mid).Truncate(time.Millisecond)
}

// truncateText cuts s to at most n bytes of valid UTF-8, so that an error
// message quoting a peer's input still encodes as a CBOR text string.
func truncateText(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "")
}
