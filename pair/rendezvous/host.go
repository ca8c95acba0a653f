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
	"net/netip"
	"sync"
	"time"

	"github.com/danyue/danyue/internal/connlimit"
	"github.com/danyue/danyue/internal/lan"
	"github.com/danyue/danyue/pair"
)

// SessionTimeout bounds one connection from accept to the end of the
// handover, whatever the other side does.
const SessionTimeout = time.Minute

// RespondTimeout bounds the PAKE of one session at the inviter, hello
// included: a joiner answers at once (it only computes), so this is how
// long an initiator that sent its guess and stalls can hold the code
// before it is burned and named.
const RespondTimeout = 20 * time.Second

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
	// Burns is the inviter's record of burned codes, shared by its
	// invitations: a burn is added to it, and the addresses it refuses get
	// no guess. Default a record of this rendezvous alone.
	Burns *Burns
	// Limits caps the listener; default DefaultLimits.
	Limits *connlimit.Limits
	Logger *slog.Logger
}

// Outcome is how an invitation ended.
type Outcome struct {
	// Paired: the joiner has the payload and confirmed it.
	Paired bool
	// PeerAD is the joiner's associated data, authenticated if Paired.
	PeerAD []byte
	// Err says why not: pair.ErrWrongCode, pair.ErrInvitationExpired,
	// ErrCancelled, ErrNoAck, or what broke the session.
	Err error
	// From is the address of the session that took the code, if one did;
	// At is when that session ended.
	From netip.Addr
	At   time.Time
	// Burned: that session did not prove it knew the code, so it spent
	// the code without pairing (a wrong code, or one that broke off
	// after its guess was tested). Burner is then From's record in
	// Config.Burns, this burn included.
	Burned bool
	Burner Burner
}

// Host is an open rendezvous: the inviter's side.
//
// Its invitation ends (Done, Outcome) when the code pairs, is burned,
// expires or is cancelled. A burned code goes on being announced and
// answered until it would have expired, each session refused with who
// burned it and when (pair.Refusal), so that the joiner who comes with the
// right code is told what happened rather than finding nobody.
type Host struct {
	cfg    Config
	ln     *connlimit.Listener
	ad     *announcer
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	wg     sync.WaitGroup

	mu    sync.Mutex
	timer *time.Timer
	// outcome is recorded first and published (done closed) after the
	// listener is closed when the outcome ends the rendezvous: whoever
	// sees Done then finds the port closed, never a session cut short.
	outcome   *Outcome
	published bool
	shut      bool
	// noted are the refused addresses already logged at Info for this
	// invitation, so that a flood of refused connections is one line each.
	noted map[netip.Addr]bool
}

// maxNoted bounds Host.noted.
const maxNoted = 64

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
	if cfg.Burns == nil {
		cfg.Burns = NewBurns()
	}
	lim := DefaultLimits
	if cfg.Limits != nil {
		lim = *cfg.Limits
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("rendezvous: listen on %s: %w", cfg.Listen, err)
	}
	h := &Host{cfg: cfg, ln: connlimit.New(ln, lim), done: make(chan struct{}), noted: make(map[netip.Addr]bool)}
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

// Done is closed when the invitation has ended; Outcome then says how.
// The rendezvous may still answer, with refusals, until it expires.
func (h *Host) Done() <-chan struct{} { return h.done }

// Outcome returns how the invitation ended, and false while it is open.
func (h *Host) Outcome() (Outcome, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.published {
		return Outcome{}, false
	}
	return *h.outcome, true
}

// Close ends the rendezvous (ErrCancelled if the invitation was still
// open), stops listening and announcing, and waits for its goroutines:
// the port is free when it returns.
func (h *Host) Close() {
	h.record(Outcome{Err: ErrCancelled})
	h.shutdown()
	h.publish()
	h.wg.Wait()
}

// record sets the outcome once, and reports whether one was set before.
func (h *Host) record(o Outcome) (already bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.outcome != nil {
		return true
	}
	h.outcome = &o
	return false
}

// recorded reports whether the invitation has an outcome.
func (h *Host) recorded() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.outcome != nil
}

// publish ends the invitation for Done and Outcome.
func (h *Host) publish() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.published {
		return
	}
	h.published = true
	close(h.done)
}

// shutdown stops listening and announcing, and ends every session.
func (h *Host) shutdown() {
	h.mu.Lock()
	if h.shut {
		h.mu.Unlock()
		return
	}
	h.shut = true
	timer := h.timer
	h.mu.Unlock()
	timer.Stop()
	h.ln.Close()
	h.ad.close()
	h.cancel()
}

