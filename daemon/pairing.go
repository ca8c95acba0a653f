package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/pair"
	"github.com/danyue/danyue/pair/rendezvous"
	"github.com/danyue/danyue/peer"
)

// Short-code pairing. POST /v1/pairing makes an invitation (pair.Invitation:
// one use, five minutes) and opens a rendezvous for it on the LAN
// (pair/rendezvous): a plain TCP port, announced by mDNS with the code's
// channel. A joiner with the code (POST /v1/join) meets it there, both run
// the PAKE, and the inviter seals the library's long invite code to the
// joiner under the PAKE's key; the joiner then joins as with a long code.
//
// A daemon has at most one open invitation: a new one replaces the last,
// whose code stops working, so the newest code shown is the one that works.

// browseTimeout bounds how long a joiner looks for the inviter by mDNS.
const browseTimeout = 15 * time.Second

// maxRecentPairings is how many ended invitations GET /v1/pairing/{id}
// still answers for.
const maxRecentPairings = 8

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
	if len(p.recent) > maxRecentPairings {
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

// close ends the open invitation, for the daemon's Close.
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

func (d *Daemon) pairAD() []byte {
	name := d.names.get(d.self)
	for len(name) > maxADName {
		_, n := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-n]
	}
	b, _ := json.Marshal(pairAD{Device: d.self.String(), Name: name})
	return b
}

func parsePairAD(b []byte) pairAD {
	var ad pairAD
	_ = json.Unmarshal(b, &ad) // best effort: only shown to people
	return ad
}

// invitePayload is what an inviter seals to a joiner: the library's long
// invite code, with the addresses it listens on now.
func (d *Daemon) invitePayload() ([]byte, error) {
	node := d.net.current()
	if node == nil {
		return nil, errors.New("the peer network is not running")
	}
	return []byte(node.Invite()), nil
}

func (d *Daemon) handlePairingCreate(w http.ResponseWriter, r *http.Request) error {
	if r.ContentLength != 0 {
		var empty struct{}
		if err := decodeBody(w, r, &empty); err != nil {
			return err
		}
	}
	if _, err := d.invitePayload(); err != nil {
		return errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "%v", err)
	}
	validity := pair.DefaultValidity
	if d.cfg.pairValidity > 0 {
		validity = d.cfg.pairValidity
	}
	inv, err := pair.NewInvitation(validity)
	if err != nil {
		return err
	}
	log := d.log.With("component", "pairing")
	host, err := rendezvous.Open(rendezvous.Config{
		Invitation: inv,
		Listen:     d.cfg.PairListen,
		AD:         d.pairAD(),
		Payload:    d.invitePayload,
		Announce:   !d.cfg.NoMDNS,
		Logger:     log,
	})
	if err != nil {
		return errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "cannot open the pairing port: %v", err)
	}
	var id [8]byte
	rand.Read(id[:])
	e := &pairingEntry{id: hex.EncodeToString(id[:]), inv: inv, host: host, addrs: host.Addrs()}
	old, ok := d.pairs.add(e)
	if !ok {
		host.Close()
		return errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "the daemon is shutting down")
	}
	if old != nil {
		old.host.Close()
	}
	d.spawn(func() {
		<-host.Done()
		if o, _ := host.Outcome(); o.Paired {
			d.notePaired(parsePairAD(o.PeerAD).Device)
		}
		v := e.view()
		log.Info("pairing ended", "channel", inv.Code.Channel, "state", v.State, "device", v.Device, "name", v.DeviceName, "detail", v.Detail)
	})
	log.Info("pairing: invitation open", "channel", inv.Code.Channel, "expires", inv.Expires.Format(time.RFC3339), "addresses", e.addrs)
	writeJSON(w, http.StatusCreated, e.view())
	return nil
}

func (d *Daemon) pairingOf(r *http.Request) (*pairingEntry, error) {
	e := d.pairs.find(r.PathValue("id"))
	if e == nil {
		return nil, errorf(http.StatusNotFound, api.CodeNotFound, "no invitation %q (only the last %d are kept)", r.PathValue("id"), maxRecentPairings)
	}
	return e, nil
}

// handlePairingGet answers an invitation's state; with ?wait=1 it first
// waits until the invitation has ended (or the client goes away), so a
// client learns the outcome without polling.
func (d *Daemon) handlePairingGet(w http.ResponseWriter, r *http.Request) error {
	e, err := d.pairingOf(r)
	if err != nil {
		return err
	}
	switch r.URL.Query().Get("wait") {
	case "", "0", "false":
	case "1", "true":
		select {
		case <-e.host.Done():
		case <-r.Context().Done():
			return nil
		case <-d.closing:
		}
	default:
		return errorf(http.StatusBadRequest, api.CodeInvalid, "wait must be 1 or 0, not %q", r.URL.Query().Get("wait"))
	}
	writeJSON(w, http.StatusOK, e.view())
	return nil
}

func (d *Daemon) handlePairingDelete(w http.ResponseWriter, r *http.Request) error {
	e, err := d.pairingOf(r)
	if err != nil {
		return err
	}
	e.host.Close()
	writeJSON(w, http.StatusOK, e.view())
	return nil
}

