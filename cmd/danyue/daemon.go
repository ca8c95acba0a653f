package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/danyue/danyue/daemon"
)

func daemonCommand() command {
	return command{
		name:    "daemon",
		usage:   "[--name NAME] [--socket PATH] [--http 127.0.0.1:PORT] [--listen MULTIADDR]... [--peer MULTIADDR]... [--announce MULTIADDR]... [--port-map] [--kosync ADDRESS [--kosync-registration] [--kosync-prefix PATH]]",
		summary: "Run the sync daemon of this device in the foreground (until SIGINT or SIGTERM).",
		run:     runDaemon,
	}
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// nodeFlags are the flags of the commands that run this device's daemon:
// who it is and how it finds its peers.
type nodeFlags struct {
	name                    *string
	listen, peers, announce listFlag
	noMDNS, portMap         *bool
}

func addNodeFlags(fs *flagSet) *nodeFlags {
	nf := &nodeFlags{name: fs.String("name", "", "this device's `NAME` as other devices show it; it sticks across restarts (default: the name it has, the hostname for a new device)")}
	fs.Var(&nf.listen, "listen", "libp2p listen `MULTIADDR`, repeatable (default /ip4/0.0.0.0/tcp/0 and /ip6/::/tcp/0)")
	fs.Var(&nf.peers, "peer", "static peer `MULTIADDR` with /p2p/ID, repeatable, for networks that block multicast")
	fs.Var(&nf.announce, "announce", "an address `MULTIADDR` members may dial this device on from anywhere (a port forward, a DNS name, e.g. /dns4/home.example.net/tcp/4001), repeatable; shared with the members")
	nf.noMDNS = fs.Bool("no-mdns", false, "do not discover peers on the LAN with mDNS")
	nf.portMap = fs.Bool("port-map", false, "ask the router for a port mapping to the listen port (UPnP, NAT-PMP), so that members reach this device from the internet; the mapped address is shared with them")
	return nf
}

// config is the daemon config of data dir data with these flags.
func (nf *nodeFlags) config(data string) daemon.Config {
	return daemon.Config{DataDir: data, Name: *nf.name, Listen: nf.listen, Peers: nf.peers, Announce: nf.announce, NoMDNS: *nf.noMDNS, PortMap: *nf.portMap}
}

// socketHelp describes --socket, the API's local endpoint.
const socketHelp = "`PATH` of the local API: a unix socket, a named pipe on Windows (default DATA/api.sock, on Windows a pipe named after DATA)"

func runDaemon(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, daemonCommand(), "danyue daemon --name laptop --http 127.0.0.1:7100")
	data := daemonDataDirFlag(fs, e)
	node := addNodeFlags(fs)
	socket := fs.String("socket", "", socketHelp)
	httpAddr := fs.String("http", "", "also serve the API on this loopback `ADDRESS` (requests need the bearer token in DATA/api-token)")
	allowRemote := fs.Bool("http-allow-remote", false, "allow --http to bind a non-loopback address (the token is then the only protection)")
	kosyncAddr := fs.String("kosync", "", "serve KOReader's progress sync on this `ADDRESS` (0.0.0.0:7200: reachable from the LAN, for KOReader devices)")
	kosyncReg := fs.Bool("kosync-registration", false, "let anyone who reaches --kosync create accounts (default: only danyue kosync adduser does)")
	kosyncPrefix := fs.String("kosync-prefix", "", "serve the progress sync under this URL `PATH` (/kosync), e.g. behind a reverse proxy")
	pairListen := fs.String("pair-listen", "", "listen for short-code pairing (only while a code from danyue invite is open) on this `ADDRESS` (default every interface, a port the system picks)")
	keep := durationFlag(fs, "keep-deleted", daemon.DefaultKeepDeleted, "keep a deleted book this `DURATION` after its delete, listed and restorable with danyue restore (0: remove it once every device has the delete)")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return &usageError{msg: fmt.Sprintf("daemon takes no arguments, got %q", pos), hint: "danyue help daemon"}
	}
	logger, err := newLogger(e, *logFormat, *logLevel)
	if err != nil {
		return err
	}
	var offset time.Duration
	if v := e.getenv("DANYUE_CLOCK_OFFSET"); v != "" {
		if offset, err = time.ParseDuration(v); err != nil {
			return &usageError{msg: fmt.Sprintf("DANYUE_CLOCK_OFFSET=%q is not a duration such as 8760h or -30m", v)}
		}
		logger.Warn("wall clock shifted by DANYUE_CLOCK_OFFSET (a testing aid)", "offset", offset)
	}
	cfg := node.config(*data)
	cfg.Socket, cfg.HTTP, cfg.HTTPAllowRemote = *socket, *httpAddr, *allowRemote
	cfg.ClockOffset, cfg.Logger = offset, logger
	cfg.Kosync, cfg.KosyncRegistration, cfg.KosyncPrefix = *kosyncAddr, *kosyncReg, *kosyncPrefix
	cfg.PairListen = *pairListen
	switch {
	case *keep < 0:
		return &usageError{msg: fmt.Sprintf("--keep-deleted %v must not be negative", *keep), hint: "danyue daemon --keep-deleted 720h"}
	case *keep == 0:
		cfg.KeepDeleted = -1 // the library's word for none
	default:
		cfg.KeepDeleted = *keep
	}
	defer setDaemonProcess(e)()
	d, err := daemon.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer releasingAfterBursts()()
	var runErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case runErr = <-d.Err():
	}
	if err := d.Close(); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}

func newLogger(e *env, format, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, &usageError{msg: fmt.Sprintf("--log-level %q is not debug, info, warn or error", level), hint: "danyue help daemon"}
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(e.stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(e.stderr, opts)), nil
	}
	return nil, &usageError{msg: fmt.Sprintf("--log-format %q is not text or json", format), hint: "danyue help daemon"}
}

// isTerminal reports whether w is a terminal, for output meant for people.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
