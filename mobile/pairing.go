package mobile

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/library"
)

// Bringing another device into the library, and joining one: the library's
// admin operations (library/pairing.go, library/join.go), called in
// process. Only the app that embeds the node holds them: the HTTP token
// (APIToken), which the app may hand to other code such as a web view,
// reads and writes books but cannot invite or join.
//
// The inviting device opens a short-code pairing (OpenPairing), shows its
// code, follows it (WaitPairing, or Pairing to poll) and may cancel it; the
// joining device calls Join with the code the user typed, and may cancel
// that (CancelJoin). Invite returns the long code instead, for devices that
// cannot meet on the LAN: it carries the library's secret, does not expire
// and works any number of times.

// Pairing is a short-code invitation as the inviting device sees it.
type Pairing struct {
	ID string
	// Code is what the user of the other device types, as
	// "7-crossover-clockwork"; it works once, until Expires (RFC 3339).
	Code    string
	Expires string
	// State is "open" until the invitation ends: "paired", "wrong_code"
	// (someone tried a wrong code, which spends it), "expired",
	// "cancelled" or "failed".
	State string
	// Addresses are where the invitation waits, HOST:PORT separated by
	// commas: what the joining device's JoinAt takes where multicast does
	// not reach it.
	Addresses string
	// Device and DeviceName are who joined, once State is "paired".
	Device     string
	DeviceName string
	// TriedBy is the address (host) of the try that spent the code without
	// pairing (State "wrong_code", or "failed" when it broke off), and
	// Burns how many codes that address spent lately, this one included:
	// a device on the LAN that keeps burning codes is not the user's.
	TriedBy string
	Burns   int
	// Detail says the outcome to a person, and what to do next.
	Detail string
}

// Ended says whether the invitation is over (State is not "open").
func (p *Pairing) Ended() bool { return p.State != string(library.PairingOpen) }

func pairingOf(p library.Pairing) *Pairing {
	return &Pairing{
		ID:         p.ID,
		Code:       p.Code,
		Expires:    p.Expires.UTC().Format(time.RFC3339),
		State:      string(p.State),
		Addresses:  strings.Join(p.Addresses, ","),
		Device:     p.Device,
		DeviceName: p.DeviceName,
		TriedBy:    p.TriedBy,
		Burns:      p.Burns,
		Detail:     p.Detail,
	}
}

// errNoPairing is the error for an invitation id the node does not know.
func errNoPairing(op, id string) error {
	return fmt.Errorf("%s: no invitation %q (only the last %d are kept)", op, id, library.MaxRecentPairings)
}

// OpenPairing opens a short-code invitation to this device's library and
// returns it; it replaces the invitation opened before, whose code stops
// working. The code works once, for a few minutes, for a device that finds
// this one on the LAN (or is given one of Addresses).
func (n *Node) OpenPairing() (*Pairing, error) {
	if err := n.alive(); err != nil {
		return nil, err
	}
	p, err := n.d.Library().OpenPairing()
	if err != nil {
		return nil, n.fail("open pairing", err)
	}
	return pairingOf(p), nil
}

// Pairing returns invitation id as it is now.
func (n *Node) Pairing(id string) (*Pairing, error) {
	if err := n.alive(); err != nil {
		return nil, err
	}
	p, _, ok := n.d.Library().Pairing(id)
	if !ok {
		return nil, errNoPairing("pairing", id)
	}
	return pairingOf(p), nil
}

// WaitPairing waits until invitation id has ended, or timeoutMs
// milliseconds have passed (0 or less: no limit), or the node stops, and
// returns it as it is then: a State of "open" means the time ran out.
// CancelPairing from another thread ends the wait with "cancelled".
func (n *Node) WaitPairing(id string, timeoutMs int64) (*Pairing, error) {
	if err := n.alive(); err != nil {
		return nil, err
	}
	lib := n.d.Library()
	_, done, ok := lib.Pairing(id)
	if !ok {
		return nil, errNoPairing("wait pairing", id)
	}
	ctx := n.ctx
	if timeoutMs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(timeoutMs)*time.Millisecond)
		defer cancel()
	}
	select {
	case <-done:
	case <-ctx.Done():
		if n.ctx.Err() != nil {
			return nil, fmt.Errorf("wait pairing: %w", ErrStopped)
		}
	}
	p, _, _ := lib.Pairing(id)
	return pairingOf(p), nil
}

