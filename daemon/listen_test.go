package daemon

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/danyue/danyue/store"
)

func TestSecondDaemonOnSameDataDirIsRefused(t *testing.T) {
	d := startDaemon(t, nil)
	_, err := Start(ctxT(t), Config{DataDir: d.dir, NoMDNS: true, Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Logger: testLogger(t)})
	if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), d.dir) {
		t.Fatalf("second Start = %v, want ErrLocked naming %s", err, d.dir)
	}
	// The first one still answers.
	if _, err := d.client.Status(ctxT(t)); err != nil {
		t.Fatalf("first daemon after refused second: %v", err)
	}
}

func TestTCPListenerNeedsTokenAndLoopbackHost(t *testing.T) {
	d := startDaemon(t, func(c *Config) { c.HTTP = "127.0.0.1:0" })
	addr := d.HTTPAddr()
	tests := []struct {
		name   string
		host   string
		token  string
		path   string
		method string
		want   int
	}{
		{"token and loopback host", addr, d.token, "/v1/status", "GET", 200},
		{"localhost host", "localhost:1234", d.token, "/v1/status", "GET", 200},
		{"no token", addr, "", "/v1/status", "GET", 401},
		{"wrong token", addr, strings.Repeat("0", 64), "/v1/status", "GET", 401},
		{"rebinding host", "evil.example:80", d.token, "/v1/status", "GET", 403},
		{"invite is unix-socket only", addr, d.token, "/v1/invite", "POST", 403},
		{"read-only token reads", addr, d.readToken, "/v1/status", "GET", 200},
		{"read-only token cannot write", addr, d.readToken, "/v1/books/" + keyA, "DELETE", 403},
		{"write token writes (an unknown book: 404, not refused)", addr, d.token, "/v1/books/" + keyA, "DELETE", 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(context.Background(), tt.method, "http://"+addr+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = tt.host
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, tt.want)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("content type %q, want application/json", ct)
			}
		})
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestNonLoopbackHTTPIsRefused(t *testing.T) {
	dir := tempDir(t)
	_, err := Start(ctxT(t), Config{DataDir: dir, HTTP: "0.0.0.0:0", NoMDNS: true, Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Logger: testLogger(t)})
	if !errors.Is(err, ErrNotLoopback) {
		t.Fatalf("Start with --http 0.0.0.0:0 = %v, want ErrNotLoopback", err)
	}
}

// A caller on the local endpoint is let in only if the OS vouched for it:
// where the OS can read peer credentials, failing to read them refuses the
// request instead of trusting the socket's directory alone.
func TestLocalCallerMustBeVouched(t *testing.T) {
	d := &Daemon{}
	h := d.guard(route{"GET", "/v1/status", permAdmin, func(w http.ResponseWriter, _ *http.Request) error {
		w.WriteHeader(http.StatusOK)
		return nil
	}})
	tests := []struct {
		name string
		info connInfo
		want int
	}{
		{"credentials read, this user", unixCaller(os.Getuid(), nil), 200},
		{"credentials read, root", unixCaller(0, nil), 200},
		{"credentials read, another user", unixCaller(os.Getuid()+1000, nil), 403},
		{"credentials could not be read", unixCaller(-1, errors.New("getsockopt: bad file descriptor")), 403},
		{"the OS has no peer credentials", unixCaller(-1, errors.ErrUnsupported), 200},
		{"not vouched, uid known", connInfo{kind: connUnix, uid: os.Getuid()}, 403},
		{"no connection info", connInfo{}, 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequestWithContext(context.WithValue(context.Background(), connInfoKey{}, tt.info), "GET", "/v1/status", nil)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Fatalf("%+v: status %d (%s), want %d", tt.info, rec.Code, rec.Body, tt.want)
			}
		})
	}
}

// pipeName is what DefaultSocket gives on Windows; it is checked here.
func TestPipeName(t *testing.T) {
	base := t.TempDir()
	a, b := filepath.Join(base, "a"), filepath.Join(base, "b")
	pa := pipeName(a)
	if !regexp.MustCompile(`^\\\\\.\\pipe\\danyue-[0-9a-f]{16}$`).MatchString(pa) {
		t.Fatalf("pipeName(%s) = %q, want %s and 16 hex digits", a, pa, `\\.\pipe\danyue-`)
	}
	for _, tt := range []struct {
		name string
		dir  string
		same bool
	}{
		{"same dir", a, true},
		{"same dir, not clean", a + string(filepath.Separator) + ".", true},
		{"same dir, other case (Windows paths ignore it)", strings.ToUpper(a), true},
		{"another dir", b, false},
		{"a dir inside", filepath.Join(a, "a"), false},
	} {
		if got := pipeName(tt.dir); (got == pa) != tt.same {
			t.Errorf("%s: pipeName(%s) = %s, pipeName(%s) = %s; want same %v", tt.name, tt.dir, got, a, pa, tt.same)
		}
	}
	// A relative dir names the same pipe as its absolute form.
	t.Chdir(base)
	if got := pipeName("a"); got != pa {
		t.Errorf("pipeName(\"a\") in %s = %s, want %s", base, got, pa)
	}
}
