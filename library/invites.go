package library

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/peer"
	"github.com/danyue/danyue/store"
)

// The invites this device made, and how a long code's joiner becomes a
// member. A long code carries the library's secret and a one-time ticket
// (random, ticketLen bytes); this device keeps a hash of the ticket, the
// epoch the code was made in and its expiry (store/invites.go). The joiner
// presents the ticket in the hello of its pull from this device; redeem
// makes it a member if the ticket is open, of the current epoch and
// unexpired, and marks it used. A ticket shown to another device is
// unknown there, and refused. Short-code invitations are pairing.go's.

// DefaultInviteValidity is how long a long invite code works unless its
// maker says otherwise: long enough to carry it to another device by hand
// or by message, short enough that a code found in an old message is dead.
const DefaultInviteValidity = 24 * time.Hour

// MaxInviteValidity bounds how long a long code may be made to work.
const MaxInviteValidity = 30 * 24 * time.Hour

// ticketLen is the length of a long code's ticket: 128 bits, not to be
// guessed.
const ticketLen = 16

// ticketHash is what this device keeps of a ticket.
func ticketHash(ticket []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte("danyue invite ticket\x00"))
	h.Write(ticket)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// LongInviteState is where a long invite code is.
type LongInviteState string

// The states of a long code: open until it ends in one of the others.
const (
	LongInviteOpen      LongInviteState = "open"
	LongInviteUsed      LongInviteState = "used"
	LongInviteExpired   LongInviteState = "expired"
	LongInviteCancelled LongInviteState = "cancelled"
	// LongInviteVoid: the library's secret changed since it was made.
	LongInviteVoid LongInviteState = "void"
)

// LongInvite is one long invite code this device made, as it keeps it
// (the code itself is not kept: only a hash of its ticket).
type LongInvite struct {
	ID      string
	Created time.Time
	Expires time.Time
	State   LongInviteState
	// Epoch is the epoch of the library's secret it was made in.
	Epoch uint64
	// UsedBy is the device the code made a member, at UsedAt.
	UsedBy crdt.DeviceID
	UsedAt time.Time
	Detail string
}

// ErrNoLongInvite is returned by CancelLongInvite for an id that is none
// of this device's long codes.
var ErrNoLongInvite = errors.New("no such long invite code")

// Invite returns a new long invite code of the library, which works for
// DefaultInviteValidity (NewInvite).
func (l *Library) Invite() (string, error) {
	code, _, err := l.NewInvite(0)
	return code, err
}

// NewInvite returns a new long invite code, and the code as LongInvites
// lists it: the library secret, the addresses the main node listens on
// now, and a one-time ticket that only this device redeems, for validFor
// (0: DefaultInviteValidity; at most MaxInviteValidity).
func (l *Library) NewInvite(validFor time.Duration) (string, LongInvite, error) {
	switch {
	case validFor == 0:
		validFor = DefaultInviteValidity
	case validFor < time.Minute || validFor > MaxInviteValidity:
		return "", LongInvite{}, refusef(ErrBadInvite, "an invite works from a minute to %v, not %v", MaxInviteValidity, validFor)
	}
	node := l.net.current()
	if node == nil {
		return "", LongInvite{}, ErrNoNetwork
	}
	ticket := make([]byte, ticketLen)
	var id [8]byte
	rand.Read(ticket)
	rand.Read(id[:])
	lib, _ := l.store.Library()
	now := l.cfg.Now()
	inv := store.Invite{ID: hex.EncodeToString(id[:]), Ticket: ticketHash(ticket), Epoch: lib.Epoch, Created: now, Expires: now.Add(validFor)}
	ctx, cancel := l.untilClosing(handshakeWrite)
	defer cancel()
	if err := l.store.AddInvite(ctx, inv); err != nil {
		if errors.Is(err, store.ErrTooManyInvites) {
			return "", LongInvite{}, refusef(ErrUnavailable, "%v: wait until one is used or expires", err)
		}
		return "", LongInvite{}, err
	}
	l.log.Info("made a long invite code", "invite", inv.ID, "epoch", inv.Epoch, "expires", inv.Expires.Format(time.RFC3339))
	return node.InviteTicket(ticket), l.longInvite(inv, now), nil
}

