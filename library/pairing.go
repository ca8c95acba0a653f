package library

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/danyue/danyue/pair"
	"github.com/danyue/danyue/pair/rendezvous"
)

// Short-code pairing, the inviter's side. OpenPairing makes an invitation
// (pair.Invitation: one use, five minutes) and opens a rendezvous for it on
// the LAN (pair/rendezvous): a plain TCP port, announced by mDNS with the
// code's channel. A joiner with the code (Join, join.go) meets it there,
// both run the PAKE, and the inviter seals the library's long invite code
// to the joiner under the PAKE's key; the joiner then joins as with a long
// code, and the inviter adds it to the members (notePaired).
//
// A device has at most one open invitation: a new one replaces the last,
// whose code stops working, so the newest code shown is the one that works.
// The last one's rendezvous is closed before the new one listens, so a
// pinned PairListen port is free for it.
//
// Someone on the LAN can spend (burn) a code with one wrong guess: the
// channel is announced in the clear, and one guess per code is what keeps
// the code's 16 bits enough (package pair). Burns are not prevented, they
// are named: the invitation's state says who burned it and when, the log
// says it at Warn, the burned code's rendezvous goes on telling the real
// joiner who spent it (pair/rendezvous), and an address that burns
// rendezvous.AttackBurns codes within rendezvous.BurnWindow is reported as
// an attack (PairingWarnings, which the status and the page show) and
// refused for a while, without a guess.

// MaxRecentPairings is how many ended invitations Pairing still answers
// for.
const MaxRecentPairings = 8

// PairingState is where an invitation is.
type PairingState string

// The states of an invitation: open until it ends in one of the others.
const (
	PairingOpen      PairingState = "open"
	PairingPaired    PairingState = "paired"
	PairingWrongCode PairingState = "wrong_code"
	PairingExpired   PairingState = "expired"
	PairingCancelled PairingState = "cancelled"
	PairingFailed    PairingState = "failed"
)

// Pairing is a short-code invitation as its inviter knows it.
type Pairing struct {
	ID        string
	Code      string // what the joiner types: "7-crossover-clockwork"
	Expires   time.Time
	State     PairingState
	Addresses []string // where the rendezvous listens (host:port)
	// Device and DeviceName are who paired (PairingPaired), as the
	// pairing's authenticated associated data says.
	Device, DeviceName string
	// TriedBy and TriedAt are the address and time of the try that spent
	// the code without pairing (PairingWrongCode, or PairingFailed when
	// it broke off), if one did.
	TriedBy string
	TriedAt time.Time
	// Burns is how many codes TriedBy spent within
	// rendezvous.BurnWindow, this one included.
	Burns int
	// Detail says the outcome to a person, and what to do next.
	Detail string
}

// pairings are the open invitation and the last ended ones. It has a lock
// of its own; openMu, taken before it, serialises OpenPairing, which
// closes the last rendezvous before it opens the next.
type pairings struct {
	openMu sync.Mutex
	mu     sync.Mutex
	recent []*pairingEntry // oldest first; the last may be open
	closed bool
	burns  *rendezvous.Burns // made on first use
	// browse finds the inviters of a channel; default rendezvous.Browse.
	// Tests set it.
	browse func(ctx context.Context, channel int, log *slog.Logger) ([]rendezvous.Announcer, error)
}

type pairingEntry struct {
	id       string
	inv      *pair.Invitation
	host     *rendezvous.Host
	addrs    []string
	replaced atomic.Bool
}

// last returns the newest invitation, which may be open; false once the
// library is closing.
func (p *pairings) last() (*pairingEntry, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, false
	}
	if n := len(p.recent); n > 0 {
		return p.recent[n-1], true
	}
	return nil, true
}

// add makes e the open invitation; false once the library is closing.
func (p *pairings) add(e *pairingEntry) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.recent = append(p.recent, e)
	if len(p.recent) > MaxRecentPairings {
		p.recent = p.recent[1:]
	}
	return true
}

// burnRecord returns the record of burned codes all invitations share.
func (p *pairings) burnRecord() *rendezvous.Burns {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.burns == nil {
		p.burns = rendezvous.NewBurns()
	}
	return p.burns
}

// all returns the invitations kept, oldest first.
func (p *pairings) all() []*pairingEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*pairingEntry(nil), p.recent...)
}

func (p *pairings) find(id string) *pairingEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.recent {
		if e.id == id {
			return e
		}
	}
	return nil
}

// close ends the open invitation, for the library's Close.
func (p *pairings) close() {
	p.mu.Lock()
	p.closed = true
	recent := p.recent
	p.mu.Unlock()
	for _, e := range recent {
		e.host.Close()
	}
}

// pairAD is this device's associated data in a pairing: who it is, so
// each side can say whom it paired with. It is sent in the clear before the
// code is tested: the device id and name only.
type pairAD struct {
	Device string `json:"device"`
	Name   string `json:"name"`
}

