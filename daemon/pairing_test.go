package daemon

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
	"github.com/danyue/danyue/internal/poll"
	"github.com/danyue/danyue/pair"
	"github.com/danyue/danyue/pair/rendezvous"
)

// startPairable starts a daemon whose pairing rendezvous listens on
// loopback: the joiner is given its address, as --pair-addr does.
func startPairable(t *testing.T, name string, mod func(*Config)) *testDaemon {
	return startDaemon(t, func(c *Config) {
		c.Name, c.PairListen = name, "127.0.0.1:0"
		if mod != nil {
			mod(c)
		}
	})
}

func wantAPIError(t *testing.T, err error, code string) {
	t.Helper()
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Code != code {
		t.Fatalf("error %v, want %s", err, code)
	}
}

// otherCode returns code with its second word changed: same channel, wrong
// words.
func otherCode(t *testing.T, s string) string {
	t.Helper()
	c, err := pair.ParseCode(s)
	if err != nil {
		t.Fatal(err)
	}
	c.Words[1] = map[bool]string{true: "absurd", false: "aardvark"}[c.Words[1] == "aardvark"]
	return c.String()
}

func TestPairByShortCode(t *testing.T) {
	a := startPairable(t, "laptop", nil)
	b := startPairable(t, "phone", nil)
	ctx := ctxT(t)
	mustDo(b.client.SetPosition(ctx, keyB, 42, 0.01, "B's own book"))(t)

	p := mustDo(a.client.Pair(ctx))(t)
	if _, err := pair.ParseCode(p.Code); err != nil || p.State != api.PairingOpen || len(p.Addresses) != 1 {
		t.Fatalf("pairing %+v: %v", p, err)
	}
	joined := mustDo(b.client.JoinAt(ctx, p.Code, p.Addresses[0]))(t)
	aStatus := mustDo(a.client.Status(ctx))(t)
	if joined.Library.ID != aStatus.Library.ID {
		t.Fatalf("joined library %s, want A's %s", joined.Library.ID, aStatus.Library.ID)
	}
	got := mustDo(a.client.Pairing(ctx, p.ID, true))(t)
	if got.State != api.PairingPaired || got.DeviceName != "phone" || got.Device != b.Device().String() {
		t.Fatalf("inviter's pairing %+v, want paired with phone", got)
	}
	// The joiner is in the library: its own book reaches the inviter.
	waitBook(t, a.client, keyB, "A to receive B's own book", func(bk api.Book) bool { return bk.Position != nil && bk.Position.Char == 42 })
	// The code is spent: the port is closed.
	_, err := b.client.JoinAt(ctx, p.Code, p.Addresses[0])
	wantAPIError(t, err, api.CodeNoInviter)
}

func TestPairWrongCode(t *testing.T) {
	a := startPairable(t, "laptop", nil)
	b := startPairable(t, "phone", nil)
	ctx := ctxT(t)
	before := mustDo(b.client.Status(ctx))(t).Library.ID

	p := mustDo(a.client.Pair(ctx))(t)
	_, err := b.client.JoinAt(ctx, otherCode(t, p.Code), p.Addresses[0])
	wantAPIError(t, err, api.CodeWrongCode)
	if got := mustDo(a.client.Pairing(ctx, p.ID, true))(t); got.State != api.PairingWrongCode {
		t.Fatalf("inviter's pairing %+v, want wrong_code", got)
	}
	// One guess per code: the right code is refused now, and the
	// inviter says by whom.
	_, err = b.client.JoinAt(ctx, p.Code, p.Addresses[0])
	wantAPIError(t, err, api.CodeCodeSpent)
	if !strings.Contains(err.Error(), "spent by a failed try from this device") {
		t.Fatalf("the right code after a wrong one: %v", err)
	}
	if after := mustDo(b.client.Status(ctx))(t).Library.ID; after != before {
		t.Fatalf("the joiner's library changed from %s to %s", before, after)
	}
}

