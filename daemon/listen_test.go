package daemon

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/danyue/danyue/store"
)

func TestSocketAndSecretsArePrivate(t *testing.T) {
	d := startDaemon(t, nil)
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{
		{d.dir, 0o700},
		{d.Socket(), 0o600},
		{filepath.Join(d.dir, "api-token"), 0o600},
	} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != c.mode {
			t.Errorf("%s has mode %o, want %o", c.path, got, c.mode)
		}
	}
}

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

// TestOtherUserCannotConnect runs curl as another user against the socket:
// the 0700 data dir and 0600 socket must stop it before any request.
func TestOtherUserCannotConnect(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("needs curl")
	}
	d := startDaemon(t, nil)
	cmd := exec.Command(curl, "-s", "--max-time", "5", "--unix-socket", d.Socket(), "http://danyue/v1/status")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 7 { // 7: could not connect
		t.Fatalf("curl as uid 65534: %v, output %q; want refused at connect (exit 7)", err, out)
	}
}
