package pair

import (
	"bytes"
	"crypto/sha512"
	"errors"
	"fmt"
	"io"

	r255 "github.com/bwesterb/go-ristretto"
	"github.com/cloudflare/circl/group"
)

// The CPace cipher suite CPACE-RISTR255-SHA512 (draft-irtf-cfrg-cpace-21,
// section 8.3).
const (
	dsi = "CPaceRistretto255"
	// sInBytes is SHA-512's input block size: the zero padding in the
	// generator string fills the first block so that the hash of the
	// password's block does not depend on the password's length.
	sInBytes = 128
	// elementSize is the length of an encoded ristretto255 element.
	elementSize = 32
)

// ErrBadElement reports a received share that is not a valid encoding of a
// ristretto255 element or that encodes the identity: the draft requires an
// abort, and an honest peer never sends one.
var ErrBadElement = errors.New("pair: invalid group element")

var r255g = group.Ristretto255

// prependLen returns data prefixed with its length in LEB128.
func prependLen(dst, data []byte) []byte {
	n := len(data)
	for n >= 0x80 {
		dst = append(dst, byte(n&0x7f|0x80))
		n >>= 7
	}
	dst = append(dst, byte(n))
	return append(dst, data...)
}

// lvCat is the draft's lv_cat: every field with its length prepended, which
// makes the hash input prefix-free.
func lvCat(fields ...[]byte) []byte {
	var out []byte
	for _, f := range fields {
		out = prependLen(out, f)
	}
	return out
}

// generatorString is the draft's generator_string(DSI, PRS, CI, sid,
// s_in_bytes) (section 8.1 and A.2).
func generatorString(prs, ci, sid []byte) []byte {
	zpad := sInBytes - 1 - len(prependLen(nil, prs)) - len(prependLen(nil, []byte(dsi)))
	zpad = max(zpad, 0)
	return lvCat([]byte(dsi), prs, make([]byte, zpad), ci, sid)
}

// calculateGenerator derives the secret generator from the password (PRS),
// the channel identifier and the session id. circl's HashToElement runs
// expand_message_xmd first, which CPace does not; CPace hashes the generator
// string with SHA-512 and feeds the 64 bytes to RFC 9496's one-way map,
// which go-ristretto (the ristretto255 implementation under circl's group)
// provides as two Elligator maps and an addition.
func calculateGenerator(prs, ci, sid []byte) (group.Element, error) {
	h := sha512.Sum512(generatorString(prs, ci, sid))
	var half [32]byte
	var p0, p1 r255.Point
	copy(half[:], h[:32])
	p0.SetElligator(&half)
	copy(half[:], h[32:])
	p1.SetElligator(&half)
	p0.Add(&p0, &p1)
	g := r255g.NewElement()
	if err := g.UnmarshalBinary(p0.Bytes()); err != nil {
		return nil, fmt.Errorf("calculate generator: %w", err)
	}
	return g, nil
}

// sampleScalar follows the draft's recommended sampling: 32 random bytes
// with the bits above group_size_bits (252) cleared, read little-endian. The
// result is below the group order, so it is canonical; zero is drawn again.
func sampleScalar(rand io.Reader) (group.Scalar, error) {
	var b [32]byte
	for {
		if _, err := io.ReadFull(rand, b[:]); err != nil {
			return nil, fmt.Errorf("sample scalar: %w", err)
		}
		b[31] &= 0x0f
		s, err := scalarFromBytes(b[:])
		if err != nil {
			return nil, err
		}
		if !s.IsZero() {
			return s, nil
		}
	}
}

// scalarFromBytes reads a canonical little-endian scalar.
func scalarFromBytes(b []byte) (group.Scalar, error) {
	s := r255g.NewScalar()
	if err := s.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("scalar: %w", err)
	}
	return s, nil
}

// scalarMult is the draft's scalar_mult(y, _g): y times a decoded element,
// encoded.
func scalarMult(y group.Scalar, g group.Element) ([]byte, error) {
	out, err := r255g.NewElement().Mul(g, y).MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("scalar mult: %w", err)
	}
	return out, nil
}

// identity is G.I, the encoding of the neutral element.
var identity = make([]byte, elementSize)

// scalarMultVfy is the draft's scalar_mult_vfy(y, X): decode X, multiply,
// encode; an X that does not decode gives G.I.
func scalarMultVfy(y group.Scalar, x []byte) []byte {
	e := r255g.NewElement()
	if len(x) != elementSize || e.UnmarshalBinary(x) != nil {
		return bytes.Clone(identity)
	}
	k, err := scalarMult(y, e)
	if err != nil {
		return bytes.Clone(identity)
	}
	return k
}

// transcriptIR is the initiator-responder transcript lv_cat(Ya,ADa) ||
// lv_cat(Yb,ADb).
func transcriptIR(ya, ada, yb, adb []byte) []byte {
	return append(lvCat(ya, ada), lvCat(yb, adb)...)
}

// transcriptOC is the ordered transcript of the symmetric setting, kept to
// check the draft's parallel-execution vector; sessions use transcriptIR.
func transcriptOC(ya, ada, yb, adb []byte) []byte {
	a, b := lvCat(ya, ada), lvCat(yb, adb)
	if bytes.Compare(a, b) < 0 {
		a, b = b, a
	}
	return append(append([]byte("oc"), a...), b...)
}

// deriveISK computes ISK = SHA-512(lv_cat(DSI||"_ISK", sid, K) ||
// transcript).
func deriveISK(sid, k, transcript []byte) []byte {
	h := sha512.New()
	h.Write(lvCat([]byte(dsi+"_ISK"), sid, k))
	h.Write(transcript)
	return h.Sum(nil)
}

// party is one side of a CPace run between sending its share and receiving
// the other's.
type party struct {
	sid   []byte
	y     group.Scalar
	share []byte // this side's Y
}

// start computes the generator from the password and draws this side's
// secret scalar: the first step of both roles.
func start(prs, ci, sid []byte, rand io.Reader) (*party, error) {
	y, err := sampleScalar(rand)
	if err != nil {
		return nil, err
	}
	g, err := calculateGenerator(prs, ci, sid)
	if err != nil {
		return nil, err
	}
	share, err := scalarMult(y, g)
	if err != nil {
		return nil, err
	}
	return &party{sid: sid, y: y, share: share}, nil
}

// finish computes ISK from the other side's share, given the transcript
// order: ya/ada are the initiator's, yb/adb the responder's. It refuses a
// share that does not decode or whose product is the identity.
func (p *party) finish(other []byte, ya, ada, yb, adb []byte) ([]byte, error) {
	k := scalarMultVfy(p.y, other)
	if bytes.Equal(k, identity) {
		return nil, ErrBadElement
	}
	return deriveISK(p.sid, k, transcriptIR(ya, ada, yb, adb)), nil
}
