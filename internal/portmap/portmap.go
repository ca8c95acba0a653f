// Package portmap keeps TCP ports of this device mapped on the home router,
// through UPnP IGD or NAT-PMP, so that members away reach it at the router's
// public address.
//
// What it keeps stable is the external port. A member away knows this
// device by the address it was last told, and while it is away nothing can
// tell it a new one; so a mapping is asked for on the listen port itself
// first, the port granted is kept and asked for again whenever the mapping
// is made anew (the router restarted, or was found again), and another
// port is taken only when the router refuses the one held. A router that
// forgets its mappings (restarting, or on a lease it cut short) is noticed
// at the next renewal, found again at once and given the same port.
//
// The protocols are spoken by github.com/huin/goupnp and
// github.com/jackpal/go-nat-pmp; this package is the policy above them.
package portmap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"
)

// Router is a home router that maps ports on request.
type Router interface {
	// Map asks for TCP port external on the router to be forwarded to
	// port internal of this device for lease, and returns the port
	// granted: external, or another one if the protocol lets the router
	// choose (NAT-PMP).
	Map(ctx context.Context, internal, external int, lease time.Duration) (int, error)
	// Unmap removes the mapping of TCP port external.
	Unmap(ctx context.Context, internal, external int) error
	// External returns the router's public address.
	External(ctx context.Context) (netip.Addr, error)
	// String names the protocol and the router, for the log.
	String() string
}

// Config is what a Mapper needs; the zero values of the durations are the
// defaults below.
type Config struct {
	// Discover finds the router: Discover in this package, or a fake.
	Discover func(context.Context) (Router, error)
	// Lease is how long each mapping is asked for; it is renewed every
	// Lease/3, so a router that lost it is noticed that soon.
	Lease time.Duration
	// Retry is how long to wait after no router was found.
	Retry time.Duration
	Log   *slog.Logger
}

// A short lease: a device that vanishes leaves no open port behind for
// long, and a router that restarted is noticed within a third of it. The
// renewal is one request to the router, on the device meant to be
// reachable (a NAS, a desktop), not on a phone.
const (
	DefaultLease = time.Minute
	DefaultRetry = time.Minute
)

// triesElsewhere is how many random ports are tried once the router
// refuses the held one (taken by another device of the LAN).
const triesElsewhere = 3

// Mapper keeps the ports it is given mapped. Its methods are safe for
// concurrent use.
type Mapper struct {
	cfg    Config
	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	want     map[int]bool // internal ports to map
	ext      map[int]int  // internal port -> external port held (or last held)
	mapped   map[int]bool // internal ports mapped at the last renewal
	public   netip.Addr
	router   Router
	everSeen bool
	lastErr  string    // the failure last logged
	lastOK   time.Time // the last renewal that mapped every port
}

// New starts a Mapper; Close stops it and removes its mappings.
func New(cfg Config) *Mapper {
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Retry <= 0 {
		cfg.Retry = DefaultRetry
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Mapper{
		cfg: cfg, wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{}),
		want: map[int]bool{}, ext: map[int]int{}, mapped: map[int]bool{},
	}
	go m.run(ctx)
	return m
}

// SetPorts sets the internal TCP ports to keep mapped.
func (m *Mapper) SetPorts(ports ...int) {
	m.mu.Lock()
	changed := len(ports) != len(m.want)
	want := make(map[int]bool, len(ports))
	for _, p := range ports {
		want[p] = true
		changed = changed || !m.want[p]
	}
	m.want = want
	m.mu.Unlock()
	if changed {
		select {
		case m.wake <- struct{}{}:
		default:
		}
	}
}

// Mapping returns the public address and port at which internal port is
// reached, if it is mapped now.
func (m *Mapper) Mapping(internal int) (netip.AddrPort, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.mapped[internal] || !m.public.IsValid() {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(m.public, uint16(m.ext[internal])), true
}

// Found reports whether a router has been found.
func (m *Mapper) Found() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.everSeen
}

// Close stops the renewals and removes the mappings from the router.
func (m *Mapper) Close() error {
	m.cancel()
	<-m.done
	return nil
}

func (m *Mapper) run(ctx context.Context) {
	defer close(m.done)
	defer m.unmapAll()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.wake:
		case <-t.C:
		}
		next := m.renew(ctx)
		t.Reset(next)
	}
}

