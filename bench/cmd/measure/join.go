//go:build linux

package main

import (
	"context"
	"fmt"
	"time"
)

// bookPoll is how often a wait for books asks a daemon for its count: a
// join takes seconds, and each status request is work for the joiner.
const bookPoll = 50 * time.Millisecond

// holders returns the data dirs of two stopped daemons of build b, devices
// of one library, each with cfg.books books: the shelf and a device that
// joined it. They are made the first time.
func (r *runner) holders(ctx context.Context, b build) ([2]string, error) {
	f := r.fixture(b)
	if f.holders[0] != "" {
		return f.holders, nil
	}
	shelf, err := r.shelf(ctx, b)
	if err != nil {
		return f.holders, err
	}
	fmt.Fprintf(r.log, "measure: making two holders of %d books with %s\n", r.cfg.books, b.Name)
	dir := r.fixtureDir(b, "holders")
	h1, err := r.copyOf(b, shelf, dir, "shelf")
	if err != nil {
		return f.holders, err
	}
	if _, err := h1.waitAPI(ctx, time.Minute); err != nil {
		return f.holders, err
	}
	h2, err := r.fresh(ctx, b, dir, "holder")
	if err != nil {
		return f.holders, err
	}
	code, err := h1.c.Invite(ctx)
	if err != nil {
		return f.holders, fmt.Errorf("invite: %w", err)
	}
	if _, err := h2.c.Join(ctx, code); err != nil {
		return f.holders, fmt.Errorf("join: %w", err)
	}
	if err := h2.waitBooks(ctx, r.cfg.books, r.cfg.timeout, bookPoll); err != nil {
		return f.holders, err
	}
	for _, h := range []*proc{h1, h2} {
		if err := h.stop(); err != nil {
			return f.holders, err
		}
	}
	f.holders = [2]string{h1.data, h2.data}
	return f.holders, nil
}

func runJoin(ctx context.Context, r *runner, b build, dir string) (*outcome, error) {
	src, err := r.holders(ctx, b)
	if err != nil {
		return nil, err
	}
	var hs [2]*proc
	var peers []string
	for i, name := range []string{"shelf", "holder"} {
		if hs[i], err = r.copyOf(b, src[i], dir, name); err != nil {
			return nil, err
		}
		if _, err := hs[i].waitAPI(ctx, time.Minute); err != nil {
			return nil, err
		}
		addr, err := hs[i].address(ctx)
		if err != nil {
			return nil, err
		}
		peers = append(peers, "--peer", addr)
	}
	j, err := r.fresh(ctx, b, dir, "joiner", peers...)
	if err != nil {
		return nil, err
	}
	code, err := hs[0].c.Invite(ctx)
	if err != nil {
		return nil, fmt.Errorf("invite: %w", err)
	}
	for _, p := range append(hs[:], j) {
		p.mem.begin()
	}
	start := time.Now()
	if _, err := j.c.Join(ctx, code); err != nil {
		return nil, fmt.Errorf("join: %w", err)
	}
	if err := j.waitBooks(ctx, r.cfg.books, r.cfg.timeout, bookPoll); err != nil {
		return nil, err
	}
	took := time.Since(start)
	o := &outcome{}
	o.add("join", "s", took.Seconds())
	o.memory("", j.mem.end())
	m0, m1 := hs[0].mem.end(), hs[1].mem.end()
	o.add("holders anon peak", "MB", float64(max(m0.AnonPeak, m1.AnonPeak))/1024)
	return o, nil
}
