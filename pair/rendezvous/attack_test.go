package rendezvous

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/danyue/danyue/internal/poll"
	"github.com/danyue/danyue/pair"
)

// Attacks on the LAN, played on loopback: each attacker is a goroutine
// with an address of its own (127.0.0.N), the inviter and the joiner are
// on 127.0.0.1.

// alias returns 127.0.0.n, skipping the test where loopback has no such
// address (only Linux routes all of 127/8 to lo by default).
func alias(t *testing.T, n int) netip.Addr {
	t.Helper()
	a := netip.AddrFrom4([4]byte{127, 0, 0, byte(n)})
	ln, err := net.Listen("tcp", net.JoinHostPort(a.String(), "0"))
	if err != nil {
		t.Skipf("no loopback address %s here: %v", a, err)
	}
	ln.Close()
	return a
}

// from is a joiner whose connections come from address a.
func from(a netip.Addr, code pair.Code) *Joiner {
	return &Joiner{
		Code: code, AD: []byte("joiner " + a.String()), Accept: accept, Logger: quiet,
		Dialer: &net.Dialer{Timeout: dialTimeout, LocalAddr: &net.TCPAddr{IP: a.AsSlice()}},
	}
}

// randomWords returns a code on channel with random words: what an
// attacker who read the channel off the announcement guesses.
func randomWords(t *testing.T, channel int) pair.Code {
	t.Helper()
	c, err := pair.NewCode()
	if err != nil {
		t.Fatal(err)
	}
	c.Channel = channel
	return c
}

