package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
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

// Issue 47, through the daemon's own kosync listener: alice's device signs
// in from 127.0.0.1; another address sends five wrong keys and is locked.
// From it, alice's right key then gets the same 429 as a wrong one (on
// main it got 200, so the lock was an oracle), and so does another
// account's right key, told of the lock rather than of a wrong password;
// alice's device keeps syncing from its own address.
func TestKosyncLockedAddressIsNoOracle(t *testing.T) {
	d := startDaemon(t, withKosync(nil))
	mustDo(d.client.KosyncAddUser(ctxT(t), "alice", aliceKey))(t)
	const bobKey = "e10adc3949ba59abbe56e057f20f883e"
	mustDo(d.client.KosyncAddUser(ctxT(t), "bob", bobKey))(t)
	from := func(ip byte, user, key string) (int, string, string) {
		t.Helper()
		dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, ip)}}
		hc := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
		defer hc.CloseIdleConnections()
		req, _ := http.NewRequest("GET", "http://"+d.KosyncAddr()+"/users/auth", nil)
		req.Header["x-auth-user"] = []string{user}
		req.Header["x-auth-key"] = []string{key}
		resp, err := hc.Do(req)
		if err != nil {
			t.Skipf("no loopback address 127.0.0.%d here: %v", ip, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), string(body)
	}
	if st, _, body := from(1, "alice", aliceKey); st != http.StatusOK {
		t.Fatalf("alice's device signs in: %d %s", st, body)
	}
	for i := range 5 {
		if st, _, body := from(2, "alice", fmt.Sprintf("%032x", i)); st != http.StatusUnauthorized {
			t.Fatalf("wrong key %d: %d %s", i, st, body)
		}
	}
	wantSt, wantRA, wantBody := from(2, "alice", fmt.Sprintf("%032x", 99))
	var e struct {
		Code    int
		Message string
	}
	if err := json.Unmarshal([]byte(wantBody), &e); err != nil || wantSt != http.StatusTooManyRequests || wantRA == "" || !strings.Contains(e.Message, "try again in") {
		t.Fatalf("a wrong key from the locked address: %d Retry-After %q %s; want 429, Retry-After and the lock's message", wantSt, wantRA, wantBody)
	}
	// The wait the message names runs down with the daemon's clock.
	// (A number, not each digit, is masked: the wait may go from 10 s to
	// 9 s between the two requests.)
	noDigits := func(s string) string { return regexp.MustCompile(`[0-9]+`).ReplaceAllString(s, "#") }
	for _, c := range []struct{ user, key string }{{"alice", aliceKey}, {"bob", bobKey}} {
		if st, _, body := from(2, c.user, c.key); st != wantSt || noDigits(body) != noDigits(wantBody) {
			t.Errorf("%s's right key from the locked address: %d %s; a wrong key got %d %s", c.user, st, body, wantSt, wantBody)
		}
	}
	if st, _, body := from(1, "alice", aliceKey); st != http.StatusOK {
		t.Errorf("alice's device during the lock: %d %s", st, body)
	}
}
