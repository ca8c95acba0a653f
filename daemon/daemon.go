package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/daemon/web"
	"github.com/danyue/danyue/library"
	"github.com/danyue/danyue/store"
)

// Config is everything a daemon is started with. The zero value of every
// optional field is the documented default.
type Config struct {
	// DataDir holds the store, the API socket and token. Created 0700.
	DataDir string
	// Name is this device's name as other devices show it; default the
	// name it already has, and the hostname for a new device.
	Name string
	// Socket is the local endpoint of the API: a unix socket, or on Windows
	// a named pipe; default DefaultSocket(DataDir).
	Socket string
	// NoSocket serves no local endpoint: an app that embeds the daemon
	// reaches it in process (InProcess) or on HTTP, and iOS limits a socket
	// path to 104 bytes, which a path inside an app's container exceeds.
	NoSocket bool
	// HTTP is an optional loopback TCP address for the API ("127.0.0.1:7100"),
	// for apps that cannot use a unix socket. Requests need the bearer token
	// in DataDir/api-token.
	HTTP string
	// HTTPAllowRemote allows HTTP to bind a non-loopback address.
	HTTPAllowRemote bool
	// Listen are the libp2p listen multiaddrs; default all interfaces, an
	// OS-chosen TCP port.
	Listen []string
	// Peers are static peers (multiaddrs with /p2p/ID), for networks where
	// multicast is blocked.
	Peers []string
	// Announce are addresses (multiaddrs without /p2p) members may dial
	// this device on from anywhere, shared with them: --announce.
	Announce []string
	// NoMDNS turns LAN discovery off.
	NoMDNS bool
	// PortMap asks the router for a port mapping (UPnP IGD, NAT-PMP) so
	// that the members reach this device from the internet: --port-map.
	PortMap bool
	// Kosync is the address of the KOReader progress-sync listener
	// ("0.0.0.0:7200"), off when empty. It is meant to be reachable from
	// the LAN (KOReader devices are other machines) and serves the kosync
	// protocol only.
	Kosync string
	// KosyncRegistration opens POST /users/create on that listener; off,
	// accounts are made with `danyue kosync adduser`.
	KosyncRegistration bool
	// KosyncPrefix serves the protocol under a path prefix ("/kosync").
	KosyncPrefix string
	// PairListen is the TCP address of the short-code pairing rendezvous,
	// open only while an invitation is (POST /v1/pairing); default every
	// interface, a port the system picks.
	PairListen string
	// KeepDeleted is the undo window (library.Config.KeepDeleted): how long
	// a deleted book stays listed, readable and restorable; default
	// library.DefaultKeepDeleted (30 days), negative for none (deleted
	// books go once every member holds the delete).
	KeepDeleted time.Duration
	// ClockOffset shifts the daemon's wall clock (DANYUE_CLOCK_OFFSET): a
	// testing aid for clock-skew scenarios.
	ClockOffset time.Duration
	// Logger receives the daemon's logs; default slog.Default().
	Logger *slog.Logger

	// limits replaces the listeners' limits (tests make them small).
	limits *limits
	// pairValidity replaces pair.DefaultValidity (tests make it short).
	pairValidity time.Duration
	// bounds replaces the default bounds (tests make them small).
	bounds library.Bounds
	// summaryEvery replaces the collection loop's pace
	// (library.Config.SummaryEvery).
	summaryEvery time.Duration
	// clock replaces the wall clock (before ClockOffset): tests move it
	// past the undo window.
	clock func() time.Time
}

// DefaultKeepDeleted is the undo window of Config.KeepDeleted's default.
const DefaultKeepDeleted = library.DefaultKeepDeleted

// ErrLocked is returned by Start when another daemon has the data dir open;
// a caller that only wanted to sync once can ask that daemon instead.
var ErrLocked = store.ErrLocked

// Daemon is a running danyue daemon: the device's library (package
// library) served to reader apps on the local API, the status page and the
// kosync listener.
type Daemon struct {
	cfg Config
	log *slog.Logger
	// store is read by the handlers that list what it holds (pages of the
	// shelf, the change feed, the daily statistics); every write goes
	// through lib.
	store *store.Store
	lib   *library.Library
	token string // grants permWrite on --http
	// readToken grants permRead on --http (DATA/api-token-read).
	readToken string
	hub       *hub
	seen      lastSeen // when each device was last connected (seen.go)

	// closing is closed when Close starts (by stop): it ends the handlers
	// that wait (event streams, long polls).
	closing <-chan struct{}
	stop    context.CancelFunc
	// closeOnce makes Close idempotent; closeErr is what the first returned.
	closeOnce sync.Once
	closeErr  error
	servers   []*http.Server
	httpAddr  string
	serveErr  chan error
	wg        sync.WaitGroup // the listeners' goroutines
	// kosyncAddr is the kosync listener's address, if there is one.
	kosyncAddr string
	// limits are the listeners' limits.
	limits limits
	// early holds the TCP listeners Start bound before anything else, and
	// the peer addresses it parsed.
	early early
	// web is the status page (web.go).
	web *web.Server
}

