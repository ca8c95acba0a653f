package pair

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"testing"
	"time"
)

// limitedSource fails the test if a read asks for more than the limit allows:
// the length is checked before the body is allocated or read.
type limitedSource struct {
	r      *bytes.Reader
	maxReq int
	t      *testing.T
}

func (l *limitedSource) Read(p []byte) (int, error) {
	if len(p) > l.maxReq {
		l.t.Fatalf("read of %d bytes, more than a frame can hold", len(p))
	}
	return l.r.Read(p)
}

func TestReadFrame(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want frame
		err  error
	}{
		{"empty reject", []byte{1, frameReject, 0, 0}, frame{typ: frameReject, body: []byte{}}, nil},
		{"body", []byte{1, frameShare, 0, 3, 'a', 'b', 'c', 'x'}, frame{typ: frameShare, body: []byte("abc")}, nil},
		{"largest", append([]byte{1, 2, byte(maxBody >> 8), byte(maxBody & 0xff)}, make([]byte, maxBody)...), frame{typ: 2, body: make([]byte, maxBody)}, nil},
		{"one too long", []byte{1, 2, byte((maxBody + 1) >> 8), byte((maxBody + 1) & 0xff)}, frame{}, ErrProtocol},
		{"huge", []byte{1, 2, 0xff, 0xff}, frame{}, ErrProtocol},
		{"version 0", []byte{0, 2, 0, 0}, frame{}, ErrProtocol},
		{"short header", []byte{1, 2, 0}, frame{}, io.ErrUnexpectedEOF},
		{"short body", []byte{1, 2, 0, 2, 'a'}, frame{}, io.ErrUnexpectedEOF},
		{"nothing", nil, frame{}, io.EOF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := readFrame(&limitedSource{bytes.NewReader(tc.in), maxBody, t})
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if f.typ != tc.want.typ || !bytes.Equal(f.body, tc.want.body) || (err != nil && f.body != nil) {
				t.Fatalf("frame %v, want %v", f, tc.want)
			}
		})
	}
	if _, err := appendFrame(nil, frame{typ: 1, body: make([]byte, maxBody+1)}); !errors.Is(err, ErrProtocol) {
		t.Errorf("appendFrame over the limit: %v", err)
	}
}

// FuzzReadFrame: any bytes give a frame or an error with no frame, never a
// read past the limit; a decoded frame encodes back to the bytes it came
// from.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{1, frameShare, 0, 3, 'a', 'b', 'c'})
	f.Add([]byte{1, frameReject, 0, 0})
	f.Add([]byte{1, 2, 0xff, 0xff})
	f.Add([]byte{2, 1, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		fr, err := readFrame(&limitedSource{bytes.NewReader(in), maxBody, t})
		if err != nil {
			if fr.typ != 0 || fr.body != nil {
				t.Fatalf("error %v came with a frame %v", err, fr)
			}
			return
		}
		out, err := appendFrame(nil, fr)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, in[:len(out)]) {
			t.Fatalf("re-encoded %x, read from %x", out, in)
		}
	})
}

// FuzzRefusal: a refused frame's body never panics, and what it yields is
// bounded and printable whatever a hostile responder sends.
func FuzzRefusal(f *testing.F) {
	f.Add(Refusal{Reason: ReasonBurned, By: netip.MustParseAddr("192.0.2.1"), At: time.Unix(1_800_000_000, 0), Burns: 2}.encode())
	f.Add([]byte{})
	f.Add([]byte{0xa1, 0x00, 0x18, 0xff})                                           // reason 255
	f.Add([]byte{0xa1, 0x02, 0x1b, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) // a far time
	f.Fuzz(func(t *testing.T, b []byte) {
		r := decodeRefusal(b)
		if r.Reason > maxReason || r.At.Year() > 9999 || (r.By.IsValid() && r.By.Is4In6()) {
			t.Fatalf("decoded %+v", *r)
		}
		_ = r.Error()
		if again := decodeRefusal(r.encode()); *again != *r {
			t.Fatalf("round trip: %+v, then %+v", *r, *again)
		}
	})
}
