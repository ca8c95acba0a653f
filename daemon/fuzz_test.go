package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/danyue/danyue/crdt"
)

// FuzzBodies sends arbitrary bodies to every endpoint of the local API that
// reads one: the answer is never a server error, an error is the documented
// {"error","detail"} shape, and an error changes nothing.
func FuzzBodies(f *testing.F) {
	for _, seed := range []string{
		`{"char":1234,"percent":0.12,"title":"Dream of the Red Chamber"}`,
		`{"char":0,"percent":0}`, `{"char":-1,"percent":0}`, `{"char":1.5,"percent":2}`,
		`{"addMs":5000}`, `{"addMs":0}`, `{"addMs":86400001}`, `{"code":"danyue1-abc"}`,
		`{"char":1,"percent":0,"chapter":3}`, `{}`, `[]`, `{`, ``, "\x00", `{"title":"\ud800"}`,
		`{"char":1,"percent":0,"char":2}`, `{"char":1,"percent":0,"title":"a\u001bb"}`, "{\"char\":1,\"percent\":0,\"title\":\"\u009b\"}",
		`{"char":1,"percent":0,"title":"\ud83d\udcd6"}`, `{"addMs":5,"addMs":6}`,
	} {
		for _, ep := range []string{"position", "read-time", "join"} {
			f.Add(ep, seed)
		}
	}
	d := startDaemon(f, func(c *Config) { c.Logger = discardLogger() })
	h := d.routes()
	ctx := context.WithValue(context.Background(), connInfoKey{}, connInfo{kind: connUnix, uid: os.Getuid(), vouched: true})
	f.Fuzz(func(t *testing.T, endpoint, body string) {
		method, path := "PUT", "/v1/books/"+keyA+"/position"
		switch endpoint {
		case "read-time":
			method, path = "POST", "/v1/books/"+keyA+"/read-time"
		case "join":
			// A valid code would move the daemon to another library:
			// only malformed ones are fuzzed here.
			if strings.Contains(body, "danyue1-") {
				return
			}
			method, path = "POST", "/v1/join"
		}
		seq := d.store.LastSeq()
		req := httptest.NewRequestWithContext(ctx, method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch {
		case rec.Code >= 500:
			t.Fatalf("%s %s %q: status %d %s", method, path, body, rec.Code, rec.Body)
		case rec.Code == http.StatusOK:
			// What was taken is clean text (see TestBodiesAreCleanAtTheDoor).
			var b struct{ Title string }
			if err := json.Unmarshal(rec.Body.Bytes(), &b); err == nil && crdt.CheckText("title", b.Title) != nil {
				t.Fatalf("%s %q was taken with title %q", path, body, b.Title)
			}
			return
		}
		var e struct{ Error, Detail string }
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" || e.Detail == "" {
			t.Fatalf("%d answer is not an API error: %q", rec.Code, rec.Body)
		}
		if d.store.LastSeq() != seq {
			t.Fatalf("a %d answer (%s) changed the store", rec.Code, e.Error)
		}
	})
}
