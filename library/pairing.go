package library

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
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
	// Detail says the outcome to a person, and what to do next.
	Detail string
}

// pairings are the open invitation and the last ended ones. It has a lock
// of its own.
type pairings struct {
	mu     sync.Mutex
	recent []*pairingEntry // oldest first; the last may be open
	closed bool
}

type pairingEntry struct {
	id       string
	inv      *pair.Invitation
	host     *rendezvous.Host
	addrs    []string
	replaced atomic.Bool
}

// add makes e the open invitation and returns the one it replaces.
func (p *pairings) add(e *pairingEntry) (old *pairingEntry, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, false
	}
	if n := len(p.recent); n > 0 {
		old = p.recent[n-1]
		old.replaced.Store(true)
	}
	p.recent = append(p.recent, e)
	if len(p.recent) > MaxRecentPairings {
		p.recent = p.recent[1:]
	}
	return old, true
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
// invite code, with the addresses it listens on now.
func (l *Library) invitePayload() ([]byte, error) {
	code, err := l.Invite()
	return []byte(code), err
}

// ErrUnavailable wraps the error of a pairing that cannot be opened now:
// the peer network is not running, the port cannot be opened, or the
// library is closing.
var ErrUnavailable = errors.New("unavailable")

// OpenPairing makes a new invitation, which replaces the open one, and
// opens its rendezvous.
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
	log := l.log.With("component", "pairing")
	host, err := rendezvous.Open(rendezvous.Config{
		Invitation: inv,
		Listen:     l.cfg.PairListen,
		AD:         l.pairAD(),
		Payload:    l.invitePayload,
		Announce:   l.cfg.MDNS,
		Logger:     log,
	})
	if err != nil {
		return Pairing{}, refusef(ErrUnavailable, "cannot open the pairing port: %v", err)
	}
	var id [8]byte
	rand.Read(id[:])
	e := &pairingEntry{id: hex.EncodeToString(id[:]), inv: inv, host: host, addrs: host.Addrs()}
	old, ok := l.pairs.add(e)
	if !ok {
		host.Close()
		return Pairing{}, refusef(ErrUnavailable, "the library is closing")
	}
	if old != nil {
		old.host.Close()
	}
	l.spawn(func() {
		<-host.Done()
		if o, _ := host.Outcome(); o.Paired {
			l.notePaired(parsePairAD(o.PeerAD).Device)
		}
		v := e.view()
		log.Info("pairing ended", "channel", inv.Code.Channel, "state", v.State, "device", v.Device, "name", v.DeviceName, "detail", v.Detail)
	})
	log.Info("pairing: invitation open", "channel", inv.Code.Channel, "expires", inv.Expires.Format(time.RFC3339), "addresses", e.addrs)
	return e.view(), nil
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
	switch {
	case o.Paired:
		v.State, v.Device, v.DeviceName = PairingPaired, ad.Device, ad.Name
		v.Detail = fmt.Sprintf("%s joined the library", orUnnamed(ad.Name))
	case errors.Is(o.Err, pair.ErrWrongCode):
		v.State = PairingWrongCode
		v.Detail = "a device tried a wrong code, so this code is spent; run `danyue invite` again for a new one"
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

func orUnnamed(name string) string {
	if name == "" {
		return "a device"
	}
	return name
}
