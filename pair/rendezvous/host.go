package rendezvous

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/danyue/danyue/internal/connlimit"
	"github.com/danyue/danyue/internal/lan"
	"github.com/danyue/danyue/pair"
)

// SessionTimeout bounds one connection from accept to the end of the
// handover, whatever the other side does.
const SessionTimeout = time.Minute

// DefaultLimits cap the rendezvous listener: pairing needs one connection,
// the rest is room for a retry and for strangers, who are evicted oldest
// first when it fills up.
var DefaultLimits = connlimit.Limits{Max: 16, PerAddr: 4, WriteStall: StepTimeout}

// Errors of an Outcome besides pair.ErrWrongCode and
// pair.ErrInvitationExpired.
var (
	// ErrCancelled: the host was closed before the invitation was used.
	ErrCancelled = errors.New("rendezvous: invitation cancelled")
	// ErrNoAck: the payload was sent but the joiner did not confirm it.
	ErrNoAck = errors.New("rendezvous: the other device did not confirm the invite")
)

// Config is how an inviter opens a rendezvous.
type Config struct {
	// Invitation holds the code; it must be fresh.
	Invitation *pair.Invitation
	// Listen is the TCP address to listen on; default ":0" (every
	// interface, a port the system picks).
	Listen string
	// AD is this device's associated data for the PAKE (at most 256
	// bytes): the joiner sees it authenticated.
	AD []byte
	// Payload returns what is sealed to the joiner once the PAKE has
	// succeeded: it is asked for only then, so it is current.
	Payload func() ([]byte, error)
	// Announce announces the rendezvous by mDNS on Interfaces (default
	// every up multicast interface).
	Announce   bool
	Interfaces []net.Interface
	// Limits caps the listener; default DefaultLimits.
	Limits *connlimit.Limits
	Logger *slog.Logger
}

// Outcome is how a rendezvous ended.
type Outcome struct {
	// Paired: the joiner has the payload and confirmed it.
	Paired bool
	// PeerAD is the joiner's associated data, authenticated if Paired.
	PeerAD []byte
	// Err says why not: pair.ErrWrongCode, pair.ErrInvitationExpired,
	// ErrCancelled, ErrNoAck, or what broke the session.
	Err error
}

// Host is an open rendezvous: the inviter's side.
type Host struct {
	cfg    Config
	ln     *connlimit.Listener
	ad     *announcer
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	wg     sync.WaitGroup

	mu       sync.Mutex
	timer    *time.Timer
	inflight int
	outcome  *Outcome
	// the sessions' results, for the outcome once the code is spent
	paired  *Outcome
	wrong   bool
	failure error
}

// Open listens, announces and answers joiners until the invitation is used
// or expires, or Close is called.
func Open(cfg Config) (*Host, error) {
	if cfg.Invitation == nil || cfg.Payload == nil {
		return nil, errors.New("rendezvous: no invitation or payload")
	}
	if cfg.Invitation.Used() || !time.Now().Before(cfg.Invitation.Expires) {
		return nil, errors.New("rendezvous: the invitation is already used or expired")
	}
	if cfg.Listen == "" {
		cfg.Listen = ":0"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	lim := DefaultLimits
	if cfg.Limits != nil {
		lim = *cfg.Limits
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("rendezvous: listen on %s: %w", cfg.Listen, err)
	}
	h := &Host{cfg: cfg, ln: connlimit.New(ln, lim), done: make(chan struct{})}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	if cfg.Announce {
		h.ad = announce(cfg.Invitation.Code.Channel, ln.Addr().(*net.TCPAddr).Port, cfg.Interfaces, cfg.Logger)
	}
	h.mu.Lock() // expire may run before the assignment is done
	h.timer = time.AfterFunc(time.Until(cfg.Invitation.Expires), h.expire)
	h.mu.Unlock()
	h.wg.Go(h.acceptLoop)
	return h, nil
}

// Addrs returns host:port addresses a joiner can be given by hand: the
// listener's own if it is bound to one address, else one per address of
// the up interfaces.
func (h *Host) Addrs() []string {
	return lan.Addrs(h.ln.Addr().String(), false)
}

// Done is closed when the rendezvous has ended; Outcome then says how.
func (h *Host) Done() <-chan struct{} { return h.done }

// Outcome returns how the rendezvous ended, and false while it is open.
func (h *Host) Outcome() (Outcome, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.outcome == nil {
		return Outcome{}, false
	}
	return *h.outcome, true
}

// Close ends the rendezvous (ErrCancelled if it was still open) and waits
// for its goroutines.
func (h *Host) Close() {
	h.finish(Outcome{Err: ErrCancelled})
	h.wg.Wait()
}

// finish sets the outcome once and closes everything.
func (h *Host) finish(o Outcome) {
	h.mu.Lock()
	if h.outcome != nil {
		h.mu.Unlock()
		return
	}
	h.outcome = &o
	timer := h.timer
	h.mu.Unlock()
	timer.Stop()
	h.ln.Close()
	h.ad.close()
	h.cancel()
	close(h.done)
}

// expire ends an unused invitation. One whose code is being tested goes on
// until that session ends: it took the code in time.
func (h *Host) expire() {
	if !h.cfg.Invitation.Used() {
		h.finish(Outcome{Err: pair.ErrInvitationExpired})
		return
	}
	h.ln.Close()
	h.settle()
}

func (h *Host) acceptLoop() {
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return // closed
		}
		h.mu.Lock()
		h.inflight++
		h.mu.Unlock()
		h.wg.Go(func() {
			o, tested := h.serve(c)
			h.record(o, tested)
		})
	}
}

