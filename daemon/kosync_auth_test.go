package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
)

// An account kept in the old fast form (a library written before argon2id)
// still signs in, and that sign-in rewrites its record in the argon2id form,
// which then signs in too.
func TestKosyncVerifierUpgrade(t *testing.T) {
	d := startDaemon(t, withKosync(nil))
	salt := strings.Repeat("ab", 16)
	raw, _ := hex.DecodeString(salt)
	sum := sha256.Sum256(append(raw, aliceKey...))
	if err := d.lib.CreateKosyncUser(ctxT(t), "alice", "v1:"+salt+":"+hex.EncodeToString(sum[:])); err != nil {
		t.Fatal(err)
	}
	lib := kosyncLibrary{d.Daemon}
	for i, want := range []string{"a2id:", "a2id:"} {
		if status, m := koreaderReq(t, d, "GET", "/users/auth", "alice", aliceKey, ""); status != http.StatusOK {
			t.Fatalf("sign-in %d: %d %v", i, status, m)
		}
		stored, ok, err := lib.UserAuth(ctxT(t), "alice")
		if err != nil || !ok || !strings.HasPrefix(stored, want) {
			t.Fatalf("after sign-in %d the record holds %q (%v, %v), want %s...", i, stored, ok, err, want)
		}
	}
	// The rewrite is conditional: a record that moved on is kept.
	if replaced, err := lib.ReplaceAuth(ctxT(t), "alice", "v1:stale", "a2id:x"); replaced || err != nil {
		t.Errorf("ReplaceAuth of a stale verifier: %v, %v", replaced, err)
	}
	if replaced, err := lib.ReplaceAuth(ctxT(t), "nobody", "", "a2id:x"); replaced || err != nil {
		t.Errorf("ReplaceAuth of an unknown account: %v, %v", replaced, err)
	}
	if status, _ := koreaderReq(t, d, "GET", "/users/auth", "alice", aliceKey, ""); status != http.StatusOK {
		t.Errorf("sign-in after refused rewrites: %d", status)
	}
}
