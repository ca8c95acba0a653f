package library

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	libp2ppeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multiaddr"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/peer"
	"github.com/danyue/danyue/store"
)

// Config is what a Library is opened with. The zero value of every
// optional field is the documented default.
type Config struct {
	// Store is this device's store. The caller opens it, and closes it
	// after Close.
	Store *store.Store
	// Name is this device's name as other devices show it; default the
	// name it already has, and the hostname for a new device.
	Name string
	// Listen are the libp2p listen addresses; default all interfaces, an
	// OS-chosen TCP port.
	Listen []multiaddr.Multiaddr
	// Peers are static peers (multiaddrs with /p2p/ID), for networks where
	// multicast is blocked.
	Peers []multiaddr.Multiaddr
	// Announce are addresses members may dial this device on from
	// anywhere (a port forward, a DNS name), shared with the members
	// before the addresses it listens on.
	Announce []multiaddr.Multiaddr
	// MDNS turns LAN discovery on, for the peer network and for pairing.
	MDNS bool
	// PortMap asks the router for a port mapping to the main peer node's
	// listen port (peer.Config.PortMap).
	PortMap bool
	// PairListen is the TCP address of the short-code pairing rendezvous,
	// open only while an invitation is; default every interface, a port
	// the system picks.
	PairListen string
	// PairValidity is how long a short code lasts; default
	// pair.DefaultValidity.
	PairValidity time.Duration
	// SummaryEvery is the shortest time between two rounds of tombstone
	// collection; default 2 seconds (collect.go says why).
	SummaryEvery time.Duration
	// KeepDeleted is the undo window: how long a deleted book stays listed,
	// readable and restorable after its delete (by the tombstone's time)
	// before collection may take it, once every member holds it too;
	// default DefaultKeepDeleted, and a negative one keeps none. Each
	// device applies its own (docs/design.md says why that is safe).
	KeepDeleted time.Duration
	// Now is the wall clock; default time.Now. A daemon shifts it for
	// clock-skew tests.
	Now func() time.Time
	// Logger receives the library's logs; default slog.Default().
	Logger *slog.Logger
	// OnEvent, if set, is told what other devices did (Event), on the
	// goroutine that merged it: it must not block.
	OnEvent func(Event)
	// Bounds are what one device may originate, as this device takes it
	// in from peers (bounds.go); zero fields take their defaults.
	Bounds Bounds
	// Listening, if set, reports whether OnEvent has anyone to tell: book
	// events nobody would read are not made, a batch of hundreds at a
	// time under a flood of records from a peer. Nil means always.
	Listening func() bool
}

// Library is this device in its library: its identity, the records it
// writes and merges, the members, the library secret and the peer nodes
// that run on it, tombstone collection and pairing. Its methods are safe
// for concurrent use.
type Library struct {
	cfg      Config
	log      *slog.Logger
	store    *store.Store
	identity crypto.PrivKey
	self     crdt.DeviceID

	// Each concern below has a lock of its own, guarding it alone (see
	// the package doc for the order where two are held).
	clock  hlc           // the hybrid logical clock (clock.go)
	names  deviceNames   // the devices' names and name histories (names.go)
	counts shelfCounts   // the shelf's counts (merge.go)
	warns  clockWarnings // writers whose clocks are ahead (clockwarn.go)
	bounds writerBounds  // what each device may originate (bounds.go)
	// members is the member set of the library (members.go), which the
	// peer layer's gater reads.
	members memberSet
	// parked are new secrets offered by devices not known as members yet
	// (rotate.go).
	parked parkedOffers
	// net is the peer nodes: the main one and the restricted ones on
	// superseded secrets (nodes.go, previous.go).
	net   peerNodes
	coll  collector // tombstone collection (collect.go)
	pairs pairings  // the open short-code invitation (pairing.go)
	joinW joinWatch // what the inviter of a long code says (invites.go)

	// moveMu serialises whatever replaces the nodes (joins, rotations,
	// dropping the superseded secrets); it is held across network I/O and
	// taken before any other lock.
	moveMu sync.Mutex

	// life ends when Close starts; contexts made by untilClosing end with
	// it.
	life context.Context
	stop context.CancelFunc
	// spawnMu orders spawn against Close: no goroutine is added to wg once
	// Close has started waiting for them.
	spawnMu   sync.Mutex
	closed    bool
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	// leaveWritten, nil but in tests, runs in Leave between writing the
	// removal and waiting for its delivery, so that a test can order a
	// member's drop before the wait's first look.
	leaveWritten func()
}

