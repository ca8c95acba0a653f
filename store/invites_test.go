package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// The roster of an epoch comes with the secret it is the roster of: a
// rotation sets it, a higher epoch of the same secret replaces it, the same
// epoch only fills it in, and a new library has none.
func TestRoster(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	ctx := context.Background()
	lib := Library{ID: [16]byte{1}, Secret: [32]byte{1}}
	if err := s.JoinLibrary(ctx, lib, 7, []byte("ticket")); err != nil {
		t.Fatal(err)
	}
	if r, ok := s.Roster(); ok {
		t.Fatalf("a joined library has a roster: %v", r)
	}
	if err := s.SetLibraryEpoch(ctx, 3, []uint64{7, 8}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetLibraryEpoch(ctx, 3, []uint64{9}); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Roster(); !slices.Equal(r, []uint64{7, 8}) {
		t.Fatalf("roster %v, want the first one told for epoch 3", r)
	}
	if inviter, ticket := s.Joining(); inviter != 7 || string(ticket) != "ticket" {
		t.Fatalf("joining: %d %q", inviter, ticket)
	}
	if err := s.DropTicket(ctx); err != nil {
		t.Fatal(err)
	}
	if inviter, ticket := s.Joining(); inviter != 7 || ticket != nil {
		t.Fatalf("after DropTicket: %d %q", inviter, ticket)
	}
	next := Library{ID: lib.ID, Secret: [32]byte{2}, Epoch: 4}
	if err := s.RotateLibrary(ctx, next, []uint64{8, 9}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, dir, Options{})
	if r, ok := s.Roster(); !ok || !slices.Equal(r, []uint64{8, 9}) {
		t.Fatalf("after the rotation and a restart, roster %v, %v", r, ok)
	}
	if inviter, _ := s.Joining(); inviter != 7 {
		t.Fatalf("the inviter was lost in a rotation: %d", inviter)
	}
	if err := s.RotateLibrary(ctx, Library{ID: lib.ID, Secret: [32]byte{3}, Epoch: 5}, make([]uint64, MaxRoster+1)); err == nil {
		t.Fatal("a roster over the bound was taken")
	}
	if err := s.SetLibrary(ctx, Library{ID: [16]byte{2}, Secret: [32]byte{4}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Roster(); ok {
		t.Fatal("a new library kept the old one's roster")
	}
	if inviter, _ := s.Joining(); inviter != 0 {
		t.Fatal("a new library kept the old one's inviter")
	}
}

// An invite is redeemed once, by one device, while open and of the current
// epoch; a rotation voids the open ones; each refusal says why and changes
// nothing; the list survives a restart and stays bounded.
func TestInvites(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	ctx := context.Background()
	lib := Library{ID: [16]byte{1}, Secret: [32]byte{1}, Epoch: 2}
	if err := s.SetLibrary(ctx, lib); err != nil {
		t.Fatal(err)
	}
	t0 := time.UnixMilli(1_767_225_600_000)
	add := func(id string, ticket byte, epoch uint64, expires time.Duration) {
		t.Helper()
		if err := s.AddInvite(ctx, Invite{ID: id, Ticket: [32]byte{ticket}, Epoch: epoch, Created: t0, Expires: t0.Add(expires)}); err != nil {
			t.Fatal(err)
		}
	}
	add("open", 1, 2, time.Hour)
	add("short", 2, 2, time.Minute)
	add("cancel", 3, 2, time.Hour)
	add("old", 4, 1, time.Hour)
	if _, err := s.CancelInvite(ctx, "cancel", t0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		ticket byte
		by     uint64
		at     time.Time
		want   error
	}{
		{"unknown ticket", 9, 0xa, t0, ErrNoInvite},
		{"expired", 2, 0xa, t0.Add(time.Minute), ErrInviteExpired},
		{"cancelled", 3, 0xa, t0, ErrInviteCancelled},
		{"of an older epoch", 4, 0xa, t0, ErrInviteVoid},
		{"open", 1, 0xa, t0.Add(time.Second), nil},
		{"again, by the same device", 1, 0xa, t0.Add(2 * time.Second), nil},
		{"by another device", 1, 0xb, t0.Add(time.Second), ErrInviteUsed},
	} {
		got, err := s.RedeemInvite(ctx, [32]byte{tc.ticket}, tc.by, tc.at)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
			continue
		}
		if err == nil && (got.UsedBy != 0xa || !got.UsedAt.Equal(t0.Add(time.Second))) {
			t.Errorf("%s: redeemed %+v, want used by a at t0+1s", tc.name, got)
		}
	}
	add("before the rotation", 5, 2, time.Hour)
	if err := s.RotateLibrary(ctx, Library{ID: lib.ID, Secret: [32]byte{2}, Epoch: 3}, []uint64{0xa}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RedeemInvite(ctx, [32]byte{5}, 0xc, t0); !errors.Is(err, ErrInviteVoid) {
		t.Errorf("an invite made before a rotation: %v, want ErrInviteVoid", err)
	}
	s.Close()
	s = open(t, dir, Options{})
	state := map[string]string{}
	for _, inv := range s.Invites() {
		state[inv.ID] = fmt.Sprintf("used=%x cancelled=%v void=%v", inv.UsedBy, inv.Cancelled, inv.Void)
	}
	want := map[string]string{
		"open": "used=a cancelled=false void=false", "short": "used=0 cancelled=false void=true",
		"cancel": "used=0 cancelled=true void=false", "old": "used=0 cancelled=false void=true",
		"before the rotation": "used=0 cancelled=false void=true",
	}
	for id, w := range want {
		if state[id] != w {
			t.Errorf("after a restart, invite %q: %s, want %s", id, state[id], w)
		}
	}
	// Bounded: ended invites make room; open ones do not.
	for i := range maxInvites {
		if err := s.AddInvite(ctx, Invite{ID: fmt.Sprint("n", i), Ticket: [32]byte{byte(10 + i)}, Epoch: 3, Created: t0, Expires: t0.Add(time.Hour)}); err != nil {
			t.Fatalf("invite %d: %v", i, err)
		}
	}
	if n := len(s.Invites()); n != maxInvites {
		t.Fatalf("%d invites kept, want %d", n, maxInvites)
	}
	if err := s.AddInvite(ctx, Invite{ID: "one too many", Ticket: [32]byte{99}, Epoch: 3, Created: t0, Expires: t0.Add(time.Hour)}); !errors.Is(err, ErrTooManyInvites) {
		t.Fatalf("an invite past the bound: %v", err)
	}
	if _, err := s.CancelInvite(ctx, "nobody", t0); !errors.Is(err, ErrNoInvite) {
		t.Fatalf("cancel an unknown invite: %v", err)
	}
}
