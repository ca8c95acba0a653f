package pair

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"pgregory.net/rapid"
)

// codeGen draws any valid code.
func codeGen() *rapid.Generator[Code] {
	return rapid.Custom(func(t *rapid.T) Code {
		var c Code
		c.Channel = rapid.IntRange(1, MaxChannel).Draw(t, "channel")
		for i := range c.Words {
			c.Words[i] = pgpWords.words[i%2][rapid.Byte().Draw(t, "word")]
		}
		return c
	})
}

// TestPropertySameCode: the same code and session id give both sides the
// same key, and a fresh key every session.
func TestPropertySameCode(t *testing.T) {
	var last []byte
	rapid.Check(t, func(t *rapid.T) {
		code := codeGen().Draw(t, "code")
		sid := rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "sid")
		a, b := pairUp(t, context.Background(), code, code, sid, sid)
		if a.err != nil || b.err != nil {
			t.Fatalf("code %s: initiator %v, responder %v", code, a.err, b.err)
		}
		if !bytes.Equal(a.res.Key, b.res.Key) {
			t.Fatalf("code %s: keys differ", code)
		}
		if bytes.Equal(a.res.Key, last) {
			t.Fatalf("two sessions gave the same key")
		}
		last = a.res.Key
	})
}

// TestPropertyWrongCode: any two different codes fail on both sides with
// ErrWrongCode.
func TestPropertyWrongCode(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ca := codeGen().Draw(t, "initiator code")
		cb := codeGen().Filter(func(c Code) bool { return c != ca }).Draw(t, "responder code")
		a, b := pairUp(t, context.Background(), ca, cb, []byte("sid"), []byte("sid"))
		if !errors.Is(a.err, ErrWrongCode) || !errors.Is(b.err, ErrWrongCode) {
			t.Fatalf("%s vs %s: initiator %v, responder %v; want ErrWrongCode on both", ca, cb, a.err, b.err)
		}
	})
}
