//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/danyue/danyue/bench/internal/flood"
	"github.com/danyue/danyue/bench/mixload"
)

// meterEvery is how often the flood's meter asks the daemon for a book.
const meterEvery = 10 * time.Millisecond

func runFlood(ctx context.Context, r *runner, b build, dir string) (*outcome, error) {
	p, err := r.fresh(ctx, b, dir, "target")
	if err != nil {
		return nil, err
	}
	code, err := p.c.Invite(ctx)
	if err != nil {
		return nil, fmt.Errorf("invite: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	socket := filepath.Join(p.data, "api.sock")
	cfg := flood.Config{
		Invite:  code,
		Records: uint64(r.cfg.flood),
		Socket:  socket,
		Meter: &flood.MeterConfig{
			Command: []string{self},
			Env:     []string{fmt.Sprintf("%s=%s,%v", meterEnv, socket, meterEvery)},
		},
	}
	if r.cfg.verbose {
		cfg.Tick = func(pr flood.Progress) {
			fmt.Fprintf(r.log, "measure: flood %4.0fs: sent %d, stored %d\n", pr.Elapsed.Seconds(), pr.Sent, pr.Stored)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.timeout)
	defer cancel()
	p.mem.begin()
	res, err := flood.Run(ctx, cfg)
	switch {
	case errors.Is(err, flood.ErrNoSync):
		return nil, unsupportedError{"it takes no record from this checkout's flooding member (another sync protocol)"}
	case err != nil:
		return nil, err
	}
	if res.Bounded {
		// The records per second are those of what it stored.
		fmt.Fprintf(r.log, "measure: flood: the target stored %d of %d records and refused the rest, the member being over the bounds of one device\n", res.Stored, r.cfg.flood)
	}
	o := &outcome{}
	o.add("stored", "records/s", float64(res.Stored)/res.Elapsed.Seconds())
	lat := slices.Clone(res.GETs)
	slices.Sort(lat)
	o.add("GET p50", "ms", ms(mixload.Percentile(lat, 0.5)))
	o.add("GET p99", "ms", ms(mixload.Percentile(lat, 0.99)))
	o.add("GET errors", "", float64(res.GETErrors))
	o.memory("", p.mem.end())
	return o, nil
}
