package library

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"github.com/danyue/danyue/internal/testport"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/pair"
	"github.com/danyue/danyue/pair/rendezvous"
)

// Attacks on short-code pairing from the LAN, played on loopback: the
// attacker is a goroutine whose connections come from 127.0.0.2, the
// inviter and the joiner are on 127.0.0.1.

// attackerAddr returns the attacker's address, skipping the test where
// loopback has no second address (only Linux routes 127/8 to lo).
func attackerAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no loopback address 127.0.0.2 here: %v", err)
	}
	ln.Close()
	return "127.0.0.2"
}

// burn is the attacker: it reaches the rendezvous at addr from the
// address from, as the pairing protocol does (a hello with a nonce, then
// CPace with a code of its own on channel), and returns what its one
// guess got.
func burn(ctx context.Context, addr, from string, channel int) error {
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	const magic = "danyue-pair/1\n"
	nonce := make([]byte, 16)
	rand.Read(nonce)
	if _, err := c.Write(append([]byte(magic), nonce...)); err != nil {
		return err
	}
	hello := make([]byte, len(magic)+16)
	if _, err := io.ReadFull(c, hello); err != nil {
		return err
	}
	guess, err := pair.NewCode()
	if err != nil {
		return err
	}
	guess.Channel = channel
	sid := append(hello[len(magic):], nonce...)
	_, err = pair.Initiate(ctx, c, guess, sid, []byte(`{"device":"attacker"}`))
	return err
}

// wantDetail fails unless the pairing's detail says each of the phrases.
func wantDetail(t *testing.T, what, detail string, phrases ...string) {
	t.Helper()
	for _, p := range phrases {
		if !strings.Contains(detail, p) {
			t.Fatalf("%s: %q does not say %q", what, detail, p)
		}
	}
}

// An attacker burns the code before the joiner types it. The inviter is
// told who did it, as a possible attacker; the joiner, arriving with the
// right code, is told the code was spent by a failed try from the
// attacker's address and when, not that nobody offers it.
func TestPairAttackBurnThenJoin(t *testing.T) {
	attacker := attackerAddr(t)
	a, b := pairable(t, "laptop"), pairable(t, "phone")
	ctx := ctxT(t)
	p := mustDo(a.OpenPairing())(t)
	code := mustDo(pair.ParseCode(p.Code))(t)
	if err := burn(ctx, p.Addresses[0], attacker, code.Channel); !errors.Is(err, pair.ErrWrongCode) {
		t.Fatalf("the attacker's guess: %v, want a wrong code", err)
	}
	got := waitPairing(t, a, p.ID)
	if got.State != PairingWrongCode {
		t.Fatalf("the inviter's invitation %+v, want wrong_code", got)
	}
	wantDetail(t, "the inviter", got.Detail, "someone at "+attacker+" tried a wrong code", "if that was not the other device, someone on this network is trying to pair", "run `danyue invite` again")

	own := b.ID()
	_, err := b.Join(ctx, p.Code, p.Addresses[0])
	var r *Refusal
	if !errors.As(err, &r) || !errors.Is(err, ErrCodeSpent) {
		t.Fatalf("the joiner: %v, want a Refusal of kind ErrCodeSpent", err)
	}
	wantDetail(t, "the joiner", r.Msg, "this code was spent by a failed try from another device at "+attacker+" at ", "someone on this network is trying to pair")
	if b.ID() != own {
		t.Fatal("the joiner moved")
	}
}

// One address burning code after code is named as an attack at the
// second burn, on the inviter's invitation, and refused for the next
// code, which the joiner then uses.
func TestPairAttackRepeatedBurns(t *testing.T) {
	attacker := attackerAddr(t)
	a, b := pairable(t, "laptop"), pairable(t, "phone")
	ctx := ctxT(t)
	for i := 1; i <= 2; i++ {
		p := mustDo(a.OpenPairing())(t)
		code := mustDo(pair.ParseCode(p.Code))(t)
		if err := burn(ctx, p.Addresses[0], attacker, code.Channel); !errors.Is(err, pair.ErrWrongCode) {
			t.Fatalf("burn %d: %v", i, err)
		}
		got := waitPairing(t, a, p.ID)
		if i == 2 {
			wantDetail(t, "the inviter after two burns", got.Detail, "2 codes burned by "+attacker+" in the last 10 minutes", "refuses "+attacker)
		}
	}
	p := mustDo(a.OpenPairing())(t)
	code := mustDo(pair.ParseCode(p.Code))(t)
	if err := burn(ctx, p.Addresses[0], attacker, code.Channel); !errors.Is(err, pair.ErrRefused) {
		t.Fatalf("the attacker on the third code: %v, want refused", err)
	}
	if got, _, _ := a.Pairing(p.ID); got.State != PairingOpen {
		t.Fatalf("the third code after the refused attacker: %+v, want open", got)
	}
	if lib := mustDo(b.Join(ctx, p.Code, p.Addresses[0]))(t); lib != a.ID() {
		t.Fatalf("joined %x, want %x", lib, a.ID())
	}
	warnings := a.PairingWarnings()
	if len(warnings) != 1 || warnings[0].Addr != attacker || warnings[0].Burns != 2 || warnings[0].RefusedUntil.IsZero() {
		t.Fatalf("pairing warnings %+v, want the attacker", warnings)
	}
	wantDetail(t, "the warning", warnings[0].Message(), "2 pairing codes burned by "+attacker, "someone on this network is trying to pair")
}