// stopAnswering stops listening and announcing; sessions in flight go on.
func (h *Host) stopAnswering() {
	h.ln.Close()
	h.ad.close()
}

// expire ends the rendezvous when the code's life is over. An unused
// invitation expires; a session testing the code goes on until it ends (it
// took the code in time), and the rendezvous closes then.
func (h *Host) expire() {
	if h.cfg.Invitation.Used() && !h.recorded() {
		h.stopAnswering()
		return
	}
	h.record(Outcome{Err: pair.ErrInvitationExpired})
	h.shutdown()
	h.publish()
}

func (h *Host) acceptLoop() {
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return // closed
		}
		h.wg.Go(func() { h.serve(c) })
	}
}

// ended records the end of the session that took the code. A pairing (or
// a joiner that proved it knew the code) closes the rendezvous; a burn
// leaves it answering refusals until the code would have expired.
func (h *Host) ended(o Outcome, log *slog.Logger) {
	if h.recorded() {
		return // cancelled under the session: nobody burned anything
	}
	if o.Burned {
		o.Burner = h.cfg.Burns.add(o.From, o.At)
		log.Info("pairing: the code was spent by a session that did not prove it knew it", "err", o.Err, "burns", o.Burner.Burns)
	}
	if h.record(o) {
		return
	}
	if !o.Burned || !time.Now().Before(h.cfg.Invitation.Expires) {
		h.shutdown()
	}
	h.publish()
}

// serve runs one connection.
func (h *Host) serve(nc net.Conn) {
	defer nc.Close()
	ctx, cancel := context.WithTimeout(h.ctx, SessionTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	from := remoteIP(nc)
	log := h.cfg.Logger.With("remote", nc.RemoteAddr())
	nonce := make([]byte, nonceSize)
	rand.Read(nonce)
	peerNonce, err := exchangeHello(nc, nonce)
	if err != nil {
		log.Debug("pairing: dropped a connection before the code was tested", "err", err)
		return
	}
	if b, refused := h.cfg.Burns.refused(from); refused {
		err := pair.Refuse(ctx, nc, pair.Refusal{Reason: pair.ReasonBlocked, By: from, At: b.Last, Burns: b.Burns})
		h.noteRefused(log, from, "pairing: refused a session from an address that burned codes", "burns", b.Burns, "until", b.RefusedUntil.Format(time.RFC3339), "err", err)
		return
	}
	sid := sessionID(nonce, peerNonce)
	rctx, rcancel := context.WithTimeout(ctx, RespondTimeout)
	res, claimed, err := h.cfg.Invitation.RespondFrom(rctx, nc, sid, h.cfg.AD, from)
	rcancel()
	if !claimed {
		if errors.Is(err, pair.ErrInvitationUsed) || errors.Is(err, pair.ErrInvitationExpired) {
			h.noteRefused(log, from, "pairing: refused a session: the code is taken", "err", err)
		} else {
			log.Debug("pairing: dropped a session before the code was tested", "err", err)
		}
		return
	}
	o := Outcome{From: from}
	if err != nil {
		o.Err, o.Burned = err, true
	} else if err := h.handOver(nc, res, sid); err != nil {
		log.Warn("pairing: handover failed", "err", err)
		o.Err, o.PeerAD = err, res.PeerAD
	} else {
		o.Paired, o.PeerAD = true, res.PeerAD
	}
	o.At = time.Now()
	if r, ok := h.cfg.Invitation.Refusal(); ok && o.Burned {
		o.At = r.At // the time the refusals name
	}
	h.ended(o, log)
}

// noteRefused logs a refused session at Info once per address and
// invitation, and at Debug after that.
func (h *Host) noteRefused(log *slog.Logger, from netip.Addr, msg string, args ...any) {
	h.mu.Lock()
	first := !h.noted[from] && len(h.noted) < maxNoted
	if first {
		h.noted[from] = true
	}
	h.mu.Unlock()
	level := slog.LevelDebug
	if first {
		level = slog.LevelInfo
	}
	log.Log(context.Background(), level, msg, args...)
}

// remoteIP is the address a connection came from, as one burner is known
// by: IPv4 in its 4-byte form.
func remoteIP(c net.Conn) netip.Addr {
	if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
		return ap.Addr().Unmap().WithZone("")
	}
	return netip.Addr{}
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
