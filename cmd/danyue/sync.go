package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/danyue/danyue/daemon"
)

func syncCommand() command {
	return command{
		name:    "sync",
		usage:   "--once [--timeout 30s] [--name NAME] [--peer MULTIADDR]... [--no-mdns]",
		summary: "Sync this device with the peers it can reach, then exit (for cron, Termux and laptops that sleep).",
		run:     runSync,
	}
}

// runSync starts the daemon of the data dir, waits until it has caught up
// both ways with every peer it could reach, prints one line and stops. The
// exit status is 0 when caught up with every reachable peer, 1 otherwise
// (no peer reachable, or the timeout passed first). If a daemon already runs
// on the data dir, it asks that one instead.
func runSync(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, syncCommand(), "danyue sync --once --timeout 1m")
	// sync runs this device's daemon, or asks the one running.
	cf := clientFlags{data: daemonDataDirFlag(fs, e), socket: fs.String("socket", "", socketHelp)}
	once := fs.Bool("once", false, "sync until caught up, then exit (required: danyue daemon syncs continuously)")
	timeout := durationFlag(fs, "timeout", 30*time.Second, "give up after this `DURATION` (exit status 1)")
	node := addNodeFlags(fs)
	logLevel := fs.String("log-level", "warn", "log level: debug, info, warn or error")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs(syncCommand(), pos); err != nil {
		return err
	}
	if !*once {
		return &usageError{msg: "sync needs --once; to stay in sync, run `danyue daemon`", hint: "danyue sync --once"}
	}
	if *timeout <= 0 {
		return &usageError{msg: fmt.Sprintf("--timeout %s must be positive", *timeout), hint: "danyue help sync"}
	}
	logger, err := newLogger(e, "text", *logLevel)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	cfg := node.config(*cf.data)
	cfg.Socket, cfg.Logger = *cf.socket, logger
	d, err := daemon.Start(ctx, cfg)
	if errors.Is(err, daemon.ErrLocked) {
		return timedOut(waitRunning(ctx, e, cf), *timeout, "asking the daemon running on "+*cf.data+" whether it is in sync")
	}
	if err != nil {
		return timedOut(err, *timeout, "starting this device's daemon (opening its store, starting the peer network), before any peer was looked for")
	}
	report, err := d.SyncOnce(ctx)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return timedOut(err, *timeout, "syncing with the peers")
	}
	fmt.Fprintf(e.stdout, "%s\n", report.Summary())
	if !report.CaughtUp {
		return errReported
	}
	return nil
}

// timedOut says what --timeout cut short, where the error would otherwise
// end in a bare "context deadline exceeded".
func timedOut(err error, timeout time.Duration, what string) error {
	if !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("--timeout %v passed while %s; give it more time, e.g. --timeout %v (%w)", timeout, what, max(2*timeout, 30*time.Second).Round(time.Second), err)
}

// waitRunning answers sync --once for a data dir whose daemon is running:
// that daemon syncs all the time, so the question is only whether it is in
// sync with every peer it is connected to, which it is asked until the
// timeout.
func waitRunning(ctx context.Context, e *env, cf clientFlags) error {
	c := cf.client()
	defer c.Close()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		peers, err := c.Peers(ctx)
		if err != nil && ctx.Err() == nil {
			return cf.explain(err)
		}
		connected, inSync := 0, 0
		for _, p := range peers {
			if p.Connected {
				connected++
			}
			if p.InSync {
				inSync++
			}
		}
		done := connected > 0 && inSync == connected
		if done || ctx.Err() != nil {
			fmt.Fprintf(e.stdout, "the daemon running on %s is in sync with %d of %d connected peers (%d known)\n", *cf.data, inSync, connected, len(peers))
			if !done {
				return errReported
			}
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
}
