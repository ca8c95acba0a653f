package kosync

import (
	"regexp"
	"strings"
	"testing"
)

// The library keeps a salted hash of the key, never the key: a new salt for
// every hash, and only the key it was made of passes.
func TestKeyHash(t *testing.T) {
	h1, err := HashKey(aliceKey)
	if err != nil {
		t.Fatal(err)
	}
	h2, _ := HashKey(aliceKey)
	if !regexp.MustCompile(`^v1:[0-9a-f]{32}:[0-9a-f]{64}$`).MatchString(h1) {
		t.Fatalf("hash %q is not v1:<salt>:<sha256>", h1)
	}
	if h1 == h2 || strings.Contains(h1, aliceKey) {
		t.Fatalf("two hashes of one key: %q, %q (equal, or holding the key)", h1, h2)
	}
	for _, h := range []string{h1, h2} {
		if !CheckKey(h, aliceKey) {
			t.Errorf("CheckKey(%q, the key) = false", h)
		}
		for _, wrong := range []string{bobKey, strings.ToUpper(aliceKey), aliceKey[:31], aliceKey + "0", ""} {
			if CheckKey(h, wrong) {
				t.Errorf("CheckKey(%q, %q) = true", h, wrong)
			}
		}
	}
	// A hash in a form this build does not know never passes.
	salt, sum, _ := strings.Cut(strings.TrimPrefix(h1, "v1:"), ":")
	for _, bad := range []string{"", "v1", "v2:" + salt + ":" + sum, "v1::" + sum, "v1:" + salt + ":" + sum[:62], "v1:zz:" + sum, aliceKey} {
		if CheckKey(bad, aliceKey) {
			t.Errorf("CheckKey(%q) = true", bad)
		}
	}
	for _, key := range []string{"", aliceKey} {
		if CheckKey(decoyHash, key) {
			t.Errorf("the decoy hash passes %q", key)
		}
	}
}
