package kosync

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/danyue/danyue/crdt"
)

// The key KOReader sends is the MD5 of the password: whoever holds it can
// sync as the user, so it is a password in its own right. The library (on
// every device, in every backup) keeps a salted SHA-256 of it instead:
//
//	v1:<32 hex digits of salt>:<64 hex digits of sha256(salt || key)>
//
// A plain hash, not a slow one: KOReader sends the key with every request,
// and its own strength is that of the user's password through one MD5.

const (
	hashVersion = "v1"
	saltBytes   = 16
	// maxKeyBytes bounds a key; KOReader's is 32 hex digits.
	maxKeyBytes = 128
)

// HashKey returns the salted hash of a client-side key, with a new random
// salt, for the library to keep.
func HashKey(key string) (string, error) {
	salt := make([]byte, saltBytes)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("kosync key salt: %w", err)
	}
	return hashWithSalt(salt, key), nil
}

func hashWithSalt(salt []byte, key string) string {
	h := sha256.New()
	h.Write(salt)
	h.Write([]byte(key))
	return hashVersion + ":" + hex.EncodeToString(salt) + ":" + hex.EncodeToString(h.Sum(nil))
}

// CheckKey reports whether key is the one hash was made of. The digests are
// compared in constant time.
func CheckKey(hash, key string) bool {
	version, rest, _ := strings.Cut(hash, ":")
	saltHex, sumHex, _ := strings.Cut(rest, ":")
	salt, err1 := hex.DecodeString(saltHex)
	want, err2 := hex.DecodeString(sumHex)
	if version != hashVersion || err1 != nil || err2 != nil || len(salt) == 0 || len(want) != sha256.Size {
		return false
	}
	got := sha256.New()
	got.Write(salt)
	got.Write([]byte(key))
	return subtle.ConstantTimeCompare(got.Sum(nil), want) == 1
}

// decoyHash is what an unknown account's key is checked against, so that
// answering "no such account" takes as long as "wrong key". No key is known
// to hash to its all-zero digest.
var decoyHash = hashVersion + ":" + strings.Repeat("00", saltBytes) + ":" + strings.Repeat("00", 32)

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

// authenticate returns the account the request's x-auth-user and x-auth-key
// headers (any case) prove, or "" and false. It does not say why a pair was
// refused: an unknown account and a wrong key look the same.
func (h *handler) authenticate(ctx context.Context, r *http.Request) (string, bool, error) {
	users, keys := r.Header.Values("X-Auth-User"), r.Header.Values("X-Auth-Key")
	if len(users) != 1 || len(keys) != 1 || ValidUserName(users[0]) != nil || ValidKey(keys[0]) != nil {
		return "", false, nil
	}
	user, key := users[0], keys[0]
	hash, ok, err := h.lib.UserAuth(ctx, user)
	if err != nil {
		return "", false, err
	}
	if !ok {
		CheckKey(decoyHash, key)
		return "", false, nil
	}
	if !CheckKey(hash, key) {
		return "", false, nil
	}
	return user, true, nil
}