func TestPairExpires(t *testing.T) {
	a := startPairable(t, "laptop", func(c *Config) { c.pairValidity = 200 * time.Millisecond })
	b := startPairable(t, "phone", nil)
	ctx := ctxT(t)
	p := mustDo(a.client.Pair(ctx))(t)
	if got := mustDo(a.client.Pairing(ctx, p.ID, true))(t); got.State != api.PairingExpired {
		t.Fatalf("pairing %+v, want expired", got)
	}
	_, err := b.client.JoinAt(ctx, p.Code, p.Addresses[0])
	wantAPIError(t, err, api.CodeNoInviter)
}

// A stranger sending garbage to the rendezvous learns nothing and does not
// spend the code: only a PAKE share is a guess.
func TestPairStrangerGarbage(t *testing.T) {
	a := startPairable(t, "laptop", nil)
	b := startPairable(t, "phone", nil)
	ctx := ctxT(t)
	p := mustDo(a.client.Pair(ctx))(t)
	for _, garbage := range []string{"GET / HTTP/1.1\r\n\r\n", "danyue-pair/1\n0123456789abcdef\x01\x07\xff\xff", ""} {
		c, err := net.Dial("tcp", p.Addresses[0])
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte(garbage))
		c.(*net.TCPConn).CloseWrite()
		c.SetDeadline(time.Now().Add(15 * time.Second))
		got, _ := io.ReadAll(c)
		c.Close()
		if len(got) != 30 { // the inviter's hello: magic and a nonce
			t.Fatalf("the stranger read %d bytes: %q", len(got), got)
		}
	}
	if got := mustDo(a.client.Pairing(ctx, p.ID, false))(t); got.State != api.PairingOpen {
		t.Fatalf("after garbage the pairing is %+v, want open", got)
	}
	mustDo(b.client.JoinAt(ctx, p.Code, p.Addresses[0]))(t)
	if got := mustDo(a.client.Pairing(ctx, p.ID, true))(t); got.State != api.PairingPaired {
		t.Fatalf("pairing %+v, want paired", got)
	}
}

// A new invitation replaces the open one; DELETE cancels; both close the
// port.
func TestPairReplaceAndCancel(t *testing.T) {
	a := startPairable(t, "laptop", nil)
	b := startPairable(t, "phone", nil)
	ctx := ctxT(t)
	first := mustDo(a.client.Pair(ctx))(t)
	second := mustDo(a.client.Pair(ctx))(t)
	if got := mustDo(a.client.Pairing(ctx, first.ID, true))(t); got.State != api.PairingCancelled || got.Detail == "" {
		t.Fatalf("replaced pairing %+v, want cancelled", got)
	}
	_, err := b.client.JoinAt(ctx, first.Code, first.Addresses[0])
	wantAPIError(t, err, api.CodeNoInviter)
	if got := mustDo(a.client.CancelPairing(ctx, second.ID))(t); got.State != api.PairingCancelled {
		t.Fatalf("cancelled pairing %+v", got)
	}
	_, err = a.client.Pairing(ctx, "nope", false)
	wantAPIError(t, err, api.CodeNotFound)
}

// GET /v1/invites lists the open invitation (the newest: it replaced the
// last), never null; DELETE /v1/invites/{id} cancels it and closes its
// port.
func TestPairInvites(t *testing.T) {
	a := startPairable(t, "laptop", nil)
	ctx := ctxT(t)
	if l := mustDo(a.client.PairingInvites(ctx))(t); l.Invites == nil || len(l.Invites) != 0 {
		t.Fatalf("invites before any: %#v, want an empty list", l.Invites)
	}
	mustDo(a.client.Pair(ctx))(t)
	second := mustDo(a.client.Pair(ctx))(t)
	l := mustDo(a.client.PairingInvites(ctx))(t)
	if len(l.Invites) != 1 || l.Invites[0].ID != second.ID || l.Invites[0].State != api.PairingOpen || l.Invites[0].Code != second.Code {
		t.Fatalf("invites %+v, want only %s, open", l.Invites, second.ID)
	}
	if got := mustDo(a.client.CancelPairingInvite(ctx, second.ID))(t); got.State != api.PairingCancelled {
		t.Fatalf("cancelled invite %+v", got)
	}
	if l := mustDo(a.client.PairingInvites(ctx))(t); len(l.Invites) != 0 {
		t.Fatalf("invites after the cancel: %+v", l.Invites)
	}
	if c, err := net.Dial("tcp", second.Addresses[0]); err == nil {
		c.Close()
		t.Fatal("the cancelled invite's port still accepts")
	}
	_, err := a.client.CancelPairingInvite(ctx, "nope")
	wantAPIError(t, err, api.CodeNotFound)
}

