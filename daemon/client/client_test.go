package client

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// ErrNoDaemon is what every command turns into "start the daemon": it must
// come for a socket that does not exist and for one a crashed daemon left.
func TestNoDaemon(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("unix sockets; the pipe's ErrNoDaemon is only compiled here")
	}
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // the socket file stays, with nothing behind it
	if _, err := os.Stat(stale); err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	for _, tt := range []struct{ name, socket string }{
		{"missing socket", filepath.Join(dir, "missing.sock")},
		{"stale socket", stale},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c := New(tt.socket)
			defer c.Close()
			if _, err := c.Status(ctx); !errors.Is(err, ErrNoDaemon) {
				t.Fatalf("Status = %v, want ErrNoDaemon", err)
			}
		})
	}
}
