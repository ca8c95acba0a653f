package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/daemon"
	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
	"github.com/danyue/danyue/internal/poll"
)

// `danyue sync --once` on a stopped device: it gets what it missed, exits 0
// with a one-line summary; alone, it exits 1 and says so.
func TestCLISyncOnce(t *testing.T) {
	a := startDaemonProc(t, "desk")
	b := startDaemonProc(t, "pocket")
	res := a.cli(t, "invite")
	if res.code != 0 {
		t.Fatalf("invite: exit %d, stderr %q", res.code, res.stderr)
	}
	if res := b.cli(t, "join", strings.TrimSpace(res.stdout)); res.code != 0 {
		t.Fatalf("join: exit %d, stderr %q", res.code, res.stderr)
	}
	ca := client.New(daemon.DefaultSocket(a.data))
	defer ca.Close()
	cb := client.New(daemon.DefaultSocket(b.data))
	defer cb.Close()
	const key = "md5:900150983cd24fb0d6963f7d28e17f72"
	if _, err := ca.SetPosition(context.Background(), key, 500, 0.25, "The Story of the Stone"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "B to have the book", time.Minute, func() bool {
		book, err := cb.Book(context.Background(), key)
		return err == nil && book.Position != nil && book.Position.Char == 500
	})
	// Quiet before stopping, so that B owes and is owed nothing.
	inSync := func(c *client.Client) bool {
		peers, err := c.Peers(context.Background())
		return err == nil && len(peers) == 1 && peers[0].InSync
	}
	poll.Until(t, "A and B in sync", time.Minute, func() bool { return inSync(ca) && inSync(cb) })
	b.stop(t)

	// One change while B is away: the one record sync --once should move.
	if _, err := ca.SetPosition(context.Background(), key, 800, 0.4, ""); err != nil {
		t.Fatal(err)
	}
	var st api.Status
	if res := a.cli(t, "status", "--json"); json.Unmarshal([]byte(res.stdout), &st) != nil || len(st.Addresses) == 0 {
		t.Fatalf("status --json on A = %q", res.stdout)
	}

	once := []string{"sync", "--once", "--data", b.data, "--name", "pocket", "--no-mdns", "--listen", "/ip4/127.0.0.1/tcp/0"}
	res = runCLI(t, nil, append(once, "--peer", st.Addresses[0], "--timeout", "30s")...)
	if res.code != 0 || !strings.Contains(res.stdout, "caught up with 1 of 1 peers") || strings.Count(res.stdout, "\n") != 1 {
		t.Fatalf("sync --once: exit %d, stdout %q, stderr %q; want one line, caught up", res.code, res.stdout, res.stderr)
	}
	t.Logf("sync --once: %s", res.stdout)
	if !strings.Contains(res.stdout, "received 1 records") {
		t.Errorf("sync --once moved more than the one change: %q", res.stdout)
	}

	// Issue 49: with no --peer and no mDNS, it dials the addresses B
	// remembers of A, as the daemon does at start.
	if _, err := ca.SetPosition(context.Background(), key, 900, 0.45, ""); err != nil {
		t.Fatal(err)
	}
	res = runCLI(t, nil, append(once, "--timeout", "30s")...)
	if res.code != 0 || !strings.Contains(res.stdout, "caught up with 1 of 1 peers") || !strings.Contains(res.stdout, "received 1 records") {
		t.Errorf("sync --once with no --peer: exit %d, stdout %q, stderr %q; want A reached from the remembered addresses", res.code, res.stdout, res.stderr)
	}
	if res := runCLI(t, nil, "sync", "--data", b.data); res.code != 2 || !strings.Contains(res.stderr, "danyue daemon") {
		t.Errorf("sync without --once: exit %d, stderr %q", res.code, res.stderr)
	}
	// Beside a running daemon, sync --once asks it: A is in sync with B
	// until B stops.
	if res := a.cli(t, "sync", "--once", "--timeout", "3s"); res.code != 1 || !strings.Contains(res.stdout, "in sync with 0 of 0 connected peers") {
		t.Errorf("sync --once beside a daemon with no peer: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	startDaemonProcAt(t, b.data, "pocket", "--peer", st.Addresses[0])
	if res := a.cli(t, "sync", "--once", "--timeout", "30s"); res.code != 0 || !strings.Contains(res.stdout, "in sync with 1 of 1 connected peers") {
		t.Errorf("sync --once beside a daemon in sync: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
}

// Issue 49: a bare number for a duration says what to write, and a
// timeout says what it cut short.
func TestSyncTimeoutTexts(t *testing.T) {
	res := runCLIWith(t, nil, "", "sync", "--once", "--timeout", "5", "--data", t.TempDir())
	if res.code != 2 || !strings.Contains(res.stderr, "write 5s") {
		t.Errorf("--timeout 5: exit %d, stderr %q, want a usage error saying write 5s", res.code, res.stderr)
	}
	err := timedOut(fmt.Errorf("set device name: %w", context.DeadlineExceeded), 300*time.Millisecond, "starting this device's daemon")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "--timeout 300ms passed while starting this device's daemon; give it more time, e.g. --timeout 30s") {
		t.Errorf("timedOut: %v", err)
	}
	if other := errors.New("disk full"); timedOut(other, time.Second, "x") != other {
		t.Error("timedOut changed an error that is no timeout")
	}
}
