package library

import (
	"errors"
	"testing"
	"time"

	"github.com/danyue/danyue/internal/poll"
	"github.com/danyue/danyue/pair"
)

// pairable opens a library whose pairing rendezvous listens on loopback:
// the joiner is given its address, as --pair-addr does.
func pairable(t *testing.T, name string) *Library {
	return openLibrary(t, name, func(c *Config) { c.PairListen = "127.0.0.1:0" })
}

// waitPairing waits until invitation id has ended, and returns it.
func waitPairing(t *testing.T, l *Library, id string) Pairing {
	t.Helper()
	_, done, ok := l.Pairing(id)
	if !ok {
		t.Fatalf("no invitation %s", id)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("invitation %s did not end", id)
	}
	p, _, _ := l.Pairing(id)
	return p
}

// A device joins by short code: the inviter says whom it paired with and
// adds it to the members, the joiner takes its inviter as a member at
// once (without a record of its own), and the code is spent.
func TestPairByShortCode(t *testing.T) {
	a, b := pairable(t, "laptop"), pairable(t, "phone")
	ctx := ctxT(t)
	p := mustDo(a.OpenPairing())(t)
	if p.State != PairingOpen || len(p.Addresses) != 1 {
		t.Fatalf("invitation %+v, want open on one address", p)
	}
	lib := mustDo(b.Join(ctx, p.Code, p.Addresses[0]))(t)
	if lib != a.ID() || b.ID() != a.ID() {
		t.Fatalf("joined library %x, want %x", lib, a.ID())
	}
	if got := waitPairing(t, a, p.ID); got.State != PairingPaired || got.Device != b.Self().String() || got.DeviceName != "phone" {
		t.Fatalf("the inviter's invitation %+v, want paired with the phone", got)
	}
	if !b.members.current(a.Self()) {
		t.Errorf("the joiner does not take its inviter as a member")
	}
	poll.Until(t, "the inviter to add the joiner", 10*time.Second, func() bool {
		m, ok := a.Member(b.Self())
		return ok && m.AddedBy == a.Self()
	})
	_, err := b.Join(ctx, p.Code, p.Addresses[0])
	if !errors.Is(err, ErrNoInviter) {
		t.Errorf("joining again with a spent code: %v, want ErrNoInviter", err)
	}
}

// A wrong code spends the invitation, and the joiner's library stays its
// own; a new invitation replaces the open one; a cancelled one is closed.
func TestPairRefusals(t *testing.T) {
	a, b := pairable(t, "laptop"), pairable(t, "phone")
	ctx := ctxT(t)
	own := b.ID()
	p := mustDo(a.OpenPairing())(t)
	code := mustDo(pair.ParseCode(p.Code))(t)
	code.Words[1] = map[bool]string{true: "absurd", false: "aardvark"}[code.Words[1] == "aardvark"]
	_, err := b.Join(ctx, code.String(), p.Addresses[0])
	var r *Refusal
	if !errors.As(err, &r) || !errors.Is(err, ErrWrongCode) || r.Msg == "" {
		t.Fatalf("a wrong code: %v, want a Refusal of kind ErrWrongCode", err)
	}
	if got := waitPairing(t, a, p.ID); got.State != PairingWrongCode {
		t.Fatalf("after a wrong code the invitation is %+v", got)
	}
	if b.ID() != own {
		t.Fatal("a wrong code moved the joiner's library")
	}
	first := mustDo(a.OpenPairing())(t)
	second := mustDo(a.OpenPairing())(t)
	if got := waitPairing(t, a, first.ID); got.State != PairingCancelled || got.Detail == "" {
		t.Fatalf("the replaced invitation is %+v, want cancelled", got)
	}
	if got, ok := a.CancelPairing(second.ID); !ok || got.State != PairingCancelled {
		t.Fatalf("the cancelled invitation is %+v (found %v)", got, ok)
	}
	if _, ok := a.CancelPairing("nope"); ok {
		t.Error("an unknown invitation was found")
	}
}

// Join refuses what is not a code with the kind of refusal that says
// what is wrong.
func TestJoinRefusals(t *testing.T) {
	b := pairable(t, "phone")
	for _, tc := range []struct {
		code, addr string
		want       error
	}{
		{"7-aardvark-crossover", "", ErrBadInvite},        // words swapped
		{"7-adroitness-aardvark", "", ErrNoInviter},       // no mDNS in tests: an address needed
		{"7-adroitness-aardvark", "nope", ErrBadPairAddr}, // not host:port
		{"danyue1-abc", "127.0.0.1:1", ErrBadPairAddr},    // an address with a long code
		{"danyue1-abc", "", ErrBadInvite},
	} {
		_, err := b.Join(ctxT(t), tc.code, tc.addr)
		if !errors.Is(err, tc.want) {
			t.Errorf("Join(%q, %q): %v, want %v", tc.code, tc.addr, err, tc.want)
		}
	}
}
