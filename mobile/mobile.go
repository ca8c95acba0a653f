// Package mobile is the in-process danyue node for reader apps, bindable by
// gomobile (gomobile bind -target=android|ios). Android kills background
// processes and iOS allows none, so a reader app there runs the daemon inside
// itself: Start brings the node up on the app's data dir, the book
// operations go through the daemon's own API handler in process (the same
// validation and JSON as the HTTP API), pairing and joining through the
// library's own methods (pairing.go), events arrive
// through an EventHandler, and SyncOnce is what a background job (Android
// WorkManager, an iOS BGTask) runs: Start, SyncOnce, Stop.
//
// The API uses only what gobind can bind: signed integers, float64, bool,
// string, error, pointers to this package's structs and its interfaces.
// Lists are a struct with Len and Get. Times are RFC 3339 strings.
package mobile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/danyue/danyue/daemon"
	"github.com/danyue/danyue/daemon/client"
)

// Config is what a node starts with. Make one with NewConfig and change the
// fields that matter to the app.
type Config struct {
	// DataDir holds the node's store and identity; the app's
	// private files dir (Android Context.getFilesDir, iOS Application
	// Support). Created 0700.
	DataDir string
	// Name is this device's name as the reader's other devices show it;
	// empty means the host name, which phones set to something generic, so
	// apps should pass the device's user-visible name.
	Name string
	// Listen is a comma-separated list of libp2p multiaddrs to listen on;
	// empty means every interface on an OS-chosen TCP port.
	Listen string
	// Peers are static peers, multiaddrs with /p2p/ID separated by commas
	// or newlines, for networks where multicast is blocked.
	Peers string
	// NoMDNS turns LAN discovery off.
	NoMDNS bool
	// HTTP is an optional loopback TCP address ("127.0.0.1:0") for the
	// HTTP API, for app code that prefers HTTP to this package; see
	// Node.APIAddress and Node.APIToken. Empty means none.
	HTTP string
	// PairListen is the TCP address where a short-code invitation
	// (OpenPairing) waits for the joining device, open only while the
	// invitation is; empty means every interface, a port the system picks.
	PairListen string
	// LogLevel is debug, info, warn, error or off.
	LogLevel string
	// LogSink receives the node's log lines; nil means stderr.
	LogSink LogSink
	// MemoryLimit, in bytes, is the soft limit on the memory of the Go
	// runtime in the app's process (runtime/debug.SetMemoryLimit), set by
	// Start and restored by Stop. It is process-wide, and it is the app's
	// to choose: a lower limit keeps the node's anonymous memory lower
	// through a burst of sync and costs CPU in collections, and once what
	// the node holds live is above it the collector runs all the time (the
	// limit is soft: the node slows down, it does not fail). The README
	// gives the daemon command's own choice. 0 leaves the process's setting
	// alone (GOMEMLIMIT, or none).
	MemoryLimit int64

	// logger replaces the stderr logger (tests route logs to t.Log).
	logger *slog.Logger
}

// NewConfig returns a config with the defaults for dataDir: discovery on,
// listening on every interface, no HTTP listener, info logs.
func NewConfig(dataDir string) *Config {
	return &Config{DataDir: dataDir, LogLevel: "info"}
}

// ErrStopped is returned by every call on a node after Stop.
var ErrStopped = errors.New("the danyue node is stopped")

// errNotStarted is returned by a Node made with the constructor gobind
// generates (new Node() in Java) rather than by Start.
var errNotStarted = errors.New("the danyue node was not started: use Mobile.start")

// Node is a running in-process danyue node.
type Node struct {
	d   *daemon.Daemon
	rt  http.RoundTripper // the daemon's in-process API
	c   *client.Client
	log *slog.Logger

	// ctx ends at Stop, which aborts calls in flight.
	ctx    context.Context
	cancel context.CancelFunc

	// restoreLimit puts back the memory limit Start replaced; nil if
	// Config.MemoryLimit was 0.
	restoreLimit func()

	mu       sync.Mutex // guards the fields below
	stopped  bool
	stopErr  error
	delivery *delivery                  // the running event delivery, nil if none
	joins    map[int]context.CancelFunc // the Joins in flight, for CancelJoin
	nextJoin int
}

