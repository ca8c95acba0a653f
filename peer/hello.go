package peer

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/danyue/danyue/crdt"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/multiformats/go-multistream"
)

// ProtocolID is the libp2p protocol of danyue sync. There is one: a build
// never offers another id for the same protocol, and an ability added
// later is an optional field or frame that a capability bit in the hello
// announces (see Caps), which a build without it ignores. A build of
// another protocol meets libp2p's "protocols not supported" when it opens
// a stream, before any frame could be misread.
const ProtocolID protocol.ID = "/danyue/sync/1.0.0"

// ourCaps holds the capability bits of this build's hellos: a bit per
// ability added to the protocol after it was first released. A device uses
// an ability with a peer only when the peer's hello has its bit; bits it
// does not know are ignored.
const ourCaps = capSignedSummaries | capAddrs

// capSignedSummaries: the device reads summaries that carry their
// device's signature (crdt.Summary.Sig; an older build refuses a message
// that has one), so it is sent them signed (summary.go).
const capSignedSummaries = 1 << 0

// Errors of the hello exchange, seen from this device. Both sides of a
// refused stream log them, and callers branch on them (a refusal is not
// retried until the connection is replaced).
var (
	// ErrOtherLibrary: the peer completed the private-network handshake but
	// names another library (the same secret under two library ids).
	ErrOtherLibrary = errors.New("peer belongs to another library")
	// ErrDeviceMismatch: the hello's device id is not the one derived from
	// the peer's authenticated identity.
	ErrDeviceMismatch = errors.New("device id does not match the peer identity")
	// ErrRefused: the peer refused the stream for another reason, given in
	// the message.
	ErrRefused = errors.New("peer refused the sync stream")
	// ErrNotMember: the stream is between a device and one that does not
	// hold it for a current member of the library (Config.Member): it
	// holds the library's secret, from an invite code, but no member has
	// made it one yet, or a forget left it out. The message says why, for
	// the person at the refused device.
	ErrNotMember = errors.New("not a member of this library yet")
)

// Error frame codes.
const (
	codeProtocol = 1
	codeLibrary  = 3
	codeDevice   = 4
	// codeBusy: too many streams at once; unlike the others, worth retrying.
	codeBusy = 5
	// codeNotMember: the puller is not a member (ErrNotMember); worth
	// retrying once the sender has made it one.
	codeNotMember = 6
)

// maxTicket bounds the ticket a hello carries.
const maxTicket = 64

// hello is the domain form of a wireHello.
type hello struct {
	Library   [16]byte
	Device    crdt.DeviceID
	Name      string
	Epoch     uint64 // the store epoch of the hello's sender
	Last      uint64 // its last sequence number
	Wall      time.Time
	WantEpoch uint64 // puller only: the epoch and cursor it wants to resume from
	WantSeq   uint64
	From      uint64      // sender only: where its batches start
	Caps      uint64      // the capability bits of its sender
	Ticket    []byte      // puller only, to its inviter: an invite's ticket
	Known     []wireKnown // how to reach its sender and other members, checked by learnFrom
	Run       uint64      // the run of its sender's node (Node.run)
}

func (h *hello) wire() *wireHello {
	return &wireHello{
		Library:   bytes.Clone(h.Library[:]),
		Device:    uint64(h.Device),
		Name:      h.Name,
		Epoch:     h.Epoch,
		Last:      h.Last,
		WallMs:    uint64(max(h.Wall.UnixMilli(), 0)),
		WantEpoch: h.WantEpoch,
		WantSeq:   h.WantSeq,
		From:      h.From,
		Caps:      h.Caps,
		Ticket:    h.Ticket,
		Addrs:     h.Known,
		Run:       h.Run,
	}
}

// lineage is that of the hello's sender's changes (see lineage).
func (h *hello) lineage() uint64 { return lineage(h.Epoch, h.Run) }

// readHello interprets the first frame of a stream, from the peer remote: a
// hello that must match lib and the peer's identity, or an Error frame by
// which the peer refuses the stream.
func readHello(body []byte, lib Library, remote lpeer.ID) (hello, error) {
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
	if len(w.Ticket) > maxTicket {
		return hello{}, protoErrorf("ticket of %d bytes", len(w.Ticket))
	}
	h := hello{
		Device:    crdt.DeviceID(w.Device),
		Name:      w.Name,
		Epoch:     w.Epoch,
		Last:      w.Last,
		Wall:      time.UnixMilli(int64(w.WallMs)),
		WantEpoch: w.WantEpoch,
		WantSeq:   w.WantSeq,
		From:      w.From,
		Caps:      w.Caps,
		Ticket:    w.Ticket,
		Known:     w.Addrs,
		Run:       w.Run,
	}
	copy(h.Library[:], w.Library)
	return h, nil
}

// refusal turns a peer's Error frame into the error this side reports.
func refusal(e *wireError) error {
	msg := truncateText(e.Message, maxErrorMessage)
	switch e.Code {
	case codeLibrary:
		return fmt.Errorf("%w: %s", ErrOtherLibrary, msg)
	case codeBusy:
		return fmt.Errorf("peer is busy: %s", msg)
	case codeNotMember:
		return fmt.Errorf("%w: %s", ErrNotMember, msg)
	}
	return fmt.Errorf("%w: code %d: %s", ErrRefused, e.Code, msg)
}

// errorFrame is the Error frame that refuses a stream because of err.
func errorFrame(err error) *wireFrame {
	e := &wireError{Code: codeProtocol, Message: truncateText(err.Error(), maxErrorMessage)}
	switch {
	case errors.Is(err, ErrOtherLibrary):
		e.Code = codeLibrary
	case errors.Is(err, ErrDeviceMismatch):
		e.Code = codeDevice
	case errors.Is(err, ErrNotMember):
		e.Code = codeNotMember
	}
	return &wireFrame{Error: e}
}

// isRefusal reports whether err means that this peer and this device cannot
// sync at all (protocol, library, identity), so retrying on the same
// connection is pointless.
func isRefusal(err error) bool {
	return errors.Is(err, ErrOtherLibrary) || errors.Is(err, ErrDeviceMismatch) || errors.Is(err, ErrRefused) ||
		errors.Is(err, multistream.ErrNotSupported[protocol.ID]{})
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
