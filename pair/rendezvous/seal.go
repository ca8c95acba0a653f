package rendezvous

import (
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"golang.org/x/crypto/chacha20poly1305"
)

// Wire constants. The hello is fixed-size: magic then a random nonce.
const (
	magic     = "danyue-pair/1\n"
	nonceSize = 16
	helloSize = len(magic) + nonceSize
	// MaxPayload bounds the sealed payload: a long invite code is under
	// 4096 bytes by its own format's limit.
	MaxPayload = 4096
	maxSealed  = MaxPayload + chacha20poly1305.Overhead
	ackText    = "joined"
	// StepTimeout bounds each read or write outside the PAKE (which has its
	// own, pair.StepTimeout).
	StepTimeout = 10 * time.Second
)

// ErrNotRendezvous reports a peer that does not speak this protocol: a bad
// hello. Nothing was tested against the code.
var ErrNotRendezvous = errors.New("rendezvous: the other side does not speak danyue pairing")

// ErrSealed reports a sealed frame that is malformed or does not open under
// the session's key: it was not sealed by the other side of this session.
var ErrSealed = errors.New("rendezvous: sealed message does not open")

func appendHello(dst, nonce []byte) []byte {
	return append(append(dst, magic...), nonce...)
}

// parseHello returns the nonce of a hello.
func parseHello(b []byte) ([]byte, error) {
	if len(b) != helloSize || string(b[:len(magic)]) != magic {
		return nil, ErrNotRendezvous
	}
	return b[len(magic):], nil
}

// sessionID is the PAKE's sid: both nonces, the inviter's first, so neither
// side alone chooses it.
func sessionID(inviterNonce, joinerNonce []byte) []byte {
	return append(append(make([]byte, 0, 2*nonceSize), inviterNonce...), joinerNonce...)
}

// sealer holds a session's two one-message keys: one for the payload
// (inviter to joiner), one for the ack (joiner to inviter). Each key seals
// one message only, so a zero nonce is safe.
type sealer struct {
	payload, ack cipher.AEAD
	aad          []byte
}

// newSealer derives the keys from the PAKE key, and the additional data
// from the session id and both sides' associated data (the transcript's
// parts that are not secret).
func newSealer(key, sid, joinerAD, inviterAD []byte) (*sealer, error) {
	s := &sealer{aad: transcript(sid, joinerAD, inviterAD)}
	for _, k := range []struct {
		info string
		dst  *cipher.AEAD
	}{{"danyue pair seal payload", &s.payload}, {"danyue pair seal ack", &s.ack}} {
		kb, err := hkdf.Key(sha256.New, key, sid, k.info, chacha20poly1305.KeySize)
		if err != nil {
			return nil, fmt.Errorf("rendezvous: derive key: %w", err)
		}
		if *k.dst, err = chacha20poly1305.New(kb); err != nil {
			return nil, fmt.Errorf("rendezvous: %w", err)
		}
	}
	return s, nil
}

func transcript(sid, joinerAD, inviterAD []byte) []byte {
	b := []byte("danyue pair transcript\x00")
	for _, f := range [][]byte{sid, joinerAD, inviterAD} {
		b = binary.BigEndian.AppendUint16(b, uint16(len(f)))
		b = append(b, f...)
	}
	return b
}

var zeroNonce [chacha20poly1305.NonceSize]byte

// seal returns a sealed frame: a 2-byte big-endian length, then the
// ciphertext.
func seal(aead cipher.AEAD, plaintext, aad []byte) ([]byte, error) {
	if len(plaintext) > MaxPayload {
		return nil, fmt.Errorf("rendezvous: payload of %d bytes, limit %d", len(plaintext), MaxPayload)
	}
	n := len(plaintext) + aead.Overhead()
	out := binary.BigEndian.AppendUint16(make([]byte, 0, 2+n), uint16(n))
	return aead.Seal(out, zeroNonce[:], plaintext, aad), nil
}

// readSealed reads a sealed frame and opens it. The length is checked
// before anything is allocated.
func readSealed(r io.Reader, aead cipher.AEAD, aad []byte) ([]byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, fmt.Errorf("rendezvous: read sealed message: %w", err)
	}
	n := int(binary.BigEndian.Uint16(h[:]))
	if n > maxSealed || n < aead.Overhead() {
		return nil, fmt.Errorf("%w: %d bytes", ErrSealed, n)
	}
	ct := make([]byte, n)
	if _, err := io.ReadFull(r, ct); err != nil {
		return nil, fmt.Errorf("rendezvous: read sealed message: %w", err)
	}
	return open(aead, ct, aad)
}

// open opens one sealed message body; nothing is returned unless it
// authenticates.
func open(aead cipher.AEAD, ct, aad []byte) ([]byte, error) {
	pt, err := aead.Open(nil, zeroNonce[:], ct, aad)
	if err != nil {
		return nil, ErrSealed
	}
	return pt, nil
}
