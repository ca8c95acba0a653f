package kosync

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"
)

// legacyHash makes a verifier of the form libraries kept before argon2id.
func legacyHash(t testing.TB, key string) string {
	t.Helper()
	salt := make([]byte, saltBytes)
	rand.Read(salt)
	h := sha256.New()
	h.Write(salt)
	h.Write([]byte(key))
	return legacyV1 + ":" + hex.EncodeToString(salt) + ":" + hex.EncodeToString(h.Sum(nil))
}

// The library keeps a slow salted verifier of the key, never the key: a new
// salt for every verifier, its parameters written in it, and only the key it
// was made of passes. The old SHA-256 form still passes, and says it is
// stale.
func TestKeyVerifier(t *testing.T) {
	h1, err := HashKey(aliceKey)
	if err != nil {
		t.Fatal(err)
	}
	h2, _ := HashKey(aliceKey)
	if !regexp.MustCompile(`^a2id:v=19,m=19456,t=2,p=1:[A-Za-z0-9+/]{22}:[A-Za-z0-9+/]{43}$`).MatchString(h1) {
		t.Fatalf("verifier %q is not a2id:<params>:<salt>:<sum>", h1)
	}
	if h1 == h2 || strings.Contains(h1, aliceKey) {
		t.Fatalf("two verifiers of one key: %q, %q (equal, or holding the key)", h1, h2)
	}
	weak, err := hashKeyWith(argonParams{memoryKiB: 64, time: 1, threads: 1}, aliceKey)
	if err != nil {
		t.Fatal(err)
	}
	old := legacyHash(t, aliceKey)
	for _, tc := range []struct {
		name, stored string
		stale        bool
	}{
		{"argon2id", h1, false},
		{"argon2id, another salt", h2, false},
		{"argon2id, weaker parameters", weak, true},
		{"v1 sha256", old, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if ok, stale := CheckKey(tc.stored, aliceKey); !ok || stale != tc.stale {
				t.Errorf("CheckKey(the key) = %v, stale %v; want true, %v", ok, stale, tc.stale)
			}
			for _, wrong := range []string{bobKey, strings.ToUpper(aliceKey), aliceKey[:31], aliceKey + "0", ""} {
				if ok, stale := CheckKey(tc.stored, wrong); ok || stale {
					t.Errorf("CheckKey(%q) = %v, %v", wrong, ok, stale)
				}
			}
		})
	}
	// A verifier in a form this build does not know, or asking for more
	// than a phone should give, never passes.
	parts := strings.Split(h1, ":")
	salt, sum := parts[2], parts[3]
	oldParts := strings.Split(old, ":")
	for _, bad := range []string{
		"", "a2id", "v1", aliceKey,
		"a2id:v=19,m=19456,t=2,p=1:" + salt,
		"a2id:v=16,m=19456,t=2,p=1:" + salt + ":" + sum,
		"a2id:v=19,m=19456,t=2:" + salt + ":" + sum,
		"a2id:v=19,t=2,m=19456,p=1:" + salt + ":" + sum,
		"a2id:v=19,m=4194304,t=2,p=1:" + salt + ":" + sum,
		"a2id:v=19,m=19456,t=1000,p=1:" + salt + ":" + sum,
		"a2id:v=19,m=19456,t=2,p=0:" + salt + ":" + sum,
		"a2id:v=19,m=19456,t=0,p=1:" + salt + ":" + sum,
		"a2id:v=19,m=19456,t=2,p=1::" + sum,
		"a2id:v=19,m=19456,t=2,p=1:" + salt + ":" + sum[:10],
		"a2id:v=19,m=19456,t=2,p=1:" + salt + ":" + sum + ":x",
		"v2:" + oldParts[1] + ":" + oldParts[2],
		"v1::" + oldParts[2],
		"v1:" + oldParts[1] + ":" + oldParts[2][:62],
		"v1:zz:" + oldParts[2],
	} {
		if ok, _ := CheckKey(bad, aliceKey); ok {
			t.Errorf("CheckKey(%q) = true", bad)
		}
	}
	decoy, err := newDecoy()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"", aliceKey} {
		if decoy.check(key) {
			t.Errorf("the decoy passes %q", key)
		}
	}
	if decoy.params != defaultParams || len(decoy.salt) != saltBytes || len(decoy.sum) != argonKeyLen {
		t.Errorf("decoy %+v does not cost what HashKey's verifiers cost", decoy)
	}
}

// BenchmarkVerifier measures one verification of each form: argon2id's is
// what a wrong guess (or a first sign-in) costs.
func BenchmarkVerifier(b *testing.B) {
	a2, err := HashKey(aliceKey)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, stored string }{{"argon2id", a2}, {"sha256-v1", legacyHash(b, aliceKey)}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if ok, _ := CheckKey(bc.stored, aliceKey); !ok {
					b.Fatal("the key does not pass")
				}
			}
		})
	}
}
