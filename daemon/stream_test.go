package daemon

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestStreamFailCutsTheBody: an answer that fails after it started must not
// look complete to the client.
func TestStreamFailCutsTheBody(t *testing.T) {
	boom := errors.New("boom")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := newJSONStream(w, `{"books":[`)
		if err := st.fail(boom); err != boom {
			t.Errorf("fail before the answer started: %v, want the error back", err)
		}
		if err := st.item(map[string]int{"a": 1}); err != nil {
			t.Error(err)
		}
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		_ = st.fail(boom)
		t.Error("fail after the answer started returned")
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Fatalf("the body of a failed answer read completely: %q", body)
	}
}

func TestNotModified(t *testing.T) {
	const tag = `"abc"`
	for _, c := range []struct {
		inm  []string
		want bool
	}{
		{nil, false},
		{[]string{`"abc"`}, true},
		{[]string{`W/"abc"`}, true},
		{[]string{`"x", "abc"`}, true},
		{[]string{`"x"`, `"abc"`}, true},
		{[]string{`*`}, true},
		{[]string{`"abcd"`}, false},
		{[]string{`abc`}, false},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		for _, v := range c.inm {
			r.Header.Add("If-None-Match", v)
		}
		w := httptest.NewRecorder()
		if got := notModified(w, r, tag); got != c.want || w.Header().Get("ETag") != tag {
			t.Errorf("If-None-Match %q: not modified %v, ETag %q; want %v, %q", c.inm, got, w.Header().Get("ETag"), c.want, tag)
		}
		if c.want && w.Code != http.StatusNotModified {
			t.Errorf("If-None-Match %q: status %d, want 304", c.inm, w.Code)
		}
	}
}
