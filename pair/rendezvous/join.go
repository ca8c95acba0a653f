package rendezvous

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/danyue/danyue/pair"
)

// dialTimeout bounds connecting to one address of the inviter.
const dialTimeout = 5 * time.Second

// The joiner's bounds per code (JoinAny). Every device that answers and
// tests the code (a fake inviter does, with a guess of its own) learns
// whether its one guess was right, so the joiner gives at most MaxTested
// such guesses per code: a fake inviter diverts it with a probability of
// at most MaxTested in 65,536, and blocks it only by answering first from
// MaxTested addresses. MaxDevices bounds the devices it talks to at all.
const (
	MaxTested  = 3
	MaxDevices = 8
)

// Joined is what the joiner receives.
type Joined struct {
	// Payload is what the inviter sealed: the library's long invite code.
	Payload []byte
	// PeerAD is the inviter's associated data, authenticated.
	PeerAD []byte
	// Addr is where the inviter answered.
	Addr string
	// Before are the devices JoinAny tried first, which did not pair: a
	// device that answered without knowing the code is likely someone
	// pretending to be the inviter.
	Before []Attempt
}

// Joiner is the joining side of a pairing.
type Joiner struct {
	Code pair.Code
	// AD is this device's associated data for the PAKE.
	AD []byte
	// Accept is given the payload before the joiner confirms it; an error
	// from it is returned and the inviter is not told the pairing
	// succeeded.
	Accept func(payload, peerAD []byte) error
	// Dialer dials the inviter; default one with a 5-second timeout.
	Dialer *net.Dialer
	// Logger receives a line per device tried; default slog.Default().
	Logger *slog.Logger
	// order puts JoinAny's announcers in the order they are tried;
	// default random. Tests fix it.
	order func([]Announcer)
}

// Join dials a rendezvous at addr and pairs with code; see Joiner.
func Join(ctx context.Context, addr string, code pair.Code, ad []byte, accept func(payload, peerAD []byte) error) (*Joined, error) {
	j := &Joiner{Code: code, AD: ad, Accept: accept}
	return j.Join(ctx, addr)
}

// Join runs one session with the rendezvous at addr. Errors include
// pair.ErrWrongCode (the other side did not know the code; if it was the
// inviter, its code is spent now), a *pair.Refusal (it did not test the
// code, and says why) and ErrUnreachable (no session ran).
func (j *Joiner) Join(ctx context.Context, addr string) (*Joined, error) {
	ctx, cancel := context.WithTimeout(ctx, SessionTimeout)
	defer cancel()
	// An address that drops packets (another interface's, a firewall)
	// must not hold the joiner for the whole session before the next.
	d := j.Dialer
	if d == nil {
		d = &net.Dialer{Timeout: dialTimeout}
	}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	nonce := make([]byte, nonceSize)
	rand.Read(nonce)
	peerNonce, err := exchangeHello(c, nonce)
	if err != nil {
		return nil, err
	}
	sid := sessionID(peerNonce, nonce)
	res, err := pair.Initiate(ctx, c, j.Code, sid, j.AD)
	if err != nil {
		return nil, err
	}
	s, err := newSealer(res.Key, sid, j.AD, res.PeerAD)
	if err != nil {
		return nil, &ProvedError{err}
	}
	c.SetDeadline(time.Now().Add(StepTimeout))
	payload, err := readSealed(c, s.payload, s.aad)
	if err != nil {
		return nil, &ProvedError{err}
	}
	if j.Accept != nil {
		if err := j.Accept(payload, res.PeerAD); err != nil {
			return nil, &ProvedError{err}
		}
	}
	frame, err := seal(s.ack, []byte(ackText), s.aad)
	if err != nil {
		return nil, &ProvedError{err}
	}
	c.SetDeadline(time.Now().Add(StepTimeout))
	if _, err := c.Write(frame); err != nil {
		return nil, &ProvedError{fmt.Errorf("rendezvous: send ack: %w", err)}
	}
	return &Joined{Payload: payload, PeerAD: res.PeerAD, Addr: addr}, nil
}