// Start starts a node on cfg.DataDir: the same daemon as `danyue daemon`,
// with its peer network and, if cfg.HTTP is set, its loopback HTTP API.
// The first start creates the device identity and a library of its own.
func Start(cfg *Config) (*Node, error) {
	if cfg == nil {
		return nil, errors.New("start: no config given; use NewConfig")
	}
	if cfg.DataDir == "" {
		return nil, errors.New("start: DataDir is required")
	}
	if cfg.MemoryLimit < 0 {
		return nil, fmt.Errorf("start: MemoryLimit is %d bytes; 0 leaves the process's limit alone", cfg.MemoryLimit)
	}
	log := cfg.logger
	if log == nil {
		level, err := parseLevel(cfg.LogLevel)
		if err != nil {
			return nil, fmt.Errorf("start: %w", err)
		}
		log = newLogger(cfg.LogSink, level)
	}
	dcfg := daemon.Config{
		DataDir: cfg.DataDir,
		// The app reaches its node in process (or on HTTP); a socket path
		// in an iOS app container is past the 104-byte limit.
		NoSocket:   true,
		Name:       cfg.Name,
		HTTP:       cfg.HTTP,
		Listen:     splitAddrs(cfg.Listen),
		Peers:      splitAddrs(cfg.Peers),
		NoMDNS:     cfg.NoMDNS,
		PairListen: cfg.PairListen,
		Logger:     log,
	}
	restore := setMemoryLimit(cfg.MemoryLimit)
	ctx, cancel := context.WithCancel(context.Background())
	d, err := daemon.Start(ctx, dcfg)
	if err != nil {
		cancel()
		if restore != nil {
			restore()
		}
		return nil, fmt.Errorf("start: %w", err)
	}
	rt := d.InProcess()
	return &Node{d: d, rt: rt, c: client.NewTransport(rt), log: log, ctx: ctx, cancel: cancel, restoreLimit: restore}, nil
}

// setMemoryLimit sets the Go runtime's memory limit to limit bytes and
// returns a function that restores the one before, or does nothing and
// returns nil if limit is 0.
func setMemoryLimit(limit int64) (restore func()) {
	if limit == 0 {
		return nil
	}
	prev := debug.SetMemoryLimit(limit)
	return func() { debug.SetMemoryLimit(prev) }
}

// levelOff is above every level slog emits.
const levelOff = slog.Level(100)

// CheckLogLevel returns the error Start would give for Config.LogLevel
// level, or nil: for a caller that takes the level apart from a Config.
func CheckLogLevel(level string) error {
	_, err := parseLevel(level)
	return err
}

func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "info":
		return slog.LevelInfo, nil
	case "debug":
		return slog.LevelDebug, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	case "off", "none":
		return levelOff, nil
	}
	return 0, fmt.Errorf("LogLevel must be debug, info, warn, error or off, not %q", s)
}

// splitAddrs splits a list of multiaddrs separated by commas, newlines or
// spaces (multiaddrs contain none of them); the daemon checks each.
func splitAddrs(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' || r == ' ' || r == '\t' })
}

// Stop stops event delivery, the peer network and the API, and closes the
// store. Calls in flight end with an error. Stopping again does nothing and
// returns what the first Stop returned.
func (n *Node) Stop() error {
	if n.d == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return n.stopErr
	}
	n.stopped = true
	n.cancel()
	if n.delivery != nil {
		n.delivery.stop()
		n.delivery = nil
	}
	n.c.Close()
	n.stopErr = n.d.Close()
	if n.restoreLimit != nil {
		n.restoreLimit()
	}
	return n.stopErr
}

// Device returns this device's id, 16 hex digits.
func (n *Node) Device() string {
	if n.d == nil {
		return ""
	}
	return n.d.Device().String()
}

// APIAddress returns the loopback address of the HTTP API ("127.0.0.1:PORT"),
// or "" when Config.HTTP was empty.
func (n *Node) APIAddress() string {
	if n.d == nil {
		return ""
	}
	return n.d.HTTPAddr()
}

// APIToken returns the bearer token that requests to APIAddress must carry
// ("Authorization: Bearer TOKEN").
func (n *Node) APIToken() string {
	if n.d == nil {
		return ""
	}
	return n.d.APIToken()
}

func (n *Node) alive() error {
	if n.d == nil {
		return errNotStarted
	}
	if n.ctx.Err() != nil {
		return ErrStopped
	}
	return nil
}

// fail wraps the error of operation op; after Stop, it is ErrStopped
// whatever the call ran into.
func (n *Node) fail(op string, err error) error {
	if n.ctx.Err() != nil || errors.Is(err, daemon.ErrClosed) {
		return fmt.Errorf("%s: %w", op, ErrStopped)
	}
	return fmt.Errorf("%s: %w", op, err)
}
