package pair

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha512"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"
)

// Conn is the stream a session runs on. net.Conn and a libp2p stream both
// satisfy it; the deadline is what lets every read end when ctx does.
type Conn interface {
	io.ReadWriter
	SetDeadline(t time.Time) error
}

// Result is what a successful session yields.
type Result struct {
	// Key is 32 bytes both sides share, derived from CPace's ISK with
	// HKDF-SHA-512 as the draft recommends; it is never ISK itself.
	Key []byte
	// PeerAD is the associated data the other side sent, authenticated:
	// both sides agree on it or the session failed.
	PeerAD []byte
}

// ErrWrongCode reports that the two sides did not derive the same key: the
// codes differ (or a session id or associated data was changed on the way).
// Both sides of a session return it.
var ErrWrongCode = errors.New("pair: wrong code")

// ErrRefused reports that the responder did not test the code at all: its
// invitation was already used or had expired, or it refuses this side. The
// initiator's error is then a *Refusal, which says why.
var ErrRefused = errors.New("pair: invitation used or expired")

// StepTimeout bounds each read and write of a session when ctx has no
// earlier deadline.
const StepTimeout = 30 * time.Second

const (
	// ci is CPace's channel identifier: it binds the key to this protocol
	// and its version.
	ci      = "danyue/pair/1"
	keyInfo = "danyue pair key"
	keySize = 32
	tagSize = sha512.Size
)

// Initiate runs the initiator's side of a pairing session over c: it speaks
// first. sid must be the same on both sides and should be unique to this
// session (for example both peers' ids and a nonce); ad is this side's
// associated data, at most 256 bytes, sent in the clear and authenticated.
func Initiate(ctx context.Context, c Conn, code Code, sid, ad []byte) (*Result, error) {
	return run(ctx, c, code, sid, ad, (*session).initiate)
}

// Respond runs the responder's side of a pairing session over c; see
// Initiate. Once Respond has read the initiator's share it has tested that
// side's one guess at the code, so the caller must not accept the code
// again, whatever Respond returns.
func Respond(ctx context.Context, c Conn, code Code, sid, ad []byte) (*Result, error) {
	return run(ctx, c, code, sid, ad, (*session).respond)
}

func run(ctx context.Context, c Conn, code Code, sid, ad []byte, role func(*session) (*Result, error)) (*Result, error) {
	return runClaim(ctx, c, code, sid, ad, nil, role)
}

func runClaim(ctx context.Context, c Conn, code Code, sid, ad []byte, claim func() error, role func(*session) (*Result, error)) (*Result, error) {
	s, err := newSession(ctx, c, code, sid, ad)
	if err != nil {
		return nil, err
	}
	s.claim = claim
	defer s.close()
	return role(s)
}

type session struct {
	ctx  context.Context
	c    Conn
	prs  []byte
	sid  []byte
	ad   []byte
	rand io.Reader
	stop func() bool
	// claim, if set, is called when the initiator's share has arrived,
	// before it is tested: an error ends the session with a refusal, whose
	// reason a *refusing error gives.
	claim func() error
}

// pastDeadline makes every blocked and future read or write fail at once.
var pastDeadline = time.Unix(1, 0)