// pairingCode is the long code a short-code pairing hands over: without a
// ticket, since the inviter adds the joiner itself (notePaired).
func (l *Library) pairingCode() (string, error) {
	node := l.net.current()
	if node == nil {
		return "", ErrNoNetwork
	}
	return node.Invite(), nil
}

// LongInvites returns the long codes this device made and still keeps,
// newest first.
func (l *Library) LongInvites() []LongInvite {
	now := l.cfg.Now()
	var out []LongInvite
	for _, inv := range l.store.Invites() {
		out = append(out, l.longInvite(inv, now))
	}
	slices.SortStableFunc(out, func(a, b LongInvite) int { return b.Created.Compare(a.Created) })
	return out
}

// CancelLongInvite ends long code id, if it is open, and returns it;
// ErrNoLongInvite if it is none of this device's.
func (l *Library) CancelLongInvite(id string) (LongInvite, error) {
	ctx, cancel := l.untilClosing(handshakeWrite)
	defer cancel()
	now := l.cfg.Now()
	inv, err := l.store.CancelInvite(ctx, id, now)
	if errors.Is(err, store.ErrNoInvite) {
		return LongInvite{}, fmt.Errorf("%w: %q", ErrNoLongInvite, id)
	}
	if err != nil {
		return LongInvite{}, err
	}
	l.log.Info("cancelled a long invite code", "invite", id)
	return l.longInvite(inv, now), nil
}

func (l *Library) longInvite(inv store.Invite, now time.Time) LongInvite {
	out := LongInvite{ID: inv.ID, Created: inv.Created, Expires: inv.Expires, Epoch: inv.Epoch,
		UsedBy: crdt.DeviceID(inv.UsedBy), UsedAt: inv.UsedAt}
	switch {
	case inv.UsedBy != 0:
		out.State, out.Detail = LongInviteUsed, fmt.Sprintf("%s joined with it", orUnnamed(l.names.get(out.UsedBy)))
	case inv.Cancelled:
		out.State, out.Detail = LongInviteCancelled, "cancelled"
	case inv.Void || inv.Epoch != l.Epoch():
		out.State, out.Detail = LongInviteVoid, "the library's secret changed since it was made (a device was forgotten or left)"
	case !now.Before(inv.Expires):
		out.State, out.Detail = LongInviteExpired, "expired unused"
	default:
		out.State = LongInviteOpen
	}
	return out
}

// redeem makes device from a member if ticket is that of an open long
// code of this device's, of the current epoch (peer.Config.Redeem). Its
// error is what the refused device is told.
func (l *Library) redeem(ctx context.Context, from crdt.DeviceID, ticket []byte) error {
	if l.members.removed(from) {
		return errors.New("this device was forgotten by the library, and stays forgotten: wipe its data dir and pair it as a new device")
	}
	if len(ticket) != ticketLen {
		return errors.New("the invite's ticket is malformed")
	}
	ctx, cancel := context.WithTimeout(ctx, handshakeWrite)
	defer cancel()
	inv, err := l.store.RedeemInvite(ctx, ticketHash(ticket), uint64(from), l.cfg.Now())
	if err != nil {
		why := redeemRefusal(err)
		l.log.Info("refused an invite's ticket", "device", from, "why", why)
		return errors.New(why)
	}
	if err := l.addMember(ctx, from, "it joined with a long invite code ("+inv.ID+")"); err != nil {
		return fmt.Errorf("the inviter could not record this device as a member: %w", err)
	}
	return nil
}

