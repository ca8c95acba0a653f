package library

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/pair"
	"github.com/danyue/danyue/peer"
	"github.com/danyue/danyue/store"
)

// Moving this device between libraries: Join moves it into the library of
// an invite (a long code, or a short code paired for), Leave into a new
// library of its own. Either way its books stay and merge into the library
// it moves to.

// Refusal is an error the user can act on. Kind is one of the sentinels
// below (errors.Is finds it), for a caller to tell the cases apart; the
// message says what happened and what to do.
type Refusal struct {
	Kind error
	Msg  string
}

// Error returns the message, for a person.
func (r *Refusal) Error() string { return r.Msg }

// Unwrap returns the kind, for errors.Is.
func (r *Refusal) Unwrap() error { return r.Kind }

func refusef(kind error, format string, args ...any) *Refusal {
	return &Refusal{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// The kinds of a Refusal of Join.
var (
	// ErrBadInvite: the code is neither a short code nor a long one.
	ErrBadInvite = errors.New("bad invite code")
	// ErrBadPairAddr: the inviter's address is not HOST:PORT, or was given
	// with a long code.
	ErrBadPairAddr = errors.New("bad pairing address")
	// ErrNoInviter: no inviter of the short code was found or reached.
	ErrNoInviter = errors.New("no inviter")
	// ErrWrongCode: the inviter's code is another, and is spent now.
	ErrWrongCode = errors.New("wrong code")
	// ErrCodeSpent: the code was used or has expired.
	ErrCodeSpent = errors.New("code spent")
	// ErrPairingFailed: the pairing ran and failed otherwise.
	ErrPairingFailed = errors.New("pairing failed")
)

// leaveDeliverTimeout bounds how long a leaving device waits for a member
// to merge its removal.
const leaveDeliverTimeout = 10 * time.Second

// Join moves this device into the library of code: a long invite code, or
// a short code, whose inviter is found at pairAddr (HOST:PORT) if given,
// else by mDNS. It returns the library's id. The new library is stored, the
// peer network restarts under its key and dials the inviter; every book
// this device has stays and merges into the library. A code that does not
// work is a *Refusal.
//
// A long code makes this device a member only once its inviter has taken
// the code's ticket: Join waits a bounded time (joinAdmitWait) to hear
// from the inviter, and returns a Refusal of kind ErrNotAdmitted, with the
// inviter's reason, if it refused the ticket. A short code's inviter adds
// this device itself.
func (l *Library) Join(ctx context.Context, code, pairAddr string) (crdt.LibraryID, error) {
	j, err := l.JoinReport(ctx, code, pairAddr)
	return j.Library, err
}

// Joined is what JoinReport did.
type Joined struct {
	Library crdt.LibraryID
	// Warnings are, for a short code, what devices other than the inviter
	// that answered on its channel said: someone may be pretending to be
	// the inviter.
	Warnings []string
}

// JoinReport is Join, with the warnings of a short code's pairing.
func (l *Library) JoinReport(ctx context.Context, code, pairAddr string) (Joined, error) {
	inv, warnings, err := l.inviteOf(ctx, code, pairAddr)
	if err != nil {
		return Joined{}, err
	}
	j := Joined{Library: crdt.LibraryID(inv.Library.ID), Warnings: warnings}
	if len(inv.Ticket) == 0 {
		// A short code's: its inviter adds this device itself.
		return j, l.join(ctx, inv)
	}
	done := l.joinW.watch(peer.DeviceIDOf(inv.Peer))
	if err := l.join(ctx, inv); err != nil {
		l.joinW.result()
		return j, err
	}
	return j, l.awaitInviter(ctx, done)
}

// join moves this device into the invite's library: one of its own if the
// invite names no inviter.
func (l *Library) join(ctx context.Context, inv peer.Invite) error {
	l.moveMu.Lock()
	defer l.moveMu.Unlock()
	if old := l.net.take(false); old != nil {
		if err := old.Close(); err != nil {
			l.log.Warn("stop peer network for join", "err", err)
		}
	}
	var inviter uint64
	if inv.Peer != "" {
		inviter = uint64(peer.DeviceIDOf(inv.Peer))
	}
	if err := l.store.JoinLibrary(ctx, store.Library{ID: inv.Library.ID, Secret: inv.Library.Secret}, inviter, inv.Ticket); err != nil {
		return errors.Join(err, l.startNode(context.WithoutCancel(ctx), nil))
	}
	if inviter == 0 {
		if err := l.addSelf(ctx); err != nil {
			l.log.Warn("record this device as the maker of its library", "err", err)
		}
	}
	// The inviter is trusted from here on, as the invite names it (a short
	// code's pairing authenticated it): this device writes no member
	// record for it, or for itself, which the inviter writes.
	l.log.Info("joined library", "library", hex.EncodeToString(inv.Library.ID[:]), "inviter", inv.Peer)
	return l.startNode(context.WithoutCancel(ctx), inv.PeerAddrs())
}

// inviteOf returns the library invite of a join: a short code is paired
// for (with its pairing's warnings), a long code carries it, with its
// ticket.
func (l *Library) inviteOf(ctx context.Context, text, pairAddr string) (peer.Invite, []string, error) {
	code, err := pair.ParseCode(text)
	if err == nil {
		return l.pairByCode(ctx, code, pairAddr)
	}
	if looksLikeShortCode(text) {
		return peer.Invite{}, nil, refusef(ErrBadInvite, "%v (a long invite code starts with danyue1-)", err)
	}
	if pairAddr != "" {
		return peer.Invite{}, nil, refusef(ErrBadPairAddr, "pairAddr goes with a short code, not a long one")
	}
	inv, err := peer.DecodeInvite(text)
	if err != nil {
		return peer.Invite{}, nil, refusef(ErrBadInvite, "%v", err)
	}
	if inv.Peer == "" || len(inv.Ticket) == 0 {
		return peer.Invite{}, nil, refusef(ErrBadInvite, "this invite code names no inviter or carries no ticket (an older danyue made it): no device of the library would make this one a member; make a new code with `danyue invite` on a device of the library")
	}
	return inv, nil, nil
}

// looksLikeShortCode tells a mistyped short code from a mistyped long one,
// to say what is wrong with the right format.
func looksLikeShortCode(s string) bool {
	return !strings.HasPrefix(strings.ToLower(strings.TrimSpace(s)), "danyue")
}

// Left is what Leave did.
type Left struct {
	// Library is the new library this device is in, of its own.
	Library crdt.LibraryID
	// Delivered: a member confirmed the leave (it merged the removal, or
	// dropped this device) before this device went.
	Delivered bool
}

// Leave removes this device from its library, waits (a bounded time) for
// a connected member to merge the removal, and moves the device to a new
// library of its own, with a new secret: the old secret is gone from it,
// and the members that learn of the leave rotate theirs (rotate.go). The
// books stay on the device.
func (l *Library) Leave(ctx context.Context) (Left, error) {
	lib, epoch := l.members.library(), l.members.epoch()
	// The members connected before the removal is written: one may merge
	// it and drop this device before waitDelivered first looks.
	had := l.connectedPeers()
	if _, err := l.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) { return crdt.RemoveMember(lib, l.self, at, epoch) }); err != nil {
		return Left{}, fmt.Errorf("record that this device leaves: %w", err)
	}
	if l.leaveWritten != nil {
		l.leaveWritten()
	}
	wctx, cancel := context.WithTimeout(ctx, leaveDeliverTimeout)
	delivered := l.waitDelivered(wctx, had)
	cancel()
	if !delivered {
		l.log.Warn("no member confirmed this device's leave before it went; the others learn of it only if it reached one of them")
	}
	next, err := peer.NewLibrary()
	if err != nil {
		return Left{}, err
	}
	if err := l.join(context.WithoutCancel(ctx), peer.Invite{Library: next}); err != nil {
		return Left{}, fmt.Errorf("start a library of this device's own: %w", err)
	}
	l.log.Info("left the library", "library", hex.EncodeToString(lib[:]), "delivered", delivered)
	return Left{Library: crdt.LibraryID(next.ID), Delivered: delivered}, nil
}

// connectedPeers returns the devices this device is connected to.
func (l *Library) connectedPeers() map[crdt.DeviceID]bool {
	had := make(map[crdt.DeviceID]bool)
	if node := l.net.current(); node != nil {
		state, _ := node.SyncState()
		for _, p := range state.Peers {
			if p.Connected {
				had[p.Device] = true
			}
		}
	}
	return had
}

// waitDelivered waits until a member has merged everything this device
// wrote, or one of had, the members it was connected to before it wrote,
// drops it (its gater refuses a removed device once it has merged the
// removal), or ctx ends.
func (l *Library) waitDelivered(ctx context.Context, had map[crdt.DeviceID]bool) bool {
	if len(had) == 0 {
		return false // nobody to tell
	}
	for {
		node := l.net.current()
		if node == nil {
			return false
		}
		state, changed := node.SyncState()
		now := make(map[crdt.DeviceID]bool)
		for _, p := range state.Peers {
			if !p.Connected {
				continue
			}
			if p.Delivered {
				return true
			}
			now[p.Device] = true
		}
		for id := range had {
			if !now[id] {
				return true
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		case <-l.life.Done():
			return false
		}
	}
}
