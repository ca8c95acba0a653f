//go:build linux

package main

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"time"

	"github.com/danyue/danyue/bench/mixload"
	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
	"github.com/danyue/danyue/internal/procstat"
)

// phases are every phase, in the order the command runs them.
var phases = []*phase{
	{name: "write", run: runWrite, about: func(c config) string {
		return fmt.Sprintf("bulk API writes of %d books by 16 clients, with the daemon's CPU time (utime+stime) and wakeups (context switches) a write; then the anonymous memory %v after them", c.books, c.afterWrites)
	}},
	{name: "restart", run: runRestart, about: func(c config) string {
		return fmt.Sprintf("a daemon with %d books starting: its API up, then the first page of 50; memory until 2 s after the page", c.books)
	}},
	{name: "join", run: runJoin, about: func(c config) string {
		return fmt.Sprintf("a new device joining (long invite code, both holders as static peers) until it has all %d books; memory of the joiner, and the larger of the holders'", c.books)
	}},
	{name: "list", run: runList, about: func(c config) string {
		return fmt.Sprintf("listing the whole shelf of %d books in pages of 1,000, 2 s after a start", c.books)
	}},
	{name: "apps", run: runApps, about: func(c config) string {
		return fmt.Sprintf("%d requests of 64 reader apps at once (bench/mixload's mix) on %d books", c.ops, c.books)
	}},
	{name: "settle", run: runSettle, about: func(c config) string {
		return fmt.Sprintf("two paired daemons, A and B, left alone for %v, then a burst of %d writes on A: wakeups (context switches of every thread) and CPU (utime+stime) in the %v after it, then in %v of steady idle from %v after it; memory of A over the burst and the first window",
			c.before, c.burst, c.settle, c.idleWindow, c.idleAfter)
	}},
	{name: "propagate", run: runPropagate, about: func(c config) string {
		return fmt.Sprintf("two paired daemons on loopback, %d writes alternately on each, %v apart: from sending the PUT to the book event on the other's /v1/events; memory of A", c.samples, c.gap)
	}},
	{name: "connect", run: runConnect, about: func(config) string {
		return "one of two paired daemons restarting, the other's address as its static peer: from its start to the other shown connected; memory of the restarted one"
	}},
	{name: "flood", run: runFlood, about: func(c config) string {
		return fmt.Sprintf("a member offering %d records at once to a daemon, which meanwhile answers a single-book GET every 10 ms", c.flood)
	}},
}

var nan = math.NaN()

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// settleAfterStart is how long a phase that measures a started daemon
// waits before its window, so that the window holds its own work and not
// the start's (restart measures the start itself, through this long).
const settleAfterStart = 2 * time.Second

// pause waits d unless ctx ends first.
func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func runWrite(ctx context.Context, r *runner, b build, dir string) (*outcome, error) {
	p, err := r.fresh(ctx, b, dir, "shelf")
	if err != nil {
		return nil, err
	}
	pid := p.cmd.Process.Pid
	before, err := procstat.ReadUsage(pid)
	if err != nil {
		return nil, err
	}
	p.mem.begin()
	start := time.Now()
	if err := mixload.Fill(ctx, p.c, r.cfg.books); err != nil {
		return nil, fmt.Errorf("write %d books: %w", r.cfg.books, err)
	}
	took := time.Since(start)
	m := p.mem.end()
	after, err := procstat.ReadUsage(pid)
	if err != nil {
		return nil, err
	}
	o := &outcome{}
	n := float64(r.cfg.books)
	o.add("writes", "/s", n/took.Seconds())
	// What each write costs the daemon, whatever the clients beside it
	// left it of the machine: on a busy one the writes a second follow it.
	o.add("CPU", "us/write", float64((after.CPU-before.CPU).Microseconds())/n)
	o.add("wakeups", "/write", float64(after.Wakeups-before.Wakeups)/n)
	o.memory("", m)
	// What a phone keeps paying for once the burst is over: the anonymous
	// memory the daemon still holds after it, left alone.
	if err := pause(ctx, r.cfg.afterWrites); err != nil {
		return nil, err
	}
	o.add("anon after", "MB", float64(p.mem.end().AnonEnd)/1024)
	if err := r.probePages(ctx, b, p); err != nil {
		return nil, err
	}
	if err := p.stop(); err != nil {
		return nil, err
	}
	return o, r.adoptShelf(b, p.data)
}