// redeemRefusal says, for the person at the refused device, why its
// ticket was refused.
func redeemRefusal(err error) string {
	const again = "; make a new invite on a device of the library (danyue invite) and join again"
	switch {
	case errors.Is(err, store.ErrNoInvite):
		return "this device made no such invite: an invite is redeemed only at the device that made it" + again
	case errors.Is(err, store.ErrInviteUsed):
		return "the invite was already used by another device" + again
	case errors.Is(err, store.ErrInviteExpired):
		return "the invite has expired" + again
	case errors.Is(err, store.ErrInviteCancelled):
		return "the invite was cancelled" + again
	case errors.Is(err, store.ErrInviteVoid):
		return "the invite was made before the library's secret changed (a device was forgotten or left)" + again
	}
	return fmt.Sprintf("the inviter could not redeem the invite: %v", err)
}

// ticketFor is the ticket to present in a hello to device to
// (peer.Config.Ticket): that of the invite this device joined by, to its
// inviter.
func (l *Library) ticketFor(to crdt.DeviceID) []byte {
	inviter, ticket := l.store.Joining()
	if inviter == 0 || crdt.DeviceID(inviter) != to {
		return nil
	}
	return ticket
}

// dropTicket forgets the ticket of the invite this device joined by, once
// a member has added it.
func (l *Library) dropTicket() {
	if _, ticket := l.store.Joining(); ticket == nil {
		return
	}
	ctx, cancel := l.untilClosing(handshakeWrite)
	defer cancel()
	if err := l.store.DropTicket(ctx); err != nil {
		l.log.Warn("forget the invite's ticket", "err", err)
	}
}

// ErrNotAdmitted is the kind of a Refusal of Join whose inviter refused to
// make this device a member.
var ErrNotAdmitted = errors.New("not admitted")

// joinAdmitWait bounds how long Join waits for the inviter of a long code
// to take its ticket: the inviter may be away, and the join stands.
const joinAdmitWait = 10 * time.Second

// joinWatch follows, during a Join by long code, what the inviter says of
// this device: whether it serves it (it made it a member) or refuses it.
type joinWatch struct {
	mu      sync.Mutex
	inviter crdt.DeviceID
	done    chan struct{}
	err     error
}

// watch starts watching inviter, and returns the channel closed once it
// has spoken.
func (w *joinWatch) watch(inviter crdt.DeviceID) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inviter, w.done, w.err = inviter, make(chan struct{}), nil
	return w.done
}

// result stops watching and returns what the inviter said: nil if it
// served this device or said nothing.
func (w *joinWatch) result() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.err
	w.inviter, w.done, w.err = 0, nil, nil
	return err
}

func (w *joinWatch) finish(d crdt.DeviceID, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done == nil || d != w.inviter {
		return
	}
	w.err = err
	close(w.done)
	w.done = nil
}

// served: the device d served this device's pull (peer.PeerConnected).
func (w *joinWatch) served(d crdt.DeviceID) { w.finish(d, nil) }

// refused: d refused this device as not a member (peer.ErrNotMember).
func (w *joinWatch) refused(d crdt.DeviceID, err error) { w.finish(d, err) }

// awaitInviter waits, for a bounded time, until the inviter of a long code
// has said whether it made this device a member, and returns a Refusal if
// it refused: its reason, for the person at this device.
func (l *Library) awaitInviter(ctx context.Context, done <-chan struct{}) error {
	t := time.NewTimer(joinAdmitWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		l.log.Info("the inviter has not been reached yet; this device becomes a member once it is, and its ticket taken")
	case <-ctx.Done():
	case <-l.life.Done():
	}
	err := l.joinW.result()
	if err == nil {
		return nil
	}
	why := strings.TrimPrefix(err.Error(), peer.ErrNotMember.Error()+": ")
	return refusef(ErrNotAdmitted, "this device now holds the library's secret, but the inviter did not make it a member: %s", why)
}
