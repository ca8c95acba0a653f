package pair

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

type outcome struct {
	res *Result
	err error
}

// pairUp runs Initiate and Respond against each other over an in-memory
// pipe and returns both outcomes.
func pairUp(t interface{ Helper() }, ctx context.Context, codeA, codeB Code, sidA, sidB []byte) (a, b outcome) {
	t.Helper()
	ca, cb := net.Pipe()
	defer ca.Close()
	defer cb.Close()
	done := make(chan outcome, 1)
	go func() {
		res, err := Respond(ctx, cb, codeB, sidB, []byte("responder"))
		done <- outcome{res, err}
	}()
	res, err := Initiate(ctx, ca, codeA, sidA, []byte("initiator"))
	a = outcome{res, err}
	if err != nil {
		// The responder may be blocked writing to a side that stopped
		// reading; closing ends it.
		ca.Close()
	}
	b = <-done
	return a, b
}

func mustCode(t testing.TB, s string) Code {
	t.Helper()
	c, err := ParseCode(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSessionSameCode(t *testing.T) {
	code := mustCode(t, "7-crossover-clockwork")
	a, b := pairUp(t, context.Background(), code, code, []byte("sid"), []byte("sid"))
	if a.err != nil || b.err != nil {
		t.Fatalf("initiator: %v, responder: %v", a.err, b.err)
	}
	if len(a.res.Key) != keySize || !bytes.Equal(a.res.Key, b.res.Key) {
		t.Fatalf("keys differ or wrong size: %x / %x", a.res.Key, b.res.Key)
	}
	if string(a.res.PeerAD) != "responder" || string(b.res.PeerAD) != "initiator" {
		t.Errorf("peer AD: initiator saw %q, responder saw %q", a.res.PeerAD, b.res.PeerAD)
	}
}

func TestSessionMismatch(t *testing.T) {
	code := mustCode(t, "7-crossover-clockwork")
	tests := []struct {
		name       string
		codeB      Code
		sidA, sidB []byte
	}{
		{"other words", mustCode(t, "7-crossover-cobra"), []byte("s"), []byte("s")},
		{"other channel", mustCode(t, "8-crossover-clockwork"), []byte("s"), []byte("s")},
		{"other session id", code, []byte("s1"), []byte("s2")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := pairUp(t, context.Background(), code, tc.codeB, tc.sidA, tc.sidB)
			if !errors.Is(a.err, ErrWrongCode) || !errors.Is(b.err, ErrWrongCode) {
				t.Fatalf("initiator: %v, responder: %v; want ErrWrongCode on both", a.err, b.err)
			}
		})
	}
}

// relay copies frames from one conn to another, letting edit change each
// frame on the way: a man in the middle.
func relay(from, to net.Conn, edit func(n int, f *frame)) {
	for n := 0; ; n++ {
		f, err := readFrame(from)
		if err != nil {
			to.Close()
			return
		}
		edit(n, &f)
		if writeFrame(to, f) != nil {
			from.Close()
			return
		}
	}
}

// TestSessionTranscriptBinding changes the initiator's associated data in
// transit: the key confirmation catches it on both sides.
func TestSessionTranscriptBinding(t *testing.T) {
	code := mustCode(t, "7-crossover-clockwork")
	ca, ma := net.Pipe()
	mb, cb := net.Pipe()
	defer func() { ca.Close(); ma.Close(); mb.Close(); cb.Close() }()
	go relay(ma, mb, func(n int, f *frame) {
		if n == 0 {
			f.body[len(f.body)-1] ^= 1
		}
	})
	go relay(mb, ma, func(int, *frame) {})
	done := make(chan error, 1)
	go func() {
		_, err := Respond(context.Background(), cb, code, nil, nil)
		done <- err
	}()
	_, errA := Initiate(context.Background(), ca, code, nil, []byte("initiator"))
	errB := <-done
	if !errors.Is(errA, ErrWrongCode) || !errors.Is(errB, ErrWrongCode) {
		t.Fatalf("initiator: %v, responder: %v; want ErrWrongCode on both", errA, errB)
	}
}

// respondAsync runs Respond on one end of a pipe and returns the other end
// for the test to play the initiator, and Respond's error when it is done.
func respondAsync(t *testing.T, ctx context.Context, code Code) (net.Conn, <-chan error) {
	ca, cb := net.Pipe()
	t.Cleanup(func() { ca.Close(); cb.Close() })
	done := make(chan error, 1)
	go func() {
		_, err := Respond(ctx, cb, code, nil, nil)
		done <- err
	}()
	return ca, done
}

// TestSessionBadShare sends shares the draft says must abort the run.
func TestSessionBadShare(t *testing.T) {
	code := mustCode(t, "7-crossover-clockwork")
	bad := map[string][]byte{
		"identity":      make([]byte, elementSize),
		"not a point":   bytes.Repeat([]byte{0xff}, elementSize),
		"non-canonical": append([]byte{0xed}, bytes.Repeat([]byte{0xff}, elementSize-2)...),
	}
	bad["non-canonical"] = append(bad["non-canonical"], 0x7f)
	for name, share := range bad {
		t.Run(name, func(t *testing.T) {
			ca, done := respondAsync(t, context.Background(), code)
			if err := writeFrame(ca, frame{typ: frameShare, body: share}); err != nil {
				t.Fatal(err)
			}
			f, err := readFrame(ca)
			if err != nil || f.typ != frameReject {
				t.Errorf("responder answered %v, %v; want a reject frame", f, err)
			}
			if err := <-done; !errors.Is(err, ErrBadElement) {
				t.Errorf("responder: %v, want ErrBadElement", err)
			}
		})
	}
}

func TestSessionProtocolErrors(t *testing.T) {
	code := mustCode(t, "7-crossover-clockwork")
	tests := []struct {
		name  string
		bytes []byte
	}{
		{"too long", []byte{version, frameShare, 0xff, 0xff}},
		{"other version", []byte{2, frameShare, 0, 0}},
		{"short share", []byte{version, frameShare, 0, 1, 0}},
		{"out of order", []byte{version, frameConfirm, 0, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ca, done := respondAsync(t, context.Background(), code)
			if _, err := ca.Write(tc.bytes); err != nil {
				t.Fatal(err)
			}
			if err := <-done; !errors.Is(err, ErrProtocol) {
				t.Errorf("responder: %v, want ErrProtocol", err)
			}
		})
	}
}

// TestSessionContext checks that a peer that never speaks does not hold a
// session past its context, whether cancelled or past its deadline.
func TestSessionContext(t *testing.T) {
	code := mustCode(t, "7-crossover-clockwork")
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		ca, done := respondAsync(t, ctx, code)
		// Once the responder has taken half a header it is blocked in a
		// read; the cancel must end that read.
		if _, err := ca.Write([]byte{version, frameShare}); err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("responder: %v, want context.Canceled", err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		ca, cb := net.Pipe()
		defer ca.Close()
		defer cb.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if _, err := Initiate(ctx, ca, code, nil, nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("initiator: %v, want context.DeadlineExceeded", err)
		}
	})
	t.Run("stream usable after success", func(t *testing.T) {
		ca, cb := net.Pipe()
		defer ca.Close()
		defer cb.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := Respond(ctx, cb, code, nil, nil)
			if err == nil {
				_, err = cb.Write([]byte("after"))
			}
			done <- err
		}()
		if _, err := Initiate(ctx, ca, code, nil, nil); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 5)
		if _, err := ca.Read(buf); err != nil || string(buf) != "after" {
			t.Errorf("read after session: %q, %v", buf, err)
		}
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

func TestSessionADLimit(t *testing.T) {
	ca, cb := net.Pipe()
	defer ca.Close()
	defer cb.Close()
	_, err := Initiate(context.Background(), ca, mustCode(t, "7-crossover-clockwork"), nil, make([]byte, maxAD+1))
	if err == nil {
		t.Fatal("Initiate accepted associated data over the limit")
	}
}

// BenchmarkSession measures one whole pairing, both sides, over a pipe.
func BenchmarkSession(b *testing.B) {
	code := mustCode(b, "7-crossover-clockwork")
	for b.Loop() {
		if x, y := pairUp(b, context.Background(), code, code, nil, nil); x.err != nil || y.err != nil {
			b.Fatal(x.err, y.err)
		}
	}
}

// noDeadline is a stream that cannot take deadlines.
type noDeadline struct{ net.Conn }

func (noDeadline) SetDeadline(time.Time) error { return errors.New("deadlines not supported") }

func TestSessionNeedsDeadlines(t *testing.T) {
	ca, cb := net.Pipe()
	defer ca.Close()
	defer cb.Close()
	_, err := Initiate(context.Background(), noDeadline{ca}, mustCode(t, "7-crossover-clockwork"), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("Initiate on a stream without deadlines: %v", err)
	}
}
