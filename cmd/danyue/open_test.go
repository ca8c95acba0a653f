package main

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestOpenPrintsOneTimeLink(t *testing.T) {
	p := startDaemonProc(t, "laptop", "--http", "127.0.0.1:0")
	res := p.cli(t, "open", "--print")
	if res.code != 0 {
		t.Fatalf("open: %d %s", res.code, res.stderr)
	}
	var link string
	for _, f := range strings.Fields(res.stdout) {
		if strings.HasPrefix(f, "http://127.0.0.1:") {
			link = f
		}
	}
	if link == "" {
		t.Fatalf("no login link in %q", res.stdout)
	}
	// The first use answers the login page (which hands its script the page
	// key); a second use of the same link is refused.
	c := http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for i, want := range []int{http.StatusOK, http.StatusForbidden} {
		resp, err := c.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("use %d of the link: %d, want %d", i+1, resp.StatusCode, want)
		}
		if opened := len(resp.Cookies()) > 0; opened != (i == 0) {
			t.Fatalf("use %d of the link: session cookie set %v", i+1, opened)
		}
	}
}

func TestOpenWithoutHTTPSaysHow(t *testing.T) {
	p := startDaemonProc(t, "laptop")
	res := p.cli(t, "open", "--print")
	if res.code != 1 || !strings.Contains(res.stderr, "--http 127.0.0.1:7100") {
		t.Fatalf("open without --http: %d %q; want a hint to start the daemon with --http", res.code, res.stderr)
	}
}