// Start opens the data dir and starts the API and the peer network. On
// first start it creates the device identity and a library of its own, so a
// single device works at once; invite/join connect devices later.
func Start(ctx context.Context, cfg Config) (*Daemon, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.DataDir == "" {
		return nil, errors.New("no data dir given")
	}
	if cfg.Socket == "" && !cfg.NoSocket {
		cfg.Socket = DefaultSocket(cfg.DataDir)
	}
	lns, err := bindEarly(cfg)
	if err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			lns.close()
		}
	}()
	if err := ensurePrivateDir(cfg.DataDir, cfg.Logger); err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, storeDir(cfg.DataDir), store.Options{Logger: cfg.Logger.With("component", "store")})
	if err != nil {
		return nil, err
	}
	d := &Daemon{
		cfg:      cfg,
		early:    lns,
		log:      cfg.Logger,
		store:    st,
		hub:      newHub(),
		serveErr: make(chan error, 2),
	}
	life, stop := context.WithCancel(context.Background())
	d.closing, d.stop = life.Done(), stop
	if err := d.loadTokens(); err != nil {
		st.Close()
		return nil, err
	}
	if d.lib, err = library.Open(ctx, d.libraryConfig()); err != nil {
		st.Close()
		return nil, err
	}
	d.cfg.Name = d.lib.Name()
	d.web = d.newWebPage()
	// The peer network first: an app that reaches the API may ask for an
	// invite at once.
	if err := d.lib.Start(ctx); err != nil {
		d.Close()
		return nil, err
	}
	if err := d.serveAPI(); err != nil {
		d.Close()
		return nil, err
	}
	if err := d.serveKosync(); err != nil {
		d.Close()
		return nil, err
	}
	started = true
	d.log.Info("daemon started", "data", cfg.DataDir, "device", d.lib.Self(), "name", d.cfg.Name, "socket", cfg.Socket, "peer_id", d.lib.PeerID())
	return d, nil
}

// libraryConfig is the configuration of the daemon's library.
func (d *Daemon) libraryConfig() library.Config {
	return library.Config{
		Store:        d.store,
		Name:         d.cfg.Name,
		Listen:       d.early.listen,
		Peers:        d.early.peers,
		Announce:     d.early.announce,
		MDNS:         !d.cfg.NoMDNS,
		PortMap:      d.cfg.PortMap,
		PairListen:   d.cfg.PairListen,
		PairValidity: d.cfg.pairValidity,
		SummaryEvery: d.cfg.summaryEvery,
		KeepDeleted:  d.cfg.KeepDeleted,
		Bounds:       d.cfg.bounds,
		Now:          d.now,
		Logger:       d.log,
		OnEvent:      d.publish,
		Listening:    d.hub.active,
	}
}

// loadTokens loads or creates the API tokens.
func (d *Daemon) loadTokens() error {
	var err error
	if d.token, err = loadOrCreateToken(filepath.Join(d.cfg.DataDir, "api-token"), d.log); err != nil {
		return err
	}
	d.readToken, err = loadOrCreateToken(filepath.Join(d.cfg.DataDir, "api-token-read"), d.log)
	return err
}

// Close stops accepting requests, lets in-flight ones finish, stops the peer
// network and closes the store. Later calls wait for the first and return
// what it returned.
func (d *Daemon) Close() error {
	d.closeOnce.Do(func() { d.closeErr = d.close() })
	return d.closeErr
}

func (d *Daemon) close() error {
	d.stop() // ends event streams, which Shutdown would wait for
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range d.servers {
		_ = s.Shutdown(ctx)
	}
	d.wg.Wait()
	var errs []error
	if d.lib != nil {
		errs = append(errs, d.lib.Close())
	}
	errs = append(errs, d.store.Close())
	if !d.cfg.NoSocket {
		removeLocal(d.cfg.Socket)
	}
	return errors.Join(errs...)
}

// Err returns a channel that receives an error if an API listener fails
// while the daemon runs.
func (d *Daemon) Err() <-chan error { return d.serveErr }

// Device returns this device's id.
func (d *Daemon) Device() crdt.DeviceID { return d.lib.Self() }

// Socket returns the API's local endpoint: a unix socket, or a named pipe;
// empty with NoSocket.
func (d *Daemon) Socket() string { return d.cfg.Socket }

// SyncReport says what one SyncOnce did.
type SyncReport = library.SyncReport

// SyncOnce returns when this device has caught up, both ways, with every
// peer it could reach, or when ctx ends (library.Library.SyncOnce).
func (d *Daemon) SyncOnce(ctx context.Context) (SyncReport, error) {
	return d.lib.SyncOnce(ctx)
}

// now is the daemon's wall clock, shifted by DANYUE_CLOCK_OFFSET.
func (d *Daemon) now() time.Time {
	if d.cfg.clock != nil {
		return d.cfg.clock().Add(d.cfg.ClockOffset)
	}
	return time.Now().Add(d.cfg.ClockOffset)
}

// ensurePrivateDir creates dir, or tightens an existing one, so that only
// this user can reach it (0700; a private DACL on Windows): the socket and
// secrets inside are never reachable by other users, not even for an
// instant. Only for a directory that is danyue's own: the data dir, or one
// it creates.
func ensurePrivateDir(dir string, log *slog.Logger) error {
	tightened, err := store.MakePrivateDir(dir)
	if err != nil {
		return fmt.Errorf("data dir %s cannot be created private to this user: %w", dir, err)
	}
	if tightened {
		log.Warn("data dir was reachable by other users; made it private", "path", dir)
	}
	return nil
}