// probePages finds out whether build b lists the shelf a page at a time,
// from p, one of its daemons with a full shelf, once.
func (r *runner) probePages(ctx context.Context, b build, p *proc) error {
	f := r.fixture(b)
	if f.probed {
		return nil
	}
	page, err := p.c.BooksPage(ctx, client.BooksQuery{Limit: 1, Sort: "key"})
	if err != nil {
		return fmt.Errorf("ask for a page of 1 book: %w", err)
	}
	// A build without pages ignores limit and answers the whole shelf.
	f.probed, f.paged = true, len(page.Books.Books) == 1
	return nil
}

// paged returns an error saying b has no pages of the shelf, if so.
func (r *runner) paged(ctx context.Context, b build) (string, error) {
	shelf, err := r.shelf(ctx, b)
	if err != nil {
		return "", err
	}
	if !r.fixture(b).paged {
		return "", unsupportedError{"the shelf has no pages (GET /v1/books ignores limit and answers every book)"}
	}
	return shelf, nil
}

func runRestart(ctx context.Context, r *runner, b build, dir string) (*outcome, error) {
	shelf, err := r.shelf(ctx, b)
	if err != nil {
		return nil, err
	}
	p, err := r.copyOf(b, shelf, dir, "shelf")
	if err != nil {
		return nil, err
	}
	up, err := p.waitAPI(ctx, time.Minute)
	if err != nil {
		return nil, err
	}
	o := &outcome{}
	o.add("API up", "ms", ms(up))
	if r.fixture(b).paged {
		start := time.Now()
		page, err := p.c.BooksPage(ctx, client.BooksQuery{Limit: 50})
		took := time.Since(start)
		if err != nil || len(page.Books.Books) != 50 {
			return nil, fmt.Errorf("first page of 50: %d books, %v", len(page.Books.Books), err)
		}
		o.add("first page", "ms", ms(took))
	} else {
		o.add("first page", "ms", nan)
		o.note("the shelf has no pages in this build: the first page is not measured")
	}
	if err := pause(ctx, settleAfterStart); err != nil {
		return nil, err
	}
	o.memory("", p.mem.end())
	return o, nil
}

// startShelf starts a copy of b's shelf and waits until its start is over.
func (r *runner) startShelf(ctx context.Context, b build, shelf, dir string) (*proc, error) {
	p, err := r.copyOf(b, shelf, dir, "shelf")
	if err != nil {
		return nil, err
	}
	if _, err := p.waitAPI(ctx, time.Minute); err != nil {
		return nil, err
	}
	return p, pause(ctx, settleAfterStart)
}

func runList(ctx context.Context, r *runner, b build, dir string) (*outcome, error) {
	shelf, err := r.paged(ctx, b)
	if err != nil {
		return nil, err
	}
	p, err := r.startShelf(ctx, b, shelf, dir)
	if err != nil {
		return nil, err
	}
	p.mem.begin()
	start := time.Now()
	n := 0
	err = p.c.EachBook(ctx, client.BooksQuery{Limit: 1000}, func(api.Book) error { n++; return nil })
	took := time.Since(start)
	if err != nil || n != r.cfg.books {
		return nil, fmt.Errorf("listed %d of %d books: %v", n, r.cfg.books, err)
	}
	o := &outcome{}
	o.add("listing", "ms", ms(took))
	o.add("books", "/s", float64(n)/took.Seconds())
	o.memory("", p.mem.end())
	return o, nil
}

// appClients is how many reader apps the apps phase runs, each on its own
// connection.
const appClients = 64

func runApps(ctx context.Context, r *runner, b build, dir string) (*outcome, error) {
	shelf, err := r.paged(ctx, b)
	if err != nil {
		return nil, err
	}
	p, err := r.startShelf(ctx, b, shelf, dir)
	if err != nil {
		return nil, err
	}
	cursors, err := mixload.Cursors(ctx, p.c, client.BooksQuery{Limit: 1000, Sort: "key"})
	if err != nil {
		return nil, fmt.Errorf("list the page cursors: %w", err)
	}
	clients := make([]*client.Client, appClients)
	for i := range clients {
		clients[i] = client.New(filepath.Join(p.data, "api.sock"))
		defer clients[i].Close()
	}
	p.mem.begin()
	res, err := mixload.Run(ctx, clients, r.cfg.books, r.cfg.ops, cursors)
	if err != nil {
		return nil, err
	}
	o := &outcome{}
	o.add("requests", "/s", res.PerSecond())
	o.add("p50", "ms", ms(mixload.Percentile(res.All, 0.5)))
	o.add("p99", "ms", ms(mixload.Percentile(res.All, 0.99)))
	o.add("writes p99", "ms", ms(mixload.Percentile(res.Writes, 0.99)))
	o.memory("", p.mem.end())
	return o, nil
}
