package pair

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"
)

// attempt runs Initiate with code against inv on a fresh pipe; now is the
// inviter's clock.
func attempt(inv *Invitation, code Code, now time.Time) (initErr, respErr error) {
	initErr, respErr, _ = attemptFrom(inv, code, now, netip.Addr{})
	return initErr, respErr
}

// attemptFrom is attempt from an initiator at address from; claimed says
// whether the session took the code.
func attemptFrom(inv *Invitation, code Code, now time.Time, from netip.Addr) (initErr, respErr error, claimed bool) {
	ca, cb := net.Pipe()
	defer ca.Close()
	defer cb.Close()
	type result struct {
		err     error
		claimed bool
	}
	done := make(chan result, 1)
	go func() {
		_, claimed, err := inv.respond(context.Background(), cb, nil, nil, from, func() time.Time { return now })
		cb.Close() // an inviter that refuses hangs up
		done <- result{err, claimed}
	}()
	_, initErr = Initiate(context.Background(), ca, code, nil, nil)
	ca.Close()
	r := <-done
	return initErr, r.err, r.claimed
}

func TestInvitation(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	newInv := func(t *testing.T) *Invitation {
		inv, err := newInvitation(bytes.NewReader([]byte{6, 0x3c, 0x3b}), t0, DefaultValidity)
		if err != nil {
			t.Fatal(err)
		}
		if inv.Code.String() != "7-crossover-clockwork" {
			t.Fatalf("code %s", inv.Code)
		}
		return inv
	}
	right := mustCode(t, "7-crossover-clockwork")
	wrong := mustCode(t, "7-crossover-cobra")

	t.Run("right code once", func(t *testing.T) {
		inv := newInv(t)
		if ei, er := attempt(inv, right, t0.Add(time.Minute)); ei != nil || er != nil {
			t.Fatalf("first: %v / %v", ei, er)
		}
		if ei, er := attempt(inv, right, t0.Add(2*time.Minute)); !errors.Is(er, ErrInvitationUsed) || !errors.Is(ei, ErrRefused) {
			t.Fatalf("second use: %v / %v, want ErrRefused / ErrInvitationUsed", ei, er)
		}
	})
	t.Run("a wrong guess kills the code", func(t *testing.T) {
		inv := newInv(t)
		if ei, er := attempt(inv, wrong, t0); !errors.Is(ei, ErrWrongCode) || !errors.Is(er, ErrWrongCode) {
			t.Fatalf("wrong guess: %v / %v", ei, er)
		}
		if !inv.Used() {
			t.Error("invitation not used after a guess")
		}
		if ei, er := attempt(inv, right, t0); !errors.Is(er, ErrInvitationUsed) || !errors.Is(ei, ErrRefused) {
			t.Fatalf("right code after a wrong guess: %v / %v, want ErrInvitationUsed", ei, er)
		}
	})
	t.Run("expired", func(t *testing.T) {
		inv := newInv(t)
		if ei, er := attempt(inv, right, t0.Add(DefaultValidity)); !errors.Is(er, ErrInvitationExpired) || !errors.Is(ei, ErrRefused) {
			t.Fatalf("late: %v / %v, want ErrRefused / ErrInvitationExpired", ei, er)
		}
		if inv.Used() {
			t.Error("an expired attempt used the invitation")
		}
	})
}

// The sessions refused after the code was taken are told why: by whom and
// when a failed try spent it, or that it was used or expired; never who
// paired.
func TestInvitationRefusals(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	right := mustCode(t, "7-crossover-clockwork")
	wrong := mustCode(t, "7-crossover-cobra")
	attacker, joiner := netip.MustParseAddr("192.0.2.66"), netip.MustParseAddr("192.0.2.10")
	newInv := func() *Invitation { return &Invitation{Code: right, Expires: t0.Add(DefaultValidity)} }
	refusalOf := func(t *testing.T, err error) *Refusal {
		t.Helper()
		var r *Refusal
		if !errors.As(err, &r) || !errors.Is(err, ErrRefused) {
			t.Fatalf("initiator's error %v, want a *Refusal that is ErrRefused", err)
		}
		return r
	}

	t.Run("burned", func(t *testing.T) {
		inv := newInv()
		if ei, _, claimed := attemptFrom(inv, wrong, t0.Add(time.Second), attacker); !errors.Is(ei, ErrWrongCode) || !claimed {
			t.Fatalf("the attacker's try: %v, claimed %v", ei, claimed)
		}
		ei, er, claimed := attemptFrom(inv, right, t0.Add(time.Minute), joiner)
		if claimed || !errors.Is(er, ErrInvitationUsed) {
			t.Fatalf("the joiner's try took the code: %v, claimed %v", er, claimed)
		}
		want := Refusal{Reason: ReasonBurned, By: attacker, At: t0.Add(time.Second)}
		if r := refusalOf(t, ei); *r != want {
			t.Fatalf("refusal %+v, want %+v", *r, want)
		}
	})
	t.Run("used by a pairing", func(t *testing.T) {
		inv := newInv()
		if ei, er, claimed := attemptFrom(inv, right, t0, joiner); ei != nil || er != nil || !claimed {
			t.Fatalf("pairing: %v / %v", ei, er)
		}
		ei, _, _ := attemptFrom(inv, wrong, t0.Add(time.Second), attacker)
		if r := refusalOf(t, ei); *r != (Refusal{Reason: ReasonUsed}) {
			t.Fatalf("refusal %+v names the pairing", *r)
		}
	})
	t.Run("expired", func(t *testing.T) {
		ei, _, claimed := attemptFrom(newInv(), right, t0.Add(DefaultValidity), joiner)
		if r := refusalOf(t, ei); claimed || r.Reason != ReasonExpired {
			t.Fatalf("refusal %+v (claimed %v), want expired", *r, claimed)
		}
	})
	t.Run("in use", func(t *testing.T) {
		inv := newInv()
		inv.used.Store(true)
		inv.by, inv.at = attacker, t0
		ei, _, _ := attemptFrom(inv, right, t0.Add(time.Second), joiner)
		if r := refusalOf(t, ei); *r != (Refusal{Reason: ReasonInUse, At: t0}) {
			t.Fatalf("refusal %+v, want in use since t0, not by whom", *r)
		}
	})
}

// Refuse answers without testing anything, and the initiator reads why.
func TestRefuse(t *testing.T) {
	ca, cb := net.Pipe()
	defer ca.Close()
	defer cb.Close()
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	sent := Refusal{Reason: ReasonBlocked, By: netip.MustParseAddr("2001:db8::1"), At: at, Burns: 3}
	done := make(chan error, 1)
	go func() { done <- Refuse(context.Background(), cb, sent) }()
	_, err := Initiate(context.Background(), ca, mustCode(t, "7-crossover-clockwork"), nil, nil)
	var r *Refusal
	if !errors.As(err, &r) || *r != sent {
		t.Fatalf("initiator: %v, want the refusal %+v", err, sent)
	}
	if err := <-done; err != nil {
		t.Fatalf("Refuse: %v", err)
	}
}