// CancelPairing ends invitation id if it is still open, so that its code no
// longer works, and returns it.
func (n *Node) CancelPairing(id string) (*Pairing, error) {
	if err := n.alive(); err != nil {
		return nil, err
	}
	p, ok := n.d.Library().CancelPairing(id)
	if !ok {
		return nil, errNoPairing("cancel pairing", id)
	}
	return pairingOf(p), nil
}

// Invite returns the long invite code of this device's library, for
// another device to Join. It carries the library's secret, does not expire
// and works any number of times: show it only to the device's owner.
func (n *Node) Invite() (string, error) {
	if err := n.alive(); err != nil {
		return "", err
	}
	code, err := n.d.Library().Invite()
	if err != nil {
		return "", n.fail("invite", err)
	}
	return code, nil
}

// Join moves this device into the library of an invite code, short or long,
// and returns the library's id; the inviter of a short code is found on the
// LAN. Every book on this device stays and merges into the library. It
// blocks until the device has joined, the code was refused (ErrorCode says
// why), or CancelJoin or Stop ends it.
func (n *Node) Join(code string) (string, error) {
	return n.JoinAt(code, "")
}

// JoinAt is Join with the inviter of a short code at pairAddr (HOST:PORT,
// one of the inviter's Pairing.Addresses), for networks where devices do
// not find each other; "" finds it on the LAN as Join does.
func (n *Node) JoinAt(code, pairAddr string) (string, error) {
	if err := n.alive(); err != nil {
		return "", err
	}
	ctx, done := n.joinContext()
	defer done()
	lib, err := n.d.Library().Join(ctx, strings.TrimSpace(code), strings.TrimSpace(pairAddr))
	if err != nil {
		if ctx.Err() != nil && n.ctx.Err() == nil {
			return "", fmt.Errorf("join: %w", ErrCancelled)
		}
		return "", n.fail("join", err)
	}
	return hex.EncodeToString(lib[:]), nil
}

// ErrCancelled is returned by a Join that CancelJoin ended.
var ErrCancelled = errors.New("cancelled")

// CancelJoin ends the Join calls in flight; they return ErrCancelled. A
// join that has already moved the device keeps it in the new library.
func (n *Node) CancelJoin() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, cancel := range n.joins {
		cancel()
	}
}

// joinContext returns the context of one Join, which CancelJoin and Stop
// end, and the function to call when the Join returns.
func (n *Node) joinContext() (context.Context, func()) {
	ctx, cancel := context.WithCancel(n.ctx)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.joins == nil {
		n.joins = map[int]context.CancelFunc{}
	}
	n.nextJoin++
	key := n.nextJoin
	n.joins[key] = cancel
	return ctx, func() {
		n.mu.Lock()
		delete(n.joins, key)
		n.mu.Unlock()
		cancel()
	}
}

// errorCodes are the kinds of error ErrorCode names, with the HTTP API's
// codes for the same cases.
var errorCodes = []struct {
	kind error
	code string
}{
	{library.ErrBadInvite, api.CodeBadInvite},
	{library.ErrBadPairAddr, api.CodeInvalid},
	{library.ErrNoInviter, api.CodeNoInviter},
	{library.ErrWrongCode, api.CodeWrongCode},
	{library.ErrCodeSpent, api.CodeCodeSpent},
	{library.ErrPairingFailed, "pairing_failed"},
	{library.ErrUnavailable, api.CodeUnavailable},
	{ErrCancelled, "cancelled"},
	{ErrStopped, "stopped"},
}

// ErrorCode names the kind of an error of Join, JoinAt or OpenPairing, for
// an app to choose what to show: "bad_invite" (not a code), "invalid" (a
// bad pairing address), "no_inviter" (no inviter found: same network?),
// "wrong_code" (the code was mistyped, and the inviter's is spent now),
// "code_spent" (used or expired), "pairing_failed", "unavailable" (the
// peer network is not running), "cancelled", "stopped"; "" for any other
// error and for nil. The error's message says it to a person.
func ErrorCode(err error) string {
	for _, c := range errorCodes {
		if errors.Is(err, c.kind) {
			return c.code
		}
	}
	return ""
}