func openHostWith(t *testing.T, inv *pair.Invitation, listen string, burns *Burns, payload string) *Host {
	t.Helper()
	h, err := Open(Config{
		Invitation: inv, Listen: listen, AD: []byte("inviter " + listen), Burns: burns,
		Payload: func() ([]byte, error) { return []byte(payload), nil }, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

func newInvitation(t *testing.T) *pair.Invitation {
	t.Helper()
	inv, err := pair.NewInvitation(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// An attacker burns the code with one wrong guess before the joiner comes:
// the inviter learns who did it, and the joiner, arriving with the right
// code, is told the code was spent by a failed try from the attacker's
// address, at what time, rather than finding nobody.
func TestAttackBurnThenJoin(t *testing.T) {
	attacker := alias(t, 2)
	joiner := netip.MustParseAddr("127.0.0.1")
	h, inv := openHost(t, time.Minute, "danyue1-secret")
	_, err := from(attacker, randomWords(t, inv.Code.Channel)).Join(ctxT(t), h.Addrs()[0])
	if !errors.Is(err, pair.ErrWrongCode) {
		t.Fatalf("the attacker's guess: %v, want a wrong code", err)
	}
	o := waitOutcome(t, h)
	if !o.Burned || o.From != attacker || o.Burner.Burns != 1 || !o.Burner.RefusedUntil.IsZero() {
		t.Fatalf("the inviter's outcome %+v, want a burn by %s, not refused yet", o, attacker)
	}
	_, err = from(joiner, inv.Code).JoinAny(ctxT(t), []Announcer{{Addrs: h.Addrs()}})
	r, ok := errors.AsType[*pair.Refusal](err)
	if !ok || r.Reason != pair.ReasonBurned || r.By != attacker || r.At.Unix() != o.At.Unix() {
		t.Fatalf("the joiner: %v, want told the code was burned by %s at %v", err, attacker, o.At)
	}
}

// stalled is a connection whose reads wait until release is closed: an
// initiator on it sends its share and never reads the answer.
type stalled struct {
	net.Conn
	release chan struct{}
}

func (s stalled) Read([]byte) (int, error) {
	<-s.release
	return 0, errors.New("released")
}

// An attacker that sends its guess and then stalls holds the code for its
// session; a joiner meanwhile is told the code is being tried (not by
// whom: that session might still pair), and once the attacker hangs up
// the code is burned by it, named.
func TestAttackStallHoldsCode(t *testing.T) {
	attacker := alias(t, 2)
	h, inv := openHost(t, time.Minute, "danyue1-secret")
	c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: attacker.AsSlice()}}).Dial("tcp", h.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nonce := make([]byte, nonceSize)
	rand.Read(nonce)
	peer, err := exchangeHello(c, nonce)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := pair.Initiate(context.Background(), stalled{c, release}, randomWords(t, inv.Code.Channel), sessionID(peer, nonce), nil)
		done <- err
	}()
	poll.Until(t, "the attacker's share to take the code", 10*time.Second, inv.Used)
	_, err = Join(ctxT(t), h.Addrs()[0], inv.Code, nil, accept)
	r, ok := errors.AsType[*pair.Refusal](err)
	if !ok || r.Reason != pair.ReasonInUse || r.By.IsValid() || r.At.IsZero() {
		t.Fatalf("the joiner while the attacker holds the code: %v, want in use, by nobody named", err)
	}
	if _, ended := h.Outcome(); ended {
		t.Fatal("the invitation ended while the attacker held it")
	}
	close(release)
	c.Close()
	<-done
	if o := waitOutcome(t, h); !o.Burned || o.From != attacker {
		t.Fatalf("outcome %+v, want a burn by the attacker once it hung up", o)
	}
}

// One address burning code after code is counted across invitations,
// reported as an attack at the second burn, and refused for the next
// code's life without getting a guess; the joiner pairs meanwhile. One
// guess per code still holds: the refusal tests nothing.
func TestAttackRepeatedBurns(t *testing.T) {
	attacker := alias(t, 2)
	joiner := netip.MustParseAddr("127.0.0.1")
	burns := NewBurns()
	var last Outcome
	for i := 1; i <= AttackBurns; i++ {
		inv := newInvitation(t)
		h := openHostWith(t, inv, "127.0.0.1:0", burns, "danyue1-secret")
		if _, err := from(attacker, randomWords(t, inv.Code.Channel)).Join(ctxT(t), h.Addrs()[0]); !errors.Is(err, pair.ErrWrongCode) {
			t.Fatalf("burn %d: %v", i, err)
		}
		last = waitOutcome(t, h)
		if last.Burner.Burns != i {
			t.Fatalf("burn %d counted as %d", i, last.Burner.Burns)
		}
	}
	if last.Burner.RefusedUntil.IsZero() || !last.Burner.RefusedUntil.After(last.At) {
		t.Fatalf("after %d burns the attacker is not refused: %+v", AttackBurns, last.Burner)
	}
	if got := burns.Recent(); len(got) != 1 || got[0].Addr != attacker || got[0].Burns != AttackBurns {
		t.Fatalf("recent burners %+v", got)
	}

	inv := newInvitation(t)
	h := openHostWith(t, inv, "127.0.0.1:0", burns, "danyue1-secret")
	_, err := from(attacker, randomWords(t, inv.Code.Channel)).Join(ctxT(t), h.Addrs()[0])
	r, ok := errors.AsType[*pair.Refusal](err)
	if !ok || r.Reason != pair.ReasonBlocked || r.By != attacker || r.Burns != AttackBurns {
		t.Fatalf("the attacker on the next code: %v, want refused as blocked", err)
	}
	if inv.Used() {
		t.Fatal("a refused address spent the code")
	}
	j, err := from(joiner, inv.Code).Join(ctxT(t), h.Addrs()[0])
	if err != nil || string(j.Payload) != "danyue1-secret" {
		t.Fatalf("the joiner after the refused attacker: %v", err)
	}
	if o := waitOutcome(t, h); !o.Paired {
		t.Fatalf("outcome %+v, want paired", o)
	}
}

// A fake inviter announces the code's channel. Whichever the joiner tries
// first, it pairs with the real inviter: the fake fails CPace's key
// confirmation (a wrong code, never "spent") and the joiner goes on.
func TestAttackFakeInviter(t *testing.T) {
	fakeAddr := alias(t, 3)
	for _, fakeFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("fake first %v", fakeFirst), func(t *testing.T) {
			inv := newInvitation(t)
			real := openHostWith(t, inv, "127.0.0.1:0", nil, "danyue1-real")
			fakeInv := &pair.Invitation{Code: randomWords(t, inv.Code.Channel), Expires: inv.Expires}
			fake := openHostWith(t, fakeInv, net.JoinHostPort(fakeAddr.String(), "0"), nil, "danyue1-attacker")
			anns := []Announcer{{Instance: "fake", Addrs: fake.Addrs()}, {Instance: "real", Addrs: real.Addrs()}}
			if !fakeFirst {
				slices.Reverse(anns)
			}
			j := from(netip.MustParseAddr("127.0.0.1"), inv.Code)
			j.order = func([]Announcer) {} // as given
			got, err := j.JoinAny(ctxT(t), anns)
			if err != nil || string(got.Payload) != "danyue1-real" || got.Addr != real.Addrs()[0] {
				t.Fatalf("JoinAny: %+v, %v; want paired with the real inviter", got, err)
			}
			if o := waitOutcome(t, real); !o.Paired {
				t.Fatalf("the real inviter: %+v", o)
			}
			if fakeInv.Used() != fakeFirst {
				t.Fatalf("the fake inviter tested the code: %v, want %v", fakeInv.Used(), fakeFirst)
			}
		})
	}
}