func newSession(ctx context.Context, c Conn, code Code, sid, ad []byte) (*session, error) {
	if len(ad) > maxAD {
		return nil, fmt.Errorf("pair: associated data of %d bytes, limit %d", len(ad), maxAD)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := &session{ctx: ctx, c: c, prs: []byte(code.String()), sid: sid, ad: ad, rand: rand.Reader}
	// A read blocked in the stream ends when ctx does: its deadline moves to
	// the past.
	s.stop = context.AfterFunc(ctx, func() { c.SetDeadline(pastDeadline) })
	return s, nil
}

// close lifts the deadline so the caller can go on using the stream, unless
// ctx already ended.
func (s *session) close() {
	if s.stop() {
		s.c.SetDeadline(time.Time{})
	}
}

// step sets the deadline for the next read or write. A stream that cannot
// take a deadline is refused: a silent peer could hold the session for ever.
func (s *session) step() error {
	d := time.Now().Add(StepTimeout)
	if cd, ok := s.ctx.Deadline(); ok && cd.Before(d) {
		d = cd
	}
	if err := s.c.SetDeadline(d); err != nil {
		return fmt.Errorf("pair: set deadline: %w", err)
	}
	// ctx may have ended just before the line above overwrote the past
	// deadline its AfterFunc set; put it back.
	if s.ctx.Err() != nil {
		s.c.SetDeadline(pastDeadline)
	}
	return nil
}

// ioErr prefers ctx's error, which is usually why the stream failed. The
// stream's deadline can fire a moment before ctx's own timer does.
func (s *session) ioErr(err error) error {
	cerr := s.ctx.Err()
	if d, ok := s.ctx.Deadline(); ok && cerr == nil && errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(d) {
		cerr = context.DeadlineExceeded
	}
	if cerr != nil {
		return fmt.Errorf("pair: %w (%v)", cerr, err)
	}
	return fmt.Errorf("pair: %w", err)
}

func (s *session) read(want byte) (frame, error) {
	if err := s.step(); err != nil {
		return frame{}, err
	}
	f, err := readFrame(s.c)
	if err != nil {
		return frame{}, s.ioErr(err)
	}
	switch f.typ {
	case want:
		return f, nil
	case frameReject:
		return frame{}, ErrWrongCode
	case frameRefused:
		return frame{}, decodeRefusal(f.body)
	}
	return frame{}, fmt.Errorf("%w: frame type %d, want %d", ErrProtocol, f.typ, want)
}

func (s *session) write(typ byte, body []byte) error {
	if err := s.step(); err != nil {
		return err
	}
	if err := writeFrame(s.c, frame{typ: typ, body: body}); err != nil {
		return s.ioErr(err)
	}
	return nil
}

// reject tells the peer its tag was wrong, so it fails now rather than at
// its timeout. It is best effort: the peer may be gone.
func (s *session) reject() {
	_ = s.write(frameReject, nil)
}

func (s *session) initiate() (*Result, error) {
	p, err := start(s.prs, []byte(ci), s.sid, s.rand)
	if err != nil {
		return nil, err
	}
	if err := s.write(frameShare, slices.Concat(p.share, s.ad)); err != nil {
		return nil, err
	}
	f, err := s.read(frameShareConfirm)
	if err != nil {
		return nil, err
	}
	if len(f.body) < elementSize+tagSize {
		return nil, fmt.Errorf("%w: share and tag of %d bytes", ErrProtocol, len(f.body))
	}
	yb, tb, adb := f.body[:elementSize], f.body[elementSize:elementSize+tagSize], f.body[elementSize+tagSize:]
	isk, err := p.finish(yb, p.share, s.ad, yb, adb)
	if err != nil {
		s.reject()
		return nil, err
	}
	mk := macKey(s.sid, isk)
	if !hmac.Equal(tb, tag(mk, yb, adb)) {
		s.reject()
		return nil, ErrWrongCode
	}
	if err := s.write(frameConfirm, tag(mk, p.share, s.ad)); err != nil {
		return nil, err
	}
	return s.result(isk, adb)
}

func (s *session) respond() (*Result, error) {
	f, err := s.read(frameShare)
	if err != nil {
		return nil, err
	}
	if len(f.body) < elementSize {
		return nil, fmt.Errorf("%w: share of %d bytes", ErrProtocol, len(f.body))
	}
	ya, ada := f.body[:elementSize], f.body[elementSize:]
	if s.claim != nil {
		if err := s.claim(); err != nil {
			var body []byte
			if rf, ok := err.(*refusing); ok {
				body = rf.r.encode()
			}
			_ = s.write(frameRefused, body) // best effort, as reject
			return nil, err
		}
	}
	p, err := start(s.prs, []byte(ci), s.sid, s.rand)
	if err != nil {
		return nil, err
	}
	isk, err := p.finish(ya, ya, ada, p.share, s.ad)
	if err != nil {
		s.reject()
		return nil, err
	}
	mk := macKey(s.sid, isk)
	body := slices.Concat(p.share, tag(mk, p.share, s.ad), s.ad)
	if err := s.write(frameShareConfirm, body); err != nil {
		return nil, err
	}
	f, err = s.read(frameConfirm)
	if err != nil {
		return nil, err
	}
	if !hmac.Equal(f.body, tag(mk, ya, ada)) {
		s.reject()
		return nil, ErrWrongCode
	}
	return s.result(isk, ada)
}

func (s *session) result(isk, peerAD []byte) (*Result, error) {
	key, err := hkdf.Key(sha512.New, isk, s.sid, keyInfo, keySize)
	if err != nil {
		return nil, fmt.Errorf("pair: derive key: %w", err)
	}
	return &Result{Key: key, PeerAD: peerAD}, nil
}

// macKey is the draft's mac_key = H(b"CPaceMac" || sid || ISK) (section
// 10.4, key confirmation).
func macKey(sid, isk []byte) []byte {
	h := sha512.New()
	h.Write([]byte("CPaceMac"))
	h.Write(sid)
	h.Write(isk)
	return h.Sum(nil)
}

// tag is a side's key-confirmation tag over the message it sent,
// MAC(mac_key, lv_cat(Y, AD)); ISK already covers the whole transcript.
func tag(mk, y, ad []byte) []byte {
	m := hmac.New(sha512.New, mk)
	m.Write(lvCat(y, ad))
	return m.Sum(nil)
}
