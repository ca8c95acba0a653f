package kosync

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// badProgressBody is a good progress update with the fields of change
// replaced, or left out where change has "-".
func badProgressBody(change map[string]string) string {
	good := map[string]string{"document": `"` + docA + `"`, "progress": `"p"`, "percentage": "0.5", "device": `"d"`, "device_id": `"i"`}
	var parts []string
	for _, k := range []string{"document", "progress", "percentage", "device", "device_id", "extra"} {
		v, ok := change[k]
		if !ok {
			v, ok = good[k]
		}
		if ok && v != "-" {
			parts = append(parts, fmt.Sprintf("%q:%s", k, v))
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// Issue 8: bad input is a 4xx with a JSON error and changes nothing.
// Unknown fields are not bad input: clients add fields over time.
func TestBadInputChangesNothing(t *testing.T) {
	s := startServer(t, Config{Registration: true})
	s.lib.addUser(t, "alice", aliceKey)
	body := badProgressBody
	tests := []struct {
		name   string
		body   string
		status int
	}{
		{"malformed JSON", `{"document":`, 400},
		{"not JSON", `document=x`, 400},
		{"empty body", ``, 400},
		{"an array", `[]`, 400},
		{"a string", `"x"`, 400},
		{"two objects", body(nil) + body(nil), 400},
		{"missing document", body(map[string]string{"document": "-"}), 403},
		{"missing progress", body(map[string]string{"progress": "-"}), 403},
		{"missing percentage", body(map[string]string{"percentage": "-"}), 403},
		{"missing device", body(map[string]string{"device": "-"}), 403},
		{"null percentage", body(map[string]string{"percentage": "null"}), 403},
		{"empty document", body(map[string]string{"document": `""`}), 403},
		{"percentage as a string", body(map[string]string{"percentage": `"0.5"`}), 403},
		{"progress as a number", body(map[string]string{"progress": "42"}), 403},
		{"document as a number", body(map[string]string{"document": "1"}), 403},
		{"device as an object", body(map[string]string{"device": "{}"}), 403},
		{"negative percentage", body(map[string]string{"percentage": "-0.01"}), 403},
		{"percentage over 1", body(map[string]string{"percentage": "1.01"}), 403},
		{"percentage out of float range", body(map[string]string{"percentage": "1e400"}), 403},
		{"document too long", body(map[string]string{"document": `"` + strings.Repeat("d", 257) + `"`}), 403},
		{"document with NUL", body(map[string]string{"document": `"a\u0000b"`}), 403},
		{"progress too long", body(map[string]string{"progress": `"` + strings.Repeat("p", 4097) + `"`}), 403},
		{"device too long", body(map[string]string{"device": `"` + strings.Repeat("d", 257) + `"`}), 403},
		{"device with ESC", body(map[string]string{"device": `"Kobo\u001b[31m"`}), 403},
		{"progress with a newline", body(map[string]string{"progress": `"/body\n"`}), 403},
		{"device with a lone surrogate", body(map[string]string{"device": `"\ud800"`}), 400},
		{"device not UTF-8", body(map[string]string{"device": "\"Kobo\xff\""}), 400},
		{"document with a tab", body(map[string]string{"document": `"a\tb"`}), 403},
		{"document named twice", body(nil)[:len(body(nil))-1] + `,"document":"` + docA + `"}`, 400},
		{"huge body", body(map[string]string{"extra": `"` + strings.Repeat("x", 17<<10) + `"`}), 413},
	}
	for _, tt := range tests {
		a := koreader(t, "PUT", s.url+"/syncs/progress", "alice", aliceKey, tt.body)
		checkError(t, tt.name, a, tt.status, 0)
	}
	creates := []struct{ name, body string }{
		{"no username", `{"password":"` + bobKey + `"}`},
		{"no password", `{"username":"bob"}`},
		{"empty username", `{"username":"","password":"` + bobKey + `"}`},
		{"empty password", `{"username":"bob","password":""}`},
		{"username with a newline", `{"username":"bo\nb","password":"` + bobKey + `"}`},
		{"username with blanks around", `{"username":" bob","password":"` + bobKey + `"}`},
		{"username too long", `{"username":"` + strings.Repeat("b", 257) + `","password":"` + bobKey + `"}`},
		{"username as a number", `{"username":7,"password":"` + bobKey + `"}`},
		{"malformed", `{"username":`},
	}
	for _, tt := range creates {
		status := http.StatusForbidden // a field refused, as the reference server answers
		if tt.name == "malformed" {
			status = http.StatusBadRequest
		}
		checkError(t, "create: "+tt.name, koreader(t, "POST", s.url+"/users/create", "", "", tt.body), status, 2003)
	}
	if s.lib.writeCount() != 1 {
		t.Fatalf("bad input wrote %d times", s.lib.writeCount()-1)
	}
	// What clients add is accepted and not kept: metadata, identifiers,
	// anything new.
	extra := body(map[string]string{"extra": `{"nested":[1,2]}`})
	extra = strings.TrimSuffix(extra, "}") + `,"metadata":{"title":"红楼梦","authors":"曹雪芹","filename":"hlm.epub"},"identifiers":["x"]}`
	checkJSON(t, "unknown fields", koreader(t, "PUT", s.url+"/syncs/progress", "alice", aliceKey, extra), http.StatusOK)
}

// Issue 8: under a prefix the protocol is served there and nowhere else.
func TestPrefix(t *testing.T) {
	s := startServer(t, Config{Prefix: "/kosync/"})
	s.lib.addUser(t, "alice", aliceKey)
	root := strings.TrimSuffix(s.url, "/kosync/")
	checkJSON(t, "under the prefix", koreader(t, "GET", root+"/kosync/users/auth", "alice", aliceKey, ""), http.StatusOK)
	checkError(t, "at the root", koreader(t, "GET", root+"/users/auth", "alice", aliceKey, ""), http.StatusNotFound, 404)
	checkError(t, "a longer prefix", koreader(t, "GET", root+"/kosyncx/users/auth", "alice", aliceKey, ""), http.StatusNotFound, 404)
	for _, bad := range []string{"kosync", "/a b", "/{x}", "/a//b", "/../x", "/k?x", "/ko%2f"} {
		if _, err := New(Config{Library: newMemLibrary(), Prefix: bad}); err == nil {
			t.Errorf("prefix %q accepted", bad)
		}
	}
}

// Only the protocol is served: everything else, the daemon's own API
// included, is a JSON 404; a wrong method a JSON 405.
func TestNothingElseIsServed(t *testing.T) {
	s := startServer(t, Config{})
	s.lib.addUser(t, "alice", aliceKey)
	for _, path := range []string{"/", "/v1/status", "/v1/books", "/v1/openapi.json", "/healthchecks", "/syncs/progress/a/b"} {
		checkError(t, "GET "+path, koreader(t, "GET", s.url+path, "alice", aliceKey, ""), http.StatusNotFound, 404)
	}
	for _, mp := range [][2]string{{"DELETE", "/syncs/progress/x"}, {"GET", "/syncs/progress"}, {"PUT", "/users/auth"}, {"GET", "/users/create"}} {
		checkError(t, mp[0]+" "+mp[1], koreader(t, mp[0], s.url+mp[1], "alice", aliceKey, ""), http.StatusMethodNotAllowed, 405)
	}
}

// The listener is on the LAN: oversized headers are refused. (The daemon
// caps its connections: daemon/limits_test.go.)
func TestServerLimits(t *testing.T) {
	lib := newMemLibrary()
	lib.addUser(t, "alice", aliceKey)
	h, _ := New(Config{Library: lib})
	url := serveOnLoopback(t, h)
	req, _ := http.NewRequest("GET", url+"/users/auth", nil)
	req.Header.Set("x-auth-user", "alice")
	req.Header.Set("x-auth-key", aliceKey)
	req.Header.Set("x-padding", strings.Repeat("p", 16<<10))
	// The server answers 431 and closes; the client may see the answer or
	// the reset of a connection closed while it was still sending.
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("16 KiB of headers: status %d", resp.StatusCode)
		}
	}
}
