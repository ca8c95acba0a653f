//go:build linux

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/danyue/danyue/bench/internal/flood"
)

// meterEnv makes this program the flood phase's GET meter (flood.Meter):
// its value is the target's socket and the interval, "SOCKET,INTERVAL".
const meterEnv = "DANYUE_MEASURE_METER"

func main() {
	if v := os.Getenv(meterEnv); v != "" {
		os.Exit(runMeter(v))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "measure:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// runMeter is the flood meter's child process.
func runMeter(v string) int {
	socket, every, ok := strings.Cut(v, ",")
	d, err := time.ParseDuration(every)
	if !ok || err != nil {
		fmt.Fprintf(os.Stderr, "measure: %s=%q is not SOCKET,INTERVAL\n", meterEnv, v)
		return 2
	}
	if err := flood.Meter(socket, d, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "measure: flood meter:", err)
		return 1
	}
	return 0
}

var errUsage = errors.New("usage")

// config is what a measuring session does.
type config struct {
	bins        []string // -bin values: PATH or NAME=PATH
	runs        int
	phases      []*phase
	books       int
	ops         int
	samples     int
	gap         time.Duration
	burst       int
	before      time.Duration
	settle      time.Duration
	idleAfter   time.Duration
	idleWindow  time.Duration
	afterWrites time.Duration
	flood       int
	timeout     time.Duration
	work        string
	keep        bool
	jsonPath    string
	env         []string // -env: KEY=VALUE for the daemons
	verbose     bool
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	var bins, env multiFlag
	fs := flag.NewFlagSet("measure", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Var(&bins, "bin", "a danyue build to measure, `[NAME=]PATH`, repeatable (default: ./cmd/danyue of this checkout, built now)")
	fs.IntVar(&c.runs, "runs", 3, "runs of each phase on each build, taking turns")
	phaseList := fs.String("phase", "all", "the phases to run, comma-separated: "+strings.Join(phaseNames(), ", ")+", or all")
	fs.IntVar(&c.books, "books", 100_000, "books on the shelf (write, restart, join, list, apps)")
	fs.IntVar(&c.ops, "ops", 40_000, "requests the reader apps send (apps)")
	fs.IntVar(&c.samples, "samples", 200, "writes timed (propagate)")
	fs.DurationVar(&c.gap, "gap", 100*time.Millisecond, "pause between two timed writes, as between a reader's page turns (propagate)")
	fs.IntVar(&c.burst, "burst", 100, "writes in the burst (settle)")
	fs.DurationVar(&c.before, "settle-before", 10*time.Second, "quiet time between pairing and the burst, so that what pairing set off is not counted (settle)")
	fs.DurationVar(&c.settle, "settle", 30*time.Second, "window after the burst (settle)")
	fs.DurationVar(&c.idleAfter, "idle-after", 90*time.Second, "time from the burst to the steady idle window (settle)")
	fs.DurationVar(&c.idleWindow, "idle-window", 30*time.Second, "steady idle window (settle)")
	fs.DurationVar(&c.afterWrites, "after-writes", 30*time.Second, "time from the end of the bulk writes to the reading of the memory the daemon still holds (write)")
	fs.IntVar(&c.flood, "flood-records", 1_000_000, "records the member offers (flood)")
	fs.DurationVar(&c.timeout, "timeout", 20*time.Minute, "bound on each wait (a join, a flood)")
	fs.StringVar(&c.work, "work", "", "directory for the data dirs (default: a new temporary directory)")
	fs.BoolVar(&c.keep, "keep", false, "keep the data dirs")
	fs.StringVar(&c.jsonPath, "json", "", "also write the results as JSON to `FILE`")
	fs.Var(&env, "env", "`KEY=VALUE` in the daemons' environment, repeatable (GOGC, GOMEMLIMIT, GOMAXPROCS and GODEBUG are otherwise not passed on)")
	fs.BoolVar(&c.verbose, "v", false, "print the daemons' logs and each phase's progress")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: go run ./bench/cmd/measure [-bin [NAME=]PATH]... [-runs N] [-phase P,...] [-books N] [-json FILE]")
		fmt.Fprintln(stderr, "\nMeasures danyue daemon processes phase by phase (see the package doc).\n\nOptions:")
		fs.PrintDefaults()
		fmt.Fprintln(stderr, "\nExample:\n  go run ./bench/cmd/measure -bin /work/ref/bin/danyue-b309e63 -bin today=./danyue -phase propagate,settle")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, err
		}
		return c, fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return c, usageError("measure takes no arguments, only options (%q)", fs.Args())
	}
	c.bins, c.env = bins, env
	var err error
	if c.phases, err = selectPhases(*phaseList); err != nil {
		return c, err
	}
	for _, kv := range c.env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return c, usageError("-env %q is not KEY=VALUE", kv)
		}
	}
	if c.runs < 1 || c.books < 2 || c.ops < 1 || c.samples < 1 || c.burst < 1 || c.flood < 1 {
		return c, usageError("-runs, -ops, -samples, -burst and -flood-records must be positive and -books at least 2")
	}
	return c, nil
}

func usageError(format string, args ...any) error {
	return fmt.Errorf("%w: %s (Try: go run ./bench/cmd/measure -h)", errUsage, fmt.Sprintf(format, args...))
}

func selectPhases(list string) ([]*phase, error) {
	if list == "all" {
		return phases, nil
	}
	var out []*phase
	for name := range strings.SplitSeq(list, ",") {
		i := slices.IndexFunc(phases, func(p *phase) bool { return p.name == strings.TrimSpace(name) })
		if i < 0 {
			return nil, usageError("no phase %q; the phases are %s", name, strings.Join(phaseNames(), ", "))
		}
		out = append(out, phases[i])
	}
	return out, nil
}

func phaseNames() []string {
	var names []string
	for _, p := range phases {
		names = append(names, p.name)
	}
	return names
}

// Run is the command: it measures what args say, prints a table per phase
// on stdout, and its progress on stderr.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	_, err = measure(ctx, cfg, stdout, stderr)
	return err
}

// measure runs the session and returns its report.
func measure(ctx context.Context, cfg config, stdout, stderr io.Writer) (*report, error) {
	work := cfg.work
	if work == "" {
		dir, err := os.MkdirTemp("", "danyue-measure")
		if err != nil {
			return nil, err
		}
		work = dir
	}
	if !cfg.keep {
		defer os.RemoveAll(work)
	}
	builds, err := resolveBuilds(ctx, cfg.bins, work, stderr)
	if err != nil {
		return nil, err
	}
	rep := newReport(cfg, builds)
	fmt.Fprintln(stdout, rep.header())
	r := &runner{cfg: cfg, work: work, log: stderr, fixtures: map[string]*fixture{}}
	for _, p := range cfg.phases {
		pr := r.phase(ctx, p, builds)
		rep.Phases = append(rep.Phases, pr)
		fmt.Fprintln(stdout, pr.table())
		if err := ctx.Err(); err != nil {
			return rep, err
		}
	}
	rep.finish()
	if cfg.jsonPath != "" {
		if err := rep.writeJSON(cfg.jsonPath); err != nil {
			return rep, err
		}
	}
	return rep, nil
}