// ErrUnreachable reports that nothing accepted the connection: no session
// ran, so another address of the inviter may still be tried.
var ErrUnreachable = errors.New("rendezvous: cannot reach the inviter")

// ProvedError is a session that failed after the other side proved it
// knew the code (the PAKE succeeded): it was the inviter, so JoinAny
// tries nobody else.
type ProvedError struct{ Err error }

func (e *ProvedError) Error() string { return e.Err.Error() }
func (e *ProvedError) Unwrap() error { return e.Err }

// Attempt is one device the joiner tried, and what came of it.
type Attempt struct {
	// Addr is the host:port the session ran on (or the last one that
	// could not be reached).
	Addr string
	Err  error
}

// Tested reports whether the device answered with a guess of its own:
// the two sides' keys differed.
func (a Attempt) Tested() bool { return errors.Is(a.Err, pair.ErrWrongCode) }

// JoinError is a JoinAny that did not pair: what each device it tried
// answered, in order.
type JoinError struct {
	Attempts []Attempt
	// Skipped counts the announcers not tried because of the bounds.
	Skipped int
}

func (e *JoinError) Error() string {
	var b strings.Builder
	b.WriteString("rendezvous: no pairing")
	for i, a := range e.Attempts {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %v", a.Addr, a.Err)
	}
	return b.String()
}

// Unwrap returns the attempts' errors.
func (e *JoinError) Unwrap() []error {
	errs := make([]error, len(e.Attempts))
	for i, a := range e.Attempts {
		errs[i] = a.Err
	}
	return errs
}

// JoinAny pairs with the first of anns that knows the code. Anyone on the
// LAN can announce the code's channel, so a device that answers without
// knowing the code (the keys differ: pair.ErrWrongCode) or refuses
// without testing it (a *pair.Refusal, which anyone can send) does not end
// the search: the next announcer is tried, in random order so that no
// announcer is always first, at most one session per device (IP address),
// until one pairs, MaxTested devices have tested the code, MaxDevices
// have answered, or a device proves it knew the code and then fails
// (ProvedError: that was the inviter). The error is then a *JoinError.
func (j *Joiner) JoinAny(ctx context.Context, anns []Announcer) (*Joined, error) {
	log := j.Logger
	if log == nil {
		log = slog.Default()
	}
	anns = append([]Announcer(nil), anns...)
	if j.order != nil {
		j.order(anns)
	} else {
		mrand.Shuffle(len(anns), func(a, b int) { anns[a], anns[b] = anns[b], anns[a] })
	}
	var je JoinError
	ran := make(map[string]bool)
	tested, devices := 0, 0
	for i, ann := range anns {
		if tested >= MaxTested || devices >= MaxDevices {
			je.Skipped = len(anns) - i
			break
		}
		var unreachable *Attempt
		session := false
		for _, addr := range ann.Addrs {
			host := hostOf(addr)
			if ran[host] {
				continue
			}
			joined, err := j.Join(ctx, addr)
			if err == nil {
				joined.Before = je.Attempts
				return joined, nil
			}
			if ctx.Err() != nil {
				je.Attempts = append(je.Attempts, Attempt{Addr: addr, Err: err})
				return nil, &je
			}
			if errors.Is(err, ErrUnreachable) {
				unreachable = &Attempt{Addr: addr, Err: err}
				continue
			}
			a := Attempt{Addr: addr, Err: err}
			je.Attempts = append(je.Attempts, a)
			log.Info("pairing: a device on the code's channel did not pair", "addr", addr, "channel", j.Code.Channel, "err", err)
			if _, proved := errors.AsType[*ProvedError](err); proved {
				return nil, &je
			}
			ran[host], session = true, true
			devices++
			if a.Tested() {
				tested++
			}
			break // a session ran with this announcer: its answer is final
		}
		if !session && unreachable != nil {
			je.Attempts = append(je.Attempts, *unreachable)
		}
	}
	return nil, &je
}

// hostOf is the host of a host:port, an IP in its canonical form, by
// which the sessions run are counted: one per device.
func hostOf(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Unmap().WithZone("").String()
	}
	return host
}
