// Command mixed runs the load of many reader apps (package mixload: reads,
// position writes, read time, deletes and pages) against a running daemon
// through its API socket, from this process, and reports the throughput,
// the latencies the apps saw and, given the daemon's pid, its peak RSS while
// the shelf was written and while the apps ran, apart.
// Unlike BenchmarkMixedLoad, whose clients share the daemon's process,
// the daemon runs here as it is installed, under its command's settings
// (its memory limit above all). It asserts nothing.
//
//	danyue daemon --data /tmp/m --no-mdns &
//	go run ./testnet/cmd/mixed -socket /tmp/m/api.sock -pid $! -books 100000
//
// It first writes the books the shelf is short of (books 1 to -books, as
// mixload.Fill names them), then lists the page cursors, then runs -ops
// requests from -clients connections at once.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/danyue/danyue/daemon/client"
	"github.com/danyue/danyue/internal/mixload"
	"github.com/danyue/danyue/internal/procstat"
)

func main() {
	socket := flag.String("socket", "", "the daemon's API socket")
	pid := flag.Int("pid", 0, "the daemon's pid, to read its peak RSS (optional, Linux)")
	books := flag.Int("books", 100_000, "books on the shelf")
	ops := flag.Int("ops", 40_000, "requests to send")
	clients := flag.Int("clients", 64, "reader apps, each its own connection, sending at once")
	flag.Parse()
	if *socket == "" || *books <= 0 || *ops <= 0 || *clients <= 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(context.Background(), *socket, *pid, *books, *ops, *clients); err != nil {
		fmt.Fprintln(os.Stderr, "mixed:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, socket string, pid, books, ops, clients int) error {
	c := client.New(socket)
	defer c.Close()
	st, err := c.Status(ctx)
	if err != nil {
		return err
	}
	if st.Counts.Books < books {
		start := time.Now()
		if err := mixload.Fill(ctx, c, books); err != nil {
			return fmt.Errorf("fill the shelf: %w", err)
		}
		fmt.Printf("wrote %d books in %v\n", books, time.Since(start).Round(time.Millisecond))
	}
	if pid > 0 {
		if err := printRSS(pid, "before the apps"); err != nil {
			return err
		}
		if err := procstat.ResetPeak(pid); err != nil {
			return fmt.Errorf("reset the daemon's peak RSS: %w", err)
		}
	}
	cursors, err := mixload.Cursors(ctx, c, client.BooksQuery{Limit: 1000, Sort: "key"})
	if err != nil {
		return fmt.Errorf("list the page cursors: %w", err)
	}
	cs := make([]*client.Client, clients)
	for i := range cs {
		cs[i] = client.New(socket)
		defer cs[i].Close()
	}
	r, err := mixload.Run(ctx, cs, books, ops, cursors)
	if err != nil {
		return err
	}
	ms := func(p float64) time.Duration { return mixload.Percentile(r.All, p).Round(10 * time.Microsecond) }
	fmt.Printf("%d requests from %d clients in %v: %.0f a second; latency p50 %v p99 %v max %v; writes p99 %v\n",
		len(r.All), clients, r.Elapsed.Round(time.Millisecond), r.PerSecond(), ms(0.5), ms(0.99), ms(1),
		mixload.Percentile(r.Writes, 0.99).Round(10*time.Microsecond))
	if pid > 0 {
		return printRSS(pid, "while the apps ran")
	}
	return nil
}

// printRSS prints the RSS of the daemon pid and its peak.
func printRSS(pid int, when string) error {
	s, err := procstat.Read(pid)
	if err != nil {
		return err
	}
	fmt.Printf("daemon %s: RSS %.1f MB, peak %.1f MB\n", when, float64(s.RSSKB)/1024, float64(s.HWMKB)/1024)
	return nil
}
