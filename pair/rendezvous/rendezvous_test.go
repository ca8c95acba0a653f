package rendezvous

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/danyue/danyue/pair"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var quiet = slog.New(slog.DiscardHandler)

// openHost opens a rendezvous on loopback for a fresh invitation.
func openHost(t *testing.T, validity time.Duration, payload string) (*Host, *pair.Invitation) {
	t.Helper()
	inv, err := pair.NewInvitation(validity)
	if err != nil {
		t.Fatal(err)
	}
	h, err := Open(Config{
		Invitation: inv, Listen: "127.0.0.1:0", AD: []byte("inviter"),
		Payload: func() ([]byte, error) { return []byte(payload), nil }, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h, inv
}

func waitOutcome(t *testing.T, h *Host) Outcome {
	t.Helper()
	select {
	case <-h.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the rendezvous did not end")
	}
	o, ok := h.Outcome()
	if !ok {
		t.Fatal("done without an outcome")
	}
	return o
}

func accept(payload, peerAD []byte) error { return nil }

func TestPairHandsOverPayload(t *testing.T) {
	h, inv := openHost(t, time.Minute, "danyue1-secret")
	j, err := Join(ctxT(t), h.Addrs()[0], inv.Code, []byte("joiner"), accept)
	if err != nil {
		t.Fatal(err)
	}
	if string(j.Payload) != "danyue1-secret" || string(j.PeerAD) != "inviter" {
		t.Fatalf("joined %q from %q", j.Payload, j.PeerAD)
	}
	o := waitOutcome(t, h)
	if !o.Paired || string(o.PeerAD) != "joiner" || o.Err != nil {
		t.Fatalf("outcome %+v, want paired with joiner", o)
	}
	// The port is closed: nothing to try a second time.
	if _, err := Join(ctxT(t), h.Addrs()[0], inv.Code, nil, accept); err == nil {
		t.Fatal("a second join succeeded")
	}
}

// A wrong code spends the invitation; the rendezvous goes on answering
// until the code would have expired, and tells whoever comes next who
// spent it and when.
func TestWrongCodeSpendsInvitation(t *testing.T) {
	h, inv := openHost(t, time.Minute, "danyue1-secret")
	wrong := wrongCode(inv.Code)
	_, err := Join(ctxT(t), h.Addrs()[0], wrong, nil, accept)
	if !errors.Is(err, pair.ErrWrongCode) {
		t.Fatalf("join with a wrong code: %v, want ErrWrongCode", err)
	}
	o := waitOutcome(t, h)
	if !errors.Is(o.Err, pair.ErrWrongCode) || o.Paired || !o.Burned || o.From != netip.MustParseAddr("127.0.0.1") || o.Burner.Burns != 1 {
		t.Fatalf("outcome %+v, want a wrong code burned from 127.0.0.1", o)
	}
	// The right code is refused now, with the reason.
	_, err = Join(ctxT(t), h.Addrs()[0], inv.Code, nil, accept)
	r, ok := errors.AsType[*pair.Refusal](err)
	if !ok || r.Reason != pair.ReasonBurned || r.By != o.From || r.At.Unix() != o.At.Unix() {
		t.Fatalf("the right code after a wrong one: %v, want the burn's refusal", err)
	}
}

// wrongCode returns code with its second word changed.
func wrongCode(code pair.Code) pair.Code {
	code.Words[1] = map[bool]string{true: "absurd", false: "aardvark"}[code.Words[1] == "aardvark"]
	return code
}

// Once Done says the code expired, the port is closed: a joiner that
// comes after is told nobody answers, never cut off mid-session. Several
// rendezvous make the moment between the two likely to be hit.
func TestExpiry(t *testing.T) {
	for range 20 {
		h, inv := openHost(t, 20*time.Millisecond, "x")
		if o := waitOutcome(t, h); !errors.Is(o.Err, pair.ErrInvitationExpired) {
			t.Fatalf("outcome %+v, want expired", o)
		}
		if c, err := net.Dial("tcp", h.Addrs()[0]); err == nil {
			c.Close()
			t.Fatal("the port still accepts after expiry")
		}
		if _, err := Join(ctxT(t), h.Addrs()[0], inv.Code, nil, accept); !errors.Is(err, ErrUnreachable) {
			t.Fatalf("join after expiry: %v, want unreachable", err)
		}
	}
}

// A stranger who sends garbage learns nothing but the inviter's hello and
// does not spend the code: garbage is not a guess.
func TestGarbageIsNotAGuess(t *testing.T) {
	h, inv := openHost(t, time.Minute, "danyue1-secret")
	for _, garbage := range [][]byte{
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		appendHello(nil, make([]byte, nonceSize)), // a hello, then a bad frame
		append(appendHello(nil, make([]byte, nonceSize)), 1, 1, 0xff, 0xff),
		append(appendHello(nil, make([]byte, nonceSize)), 1, 4, 0, 0), // a reject frame first
		{},
	} {
		c, err := net.Dial("tcp", h.Addrs()[0])
		if err != nil {
			t.Fatal(err)
		}
		c.Write(garbage)
		if tc, ok := c.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		got, _ := io.ReadAll(c)
		c.Close()
		if len(got) < helloSize || !bytes.HasPrefix(got, []byte(magic)) || bytes.Contains(got, []byte("secret")) {
			t.Fatalf("the stranger read %q", got)
		}
	}
	if inv.Used() {
		t.Fatal("garbage spent the invitation")
	}
	j, err := Join(ctxT(t), h.Addrs()[0], inv.Code, nil, accept)
	if err != nil || string(j.Payload) != "danyue1-secret" {
		t.Fatalf("join after garbage: %v", err)
	}
	if o := waitOutcome(t, h); !o.Paired {
		t.Fatalf("outcome %+v", o)
	}
}

// A joiner that cannot use the payload does not ack, and the inviter says
// so.
func TestNoAck(t *testing.T) {
	h, inv := openHost(t, time.Minute, "payload")
	refuse := errors.New("unreadable")
	if _, err := Join(ctxT(t), h.Addrs()[0], inv.Code, nil, func(_, _ []byte) error { return refuse }); !errors.Is(err, refuse) {
		t.Fatalf("join: %v", err)
	}
	if o := waitOutcome(t, h); o.Paired || !errors.Is(o.Err, ErrNoAck) {
		t.Fatalf("outcome %+v, want no ack", o)
	}
}

func TestCloseCancels(t *testing.T) {
	h, inv := openHost(t, time.Minute, "x")
	h.Close()
	if o := waitOutcome(t, h); !errors.Is(o.Err, ErrCancelled) {
		t.Fatalf("outcome %+v", o)
	}
	if _, err := Open(Config{Invitation: inv, Listen: "127.0.0.1:0", Payload: func() ([]byte, error) { return nil, nil }}); err != nil {
		// The invitation was not used: it may be reopened.
		t.Fatalf("reopen: %v", err)
	}
}

func TestSealRoundTrip(t *testing.T) {
	s, err := newSealer(bytes.Repeat([]byte{7}, 32), []byte("sid"), []byte("j"), []byte("i"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := seal(s.payload, []byte("hello"), s.aad)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readSealed(bytes.NewReader(f), s.payload, s.aad)
	if err != nil || string(got) != "hello" {
		t.Fatalf("open: %q, %v", got, err)
	}
	// Bound to the key's direction and to the transcript.
	if _, err := readSealed(bytes.NewReader(f), s.ack, s.aad); !errors.Is(err, ErrSealed) {
		t.Fatalf("opened with the ack key: %v", err)
	}
	other, _ := newSealer(bytes.Repeat([]byte{7}, 32), []byte("sid"), []byte("j2"), []byte("i"))
	if _, err := readSealed(bytes.NewReader(f), other.payload, other.aad); !errors.Is(err, ErrSealed) {
		t.Fatalf("opened under another transcript: %v", err)
	}
	if _, err := seal(s.payload, make([]byte, MaxPayload+1), s.aad); err == nil {
		t.Fatal("sealed an oversized payload")
	}
}

// FuzzOpenSealed: no input opens unless it was sealed under the key, and
// nothing panics or allocates beyond the frame limit.
func FuzzOpenSealed(f *testing.F) {
	s, err := newSealer(bytes.Repeat([]byte{1}, 32), []byte("sid"), nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	good, _ := seal(s.payload, []byte("danyue1-abc"), s.aad)
	f.Add(good)
	f.Add([]byte{0, 0})
	f.Add([]byte{0xff, 0xff, 1, 2, 3})
	f.Add(good[:len(good)-1])
	f.Fuzz(func(t *testing.T, b []byte) {
		pt, err := readSealed(bytes.NewReader(b), s.payload, s.aad)
		if err == nil && !bytes.HasPrefix(b, good) {
			t.Fatalf("opened a frame that was not sealed by us: %q", pt)
		}
		if _, err := parseHello(b); err == nil && (len(b) != helloSize || !bytes.HasPrefix(b, []byte(magic))) {
			t.Fatalf("accepted hello %q", b)
		}
	})
}
