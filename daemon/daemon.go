package daemon

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	libp2ppeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multiaddr"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/daemon/web"
	"github.com/danyue/danyue/peer"
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
	// NoMDNS turns LAN discovery off.
	NoMDNS bool
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
	// ClockOffset shifts the daemon's wall clock (DANYUE_CLOCK_OFFSET): a
	// testing aid for clock-skew scenarios.
	ClockOffset time.Duration
	// Logger receives the daemon's logs; default slog.Default().
	Logger *slog.Logger

	// limits replaces the listeners' limits (tests make them small).
	limits *limits
	// pairValidity replaces pair.DefaultValidity (tests make it short).
	pairValidity time.Duration
	// summaryEvery replaces the collection loop's pace (collect.go).
	summaryEvery time.Duration
}

// ErrLocked is returned by Start when another daemon has the data dir open;
// a caller that only wanted to sync once can ask that daemon instead.
var ErrLocked = store.ErrLocked

// Daemon is a running danyue daemon.
type Daemon struct {
	cfg      Config
	log      *slog.Logger
	store    *store.Store
	identity crypto.PrivKey
	self     crdt.DeviceID
	token    string // grants permWrite on --http
	// readToken grants permRead on --http (DATA/api-token-read).
	readToken string
	hub       *hub

	// Each concern below has a lock of its own, guarding it alone; none
	// is held while another is taken, except the member set's, which is
	// taken under the parked offers' lock (rotate.go). joinMu, which
	// serialises whatever replaces the nodes (joins, rotations), is taken
	// before any of them and held across network I/O.

	clock hlc         // the hybrid logical clock (clock.go)
	names deviceNames // the devices' names and name histories (names.go)
	// counts are the books on the shelf and those with a winning
	// tombstone.
	counts shelfCounts
	// warns are the writers whose records arrived stamped ahead of the
	// clock (clockwarn.go).
	warns clockWarnings
	// net is the peer nodes: the main one and the restricted ones on
	// superseded secrets (nodes.go, rotate.go).
	net peerNodes
	// parked are new secrets offered by devices not known as members yet,
	// taken once their membership arrives (rotate.go).
	parked parkedOffers
	// members is the member set of the library (members.go), which the
	// peer layer's gater reads.
	members memberSet

	joinMu sync.Mutex // serialises joins and rotations, which swap the nodes
	pairs  pairings   // the open short-code invitation (pairing.go)
	// life ends when Close starts: closing is its Done, and contexts made
	// by untilClosing end with it.
	life    context.Context
	stop    context.CancelFunc
	closing <-chan struct{}
	// spawnMu orders spawn against Close: no goroutine is added to wg
	// once Close has started waiting for them.
	spawnMu sync.Mutex
	closed  bool
	// closeOnce makes Close idempotent; closeErr is what the first returned.
	closeOnce sync.Once
	closeErr  error
	servers   []*http.Server
	httpAddr  string
	serveErr  chan error
	wg        sync.WaitGroup
	// kosyncAddr is the kosync listener's address, if there is one.
	kosyncAddr string
	// limits are the listeners' limits.
	limits limits
	// early holds the TCP listeners Start bound before anything else.
	early early
	// web is the status page (web.go).
	web *web.Server
	// coll is tombstone collection's state (collect.go).
	coll collector
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
		names:    newDeviceNames(),
		serveErr: make(chan error, 2),
		coll:     newCollector(),
	}
	d.life, d.stop = context.WithCancel(context.Background())
	d.closing = d.life.Done()
	if err := d.init(ctx); err != nil {
		st.Close()
		return nil, err
	}
	d.web = d.newWebPage()
	// The peer network first: an app that reaches the API may ask for an
	// invite at once.
	if err := d.startNode(ctx, nil); err != nil {
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
	d.wg.Go(d.collectLoop)
	started = true
	d.log.Info("daemon started", "data", cfg.DataDir, "device", d.self, "name", d.cfg.Name, "socket", cfg.Socket, "peer_id", d.nodeID())
	return d, nil
}

