package pair

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"sync/atomic"
	"time"
)

// Invitation errors. An inviter shows them to the person who invited, since
// they mean either a slow joiner or someone else trying.
var (
	ErrInvitationUsed    = errors.New("pair: invitation already used")
	ErrInvitationExpired = errors.New("pair: invitation expired")
)

// DefaultValidity is how long an invitation stays open: enough to read a
// code out and type it on a phone.
const DefaultValidity = 5 * time.Minute

// Invitation is the inviter's side of a code: it answers one pairing
// session, and only until it expires. That is what limits an attacker to one
// guess per code.
type Invitation struct {
	Code    Code
	Expires time.Time
	used    atomic.Bool
}

// NewInvitation returns an invitation with a fresh code, open for validity
// from now.
func NewInvitation(validity time.Duration) (*Invitation, error) {
	return newInvitation(rand.Reader, time.Now(), validity)
}

func newInvitation(r io.Reader, now time.Time, validity time.Duration) (*Invitation, error) {
	c, err := newCode(r)
	if err != nil {
		return nil, err
	}
	return &Invitation{Code: c, Expires: now.Add(validity)}, nil
}

// Used reports whether a session has tested a guess against the code.
func (inv *Invitation) Used() bool { return inv.used.Load() }

// Respond runs Respond with the invitation's code. The first initiator share
// that arrives before Expires takes the invitation, whatever comes of it; a
// share that arrives later, or on any other stream, is refused with
// ErrInvitationUsed or ErrInvitationExpired before the code is used.
func (inv *Invitation) Respond(ctx context.Context, c Conn, sid, ad []byte) (*Result, error) {
	return inv.respond(ctx, c, sid, ad, time.Now)
}

func (inv *Invitation) respond(ctx context.Context, c Conn, sid, ad []byte, now func() time.Time) (*Result, error) {
	claim := func() error {
		if !now().Before(inv.Expires) {
			return ErrInvitationExpired
		}
		if !inv.used.CompareAndSwap(false, true) {
			return ErrInvitationUsed
		}
		return nil
	}
	return runClaim(ctx, c, inv.Code, sid, ad, claim, (*session).respond)
}
