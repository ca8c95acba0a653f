package pair

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/fxamacker/cbor/v2"
)

// Reason says why a responder did not test an initiator's share.
type Reason uint8

// The reasons a refusal gives. A reason this build does not know reads as
// ReasonUnknown.
const (
	// ReasonUnknown: no reason given (an older responder sends none).
	ReasonUnknown Reason = iota
	// ReasonExpired: the invitation had expired.
	ReasonExpired
	// ReasonUsed: a session that knew the code used it.
	ReasonUsed
	// ReasonInUse: a session has been testing the code since At.
	ReasonInUse
	// ReasonBurned: a session from By that did not prove it knew the code
	// spent it; it ended at At.
	ReasonBurned
	// ReasonBlocked: the responder refuses the initiator's address By for
	// now: Burns codes were spent by failed tries from it lately, the
	// last at At.
	ReasonBlocked
	maxReason = ReasonBlocked
)

// Refusal is why a responder refused to test the code. It travels in the
// refused frame unauthenticated (nobody has proved anything yet), so the
// initiator can only report it as what the other side says; a
// ReasonUnknown refusal is what a responder that gives no reason sends.
//
// What it discloses is bounded: the address and time, to the second, of a
// session that already failed against the same responder (a session still
// running may yet pair, so only its start is told), and only for as long
// as the responder keeps the invitation answering (never past its
// expiry). A session that paired is never named.
type Refusal struct {
	Reason Reason
	// By is the address of the session that spent the code
	// (ReasonBurned), or the refused address itself (ReasonBlocked). It
	// may be invalid: not known or not sent.
	By netip.Addr
	// At is when (see Reason); zero if not sent.
	At time.Time
	// Burns is, for ReasonBlocked, how many codes By spent lately.
	Burns int
}

// Error says what the responder said.
func (r *Refusal) Error() string {
	switch r.Reason {
	case ReasonExpired:
		return "pair: the invitation has expired"
	case ReasonUsed:
		return "pair: the invitation was already used"
	case ReasonInUse:
		return fmt.Sprintf("pair: another session has been testing the code since %s", timeText(r.At))
	case ReasonBurned:
		return fmt.Sprintf("pair: the code was spent by a failed try from %s at %s", addrText(r.By), timeText(r.At))
	case ReasonBlocked:
		return fmt.Sprintf("pair: the responder refuses %s for now: %d codes spent by failed tries from it, the last at %s", addrText(r.By), r.Burns, timeText(r.At))
	}
	return ErrRefused.Error()
}

// Is makes every Refusal an ErrRefused.
func (r *Refusal) Is(target error) bool { return target == ErrRefused }

func addrText(a netip.Addr) string {
	if !a.IsValid() {
		return "an unknown address"
	}
	return a.String()
}

func timeText(t time.Time) string {
	if t.IsZero() {
		return "an unknown time"
	}
	return t.UTC().Format(time.RFC3339)
}

// wireRefusal is the body of a refused frame: a CBOR map whose keys are
// all optional, so a later version can add some and an older initiator,
// which ignores the body, still reads an empty one as a refusal.
type wireRefusal struct {
	Reason uint8  `cbor:"0,keyasint,omitempty"`
	By     []byte `cbor:"1,keyasint,omitempty"` // 4 or 16 bytes
	At     int64  `cbor:"2,keyasint,omitempty"` // Unix seconds
	Burns  uint16 `cbor:"3,keyasint,omitempty"`
}

// maxWireTime bounds At: the end of year 9999, so a hostile value cannot
// make a time nobody can print.
const maxWireTime = 253402300799

var (
	refusalEnc = func() cbor.EncMode {
		m, err := cbor.CoreDetEncOptions().EncMode()
		if err != nil {
			panic(err) // constant options: a build defect, caught by the tests
		}
		return m
	}()
	refusalDec = func() cbor.DecMode {
		m, err := cbor.DecOptions{
			DupMapKey:        cbor.DupMapKeyEnforcedAPF,
			IndefLength:      cbor.IndefLengthForbidden,
			TagsMd:           cbor.TagsForbidden,
			MaxNestedLevels:  4,
			MaxArrayElements: 16,
			MaxMapPairs:      16,
			UTF8:             cbor.UTF8RejectInvalid,
		}.DecMode()
		if err != nil {
			panic(err)
		}
		return m
	}()
)

// encode returns the refused frame's body.
func (r Refusal) encode() []byte {
	w := wireRefusal{Reason: uint8(r.Reason)}
	if r.By.IsValid() {
		w.By = r.By.Unmap().AsSlice()
	}
	if !r.At.IsZero() && r.At.Unix() > 0 && r.At.Unix() <= maxWireTime {
		w.At = r.At.Unix()
	}
	w.Burns = uint16(min(max(r.Burns, 0), 1<<16-1))
	b, err := refusalEnc.Marshal(w)
	if err != nil {
		return nil // cannot happen for this struct; an empty body is a plain refusal
	}
	return b
}

// decodeRefusal reads a refused frame's body. Whatever is malformed is
// dropped, field by field: a refusal is a refusal even when its reason is
// garbage.
func decodeRefusal(body []byte) *Refusal {
	r := &Refusal{}
	var w wireRefusal
	if len(body) == 0 || refusalDec.Unmarshal(body, &w) != nil {
		return r
	}
	if Reason(w.Reason) <= maxReason {
		r.Reason = Reason(w.Reason)
	}
	if a, ok := netip.AddrFromSlice(w.By); ok {
		r.By = a.Unmap()
	}
	if w.At > 0 && w.At <= maxWireTime {
		r.At = time.Unix(w.At, 0).UTC()
	}
	r.Burns = int(w.Burns)
	return r
}

// refusing is a claim's refusal: err for the responder, r for the
// initiator.
type refusing struct {
	err error
	r   Refusal
}

func (e *refusing) Error() string { return e.err.Error() }
func (e *refusing) Unwrap() error { return e.err }

// Refuse answers an initiator without testing its share: it reads the
// share (so that closing the stream does not reset it before the refusal
// is read) and sends the refusal r. A rendezvous uses it for an address it
// will not give a guess to.
func Refuse(ctx context.Context, c Conn, r Refusal) error {
	s, err := newSession(ctx, c, Code{}, nil, nil)
	if err != nil {
		return err
	}
	defer s.close()
	if _, err := s.read(frameShare); err != nil {
		return err
	}
	return s.write(frameRefused, r.encode())
}