// init loads or creates the identity, library, API token and clock, and
// records this device's name.
func (d *Daemon) init(ctx context.Context) error {
	key, err := d.loadIdentity(ctx)
	if err != nil {
		return err
	}
	d.identity = key
	pid, err := libp2ppeer.IDFromPrivateKey(key)
	if err != nil {
		return fmt.Errorf("device identity: %w", err)
	}
	d.self = peer.DeviceIDOf(pid)
	if _, ok := d.store.Library(); !ok {
		lib, err := peer.NewLibrary()
		if err != nil {
			return err
		}
		if err := d.store.SetLibrary(ctx, store.Library{ID: lib.ID, Secret: lib.Secret}); err != nil {
			return err
		}
	}
	if d.token, err = loadOrCreateToken(filepath.Join(d.cfg.DataDir, "api-token"), d.log); err != nil {
		return err
	}
	if d.readToken, err = loadOrCreateToken(filepath.Join(d.cfg.DataDir, "api-token-read"), d.log); err != nil {
		return err
	}
	// The high-water mark is the latest stamp of every record ever merged,
	// a far-future one from a broken clock included: the clock resumes after
	// it only as far as it would have followed it live (crdt.MaxAhead), or
	// one such record would pin it again at every restart. Writes to that
	// record still order after it (Daemon.write).
	d.clock.c = crdt.NewClock(d.self, crdt.Timestamp{})
	d.clock.c.Observe(d.store.ClockHighWater(), d.wallMs())
	if err := d.loadState(ctx); err != nil {
		return err
	}
	// Without --name the device keeps the name it has: a restart (as a
	// service manager does it, without flags) renames nothing. A new device
	// takes the hostname.
	if d.cfg.Name == "" {
		d.cfg.Name = d.names.get(d.self)
	}
	if d.cfg.Name == "" {
		d.cfg.Name, _ = os.Hostname()
	}
	if d.cfg.Name == "" {
		d.cfg.Name = "danyue"
	}
	if d.names.get(d.self) != d.cfg.Name {
		if err := d.renameSelf(ctx, d.cfg.Name); err != nil {
			return fmt.Errorf("set device name: %w", err)
		}
	}
	return nil
}

func (d *Daemon) loadIdentity(ctx context.Context) (crypto.PrivKey, error) {
	if raw, ok := d.store.Identity(); ok {
		key, err := crypto.UnmarshalPrivateKey(raw)
		if err != nil {
			return nil, fmt.Errorf("device identity in %s is unreadable: %w", d.cfg.DataDir, err)
		}
		return key, nil
	}
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate device identity: %w", err)
	}
	raw, err := crypto.MarshalPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("generate device identity: %w", err)
	}
	if err := d.store.SetIdentity(ctx, raw); err != nil {
		return nil, err
	}
	return key, nil
}

// loadState reads the device names and the shelf's counts the API shows:
// the names by a scan of the device records (a library has a handful), the
// counts as the store keeps them (no scan of the books, however many).
func (d *Daemon) loadState(ctx context.Context) error {
	if err := d.store.Scan(ctx, crdt.KindDevice, func(e crdt.Entry) error {
		d.names.set(e.Device.ID, e.Device.Name.Value)
		return nil
	}); err != nil {
		return err
	}
	visible, deleted, err := d.store.BookCounts(ctx)
	if err != nil {
		return err
	}
	d.counts.add(int(visible), int(deleted))
	return nil
}

// startNode starts the peer network for the current library, dialling extra
// (e.g. the inviter after a join) besides the configured static peers.
func (d *Daemon) startNode(ctx context.Context, extra []multiaddr.Multiaddr) error {
	if err := d.startNodeOn(ctx, nil, extra); err != nil {
		return err
	}
	// Superseded secrets this device still holds bring members over.
	return d.restartPreviousLocked(ctx, nil)
}