// When the fake inviter is the only one that answers, the joiner says so:
// the error is a wrong code from the fake's address, not a spent code.
func TestAttackFakeInviterAlone(t *testing.T) {
	fakeAddr := alias(t, 3)
	inv := newInvitation(t)
	fake := openHostWith(t, &pair.Invitation{Code: randomWords(t, inv.Code.Channel), Expires: inv.Expires}, net.JoinHostPort(fakeAddr.String(), "0"), nil, "x")
	_, err := from(netip.MustParseAddr("127.0.0.1"), inv.Code).JoinAny(ctxT(t), []Announcer{{Addrs: fake.Addrs()}})
	je, ok := errors.AsType[*JoinError](err)
	if !ok || len(je.Attempts) != 1 || !je.Attempts[0].Tested() || je.Attempts[0].Addr != fake.Addrs()[0] || errors.Is(err, pair.ErrRefused) {
		t.Fatalf("JoinAny: %v, want one wrong-code attempt at the fake", err)
	}
}

// Fake inviters on many addresses get at most MaxTested guesses at the
// joiner's code, and the joiner stops there.
func TestAttackJoinerBoundsGuesses(t *testing.T) {
	inv := newInvitation(t)
	var anns []Announcer
	var fakes []*pair.Invitation
	for i := range MaxTested + 2 {
		a := alias(t, 10+i)
		f := &pair.Invitation{Code: randomWords(t, inv.Code.Channel), Expires: inv.Expires}
		h := openHostWith(t, f, net.JoinHostPort(a.String(), "0"), nil, "x")
		fakes = append(fakes, f)
		anns = append(anns, Announcer{Addrs: h.Addrs()})
	}
	j := from(netip.MustParseAddr("127.0.0.1"), inv.Code)
	j.order = func([]Announcer) {}
	_, err := j.JoinAny(ctxT(t), anns)
	je, ok := errors.AsType[*JoinError](err)
	if !ok || len(je.Attempts) != MaxTested || je.Skipped != 2 {
		t.Fatalf("JoinAny: %v, want %d attempts and 2 skipped", err, MaxTested)
	}
	for i, f := range fakes {
		if f.Used() != (i < MaxTested) {
			t.Errorf("fake %d tested a guess: %v", i, f.Used())
		}
	}
}

// Sessions from one device count once: a second announcement pointing at
// the same address is not tried again.
func TestJoinAnyOneSessionPerDevice(t *testing.T) {
	h, inv := openHost(t, time.Minute, "x")
	if _, err := Join(ctxT(t), h.Addrs()[0], wrongCode(inv.Code), nil, accept); !errors.Is(err, pair.ErrWrongCode) {
		t.Fatal(err)
	}
	j := from(netip.MustParseAddr("127.0.0.1"), inv.Code)
	_, err := j.JoinAny(ctxT(t), []Announcer{{Addrs: h.Addrs()}, {Addrs: h.Addrs()}})
	je, ok := errors.AsType[*JoinError](err)
	if !ok || len(je.Attempts) != 1 {
		t.Fatalf("JoinAny: %v, want one attempt", err)
	}
}

// The burn record counts within its window, refuses from the
// AttackBurns-th burn for BurnWindow after the last, and forgets.
func TestBurns(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	b := NewBurns()
	b.now = func() time.Time { return now }
	a := netip.MustParseAddr("192.0.2.7")
	if v := b.add(a, t0); v.Burns != 1 || !v.RefusedUntil.IsZero() {
		t.Fatalf("first burn %+v", v)
	}
	if _, refused := b.refused(a); refused {
		t.Fatal("refused after one burn")
	}
	// A burn older than the window does not count.
	if v := b.add(a, t0.Add(BurnWindow+time.Second)); v.Burns != 1 {
		t.Fatalf("a burn past the window counted: %+v", v)
	}
	t1 := t0.Add(BurnWindow + 2*time.Second)
	if v := b.add(a, t1); v.Burns != 2 || !v.RefusedUntil.Equal(t1.Add(BurnWindow)) {
		t.Fatalf("second burn in the window %+v", v)
	}
	for _, tc := range []struct {
		at   time.Time
		want bool
	}{{t1, true}, {t1.Add(BurnWindow - time.Second), true}, {t1.Add(BurnWindow), false}} {
		now = tc.at
		if _, refused := b.refused(a); refused != tc.want {
			t.Errorf("at %v refused %v, want %v", tc.at.Sub(t1), refused, tc.want)
		}
	}
	if got := b.Recent(); len(got) != 0 {
		t.Errorf("recent after the window %+v", got)
	}
	// Bounded: the oldest burner goes first.
	now = t0
	for i := range maxBurners + 5 {
		b.add(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), t0.Add(time.Duration(i)*time.Millisecond))
	}
	if len(b.by) > maxBurners {
		t.Fatalf("%d burners kept", len(b.by))
	}
	if _, ok := b.by[netip.AddrFrom4([4]byte{10, 0, 0, 0})]; ok {
		t.Error("the oldest burner was kept")
	}
}