// With --pair-listen pinned to one port, a new invitation replaces the
// open one on the same port, also after a burn left the old one answering.
func TestPairPinnedPortReplaces(t *testing.T) {
	pinned := fmt.Sprintf("127.0.0.1:%d", testport.Loopback(t))
	a := openLibrary(t, "laptop", func(c *Config) { c.PairListen = pinned })
	b := pairable(t, "phone")
	ctx := ctxT(t)
	first := mustDo(a.OpenPairing())(t)
	if err := burn(ctx, pinned, "127.0.0.1", mustDo(pair.ParseCode(first.Code))(t).Channel); !errors.Is(err, pair.ErrWrongCode) {
		t.Fatalf("burn: %v", err)
	}
	if got := waitPairing(t, a, first.ID); got.State != PairingWrongCode {
		t.Fatalf("the burned invitation %+v", got)
	}
	second, err := a.OpenPairing()
	if err != nil {
		t.Fatalf("a second invitation on the pinned port: %v", err)
	}
	third, err := a.OpenPairing()
	if err != nil {
		t.Fatalf("a third invitation on the pinned port: %v", err)
	}
	if got := waitPairing(t, a, second.ID); got.State != PairingCancelled || !strings.Contains(got.Detail, "replaced") {
		t.Fatalf("the replaced invitation %+v", got)
	}
	if got, _, _ := a.Pairing(first.ID); got.State != PairingWrongCode {
		t.Fatalf("the burned invitation %+v, want still wrong_code", got)
	}
	if third.Addresses[0] != pinned {
		t.Fatalf("the new invitation listens on %v, want %s", third.Addresses, pinned)
	}
	mustDo(b.Join(ctx, third.Code, pinned))(t)
	if got := waitPairing(t, a, third.ID); got.State != PairingPaired {
		t.Fatalf("invitation %+v, want paired", got)
	}
}

// A fake inviter announces the code's channel. The joiner pairs with the
// real inviter whichever it reaches first; with only the fake to reach, it
// says the device that answered did not know the code, possibly someone
// pretending to be the inviter, and never that the code was spent.
func TestPairAttackFakeInviter(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.3:0")
	if err != nil {
		t.Skipf("no loopback address 127.0.0.3 here: %v", err)
	}
	ln.Close()
	a, b := pairable(t, "laptop"), pairable(t, "phone")
	ctx := ctxT(t)
	p := mustDo(a.OpenPairing())(t)
	code := mustDo(pair.ParseCode(p.Code))(t)
	fakeOf := func(t *testing.T) (*rendezvous.Host, *pair.Invitation) {
		guess := mustDo(pair.NewCode())(t)
		guess.Channel = code.Channel
		inv := &pair.Invitation{Code: guess, Expires: time.Now().Add(time.Minute)}
		h, err := rendezvous.Open(rendezvous.Config{
			Invitation: inv,
			Listen:     "127.0.0.3:0", Payload: func() ([]byte, error) { return []byte("danyue1-attacker"), nil },
			Logger: testLogger(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(h.Close)
		return h, inv
	}

	alone, _ := fakeOf(t)
	b.pairs.browse = func(context.Context, int, *slog.Logger) ([]rendezvous.Announcer, error) {
		return []rendezvous.Announcer{{Instance: "fake", Channel: code.Channel, Addrs: alone.Addrs()}}, nil
	}
	_, err = b.Join(ctx, p.Code, "")
	var r *Refusal
	if !errors.As(err, &r) || !errors.Is(err, ErrWrongCode) || strings.Contains(r.Msg, "spent by") {
		t.Fatalf("the joiner with only a fake to reach: %v, want a wrong code, not a spent one", err)
	}
	wantDetail(t, "the joiner", r.Msg, fmt.Sprintf("the device that answered on channel %d did not know the code — possibly someone else on this network pretending to be the inviter (127.0.0.3)", code.Channel))
	if got, _, _ := a.Pairing(p.ID); got.State != PairingOpen {
		t.Fatalf("the fake spent the real code: %+v", got)
	}

	fake, fakeInv := fakeOf(t)
	b.pairs.browse = func(context.Context, int, *slog.Logger) ([]rendezvous.Announcer, error) {
		return []rendezvous.Announcer{
			{Instance: "fake", Channel: code.Channel, Addrs: fake.Addrs()},
			{Instance: "real", Channel: code.Channel, Addrs: p.Addresses},
		}, nil
	}
	j := mustDo(b.JoinReport(ctx, p.Code, ""))(t)
	if j.Library != a.ID() {
		t.Fatalf("joined %x, want the real inviter's %x", j.Library, a.ID())
	}
	// The order is random: the fake was tried first or not at all, and
	// the joiner is warned exactly when it was.
	warned := len(j.Warnings) == 1 && strings.Contains(j.Warnings[0], "did not know the code — possibly someone else on this network pretending to be the inviter (127.0.0.3)")
	if fakeInv.Used() != warned || len(j.Warnings) > 1 {
		t.Fatalf("the fake was tried: %v; the joiner's warnings: %q", fakeInv.Used(), j.Warnings)
	}
	if got := waitPairing(t, a, p.ID); got.State != PairingPaired {
		t.Fatalf("the real invitation %+v, want paired", got)
	}
}
