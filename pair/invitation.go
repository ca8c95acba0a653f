package pair

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/netip"
	"sync"
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
//
// It remembers who took the code and how that session ended, so that the
// sessions refused after it are told why (a Refusal): still being tested by
// an address, spent by a failed try from an address at a time, or used.
type Invitation struct {
	Code    Code
	Expires time.Time
	used    atomic.Bool

	mu sync.Mutex
	// by and at are the address and start of the session that took the
	// code; endedAt and proved are set once it ended: proved if its
	// initiator showed it knew the code.
	by      netip.Addr
	at      time.Time
	ended   bool
	endedAt time.Time
	proved  bool
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
	res, _, err := inv.RespondFrom(ctx, c, sid, ad, netip.Addr{})
	return res, err
}

// RespondFrom is Respond for an initiator at address from, which the
// invitation records if this session takes the code and names in the
// refusals that follow. claimed says whether this session took the code:
// if it did and err is not nil, the code is spent without a pairing.
func (inv *Invitation) RespondFrom(ctx context.Context, c Conn, sid, ad []byte, from netip.Addr) (res *Result, claimed bool, err error) {
	return inv.respond(ctx, c, sid, ad, from, time.Now)
}

func (inv *Invitation) respond(ctx context.Context, c Conn, sid, ad []byte, from netip.Addr, now func() time.Time) (*Result, bool, error) {
	claimed := false
	claim := func() error {
		t := now()
		if !t.Before(inv.Expires) {
			return &refusing{ErrInvitationExpired, Refusal{Reason: ReasonExpired}}
		}
		if !inv.used.CompareAndSwap(false, true) {
			return &refusing{ErrInvitationUsed, inv.refusal()}
		}
		inv.mu.Lock()
		inv.by, inv.at = from, t
		inv.mu.Unlock()
		claimed = true
		return nil
	}
	res, err := runClaim(ctx, c, inv.Code, sid, ad, claim, (*session).respond)
	if claimed {
		inv.mu.Lock()
		inv.ended, inv.endedAt, inv.proved = true, now(), err == nil
		inv.mu.Unlock()
	}
	return res, claimed, err
}

// Refusal returns what a session arriving now would be told, and false
// while nobody has taken the code (expiry aside).
func (inv *Invitation) Refusal() (Refusal, bool) {
	if !inv.Used() {
		return Refusal{}, false
	}
	return inv.refusal(), true
}

// refusal is why a session is refused once the code is taken.
func (inv *Invitation) refusal() Refusal {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	switch {
	case !inv.ended:
		// Not who: the session may yet pair, and who pairs is not told.
		return Refusal{Reason: ReasonInUse, At: inv.at}
	case inv.proved:
		return Refusal{Reason: ReasonUsed}
	}
	return Refusal{Reason: ReasonBurned, By: inv.by, At: inv.endedAt}
}
