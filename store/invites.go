package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// This device's long invite codes, kept with the secrets (they are as
// private): each is a one-time ticket, of which only a hash is kept, bound
// to the epoch of the library's secret it was made in and to an expiry.
// The joiner presents the ticket to this device, which redeems it once
// (RedeemInvite): that is what makes the joiner a member
// (library/doc.go).

// maxInvites bounds the invites kept; ended ones make room for new ones,
// the oldest first.
const maxInvites = 32

// Invite is one long invite code this device made, as it keeps it.
type Invite struct {
	ID string
	// Ticket is the SHA-256 of the code's ticket; the ticket itself is
	// only in the code.
	Ticket  [32]byte
	Epoch   uint64 // the epoch of the library's secret it was made in
	Created time.Time
	Expires time.Time
	// UsedBy is the device that redeemed it, at UsedAt; 0 while unused.
	UsedBy    uint64
	UsedAt    time.Time
	Cancelled bool
	// Void: the library's secret rotated since it was made.
	Void bool
}

// Open reports whether the invite can still be redeemed at now.
func (inv *Invite) Open(now time.Time) bool {
	return inv.UsedBy == 0 && !inv.Cancelled && !inv.Void && now.Before(inv.Expires)
}

// The refusals of RedeemInvite and CancelInvite.
var (
	ErrNoInvite        = errors.New("no such invite")
	ErrInviteUsed      = errors.New("the invite was used")
	ErrInviteExpired   = errors.New("the invite has expired")
	ErrInviteCancelled = errors.New("the invite was cancelled")
	// ErrInviteVoid: the library's secret rotated (a device was forgotten
	// or left) after the invite was made.
	ErrInviteVoid = errors.New("the invite was made before the library's secret changed")
	// ErrTooManyInvites: maxInvites are open; cancel one first.
	ErrTooManyInvites = errors.New("too many open invites")
)

type inviteFile struct {
	ID        string `json:"id"`
	Ticket    []byte `json:"ticket"`
	Epoch     uint64 `json:"epoch,omitempty"`
	Created   int64  `json:"created"` // Unix ms
	Expires   int64  `json:"expires"`
	UsedBy    uint64 `json:"usedBy,omitempty"`
	UsedAt    int64  `json:"usedAt,omitempty"`
	Cancelled bool   `json:"cancelled,omitempty"`
	Void      bool   `json:"void,omitempty"`
}

// maxInviteID bounds an invite's id.
const maxInviteID = 64

func (f *inviteFile) valid() bool {
	return len(f.Ticket) == 32 && f.ID != "" && len(f.ID) <= maxInviteID
}

func (f *inviteFile) invite() Invite {
	inv := Invite{ID: f.ID, Epoch: f.Epoch, Created: time.UnixMilli(f.Created), Expires: time.UnixMilli(f.Expires),
		UsedBy: f.UsedBy, Cancelled: f.Cancelled, Void: f.Void}
	copy(inv.Ticket[:], f.Ticket)
	if f.UsedAt != 0 {
		inv.UsedAt = time.UnixMilli(f.UsedAt)
	}
	return inv
}

func inviteFileOf(inv Invite) inviteFile {
	f := inviteFile{ID: inv.ID, Ticket: bytes.Clone(inv.Ticket[:]), Epoch: inv.Epoch, Created: inv.Created.UnixMilli(),
		Expires: inv.Expires.UnixMilli(), UsedBy: inv.UsedBy, Cancelled: inv.Cancelled, Void: inv.Void}
	if !inv.UsedAt.IsZero() {
		f.UsedAt = inv.UsedAt.UnixMilli()
	}
	return f
}

// Invites returns the invites kept, oldest first.
func (s *Store) Invites() []Invite {
	s.secMu.Lock()
	defer s.secMu.Unlock()
	out := make([]Invite, 0, len(s.secrets.Invites))
	for i := range s.secrets.Invites {
		out = append(out, s.secrets.Invites[i].invite())
	}
	return out
}

// AddInvite keeps inv, made at inv.Created (also the now by which ended
// invites are told apart), and makes room by dropping the oldest ended
// ones. With maxInvites open already it fails with ErrTooManyInvites.
func (s *Store) AddInvite(ctx context.Context, inv Invite) error {
	if inv.ID == "" || len(inv.ID) > maxInviteID {
		return fmt.Errorf("add an invite in %s: an id of %d bytes", s.dir, len(inv.ID))
	}
	return s.updateSecrets(ctx, func(sec *secrets) error {
		if sec.Library == nil {
			return fmt.Errorf("add an invite in %s: no library", s.dir)
		}
		list := sec.Invites
		for len(list) >= maxInvites {
			i := slices.IndexFunc(list, func(f inviteFile) bool { g := f.invite(); return !g.Open(inv.Created) })
			if i < 0 {
				return fmt.Errorf("%w: %d are open; cancel one", ErrTooManyInvites, len(list))
			}
			list = slices.Delete(list, i, i+1)
		}
		sec.Invites = append(list, inviteFileOf(inv))
		return nil
	})
}

// RedeemInvite marks the invite whose ticket hashes to ticket as used by
// device by at now, if it is open and of the current epoch, and returns
// it. An invite that by redeemed already is returned again (its joiner
// came back before its membership was written). Otherwise it fails with
// ErrNoInvite, ErrInviteUsed, ErrInviteExpired, ErrInviteCancelled or
// ErrInviteVoid, and changes nothing.
func (s *Store) RedeemInvite(ctx context.Context, ticket [32]byte, by uint64, now time.Time) (Invite, error) {
	var got Invite
	err := s.updateSecrets(ctx, func(sec *secrets) error {
		i := slices.IndexFunc(sec.Invites, func(f inviteFile) bool { return bytes.Equal(f.Ticket, ticket[:]) })
		if i < 0 || sec.Library == nil {
			return ErrNoInvite
		}
		inv := sec.Invites[i].invite()
		got = inv
		switch {
		case inv.UsedBy == by:
			return errUnchanged
		case inv.UsedBy != 0:
			return ErrInviteUsed
		case inv.Cancelled:
			return ErrInviteCancelled
		case inv.Void || inv.Epoch != sec.Library.Epoch:
			return ErrInviteVoid
		case !now.Before(inv.Expires):
			return ErrInviteExpired
		}
		got.UsedBy, got.UsedAt = by, now
		sec.Invites[i] = inviteFileOf(got)
		return nil
	})
	if err != nil {
		return Invite{}, err
	}
	return got, nil
}

// CancelInvite cancels invite id unless it has ended, and returns it;
// ErrNoInvite if none has that id.
func (s *Store) CancelInvite(ctx context.Context, id string, now time.Time) (Invite, error) {
	var got Invite
	err := s.updateSecrets(ctx, func(sec *secrets) error {
		i := slices.IndexFunc(sec.Invites, func(f inviteFile) bool { return f.ID == id })
		if i < 0 {
			return ErrNoInvite
		}
		got = sec.Invites[i].invite()
		if !got.Open(now) {
			return errUnchanged
		}
		got.Cancelled = true
		sec.Invites[i] = inviteFileOf(got)
		return nil
	})
	if err != nil {
		return Invite{}, err
	}
	return got, nil
}

// voidInvites returns list with every open invite of an epoch before
// epoch void (a copy if any changed).
func voidInvites(list []inviteFile, epoch uint64) []inviteFile {
	out := slices.Clone(list)
	for i := range out {
		if out[i].Epoch < epoch && out[i].UsedBy == 0 && !out[i].Cancelled {
			out[i].Void = true
		}
	}
	return out
}
