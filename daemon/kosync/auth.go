package kosync

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"

	"github.com/danyue/danyue/crdt"
)

// The key KOReader sends is the MD5 of the password: whoever holds it can
// sync as the user, so it is a password in its own right, and usually a
// weak one. The library (on every device, in every backup) keeps a slow,
// salted verifier of it, with its parameters, so that they can change:
//
//	a2id:v=19,m=<KiB>,t=<passes>,p=<lanes>:<base64 salt>:<base64 argon2id(key, salt)>
//
// Libraries written before kept a fast one, which still verifies; the
// handler replaces it with an argon2id verifier at the next successful
// sign-in:
//
//	v1:<32 hex digits of salt>:<64 hex digits of sha256(salt || key)>
//
// KOReader sends the key with every request; the handler's cache (authCache)
// keeps that from costing a slow verification each time.

const (
	argonPrefix = "a2id"
	legacyV1    = "v1"
	saltBytes   = 16
	argonKeyLen = 32
	// maxKeyBytes bounds a key; KOReader's is 32 hex digits.
	maxKeyBytes = 128
)

// argonParams are argon2id's cost parameters.
type argonParams struct {
	memoryKiB uint32
	time      uint32
	threads   uint8
}

// defaultParams are OWASP's second argon2id setting (19 MiB, 2 passes, one
// lane): slow enough that a stolen library's verifiers allow only a few
// guesses a second per core, fast enough that a person signing in on a
// phone does not notice (BenchmarkVerifier measures it); a costlier setting
// would slow every sign-in on a phone more than it slows a guesser.
// One lane, because the daemon shares the phone with the reader app; the
// handler runs at most maxSlowVerifies at once, so 38 MiB at most.
var defaultParams = argonParams{memoryKiB: 19 * 1024, time: 2, threads: 1}

// Bounds on the parameters a stored verifier may ask for. Verifiers arrive
// from other devices of the library, and a broken or hostile one must not
// make every sign-in here take a gigabyte or a minute.
const (
	maxArgonMemoryKiB = 256 * 1024
	maxArgonTime      = 16
	maxArgonThreads   = 4
)

// ErrBadVerifier is wrapped by the error for a stored verifier this build
// cannot read.
var ErrBadVerifier = errors.New("kosync: unreadable key verifier")

// HashKey returns a verifier of a client-side key, with a new random salt,
// for the library to keep.
func HashKey(key string) (string, error) {
	return hashKeyWith(defaultParams, key)
}

func hashKeyWith(p argonParams, key string) (string, error) {
	salt := make([]byte, saltBytes)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("kosync key salt: %w", err)
	}
	sum := argon2.IDKey([]byte(key), salt, p.time, p.memoryKiB, p.threads, argonKeyLen)
	return fmt.Sprintf("%s:v=%d,m=%d,t=%d,p=%d:%s:%s", argonPrefix, argon2.Version, p.memoryKiB, p.time, p.threads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(sum)), nil
}

// verifier is a stored verifier, parsed.
type verifier struct {
	legacy bool // v1: sha256(salt || key)
	params argonParams
	salt   []byte
	sum    []byte
}

func parseVerifier(s string) (verifier, error) {
	parts := strings.Split(s, ":")
	switch {
	case len(parts) == 3 && parts[0] == legacyV1:
		salt, err1 := hex.DecodeString(parts[1])
		sum, err2 := hex.DecodeString(parts[2])
		if err1 != nil || err2 != nil || len(salt) == 0 || len(sum) != sha256.Size {
			return verifier{}, fmt.Errorf("%w: malformed v1", ErrBadVerifier)
		}
		return verifier{legacy: true, salt: salt, sum: sum}, nil
	case len(parts) == 4 && parts[0] == argonPrefix:
		p, err := parseParams(parts[1])
		if err != nil {
			return verifier{}, err
		}
		salt, err1 := base64.RawStdEncoding.DecodeString(parts[2])
		sum, err2 := base64.RawStdEncoding.DecodeString(parts[3])
		if err1 != nil || err2 != nil || len(salt) < 8 || len(sum) < 16 || len(sum) > 64 {
			return verifier{}, fmt.Errorf("%w: malformed salt or digest", ErrBadVerifier)
		}
		return verifier{params: p, salt: salt, sum: sum}, nil
	}
	return verifier{}, fmt.Errorf("%w: unknown form", ErrBadVerifier)
}

