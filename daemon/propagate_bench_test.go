package daemon

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/danyue/danyue/daemon/client"
	"github.com/danyue/danyue/internal/poll"
)

// BenchmarkPropagate: what a user sees of a write reaching another device.
// Two paired daemons on loopback, each with a reader app on its
// /v1/events; a PUT of a position on one of them, alternately, until the
// other's app gets the book event. Each iteration is one write; p50, p99
// and max are reported as metrics (run with -benchtime=200x or more for a
// p99). The sub-benchmarks differ in the pause before each write: none, or
// a reader's page turn, after which whatever the previous write set off in
// the background has settled.
func BenchmarkPropagate(b *testing.B) {
	for _, gap := range []time.Duration{0, 50 * time.Millisecond} {
		b.Run(fmt.Sprintf("gap=%v", gap), func(b *testing.B) { benchPropagate(b, gap) })
	}
}

func benchPropagate(b *testing.B, gap time.Duration) {
	a := startDaemon(b, quietDaemon)
	d := joined(b, a)
	poll.Until(b, "connection", time.Minute, func() bool {
		return len(d.peers()) == 1 && d.peers()[0].Connected && len(a.peers()) == 1 && a.peers()[0].Connected
	})
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	ds := []*testDaemon{a, d}
	streams := make([]<-chan client.Position, len(ds))
	for i, w := range ds {
		var err error
		if streams[i], err = w.client.Positions(ctx); err != nil {
			b.Fatal(err)
		}
	}
	// Each stream is shown delivering before anything is timed.
	for i, w := range ds {
		if _, err := propagate(ctx, w, streams[1-i], fmt.Sprintf("md5:%032x", 1000+i), 1); err != nil {
			b.Fatal(err)
		}
	}
	var lat []time.Duration
	i := 0
	for b.Loop() {
		if gap > 0 {
			b.StopTimer()
			time.Sleep(gap) // a reader's page turn, not a wait for anything
			b.StartTimer()
		}
		w := i % 2
		i++
		dur, err := propagate(ctx, ds[w], streams[1-w], fmt.Sprintf("md5:%032x", 1+i%4), uint64(i+1)*10)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, dur)
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1e6 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1])/1e6, "max-ms")
}

// propagate writes char to key on w and returns the time from sending the
// write until stream, the other daemon's events, shows it.
func propagate(ctx context.Context, w *testDaemon, stream <-chan client.Position, key string, char uint64) (time.Duration, error) {
	start := time.Now()
	if _, err := w.client.SetPosition(ctx, key, int64(char), 0.5, ""); err != nil {
		return 0, err
	}
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case e := <-stream:
			if e.Key == key && e.Char == char {
				return e.At.Sub(start), nil
			}
		case <-timeout.C:
			return 0, fmt.Errorf("write of %d to %s: no event on the other daemon within 30 s", char, key)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}