// record keeps a session's result. Once the code is spent the listener
// closes, and when the last session has ended the outcome is the best of
// theirs: a pairing, else a wrong code, else what broke. (Sessions that
// overlap the one that spent the code are strangers, refused.)
func (h *Host) record(o Outcome, tested bool) {
	h.mu.Lock()
	h.inflight--
	switch {
	case o.Paired:
		h.paired = &o
	case errors.Is(o.Err, pair.ErrWrongCode):
		h.wrong = true
	case tested && h.failure == nil:
		h.failure = o.Err
	}
	h.mu.Unlock()
	if h.cfg.Invitation.Used() {
		h.ln.Close()
		h.settle()
	}
}

// settle finishes once no session is in flight.
func (h *Host) settle() {
	h.mu.Lock()
	if h.inflight > 0 {
		h.mu.Unlock()
		return
	}
	var o Outcome
	switch {
	case h.paired != nil:
		o = *h.paired
	case h.wrong:
		o = Outcome{Err: pair.ErrWrongCode}
	case h.failure != nil:
		o = Outcome{Err: h.failure}
	default:
		o = Outcome{Err: errors.New("rendezvous: the pairing session broke off")}
	}
	h.mu.Unlock()
	h.finish(o)
}

// serve runs one connection. tested says whether the session may have
// tested the code (it got past the hello and was not refused).
func (h *Host) serve(nc net.Conn) (o Outcome, tested bool) {
	defer nc.Close()
	ctx, cancel := context.WithTimeout(h.ctx, SessionTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	log := h.cfg.Logger.With("remote", nc.RemoteAddr())
	nonce := make([]byte, nonceSize)
	rand.Read(nonce)
	peerNonce, err := exchangeHello(nc, nonce)
	if err != nil {
		log.Debug("pairing: dropped a connection before the code was tested", "err", err)
		return Outcome{Err: err}, false
	}
	sid := sessionID(nonce, peerNonce)
	res, err := h.cfg.Invitation.Respond(ctx, nc, sid, h.cfg.AD)
	switch {
	case errors.Is(err, pair.ErrInvitationUsed), errors.Is(err, pair.ErrInvitationExpired):
		log.Info("pairing: refused a session: the code is spent", "err", err)
		return Outcome{Err: err}, false
	case err != nil:
		log.Info("pairing: session failed", "err", err)
		return Outcome{Err: err}, true
	}
	if err := h.handOver(nc, res, sid); err != nil {
		log.Warn("pairing: handover failed", "err", err)
		return Outcome{Err: err, PeerAD: res.PeerAD}, true
	}
	return Outcome{Paired: true, PeerAD: res.PeerAD}, true
}

// handOver seals the payload to the joiner and waits for its ack.
func (h *Host) handOver(c net.Conn, res *pair.Result, sid []byte) error {
	s, err := newSealer(res.Key, sid, res.PeerAD, h.cfg.AD)
	if err != nil {
		return err
	}
	payload, err := h.cfg.Payload()
	if err != nil {
		return fmt.Errorf("rendezvous: payload: %w", err)
	}
	frame, err := seal(s.payload, payload, s.aad)
	if err != nil {
		return err
	}
	c.SetDeadline(time.Now().Add(StepTimeout))
	if _, err := c.Write(frame); err != nil {
		return fmt.Errorf("rendezvous: send invite: %w", err)
	}
	ack, err := readSealed(c, s.ack, s.aad)
	if err != nil || !bytes.Equal(ack, []byte(ackText)) {
		return fmt.Errorf("%w: %v", ErrNoAck, err)
	}
	return nil
}

// exchangeHello sends this side's hello and reads the peer's: both sides
// write first, which 30 bytes never block on.
func exchangeHello(c net.Conn, nonce []byte) ([]byte, error) {
	c.SetDeadline(time.Now().Add(StepTimeout))
	if _, err := c.Write(appendHello(nil, nonce)); err != nil {
		return nil, fmt.Errorf("rendezvous: send hello: %w", err)
	}
	b := make([]byte, helloSize)
	if _, err := io.ReadFull(c, b); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, ErrNotRendezvous
		}
		return nil, fmt.Errorf("rendezvous: read hello: %w", err)
	}
	return parseHello(b)
}
