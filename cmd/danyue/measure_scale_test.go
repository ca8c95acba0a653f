package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/daemon"
	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
	"github.com/danyue/danyue/internal/poll"
	"github.com/danyue/danyue/internal/procstat"
)

// TestMeasureScale measures what a library of many books costs: the
// figures of issue 14's table. Device A writes the books through the API;
// DANYUE_MEASURE_PEERS-1 more devices join and take them; then a fresh
// device joins with every one of them as a static peer, so that several
// devices offer it the same records; then A restarts. It is a measuring
// command, not a check:
//
//	DANYUE_MEASURE_SCALE=1000,10000,100000 DANYUE_MEASURE_PEERS=2 \
//	  go test -run TestMeasureScale -v -timeout 60m ./cmd/danyue/
//
// DANYUE_MEASURE_BIN runs another build of danyue (an older one, for a
// before/after comparison).
func TestMeasureScale(t *testing.T) {
	var sizes []int
	for _, f := range strings.Split(os.Getenv("DANYUE_MEASURE_SCALE"), ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			sizes = append(sizes, n)
		}
	}
	if len(sizes) == 0 {
		t.Skip("set DANYUE_MEASURE_SCALE=<books>[,<books>...] to measure a library's costs")
	}
	holders := 2
	if n, err := strconv.Atoi(os.Getenv("DANYUE_MEASURE_PEERS")); err == nil && n > 0 {
		holders = n
	}
	useMeasureBin(t)
	for _, books := range sizes {
		t.Run(fmt.Sprintf("%d books, %d holders", books, holders), func(t *testing.T) {
			measureScale(t, books, holders)
		})
	}
}

// scaleWait bounds each wait: a library of a million books may take minutes
// to move.
const scaleWait = 10 * time.Minute

func measureScale(t *testing.T, books, holders int) {
	ctx := context.Background()
	dir := t.TempDir()
	start := func(name string, extra ...string) (*daemonProc, *client.Client) {
		p := startDaemonProcAt(t, filepath.Join(dir, name), name, extra...)
		c := client.New(daemon.DefaultSocket(p.data))
		t.Cleanup(func() { c.Close() })
		return p, c
	}
	a, ca := start("a")
	began := time.Now()
	fillShelf(t, ca, books)
	report(t, a, "A: bulk API writes", time.Since(began))

	invite := a.cli(t, "invite", "--long")
	if invite.code != 0 {
		t.Fatalf("invite: exit %d, stderr %q", invite.code, invite.stderr)
	}
	code := strings.TrimSpace(invite.stdout)
	procs := []*daemonProc{a}
	clients := []*client.Client{ca}
	for i := 1; i < holders; i++ {
		p, c := start(fmt.Sprintf("h%d", i), staticPeers(t, clients...)...)
		if res := p.cli(t, "join", code); res.code != 0 {
			t.Fatalf("join: exit %d, stderr %q", res.code, res.stderr)
		}
		waitBooks(t, c, books)
		procs, clients = append(procs, p), append(clients, c)
	}
	for _, c := range clients {
		waitInSync(t, c, len(clients)-1)
	}

	j, cj := start("joiner", staticPeers(t, clients...)...)
	joining := sample(j)
	began = time.Now()
	if res := j.cli(t, "join", code); res.code != 0 {
		t.Fatalf("join: exit %d, stderr %q", res.code, res.stderr)
	}
	waitBooks(t, cj, books)
	took := time.Since(began)
	waitInSync(t, cj, holders)
	st, err := cj.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("joiner: join -> has all %d books in %v; received %d records (%.2f per book, %.0f wire bytes per book), sent %d records",
		books, took.Round(time.Millisecond), st.Traffic.RecordsReceived, float64(st.Traffic.RecordsReceived)/float64(books),
		float64(st.Traffic.BytesReceived)/float64(books), st.Traffic.RecordsSent)
	report(t, j, "joiner: after joining", took)
	t.Logf("joiner, while joining: %s", joining())

	// Without mDNS here, A finds the others as a device on a LAN would
	// after a restart on a new port: by dialling their addresses.
	others := staticPeers(t, append(clients[1:], cj)...)
	a.stop(t)
	began = time.Now()
	a = startDaemonProcAt(t, a.data, "a", others...)
	up := time.Since(began)
	waitConnected(t, ca, holders)
	connected := time.Since(began)
	waitInSync(t, ca, holders)
	t.Logf("A restarted: API up in %v, peers connected in %v", up.Round(time.Millisecond), connected.Round(time.Millisecond))
	report(t, a, "A: after a restart, in sync", connected)
}

// staticPeers returns --peer flags naming the devices behind clients.
func staticPeers(t *testing.T, clients ...*client.Client) []string {
	t.Helper()
	var flags []string
	for _, c := range clients {
		st, err := c.Status(context.Background())
		if err != nil || len(st.Addresses) == 0 {
			t.Fatalf("status of a device: %v, addresses %v", err, st.Addresses)
		}
		flags = append(flags, "--peer", st.Addresses[0])
	}
	return flags
}

// report logs a process's RSS now and its peak.
func report(t *testing.T, p *daemonProc, phase string, took time.Duration) {
	t.Helper()
	s, err := procstat.Read(p.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s (%v): RSS %.1f MB, peak %.1f MB", phase, took.Round(time.Millisecond), float64(s.RSSKB)/1024, float64(s.HWMKB)/1024)
}

func waitBooks(t *testing.T, c *client.Client, books int) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("%d books", books), scaleWait, func() bool {
		st, err := c.Status(context.Background())
		return err == nil && st.Counts.Books >= books
	})
}

func waitConnected(t *testing.T, c *client.Client, peers int) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("%d peers connected", peers), scaleWait, func() bool {
		ps, err := c.Peers(context.Background())
		return err == nil && count(ps, func(p api.Peer) bool { return p.Connected }) >= peers
	})
}

func waitInSync(t *testing.T, c *client.Client, peers int) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("in sync with %d peers", peers), scaleWait, func() bool {
		ps, err := c.Peers(context.Background())
		return err == nil && count(ps, func(p api.Peer) bool { return p.InSync }) >= peers
	})
}

func count(ps []api.Peer, ok func(api.Peer) bool) int {
	n := 0
	for _, p := range ps {
		if ok(p) {
			n++
		}
	}
	return n
}