// renew maps every wanted port once, finding the router first if there is
// none, and returns how long to wait before the next renewal.
func (m *Mapper) renew(ctx context.Context) time.Duration {
	m.mu.Lock()
	r := m.router
	m.mu.Unlock()
	fresh := r == nil
	if fresh {
		var err error
		if r, err = m.discover(ctx); err != nil {
			if ctx.Err() == nil {
				m.failed(slog.LevelInfo, "no router that maps ports found; looking again every minute", err)
			}
			m.forget()
			return m.cfg.Retry
		}
	}
	err := m.mapAll(ctx, r)
	if err != nil && !fresh && ctx.Err() == nil {
		// The router stopped answering or lost the mappings (a restart):
		// find it again now rather than a lease later, and ask for the
		// same ports. Meanwhile the mappings are still reported: the port
		// will be the same, so the address members know stays right.
		m.cfg.Log.Info("port mapping renewal failed; finding the router again", "router", r, "err", err)
		m.mu.Lock()
		m.router = nil
		m.mu.Unlock()
		if r, err = m.discover(ctx); err == nil {
			err = m.mapAll(ctx, r)
		}
	}
	if err != nil && ctx.Err() == nil {
		m.mu.Lock()
		held := !fresh && time.Since(m.lastOK) < m.cfg.Lease
		m.mu.Unlock()
		if held {
			// A restarting router may not answer yet: the mappings stand
			// until their lease would have run out, and the router is
			// looked for again at the next renewal.
			return m.cfg.Lease / 3
		}
		m.failed(slog.LevelWarn, "port mapping failed; trying again every minute", err)
		m.forget()
		return m.cfg.Retry
	}
	m.mu.Lock()
	m.lastErr, m.lastOK = "", time.Now()
	m.mu.Unlock()
	return m.cfg.Lease / 3
}

// failed logs a failure once, not on every retry: a device on a network
// without such a router would otherwise say so every minute.
func (m *Mapper) failed(level slog.Level, msg string, err error) {
	m.mu.Lock()
	same := m.lastErr == err.Error()
	m.lastErr = err.Error()
	m.mu.Unlock()
	if !same {
		m.cfg.Log.Log(context.Background(), level, msg, "err", err)
	}
}

func (m *Mapper) discover(ctx context.Context) (Router, error) {
	dctx, cancel := context.WithTimeout(ctx, discoverTimeout)
	defer cancel()
	r, err := m.cfg.Discover(dctx)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.router, m.everSeen = r, true
	m.mu.Unlock()
	return r, nil
}

// forget drops the router and the mappings it held; the external ports
// are kept, to be asked for again.
func (m *Mapper) forget() {
	m.mu.Lock()
	m.router = nil
	clear(m.mapped)
	m.mu.Unlock()
}

// mapAll maps each wanted port and reads the public address. It fails if
// the router answered none of it.
func (m *Mapper) mapAll(ctx context.Context, r Router) error {
	m.mu.Lock()
	want := make(map[int]int, len(m.want))
	for p := range m.want {
		want[p] = m.ext[p]
	}
	var gone []int
	for p := range m.mapped {
		if !m.want[p] {
			gone = append(gone, p)
		}
	}
	m.mu.Unlock()
	for _, p := range gone {
		_ = r.Unmap(ctx, p, m.externalOf(p))
		m.mu.Lock()
		delete(m.mapped, p)
		m.mu.Unlock()
	}
	public, err := r.External(ctx)
	if err != nil {
		return fmt.Errorf("the router's public address: %w", err)
	}
	var errs []error
	for internal, held := range want {
		ext, err := mapOne(ctx, r, internal, held, m.cfg.Lease)
		m.mu.Lock()
		if err == nil {
			if !m.mapped[internal] || m.ext[internal] != ext || m.public != public {
				m.cfg.Log.Info("port mapped on the router", "router", r, "internal", internal, "external", netip.AddrPortFrom(public, uint16(ext)))
			}
			m.ext[internal], m.mapped[internal] = ext, true
		} else {
			delete(m.mapped, internal)
			errs = append(errs, err)
		}
		m.public = public
		m.mu.Unlock()
	}
	return errors.Join(errs...)
}

func (m *Mapper) externalOf(internal int) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ext[internal]
}

// mapOne maps internal on held, the port it had, or on internal itself the
// first time, and on a random port if the router refuses that one.
func mapOne(ctx context.Context, r Router, internal, held int, lease time.Duration) (int, error) {
	if held == 0 {
		held = internal
	}
	ext, err := r.Map(ctx, internal, held, lease)
	if err == nil {
		return ext, nil
	}
	first := err
	for range triesElsewhere {
		if ctx.Err() != nil {
			break
		}
		if ext, err = r.Map(ctx, internal, randomPort(), lease); err == nil {
			return ext, nil
		}
	}
	return 0, fmt.Errorf("mapping port %d on %s: %w", internal, r, first)
}

// randomPort is a port above the well-known and registered ranges most
// routers keep for themselves.
func randomPort() int { return 32768 + rand.IntN(65535-32768) }

func (m *Mapper) unmapAll() {
	m.mu.Lock()
	r := m.router
	var ports [][2]int
	for p, ok := range m.mapped {
		if ok {
			ports = append(ports, [2]int{p, m.ext[p]})
		}
	}
	m.mu.Unlock()
	if r == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), unmapTimeout)
	defer cancel()
	for _, p := range ports {
		_ = r.Unmap(ctx, p[0], p[1])
	}
}

// discoverTimeout bounds a search for the router: SSDP answers within its
// MX (a few seconds); NAT-PMP's gateway answers at once or not at all.
const (
	discoverTimeout = 10 * time.Second
	unmapTimeout    = 3 * time.Second
)