// parseParams reads "v=19,m=19456,t=2,p=1", all four, in that order.
func parseParams(s string) (argonParams, error) {
	var v, m, t, p uint64
	fields := strings.Split(s, ",")
	dst := []*uint64{&v, &m, &t, &p}
	names := []string{"v", "m", "t", "p"}
	if len(fields) != len(dst) {
		return argonParams{}, fmt.Errorf("%w: parameters %q", ErrBadVerifier, s)
	}
	for i, f := range fields {
		name, val, ok := strings.Cut(f, "=")
		n, err := strconv.ParseUint(val, 10, 32)
		if !ok || name != names[i] || err != nil {
			return argonParams{}, fmt.Errorf("%w: parameters %q", ErrBadVerifier, s)
		}
		*dst[i] = n
	}
	if v != argon2.Version || m < 8*p || m > maxArgonMemoryKiB || t < 1 || t > maxArgonTime || p < 1 || p > maxArgonThreads {
		return argonParams{}, fmt.Errorf("%w: parameters %q out of bounds", ErrBadVerifier, s)
	}
	return argonParams{memoryKiB: uint32(m), time: uint32(t), threads: uint8(p)}, nil
}

// check reports whether key is the one v was made of. Digests are compared
// in constant time.
func (v verifier) check(key string) bool {
	if v.legacy {
		h := sha256.New()
		h.Write(v.salt)
		h.Write([]byte(key))
		return subtle.ConstantTimeCompare(h.Sum(nil), v.sum) == 1
	}
	got := argon2.IDKey([]byte(key), v.salt, v.params.time, v.params.memoryKiB, v.params.threads, uint32(len(v.sum)))
	return subtle.ConstantTimeCompare(got, v.sum) == 1
}

// CheckKey reports whether key is the one the verifier was made of, and
// whether the verifier is of an old form that HashKey should replace. A
// verifier in a form this build does not know never passes.
func CheckKey(stored, key string) (ok, stale bool) {
	v, err := parseVerifier(stored)
	if err != nil {
		return false, false
	}
	ok = v.check(key)
	return ok, ok && v.stale()
}

// stale reports whether the verifier is weaker than HashKey's.
func (v verifier) stale() bool {
	return v.legacy || v.params.memoryKiB < defaultParams.memoryKiB || v.params.time < defaultParams.time
}

// newDecoy returns a verifier that no key is known to pass, with
// HashKey's parameters, for an unknown account's key to be checked against:
// "no such account" then costs what "wrong key" costs.
func newDecoy() (verifier, error) {
	salt, sum := make([]byte, saltBytes), make([]byte, argonKeyLen)
	if _, err := rand.Read(salt); err != nil {
		return verifier{}, fmt.Errorf("kosync decoy salt: %w", err)
	}
	return verifier{params: defaultParams, salt: salt, sum: sum}, nil
}

// ValidUserName reports what is wrong with an account name, or nil. A name
// travels in an HTTP header, so it may not hold control characters or start
// or end with blanks (which header parsing trims), and it is part of record
// ids, so it is bounded.
func ValidUserName(name string) error {
	return validHeaderValue("username", name, crdt.MaxKosyncUserBytes)
}

// ValidKey reports what is wrong with a client-side key, or nil.
func ValidKey(key string) error {
	return validHeaderValue("password (the key)", key, maxKeyBytes)
}

func validHeaderValue(what, s string, maxBytes int) error {
	switch {
	case s == "":
		return fmt.Errorf("%s is empty", what)
	case len(s) > maxBytes:
		return fmt.Errorf("%s is longer than %d bytes", what, maxBytes)
	case !utf8.ValidString(s):
		return fmt.Errorf("%s is not valid UTF-8", what)
	case strings.TrimSpace(s) != s:
		return fmt.Errorf("%s starts or ends with blanks", what)
	case strings.ContainsFunc(s, unicode.IsControl):
		return fmt.Errorf("%s contains control characters", what)
	}
	return nil
}