// maxADName keeps the associated data within the PAKE's 256-byte limit.
const maxADName = 128

func (l *Library) pairAD() []byte {
	name := l.names.get(l.self)
	for len(name) > maxADName {
		_, n := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-n]
	}
	b, _ := json.Marshal(pairAD{Device: l.self.String(), Name: name})
	return b
}

func parsePairAD(b []byte) pairAD {
	var ad pairAD
	_ = json.Unmarshal(b, &ad) // best effort: only shown to people
	return ad
}

// invitePayload is what an inviter seals to a joiner: the library's long
// invite code, with the addresses it listens on now, without a ticket: the
// inviter adds the joiner itself (notePaired).
func (l *Library) invitePayload() ([]byte, error) {
	code, err := l.pairingCode()
	return []byte(code), err
}

// ErrUnavailable wraps the error of a pairing that cannot be opened now:
// the peer network is not running, the port cannot be opened, or the
// library is closing.
var ErrUnavailable = errors.New("unavailable")

// OpenPairing makes a new invitation, which replaces the open one, and
// opens its rendezvous. The open one is closed first, even if the new one
// then cannot open: its code stops working either way.
func (l *Library) OpenPairing() (Pairing, error) {
	if _, err := l.invitePayload(); err != nil {
		return Pairing{}, &Refusal{Kind: ErrUnavailable, Msg: err.Error()}
	}
	validity := pair.DefaultValidity
	if l.cfg.PairValidity > 0 {
		validity = l.cfg.PairValidity
	}
	inv, err := pair.NewInvitation(validity)
	if err != nil {
		return Pairing{}, err
	}
	l.pairs.openMu.Lock()
	defer l.pairs.openMu.Unlock()
	old, ok := l.pairs.last()
	if !ok {
		return Pairing{}, refusef(ErrUnavailable, "the library is closing")
	}
	if old != nil {
		old.replaced.Store(true)
		old.host.Close()
	}
	log := l.log.With("component", "pairing")
	host, err := rendezvous.Open(rendezvous.Config{
		Invitation: inv,
		Listen:     l.cfg.PairListen,
		AD:         l.pairAD(),
		Payload:    l.invitePayload,
		Announce:   l.cfg.MDNS,
		Burns:      l.pairs.burnRecord(),
		Logger:     log,
	})
	if err != nil {
		return Pairing{}, refusef(ErrUnavailable, "cannot open the pairing port: %v", err)
	}
	var id [8]byte
	rand.Read(id[:])
	e := &pairingEntry{id: hex.EncodeToString(id[:]), inv: inv, host: host, addrs: host.Addrs()}
	if !l.pairs.add(e) {
		host.Close()
		return Pairing{}, refusef(ErrUnavailable, "the library is closing")
	}
	l.spawn(func() {
		<-host.Done()
		o, _ := host.Outcome()
		if o.Paired {
			l.notePaired(parsePairAD(o.PeerAD).Device)
		}
		l.logPairingEnded(log, inv, o, e.view())
	})
	log.Info("pairing: invitation open", "channel", inv.Code.Channel, "expires", inv.Expires.Format(time.RFC3339), "addresses", e.addrs)
	return e.view(), nil
}

// logPairingEnded logs how an invitation ended: a burn at Warn, with the
// address that burned it, and an attack once more.
func (l *Library) logPairingEnded(log *slog.Logger, inv *pair.Invitation, o rendezvous.Outcome, v Pairing) {
	if !o.Burned {
		log.Info("pairing ended", "channel", inv.Code.Channel, "state", v.State, "device", v.Device, "name", v.DeviceName, "detail", v.Detail)
		return
	}
	log.Warn("pairing: a code was spent by a failed try", "channel", inv.Code.Channel, "addr", v.TriedBy, "at", v.TriedAt.Format(time.RFC3339), "err", o.Err, "detail", v.Detail)
	if o.Burner.Burns >= rendezvous.AttackBurns {
		log.Warn("pairing: an address is burning codes; someone on this network is trying to pair", "addr", v.TriedBy, "burns", o.Burner.Burns, "window", rendezvous.BurnWindow, "refused_until", o.Burner.RefusedUntil.Format(time.RFC3339))
	}
}

// Pairing returns invitation id, with a channel closed once it has ended;
// false if it is not one of the last MaxRecentPairings.
func (l *Library) Pairing(id string) (Pairing, <-chan struct{}, bool) {
	e := l.pairs.find(id)
	if e == nil {
		return Pairing{}, nil, false
	}
	return e.view(), e.host.Done(), true
}

// OpenPairings returns the invitations whose codes still work, oldest
// first: at most one, since a new one replaces the last. A burned code's
// rendezvous that still answers with refusals is not open.
func (l *Library) OpenPairings() []Pairing {
	out := []Pairing{}
	for _, e := range l.pairs.all() {
		if v := e.view(); v.State == PairingOpen {
			out = append(out, v)
		}
	}
	return out
}

