package daemon

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
)

// The kosync listener of a daemon, driven the way KOReader drives it.

const (
	aliceKey = "5f4dcc3b5aa765d61d8327deb882cf99" // md5("password"), as KOReader computes it
	kobo     = "0b229176d4e8db7f6d2b5a4952368d7a" // a document id
)

// withKosync turns the kosync listener on, on a loopback port.
func withKosync(mod func(*Config)) func(*Config) {
	return func(c *Config) {
		c.Kosync = "127.0.0.1:0"
		if mod != nil {
			mod(c)
		}
	}
}

// koreaderReq is one request exactly as KOReader's kosync plugin sends it:
// its Accept type, a JSON body, and the auth headers in lower case.
func koreaderReq(t testing.TB, d *testDaemon, method, path, user, key, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+d.KosyncAddr()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header["accept"] = []string{"application/vnd.koreader.v1+json"}
	req.Header["content-type"] = []string{"application/json"}
	req.Header["x-auth-user"] = []string{user}
	req.Header["x-auth-key"] = []string{key}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Values("Content-Type"); len(ct) != 1 || ct[0] != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s %s: %d %q is not a JSON object", method, path, resp.StatusCode, data)
	}
	return resp.StatusCode, m
}

func pushProgress(t testing.TB, d *testDaemon, user, key, doc, progress string, pct float64) map[string]any {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"document": doc, "progress": progress, "percentage": pct, "device": "Kobo Libra 2", "device_id": "8B2FD53C1F5E4A3E9A4F7C11D2E0B6A1"})
	status, m := koreaderReq(t, d, "PUT", "/syncs/progress", user, key, string(body))
	if status != http.StatusOK {
		t.Fatalf("push to %s: %d %v", d.cfg.Name, status, m)
	}
	return m
}

func pullProgress(t testing.TB, d *testDaemon, user, key, doc string) map[string]any {
	t.Helper()
	status, m := koreaderReq(t, d, "GET", "/syncs/progress/"+doc, user, key, "")
	if status != http.StatusOK {
		t.Fatalf("pull from %s: %d %v", d.cfg.Name, status, m)
	}
	return m
}

// TestKosyncOffByDefault: no listener unless configured, and a bad prefix
// stops the daemon from starting rather than serving somewhere unexpected.
func TestKosyncOffByDefault(t *testing.T) {
	d := startDaemon(t, nil)
	if d.KosyncAddr() != "" {
		t.Fatalf("kosync listens on %s without --kosync", d.KosyncAddr())
	}
	_, err := Start(ctxT(t), Config{DataDir: tempDir(t), Kosync: "127.0.0.1:0", KosyncPrefix: "/a b", Listen: []string{"/ip4/127.0.0.1/tcp/0"}, NoMDNS: true, Logger: discardLogger()})
	if err == nil || !strings.Contains(err.Error(), "kosync-prefix") {
		t.Fatalf("Start with a bad prefix: %v", err)
	}
}

// The local API's kosync endpoints: accounts are created on the unix socket
// only, a taken name is name_taken, and what is not a KOReader key is
// refused; the listing shows what KOReader pushed.
func TestKosyncLocalAPI(t *testing.T) {
	d := startDaemon(t, withKosync(func(c *Config) { c.Name = "nas"; c.HTTP = "127.0.0.1:0" }))
	ctx := ctxT(t)
	if u, err := d.client.KosyncAddUser(ctx, "alice", aliceKey); err != nil || u.Name != "alice" {
		t.Fatalf("add alice: %+v, %v", u, err)
	}
	var apiErr *client.APIError
	for _, tt := range []struct{ name, key, code string }{
		{"alice", aliceKey, api.CodeNameTaken},
		{"bob", "password", api.CodeInvalid},
		{"bob", strings.ToUpper(aliceKey), api.CodeInvalid},
		{"", aliceKey, api.CodeInvalid},
		{"bo\tb", aliceKey, api.CodeInvalid},
	} {
		_, err := d.client.KosyncAddUser(ctx, tt.name, tt.key)
		if !errors.As(err, &apiErr) || apiErr.Code != tt.code {
			t.Errorf("add %q with key %q: %v, want %s", tt.name, tt.key, err, tt.code)
		}
	}
	// Not on the TCP listener: creating accounts is the device owner's.
	req, _ := http.NewRequest("POST", "http://"+d.HTTPAddr()+"/v1/kosync/users", strings.NewReader(`{"name":"eve","key":"`+aliceKey+`"}`))
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST /v1/kosync/users over TCP: %s, want 403", resp.Status)
	}

	if status, m := koreaderReq(t, d, "GET", "/users/auth", "alice", aliceKey, ""); status != 200 || m["authorized"] != "OK" {
		t.Fatalf("auth of the account the API created: %d %v", status, m)
	}
	at := time.Now()
	pushProgress(t, d, "alice", aliceKey, kobo, "/body/DocFragment[3]/body/p[7]/text().4", 0.25)
	list, err := d.client.KosyncProgress(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("GET /v1/kosync/progress: %+v, %v", list, err)
	}
	p := list[0]
	when, _ := time.Parse(time.RFC3339Nano, p.At)
	if p.User != "alice" || p.Document != kobo || p.Percentage != 0.25 || p.Device != "Kobo Libra 2" || p.DaemonName != "nas" || when.Sub(at).Abs() > time.Minute {
		t.Fatalf("listed %+v", p)
	}
	// The kosync listener serves nothing of the local API.
	if status, _ := koreaderReq(t, d, "GET", "/v1/status", "alice", aliceKey, ""); status != http.StatusNotFound {
		t.Fatalf("GET /v1/status on the kosync listener: %d", status)
	}
}
