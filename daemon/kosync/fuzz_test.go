package kosync

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzBodies sends arbitrary bodies to the two endpoints that read one, as
// an authenticated KOReader client: every answer is JSON with the exact
// content type, never a server error, and an answer other than success
// stores nothing.
func FuzzBodies(f *testing.F) {
	for _, seed := range []string{
		`{"document":"0b229176d4e8db7f6d2b5a4952368d7a","progress":"/body/p[3]","percentage":0.5,"device":"Kobo","device_id":"ABC"}`,
		`{"document":"d","progress":"12","percentage":0,"device":"x","device_id":"y","metadata":{"a":[1,2]}}`,
		`{"username":"carol","password":"5f4dcc3b5aa765d61d8327deb882cf99"}`,
		`{"document":"d","percentage":"0.5"}`, `{"percentage":1e999}`, `{"document":null}`, `[]`, `{`, ``, "\x00",
	} {
		f.Add("/syncs/progress", seed)
		f.Add("/users/create", seed)
	}
	lib := newMemLibrary()
	lib.addUser(f, "alice", aliceKey)
	h, err := New(Config{Library: lib, Registration: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, path, body string) {
		method := "PUT"
		if path != "/syncs/progress" {
			path, method = "/users/create", "POST"
		}
		before := lib.writeCount()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Accept", "application/vnd.koreader.v1+json")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-auth-user", "alice")
		req.Header.Set("x-auth-key", aliceKey)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s %q: status %d %s", method, path, body, rec.Code, rec.Body)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("content type %q", ct)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("answer is not JSON: %q", rec.Body)
		}
		if rec.Code != http.StatusOK && rec.Code != http.StatusCreated && lib.writeCount() != before {
			t.Fatalf("a %d answer stored something", rec.Code)
		}
	})
}