// Open loads this device's library from the store; Start then starts the
// peer network and tombstone collection. On a new store it creates the
// device identity and a library of its own, so a single device works at
// once; Join moves it into another library later.
func Open(ctx context.Context, cfg Config) (*Library, error) {
	if cfg.Store == nil {
		return nil, errors.New("open library: no store given")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.KeepDeleted == 0 {
		cfg.KeepDeleted = DefaultKeepDeleted
	}
	if cfg.SummaryEvery <= 0 {
		cfg.SummaryEvery = summaryEvery
	}
	l := &Library{
		cfg:   cfg,
		log:   cfg.Logger,
		store: cfg.Store,
		names: newDeviceNames(),
		coll:  newCollector(),
	}
	l.bounds.b = cfg.Bounds.withDefaults()
	l.life, l.stop = context.WithCancel(context.Background())
	if err := l.init(ctx); err != nil {
		l.stop()
		return nil, err
	}
	return l, nil
}

// Start starts the peer network and tombstone collection. Config.OnEvent
// is called from here on.
func (l *Library) Start(ctx context.Context) error {
	// The totals of the writers' bounds count the store; until they do,
	// only the rates are checked.
	l.spawn(func() {
		if err := l.countStore(l.life); err != nil && l.life.Err() == nil {
			l.log.Warn("bounds: only rates are checked until the next start", "err", err)
		}
	})
	// The nodes call back (a member's new secret) from their first
	// connection on, and what that starts replaces nodes in turn.
	l.moveMu.Lock()
	err := l.startNode(ctx, nil)
	l.moveMu.Unlock()
	if err != nil {
		return err
	}
	l.spawn(l.collectLoop)
	return nil
}

// init loads or creates the identity, library and clock, and records this
// device's name.
func (l *Library) init(ctx context.Context) error {
	key, err := l.loadIdentity(ctx)
	if err != nil {
		return err
	}
	l.identity = key
	pid, err := libp2ppeer.IDFromPrivateKey(key)
	if err != nil {
		return fmt.Errorf("device identity: %w", err)
	}
	l.self = peer.DeviceIDOf(pid)
	_, had := l.store.Library()
	if !had {
		lib, err := peer.NewLibrary()
		if err != nil {
			return err
		}
		if err := l.store.SetLibrary(ctx, store.Library{ID: lib.ID, Secret: lib.Secret}); err != nil {
			return err
		}
	}
	// The high-water mark is the latest stamp of every record ever merged,
	// a far-future one from a broken clock included: the clock resumes after
	// it only as far as it would have followed it live (crdt.MaxAhead), or
	// one such record would pin it again at every restart. Writes to that
	// record still order after it (Library.write).
	l.clock.c = crdt.NewClock(l.self, crdt.Timestamp{})
	l.clock.c.Observe(l.store.ClockHighWater(), l.wallMs())
	if err := l.loadState(ctx); err != nil {
		return err
	}
	if !had {
		if err := l.addSelf(ctx); err != nil {
			return fmt.Errorf("record this device as the maker of its library: %w", err)
		}
	}
	// Without a name the device keeps the name it has: a restart (as a
	// service manager does it, without flags) renames nothing, and neither
	// does a new database after a repair (the name saved beside the
	// identity). A new device takes the hostname.
	l.cfg.Name = cmp.Or(l.cfg.Name, l.names.get(l.self), l.store.DeviceName())
	if l.cfg.Name == "" {
		l.cfg.Name, _ = os.Hostname()
	}
	l.cfg.Name = cmp.Or(l.cfg.Name, "danyue")
	if l.names.get(l.self) != l.cfg.Name {
		if err := l.Rename(ctx, l.cfg.Name); err != nil {
			return fmt.Errorf("set device name: %w", err)
		}
	}
	if err := l.store.SetDeviceName(ctx, l.cfg.Name); err != nil {
		return fmt.Errorf("save device name: %w", err)
	}
	return nil
}

func (l *Library) loadIdentity(ctx context.Context) (crypto.PrivKey, error) {
	if raw, ok := l.store.Identity(); ok {
		key, err := crypto.UnmarshalPrivateKey(raw)
		if err != nil {
			return nil, fmt.Errorf("device identity is unreadable: %w", err)
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
	if err := l.store.SetIdentity(ctx, raw); err != nil {
		return nil, err
	}
	return key, nil
}

// loadState reads the device names and the shelf's counts: the names by a
// scan of the device records (a library has a handful), the counts as the
// store keeps them (no scan of the books, however many).
func (l *Library) loadState(ctx context.Context) error {
	if err := l.store.Scan(ctx, crdt.KindDevice, func(e crdt.Entry) error {
		l.names.set(e.Device.ID, e.Device.Name.Value)
		return nil
	}); err != nil {
		return err
	}
	visible, deleted, err := l.store.BookCounts(ctx)
	if err != nil {
		return err
	}
	l.counts.add(int(visible), int(deleted))
	return nil
}

// Close stops tombstone collection, the open invitation and the peer
// network, and waits for the library's goroutines. The store stays open.
// Later calls wait for the first and return what it returned.
func (l *Library) Close() error {
	l.closeOnce.Do(func() { l.closeErr = l.close() })
	return l.closeErr
}

func (l *Library) close() error {
	l.spawnMu.Lock()
	l.closed = true
	l.stop()
	l.spawnMu.Unlock()
	// An open invitation ends first: the goroutine that waits for it is
	// one of those waited for.
	l.pairs.close()
	l.wg.Wait()
	node, previous := l.net.close()
	var err error
	if node != nil {
		err = node.Close()
	}
	for _, n := range previous {
		if err := n.Close(); err != nil {
			l.log.Warn("stop a node on a previous secret", "err", err)
		}
	}
	return err
}

// spawn runs fn on a goroutine Close waits for, unless the library is
// closing.
func (l *Library) spawn(fn func()) {
	l.spawnMu.Lock()
	defer l.spawnMu.Unlock()
	if l.closed {
		return
	}
	l.wg.Go(fn)
}

// untilClosing returns a context that ends when the library starts
// closing, or after timeout if it is not 0.
func (l *Library) untilClosing(timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout > 0 {
		return context.WithTimeout(l.life, timeout)
	}
	return context.WithCancel(l.life)
}

// Self returns this device's id.
func (l *Library) Self() crdt.DeviceID { return l.self }

// Name returns this device's name.
func (l *Library) Name() string {
	return cmp.Or(l.names.get(l.self), l.cfg.Name)
}

// ID returns the id of the library this device is in.
func (l *Library) ID() crdt.LibraryID {
	lib, _ := l.store.Library()
	return crdt.LibraryID(lib.ID)
}

// wallMs is the wall clock in ms since the epoch, 0 before it.
func (l *Library) wallMs() uint64 {
	ms := l.cfg.Now().UnixMilli()
	if ms < 0 {
		return 0
	}
	return uint64(ms)
}

// handshakeWrite bounds a write made on behalf of the peer layer or a
// pairing.
const handshakeWrite = 10 * time.Second
