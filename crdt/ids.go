package crdt

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/danyue/danyue/internal/keyalgo"
)

// ErrInvalid is wrapped by every error about a value that breaks the rules of
// the data model: a malformed key, a negative offset, an over-long title, a
// record from a peer that could not have been produced by a correct device.
var ErrInvalid = errors.New("invalid")

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// DeviceID names a device of the library. It is derived from the device's
// identity key, so a wiped device, which makes a new key, is a new device with
// fresh read-time slots. Zero means no device.
type DeviceID uint64

// String formats the id as 16 lowercase hex digits, the form the API shows.
func (d DeviceID) String() string {
	var b [16]byte
	hex.Encode(b[:], []byte{byte(d >> 56), byte(d >> 48), byte(d >> 40), byte(d >> 32), byte(d >> 24), byte(d >> 16), byte(d >> 8), byte(d)})
	return string(b[:])
}

// MarshalText gives the hex form, so that JSON (logs included) shows the id
// as the CLI and the API do, and as a string: a decimal over 2^53 would
// lose digits in JavaScript.
func (d DeviceID) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses the form MarshalText makes.
func (d *DeviceID) UnmarshalText(b []byte) error {
	v, err := ParseDeviceID(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// ParseDeviceID parses the 16-hex-digit form made by DeviceID.String.
func ParseDeviceID(s string) (DeviceID, error) {
	if len(s) != 16 {
		return 0, invalidf("device id %q is not 16 hex digits", s)
	}
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil || v == 0 {
		return 0, invalidf("device id %q is not 16 hex digits", s)
	}
	return DeviceID(v), nil
}

// Algo is the hash function of a BookKey; bookkey, which computes keys,
// numbers it alike (both use keyalgo).
type Algo = keyalgo.Algo

const (
	MD5    = keyalgo.MD5
	SHA256 = keyalgo.SHA256
)

// BookKey identifies a book by the hash of its normalized text (see package
// bookkey): "md5:<32 hex>" or "sha256:<64 hex>". The zero BookKey is invalid.
// BookKey is comparable and can key a map.
type BookKey struct {
	algo Algo
	sum  [32]byte
}

// ParseBookKey parses the text form of a key. Hex digits may be given in
// either case; the key is the same.
func ParseBookKey(s string) (BookKey, error) {
	name, digits, ok := strings.Cut(s, ":")
	var k BookKey
	switch {
	case !ok:
	case name == "md5":
		k.algo = MD5
	case name == "sha256":
		k.algo = SHA256
	}
	if k.algo == 0 || len(digits) != 2*k.algo.Size() {
		return BookKey{}, invalidf("book key %q is not md5:<32 hex digits> or sha256:<64 hex digits>", truncate(s, 80))
	}
	if _, err := hex.Decode(k.sum[:k.algo.Size()], []byte(digits)); err != nil {
		return BookKey{}, invalidf("book key %q is not md5:<32 hex digits> or sha256:<64 hex digits>", truncate(s, 80))
	}
	return k, nil
}

// MustParseBookKey is ParseBookKey for keys known to be valid, such as
// constants in tests; it panics on a malformed key.
func MustParseBookKey(s string) BookKey {
	k, err := ParseBookKey(s)
	if err != nil {
		panic(err)
	}
	return k
}

// IsZero reports whether k is the zero (invalid) key.
func (k BookKey) IsZero() bool { return k.algo == 0 }

// Algo returns the hash function of the key.
func (k BookKey) Algo() Algo { return k.algo }

func (k BookKey) String() string {
	if k.IsZero() {
		return ""
	}
	return k.algo.String() + ":" + hex.EncodeToString(k.sum[:k.algo.Size()])
}

// AppendBinary appends the compact form used on the wire and on disk: the
// algorithm byte followed by the digest.
func (k BookKey) AppendBinary(b []byte) ([]byte, error) {
	if k.IsZero() {
		return b, invalidf("zero book key")
	}
	b = append(b, byte(k.algo))
	return append(b, k.sum[:k.algo.Size()]...), nil
}

// BookKeyFromBinary parses the form made by AppendBinary.
func BookKeyFromBinary(b []byte) (BookKey, error) {
	if len(b) == 0 {
		return BookKey{}, invalidf("empty binary book key")
	}
	k := BookKey{algo: Algo(b[0])}
	if k.algo.Size() == 0 || len(b) != 1+k.algo.Size() {
		return BookKey{}, invalidf("binary book key of %d bytes with algorithm %d", len(b), b[0])
	}
	copy(k.sum[:], b[1:])
	return k, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
