package rendezvous

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/danyue/danyue/pair"
)

// dialTimeout bounds connecting to one address of the inviter.
const dialTimeout = 5 * time.Second

// Joined is what the joiner receives.
type Joined struct {
	// Payload is what the inviter sealed: the library's long invite code.
	Payload []byte
	// PeerAD is the inviter's associated data, authenticated.
	PeerAD []byte
}

// Join dials a rendezvous at addr and pairs with code. accept is given the
// payload before the joiner confirms it; an error from accept is returned
// and the inviter is not told the pairing succeeded. Errors include
// pair.ErrWrongCode (the inviter's code is now spent) and pair.ErrRefused
// (it was already used or expired).
func Join(ctx context.Context, addr string, code pair.Code, ad []byte, accept func(payload, peerAD []byte) error) (*Joined, error) {
	ctx, cancel := context.WithTimeout(ctx, SessionTimeout)
	defer cancel()
	// An address that drops packets (another interface's, a firewall)
	// must not hold the joiner for the whole session before the next.
	d := net.Dialer{Timeout: dialTimeout}
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
	res, err := pair.Initiate(ctx, c, code, sid, ad)
	if err != nil {
		return nil, err
	}
	s, err := newSealer(res.Key, sid, ad, res.PeerAD)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(StepTimeout))
	payload, err := readSealed(c, s.payload, s.aad)
	if err != nil {
		return nil, err
	}
	if err := accept(payload, res.PeerAD); err != nil {
		return nil, err
	}
	frame, err := seal(s.ack, []byte(ackText), s.aad)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(StepTimeout))
	if _, err := c.Write(frame); err != nil {
		return nil, fmt.Errorf("rendezvous: send ack: %w", err)
	}
	return &Joined{Payload: payload, PeerAD: res.PeerAD}, nil
}

// ErrUnreachable reports that nothing accepted the connection: no session
// ran, so another address of the inviter may still be tried.
var ErrUnreachable = errors.New("rendezvous: cannot reach the inviter")