func TestJoinCodeErrors(t *testing.T) {
	b := startPairable(t, "phone", nil)
	ctx := ctxT(t)
	for _, tc := range []struct{ code, addr, want string }{
		{"7-aardvark-crossover", "", api.CodeBadInvite},    // words swapped
		{"7-adroitness-aardvark", "", api.CodeNoInviter},   // no mDNS in tests: --pair-addr needed
		{"7-adroitness-aardvark", "nope", api.CodeInvalid}, // not host:port
		{"danyue1-abc", "127.0.0.1:1", api.CodeInvalid},    // pairAddr with a long code
		{"danyue1-abc", "", api.CodeBadInvite},
	} {
		_, err := b.client.JoinAt(ctx, tc.code, tc.addr)
		wantAPIError(t, err, tc.want)
	}
}

// The rendezvous closes with the daemon.
func TestPairClosesWithDaemon(t *testing.T) {
	a := startPairable(t, "laptop", nil)
	p := mustDo(a.client.Pair(a.ctx(t)))(t)
	a.Close()
	poll.Until(t, "the rendezvous port to close", 10*time.Second, func() bool {
		c, err := net.Dial("tcp", p.Addresses[0])
		if err == nil {
			c.Close()
		}
		return err != nil
	})
}

func (d *testDaemon) ctx(t *testing.T) context.Context { return ctxT(t) }

// A failed try from another address is named where the inviter looks: the
// invitation's state, and the status (which the page shows), as an attack
// from the second burn.
func TestPairAttackNamed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no loopback address 127.0.0.2 here: %v", err)
	}
	ln.Close()
	a := startPairable(t, "laptop", nil)
	ctx := ctxT(t)
	attacker := func(p api.Pairing) {
		t.Helper()
		code := mustDo(pair.ParseCode(p.Code))(t)
		code.Words[1] = map[bool]string{true: "absurd", false: "aardvark"}[code.Words[1] == "aardvark"]
		j := &rendezvous.Joiner{Code: code, Dialer: &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}}
		if _, err := j.Join(ctx, p.Addresses[0]); !errors.Is(err, pair.ErrWrongCode) {
			t.Fatalf("the attacker's try: %v", err)
		}
	}
	for i := 1; i <= 2; i++ {
		p := mustDo(a.client.Pair(ctx))(t)
		attacker(p)
		got := mustDo(a.client.Pairing(ctx, p.ID, true))(t)
		if got.State != api.PairingWrongCode || got.TriedBy != "127.0.0.2" || got.Burns != i || got.TriedAt == "" {
			t.Fatalf("burn %d: pairing %+v, want wrong_code tried by 127.0.0.2", i, got)
		}
		want := "someone at 127.0.0.2 tried a wrong code"
		if i == 2 {
			want = "2 codes burned by 127.0.0.2 in the last 10 minutes"
		}
		if !strings.Contains(got.Detail, want) {
			t.Fatalf("burn %d: detail %q does not say %q", i, got.Detail, want)
		}
	}
	st := mustDo(a.client.Status(ctx))(t)
	if len(st.PairingWarnings) != 1 {
		t.Fatalf("status pairing warnings %+v", st.PairingWarnings)
	}
	if w := st.PairingWarnings[0]; w.Address != "127.0.0.2" || w.Burns != 2 || w.RefusedUntil == "" || !strings.Contains(w.Warning, "someone on this network is trying to pair") {
		t.Fatalf("pairing warning %+v", w)
	}
}