// CancelPairing ends invitation id if it is open, and returns it; false
// if it is not one of the last MaxRecentPairings.
func (l *Library) CancelPairing(id string) (Pairing, bool) {
	e := l.pairs.find(id)
	if e == nil {
		return Pairing{}, false
	}
	e.host.Close()
	return e.view(), true
}

// view is the invitation as Pairing shows it.
func (e *pairingEntry) view() Pairing {
	v := Pairing{
		ID:        e.id,
		Code:      e.inv.Code.String(),
		Expires:   e.inv.Expires,
		State:     PairingOpen,
		Addresses: append([]string{}, e.addrs...),
	}
	o, done := e.host.Outcome()
	if !done {
		return v
	}
	ad := parsePairAD(o.PeerAD)
	if o.Burned {
		v.TriedBy, v.TriedAt, v.Burns = o.From.String(), o.At, o.Burner.Burns
	}
	switch {
	case o.Paired:
		v.State, v.Device, v.DeviceName = PairingPaired, ad.Device, ad.Name
		v.Detail = fmt.Sprintf("%s joined the library", orUnnamed(ad.Name))
	case o.Burned:
		v.State = PairingFailed
		if errors.Is(o.Err, pair.ErrWrongCode) {
			v.State = PairingWrongCode
		}
		v.Detail = burnDetail(o)
	case errors.Is(o.Err, pair.ErrInvitationExpired):
		v.State, v.Detail = PairingExpired, "the code expired unused; run `danyue invite` again for a new one"
	case errors.Is(o.Err, rendezvous.ErrCancelled):
		v.State, v.Detail = PairingCancelled, "the invitation was cancelled"
		if e.replaced.Load() {
			v.Detail = "the invitation was replaced by a newer one"
		}
	default:
		v.State, v.Detail = PairingFailed, fmt.Sprintf("pairing failed, and this code is spent: %v", o.Err)
		if errors.Is(o.Err, rendezvous.ErrNoAck) && ad.Name != "" {
			v.Detail = fmt.Sprintf("%s received the invite but did not confirm it; if it did not join, run `danyue invite` again", ad.Name)
		}
	}
	return v
}

// burnDetail tells the inviter who burned its code: a person who mistyped
// it on the other device recognises that device's address; anyone else
// is someone on this network trying to pair.
func burnDetail(o rendezvous.Outcome) string {
	what := "tried a wrong code"
	if !errors.Is(o.Err, pair.ErrWrongCode) {
		what = "tried the code and broke off before showing it knew it"
	}
	if b := o.Burner; b.Burns >= rendezvous.AttackBurns {
		return fmt.Sprintf("%d codes burned by %s in the last %d minutes (this one: %s at %s): someone on this network is trying to pair, and this device refuses %s until %s; run `danyue invite` again for a new code",
			b.Burns, o.From, int(rendezvous.BurnWindow.Minutes()), what, clock(o.At), o.From, clock(b.RefusedUntil))
	}
	return fmt.Sprintf("someone at %s %s at %s, so this code is spent — if that was not the other device, someone on this network is trying to pair; run `danyue invite` again",
		o.From, what, clock(o.At))
}

// clock is a time of day as people read it here.
func clock(t time.Time) string { return t.Local().Format("15:04:05") }

// PairingWarning is an address that burned short codes lately.
type PairingWarning struct {
	Addr  string
	Burns int // within rendezvous.BurnWindow
	Last  time.Time
	// RefusedUntil is when this device stops refusing it; zero if it
	// does not.
	RefusedUntil time.Time
}

// Message says the warning to a person.
func (w PairingWarning) Message() string {
	if w.Burns >= rendezvous.AttackBurns {
		msg := fmt.Sprintf("%d pairing codes burned by %s in the last %d minutes, the last at %s: someone on this network is trying to pair", w.Burns, w.Addr, int(rendezvous.BurnWindow.Minutes()), clock(w.Last))
		if !w.RefusedUntil.IsZero() {
			msg += fmt.Sprintf("; refused until %s", clock(w.RefusedUntil))
		}
		return msg
	}
	return fmt.Sprintf("someone at %s spent a pairing code with a wrong try at %s — if that was not the device you were adding, someone on this network is trying to pair", w.Addr, clock(w.Last))
}

// PairingWarnings returns the addresses that burned this device's short
// codes within rendezvous.BurnWindow, the latest first.
func (l *Library) PairingWarnings() []PairingWarning {
	var out []PairingWarning
	for _, b := range l.pairs.burnRecord().Recent() {
		out = append(out, PairingWarning{Addr: b.Addr.String(), Burns: b.Burns, Last: b.Last, RefusedUntil: b.RefusedUntil})
	}
	return out
}

func orUnnamed(name string) string {
	if name == "" {
		return "a device"
	}
	return name
}