// view is the API's picture of an invitation.
func (e *pairingEntry) view() api.Pairing {
	v := api.Pairing{
		ID:        e.id,
		Code:      e.inv.Code.String(),
		Expires:   e.inv.Expires.UTC().Format(time.RFC3339),
		State:     api.PairingOpen,
		Addresses: append([]string{}, e.addrs...),
	}
	o, done := e.host.Outcome()
	if !done {
		return v
	}
	ad := parsePairAD(o.PeerAD)
	switch {
	case o.Paired:
		v.State, v.Device, v.DeviceName = api.PairingPaired, ad.Device, ad.Name
		v.Detail = fmt.Sprintf("%s joined the library", orUnnamed(ad.Name))
	case errors.Is(o.Err, pair.ErrWrongCode):
		v.State = api.PairingWrongCode
		v.Detail = "a device tried a wrong code, so this code is spent; run `danyue invite` again for a new one"
	case errors.Is(o.Err, pair.ErrInvitationExpired):
		v.State, v.Detail = api.PairingExpired, "the code expired unused; run `danyue invite` again for a new one"
	case errors.Is(o.Err, rendezvous.ErrCancelled):
		v.State, v.Detail = api.PairingCancelled, "the invitation was cancelled"
		if e.replaced.Load() {
			v.Detail = "the invitation was replaced by a newer one"
		}
	default:
		v.State, v.Detail = api.PairingFailed, fmt.Sprintf("pairing failed, and this code is spent: %v", o.Err)
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

// looksLikeShortCode tells a mistyped short code from a mistyped long one,
// to say what is wrong with the right format.
func looksLikeShortCode(s string) bool {
	return !strings.HasPrefix(strings.ToLower(strings.TrimSpace(s)), "danyue")
}

// pairByCode finds the inviter of a short code (at pairAddr, or by mDNS),
// runs the pairing and returns the library invite it handed over.
func (d *Daemon) pairByCode(ctx context.Context, code pair.Code, pairAddr string) (peer.Invite, error) {
	var addrs []string
	switch {
	case pairAddr != "":
		if _, _, err := net.SplitHostPort(pairAddr); err != nil {
			return peer.Invite{}, errorf(http.StatusBadRequest, api.CodeInvalid, "pairAddr %q is not HOST:PORT: %v", pairAddr, err)
		}
		addrs = []string{pairAddr}
	case d.cfg.NoMDNS:
		return peer.Invite{}, errorf(http.StatusNotFound, api.CodeNoInviter, "LAN discovery is off (--no-mdns), so the inviter cannot be found: give its address with --pair-addr HOST:PORT (`danyue invite` prints it)")
	default:
		bctx, cancel := context.WithTimeout(ctx, browseTimeout)
		found, err := rendezvous.Browse(bctx, code.Channel, nil, d.log.With("component", "pairing"))
		cancel()
		if err != nil {
			return peer.Invite{}, errorf(http.StatusNotFound, api.CodeNoInviter, "no device on this network offers code %d-… (looked for %v): the code may have been used or expired (it lasts five minutes), or `danyue invite` is not waiting there; on a network without multicast, add --pair-addr HOST:PORT as `danyue invite` prints it", code.Channel, browseTimeout)
		}
		addrs = found
	}
	var inv peer.Invite
	accept := func(payload, _ []byte) error {
		var err error
		inv, err = peer.DecodeInvite(string(payload))
		return err
	}
	var err error
	for _, a := range addrs {
		var j *rendezvous.Joined
		j, err = rendezvous.Join(ctx, a, code, d.pairAD(), accept)
		if err == nil {
			d.log.Info("paired by short code", "inviter", parsePairAD(j.PeerAD).Name, "addr", a)
			return inv, nil
		}
		if !errors.Is(err, rendezvous.ErrUnreachable) {
			break // a session ran: its answer is final
		}
	}
	switch {
	case errors.Is(err, pair.ErrWrongCode):
		return peer.Invite{}, errorf(http.StatusForbidden, api.CodeWrongCode, "wrong code: it does not match the inviter's, and that code is now spent; run `danyue invite` again on the other device and type the new code")
	case errors.Is(err, pair.ErrRefused):
		return peer.Invite{}, errorf(http.StatusGone, api.CodeCodeSpent, "the code was already used or has expired; run `danyue invite` again on the other device")
	case errors.Is(err, rendezvous.ErrUnreachable):
		return peer.Invite{}, errorf(http.StatusNotFound, api.CodeNoInviter, "cannot reach the inviter at %s: its code may have been used or expired, or a firewall blocks the port (%v)", strings.Join(addrs, ", "), err)
	}
	return peer.Invite{}, errorf(http.StatusBadGateway, api.CodeUnavailable, "pairing with the inviter failed: %v", err)
}

// inviteOf returns the library invite of a join request: a short code is
// paired for, a long code carries it.
func (d *Daemon) inviteOf(ctx context.Context, text, pairAddr string) (peer.Invite, error) {
	code, err := pair.ParseCode(text)
	if err == nil {
		return d.pairByCode(ctx, code, pairAddr)
	}
	if looksLikeShortCode(text) {
		return peer.Invite{}, errorf(http.StatusBadRequest, api.CodeBadInvite, "%v (a long invite code starts with danyue1-)", err)
	}
	if pairAddr != "" {
		return peer.Invite{}, errorf(http.StatusBadRequest, api.CodeInvalid, "pairAddr goes with a short code, not a long one")
	}
	inv, err := peer.DecodeInvite(text)
	if err != nil {
		return peer.Invite{}, errorf(http.StatusBadRequest, api.CodeBadInvite, "%v", err)
	}
	return inv, nil
}
