package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
	"github.com/danyue/danyue/store"
)

// offlinePeer is a daemon of a's library on its own data dir that can be
// stopped and started again, with a as its static peer or alone.
type offlinePeer struct {
	cfg Config
	d   *Daemon
}

func newOfflinePeer(tb testing.TB, a *testDaemon, books int) *offlinePeer {
	tb.Helper()
	ctx := context.Background()
	var aAddrs []string
	for _, m := range a.lib.Addrs() {
		aAddrs = append(aAddrs, m.String())
	}
	p := &offlinePeer{cfg: Config{
		DataDir: filepath.Join(tempDir(tb), "data"), Name: "B", NoMDNS: true, Logger: discardLogger(),
		Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Peers: aAddrs,
	}}
	p.start(tb, true)
	code, err := a.client.Invite(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	if err := joinCode(ctx, p.d, code); err != nil {
		tb.Fatal(err)
	}
	poll.Until(tb, "initial sync", 5*time.Minute, func() bool { return shelfCount(p.d) == books })
	// Quiet before stopping: what A merged from B (its device record) has
	// gone back, skipped as an echo, so the next start owes nothing.
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if r, err := p.d.SyncOnce(ctx); err != nil || !r.CaughtUp {
		tb.Fatalf("settle after the initial sync: %s (%v)", r.Summary(), err)
	}
	// Caught up is each pull reaching the other's end; what A merges from
	// B at that moment (its member records) moves A's end once more, and
	// must come back before B stops.
	poll.Until(tb, "each side to hold the other's every change", time.Minute, func() bool {
		return holdsAll(tb, p.d, a.Daemon) && holdsAll(tb, a.Daemon, p.d)
	})
	p.stop(tb)
	return p
}

// holdsAll reports whether d's cursor into other's store is at its end.
func holdsAll(tb testing.TB, d, other *Daemon) bool {
	c, ok, err := d.store.Cursor(context.Background(), other.Device())
	if err != nil {
		tb.Fatal(err)
	}
	return ok && c.Epoch == other.store.Epoch() && c.Seq == other.store.LastSeq()
}

func (p *offlinePeer) start(tb testing.TB, online bool) {
	tb.Helper()
	cfg := p.cfg
	if !online {
		// Alone means no static peer and no address book either: a device
		// dials the members it has met at its start.
		cfg.Peers = nil
		forgetAddresses(tb, cfg.DataDir)
	}
	d, err := Start(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	p.d = d
}

// forgetAddresses empties the address book saved in the store of the
// stopped daemon of dataDir.
func forgetAddresses(tb testing.TB, dataDir string) {
	tb.Helper()
	st, err := store.Open(context.Background(), storeDir(dataDir), store.Options{Logger: discardLogger()})
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	if err := st.SaveKnown(context.Background(), nil); err != nil {
		tb.Fatal(err)
	}
}

func (p *offlinePeer) stop(tb testing.TB) {
	tb.Helper()
	if err := p.d.Close(); err != nil {
		tb.Fatal(err)
	}
}

// oneChangeEachSide writes a position on a while p is stopped and one on p
// while it runs alone, then stops p.
func oneChangeEachSide(tb testing.TB, a *testDaemon, p *offlinePeer, i int) (onA, onB crdt.BookKey) {
	tb.Helper()
	ctx := context.Background()
	onA = crdt.MustParseBookKey(fmt.Sprintf("md5:%032x", 1))
	onB = crdt.MustParseBookKey(fmt.Sprintf("md5:%032x", 2))
	if _, err := a.lib.SetPosition(ctx, onA, uint64(1_000_000+i), 0.9, ""); err != nil {
		tb.Fatal(err)
	}
	p.start(tb, false)
	if _, err := p.d.lib.SetPosition(ctx, onB, uint64(2_000_000+i), 0.8, ""); err != nil {
		tb.Fatal(err)
	}
	p.stop(tb)
	return onA, onB
}

// A device that starts, syncs once and stops gets what it missed and leaves
// what it wrote, exactly once each way.
func TestSyncOnce(t *testing.T) {
	ctx := ctxT(t)
	a := startDaemon(t, nil)
	fillBooks(t, a, 50)
	p := newOfflinePeer(t, a, 50)
	onA, onB := oneChangeEachSide(t, a, p, 0)

	p.start(t, true)
	defer p.stop(t)
	report, err := p.d.SyncOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", report.Summary())
	if !report.CaughtUp || report.Reached() != 1 {
		t.Fatalf("report %+v, want caught up with the one peer", report)
	}
	if report.Received != 1 || report.Sent != 1 {
		t.Errorf("received %d and sent %d records, want 1 and 1: nothing the other side has", report.Received, report.Sent)
	}
	// Caught up means done: both changes are on both sides at once.
	if b, err := p.d.lib.Book(ctx, onA); err != nil || b.Position.Char != 1_000_000 {
		t.Errorf("B's copy of A's change: %+v, %v", b.Position, err)
	}
	if b, err := a.lib.Book(ctx, onB); err != nil || b.Position.Char != 2_000_000 {
		t.Errorf("A's copy of B's change: %+v, %v", b.Position, err)
	}
}

// With no peer reachable, SyncOnce reports that when its context ends.
func TestSyncOnceAlone(t *testing.T) {
	d := startDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	report, err := d.SyncOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if report.CaughtUp || report.Reached() != 0 {
		t.Fatalf("report %+v, want not caught up, nobody reached", report)
	}
	if got := report.Summary(); got[:len("no peer reachable")] != "no peer reachable" {
		t.Errorf("summary %q", got)
	}
}

// BenchmarkSyncOnce10k: a device of a 10,000-book library starts cold,
// syncs with its one reachable peer after one change on each side, and
// stops: the time from Start to caught up, and the records moved each way.
func BenchmarkSyncOnce10k(b *testing.B) {
	const books = 10_000
	a := startDaemon(b, quietDaemon)
	fillBooks(b, a, books)
	p := newOfflinePeer(b, a, books)
	var received, sent uint64
	var elapsed time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		oneChangeEachSide(b, a, p, i+1)
		b.StartTimer()
		start := time.Now()
		p.start(b, true)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		report, err := p.d.SyncOnce(ctx)
		cancel()
		if err != nil || !report.CaughtUp {
			b.Fatalf("%s (%v)", report.Summary(), err)
		}
		elapsed += time.Since(start)
		b.StopTimer()
		p.stop(b)
		b.StartTimer()
		received += report.Received
		sent += report.Sent
	}
	b.ReportMetric(elapsed.Seconds()/float64(b.N), "s-to-caught-up")
	b.ReportMetric(float64(received)/float64(b.N), "records-in/op")
	b.ReportMetric(float64(sent)/float64(b.N), "records-out/op")
}
