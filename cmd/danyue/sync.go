package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/danyue/danyue/daemon"
	"github.com/danyue/danyue/store"
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
// (no peer reachable, or the timeout passed first).
func runSync(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, syncCommand(), "danyue sync --once --timeout 1m")
	data := dataDirFlag(fs, e)
	once := fs.Bool("once", false, "sync until caught up, then exit (required: `danyue daemon` syncs continuously)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this `DURATION` (exit status 1)")
	name := fs.String("name", "", "this device's `NAME` as other devices show it (default the hostname)")
	var listen, peers listFlag
	fs.Var(&listen, "listen", "libp2p listen `MULTIADDR`, repeatable (default every interface, a port the OS picks)")
	fs.Var(&peers, "peer", "static peer `MULTIADDR` with /p2p/ID, repeatable, for networks that block multicast")
	noMDNS := fs.Bool("no-mdns", false, "do not discover peers on the LAN with mDNS")
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
	d, err := daemon.Start(ctx, daemon.Config{
		DataDir: *data,
		Name:    *name,
		Listen:  listen,
		Peers:   peers,
		NoMDNS:  *noMDNS,
		Logger:  logger,
	})
	if errors.Is(err, store.ErrLocked) {
		return fmt.Errorf("a daemon is already running on %s and keeps this device in sync; `danyue peers` shows its peers", *data)
	}
	if err != nil {
		return err
	}
	report, err := d.SyncOnce(ctx)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s\n", report.Summary())
	if !report.CaughtUp {
		return errReported
	}
	return nil
}