// startNodeOn starts the peer network on listen, or where configured if
// listen is nil.
func (d *Daemon) startNodeOn(ctx context.Context, listen, extra []multiaddr.Multiaddr) error {
	lib, _ := d.store.Library()
	// The gater reads the members from the first connection on. A node
	// restarted on a new secret of the same library keeps the set, which
	// commits keep current: reloading it would race a removal being
	// committed, whose effects (rotate.go, members.go) would then be lost.
	if !d.members.loadedFor(crdt.LibraryID(lib.ID)) {
		if err := d.loadMembers(ctx); err != nil {
			return err
		}
	}
	if err := d.ensureSelf(ctx, d.self); err != nil {
		return fmt.Errorf("record this device as a member: %w", err)
	}
	if listen == nil {
		var err error
		if listen, err = parseAddrs(d.cfg.Listen); err != nil {
			return fmt.Errorf("--listen: %w", err)
		}
	}
	static, err := parseAddrs(d.cfg.Peers)
	if err != nil {
		return fmt.Errorf("--peer: %w", err)
	}
	node, err := peer.New(ctx, peer.Config{
		Identity:    d.identity,
		Library:     peerLibrary(lib),
		Name:        d.selfName(),
		Store:       syncStore{d},
		Listen:      listen,
		Peers:       append(static, extra...),
		MDNS:        !d.cfg.NoMDNS,
		Now:         d.now,
		Logger:      d.log.With("component", "peer"),
		OnEvent:     d.onPeerEvent,
		Removed:     d.members.removed,
		OnRekey:     d.onRekey,
		RekeyOffer:  func(to crdt.DeviceID) (peer.Rekey, bool) { return d.mainOffer(peerLibrary(lib), to) },
		Summaries:   d.summaries,
		OnSummaries: d.onSummaries,
		OnResidues:  d.onResidues,
	})
	if err != nil {
		return fmt.Errorf("start peer network: %w", err)
	}
	if !d.net.publish(node) {
		// Close ran while a join was restarting the network.
		node.Close()
		return errors.New("daemon is shutting down")
	}
	return nil
}

func parseAddrs(ss []string) ([]multiaddr.Multiaddr, error) {
	out := make([]multiaddr.Multiaddr, 0, len(ss))
	for _, s := range ss {
		a, err := multiaddr.NewMultiaddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a multiaddr: %w", s, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// Close stops accepting requests, lets in-flight ones finish, stops the peer
// network and closes the store. Later calls wait for the first and return
// what it returned.
func (d *Daemon) Close() error {
	d.closeOnce.Do(func() { d.closeErr = d.close() })
	return d.closeErr
}

func (d *Daemon) close() error {
	d.spawnMu.Lock()
	d.closed = true
	d.stop() // ends event streams, which Shutdown would wait for
	d.spawnMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range d.servers {
		_ = s.Shutdown(ctx)
	}
	// An open invitation ends first: the goroutine that waits for it is
	// one of those waited for.
	d.pairs.close()
	d.wg.Wait()
	node, previous := d.net.close()
	var errs []error
	if node != nil {
		errs = append(errs, node.Close())
	}
	for _, n := range previous {
		if err := n.Close(); err != nil {
			d.log.Warn("stop a node on a previous secret", "err", err)
		}
	}
	errs = append(errs, d.store.Close())
	if !d.cfg.NoSocket {
		removeLocal(d.cfg.Socket)
	}
	return errors.Join(errs...)
}

// spawn runs fn on a goroutine Close waits for, unless the daemon is
// closing.
func (d *Daemon) spawn(fn func()) {
	d.spawnMu.Lock()
	defer d.spawnMu.Unlock()
	if d.closed {
		return
	}
	d.wg.Go(fn)
}

// untilClosing returns a context that ends when the daemon starts closing,
// or after timeout if it is not 0.
func (d *Daemon) untilClosing(timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout > 0 {
		return context.WithTimeout(d.life, timeout)
	}
	return context.WithCancel(d.life)
}

// Err returns a channel that receives an error if an API listener fails
// while the daemon runs.
func (d *Daemon) Err() <-chan error { return d.serveErr }

// Device returns this device's id.
func (d *Daemon) Device() crdt.DeviceID { return d.self }

// Socket returns the API's local endpoint: a unix socket, or a named pipe;
// empty with NoSocket.
func (d *Daemon) Socket() string { return d.cfg.Socket }

func (d *Daemon) nodeID() libp2ppeer.ID {
	if node := d.net.current(); node != nil {
		return node.ID()
	}
	return ""
}

// now is the daemon's wall clock, shifted by DANYUE_CLOCK_OFFSET.
func (d *Daemon) now() time.Time { return time.Now().Add(d.cfg.ClockOffset) }

func (d *Daemon) wallMs() uint64 {
	ms := d.now().UnixMilli()
	if ms < 0 {
		return 0
	}
	return uint64(ms)
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
