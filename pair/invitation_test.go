package pair

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// attempt runs Initiate with code against inv on a fresh pipe; now is the
// inviter's clock.
func attempt(inv *Invitation, code Code, now time.Time) (initErr, respErr error) {
	ca, cb := net.Pipe()
	defer ca.Close()
	defer cb.Close()
	done := make(chan error, 1)
	go func() {
		_, err := inv.respond(context.Background(), cb, nil, nil, func() time.Time { return now })
		cb.Close() // an inviter that refuses hangs up
		done <- err
	}()
	_, initErr = Initiate(context.Background(), ca, code, nil, nil)
	ca.Close()
	return initErr, <-done
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
