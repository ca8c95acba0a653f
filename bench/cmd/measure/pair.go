//go:build linux

package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/danyue/danyue/bench/mixload"
	"github.com/danyue/danyue/daemon/client"
	"github.com/danyue/danyue/internal/procstat"
)

// pair starts two fresh daemons of build b, "a" and "b", makes b join a's
// library, and waits until each shows the other connected.
func (r *runner) pair(ctx context.Context, b build, dir string) (*proc, *proc, error) {
	pa, err := r.fresh(ctx, b, dir, "a")
	if err != nil {
		return nil, nil, err
	}
	pb, err := r.fresh(ctx, b, dir, "b")
	if err != nil {
		return nil, nil, err
	}
	code, err := pa.c.Invite(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("invite: %w", err)
	}
	if _, err := pb.c.Join(ctx, code); err != nil {
		return nil, nil, fmt.Errorf("join: %w", err)
	}
	for _, w := range []struct {
		p    *proc
		peer string
	}{{pa, "b"}, {pb, "a"}} {
		if err := w.p.waitConnected(ctx, w.peer, time.Minute, 10*time.Millisecond); err != nil {
			return nil, nil, err
		}
	}
	return pa, pb, nil
}

func runSettle(ctx context.Context, r *runner, b build, dir string) (*outcome, error) {
	pa, pb, err := r.pair(ctx, b, dir)
	if err != nil {
		return nil, err
	}
	if err := pause(ctx, r.cfg.before); err != nil {
		return nil, err
	}
	pa.mem.begin()
	for i := 1; i <= r.cfg.burst; i++ {
		if _, err := pa.c.SetPosition(ctx, mixload.Key(i), int64(i), 0.5, fmt.Sprintf("Book %d", i)); err != nil {
			return nil, fmt.Errorf("burst: %w", err)
		}
	}
	burst := time.Now()
	// Nothing asks the daemons anything until the windows are over: a
	// request is a wakeup too.
	settled, err := usageOver(ctx, burst, r.cfg.settle, pa, pb)
	if err != nil {
		return nil, err
	}
	ma, mb := pa.mem.end(), pb.mem.end()
	idle, err := usageOver(ctx, burst.Add(r.cfg.idleAfter), r.cfg.idleWindow, pa, pb)
	if err != nil {
		return nil, err
	}
	if err := pb.waitBooks(ctx, r.cfg.burst, time.Minute, bookPoll); err != nil {
		return nil, fmt.Errorf("after the windows: %w", err)
	}
	o := &outcome{}
	for i, who := range []string{"A ", "B "} {
		o.add(who+"wakeups", "/s", settled[i].wakeups)
		o.add(who+"CPU", "ms/min", settled[i].cpu)
	}
	o.add("A anon end", "MB", float64(ma.AnonEnd)/1024)
	o.add("B anon end", "MB", float64(mb.AnonEnd)/1024)
	for i, who := range []string{"A ", "B "} {
		o.add(who+"idle wakeups", "/s", idle[i].wakeups)
		o.add(who+"idle CPU", "ms/min", idle[i].cpu)
	}
	o.memory("A ", ma)
	return o, nil
}

// usage is what a daemon spent over a window.
type usage struct {
	wakeups float64 // a second
	cpu     float64 // ms a minute
}

// usageOver waits until from, then returns what each daemon spent over
// the window that follows.
func usageOver(ctx context.Context, from time.Time, window time.Duration, ps ...*proc) ([]usage, error) {
	if err := pause(ctx, time.Until(from)); err != nil {
		return nil, err
	}
	read := func() ([]procstat.Usage, error) {
		var us []procstat.Usage
		for _, p := range ps {
			u, err := procstat.ReadUsage(p.cmd.Process.Pid)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.name, err)
			}
			us = append(us, u)
		}
		return us, nil
	}
	before, err := read()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := pause(ctx, window); err != nil {
		return nil, err
	}
	after, err := read()
	if err != nil {
		return nil, err
	}
	el := time.Since(start)
	out := make([]usage, len(ps))
	for i := range ps {
		out[i] = usage{
			wakeups: float64(after[i].Wakeups-before[i].Wakeups) / el.Seconds(),
			cpu:     ms(after[i].CPU-before[i].CPU) * float64(time.Minute) / float64(el),
		}
	}
	return out, nil
}

// propagateTimeout bounds the wait for one write's event: far above any
// propagation, short enough that a lost event fails the run soon.
const propagateTimeout = 30 * time.Second

func runPropagate(ctx context.Context, r *runner, b build, dir string) (*outcome, error) {
	pa, pb, err := r.pair(ctx, b, dir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ps := []*proc{pa, pb}
	streams := make([]<-chan client.Position, len(ps))
	for i, p := range ps {
		if streams[i], err = p.c.Positions(ctx); err != nil {
			return nil, fmt.Errorf("the event stream of %s: %w", p.name, err)
		}
	}
	// Each stream is shown delivering by a write on the other daemon
	// before anything is timed.
	for i := range ps {
		if _, err := propagateOnce(ctx, ps[1-i], streams[i], mixload.Key(1_000_000+i), 1); err != nil {
			return nil, fmt.Errorf("the first event on %s: %w", ps[i].name, err)
		}
	}
	pa.mem.begin()
	var lat []time.Duration
	for i := range r.cfg.samples {
		if err := pause(ctx, r.cfg.gap); err != nil {
			return nil, err
		}
		w := i % 2
		d, err := propagateOnce(ctx, ps[w], streams[1-w], mixload.Key(1+i%4), int64(i+1)*10)
		if err != nil {
			return nil, fmt.Errorf("write %d on %s: %w", i, ps[w].name, err)
		}
		lat = append(lat, d)
	}
	slices.Sort(lat)
	o := &outcome{}
	o.add("p50", "ms", ms(mixload.Percentile(lat, 0.5)))
	o.add("p99", "ms", ms(mixload.Percentile(lat, 0.99)))
	o.add("max", "ms", ms(lat[len(lat)-1]))
	o.memory("A ", pa.mem.end())
	return o, nil
}

// propagateOnce writes char to key on w and returns the time from sending
// the write until stream shows it.
func propagateOnce(ctx context.Context, w *proc, stream <-chan client.Position, key string, char int64) (time.Duration, error) {
	start := time.Now()
	if _, err := w.c.SetPosition(ctx, key, char, 0.5, ""); err != nil {
		return 0, err
	}
	timeout := time.After(propagateTimeout)
	for {
		select {
		case e := <-stream:
			if e.Key == key && e.Char == uint64(char) {
				return e.At.Sub(start), nil
			}
		case <-timeout:
			return 0, fmt.Errorf("no event within %v", propagateTimeout)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

func runConnect(ctx context.Context, r *runner, b build, dir string) (*outcome, error) {
	pa, pb, err := r.pair(ctx, b, dir)
	if err != nil {
		return nil, err
	}
	addr, err := pa.address(ctx)
	if err != nil {
		return nil, err
	}
	if err := pb.stop(); err != nil {
		return nil, err
	}
	pb, err = r.start(b, pb.data, "b", "--peer", addr)
	if err != nil {
		return nil, err
	}
	up, err := pb.waitAPI(ctx, time.Minute)
	if err != nil {
		return nil, err
	}
	if err := pb.waitConnected(ctx, "a", time.Minute, 5*time.Millisecond); err != nil {
		return nil, err
	}
	connected := time.Since(pb.started)
	o := &outcome{}
	o.add("API up", "ms", ms(up))
	o.add("connected", "ms", ms(connected))
	o.memory("", pb.mem.end())
	return o, nil
}
