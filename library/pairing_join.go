package library

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/danyue/danyue/pair"
	"github.com/danyue/danyue/pair/rendezvous"
	"github.com/danyue/danyue/peer"
)

// Short-code pairing, the joiner's side: find the devices that announce
// the code's channel, pair with the one that knows the code
// (rendezvous.Joiner.JoinAny tries the others when one does not, within
// its bounds), and say what each said when none did. Anyone on the LAN can
// announce a channel or refuse a session, so what a device answered is
// reported as its word, with its address.

// browseTimeout bounds how long a joiner looks for the inviter by mDNS.
const browseTimeout = 15 * time.Second

// findInviter returns where the inviters of code listen: pairAddr if
// given, else what mDNS finds.
func (l *Library) findInviter(ctx context.Context, code pair.Code, pairAddr string) ([]rendezvous.Announcer, error) {
	switch {
	case pairAddr != "":
		if _, _, err := net.SplitHostPort(pairAddr); err != nil {
			return nil, refusef(ErrBadPairAddr, "pairAddr %q is not HOST:PORT: %v", pairAddr, err)
		}
		return []rendezvous.Announcer{{Channel: code.Channel, Addrs: []string{pairAddr}}}, nil
	case !l.cfg.MDNS && l.pairs.browse == nil:
		return nil, refusef(ErrNoInviter, "LAN discovery is off (--no-mdns), so the inviter cannot be found: give its address with --pair-addr HOST:PORT (`danyue invite` prints it)")
	}
	bctx, cancel := context.WithTimeout(ctx, browseTimeout)
	defer cancel()
	browse := l.pairs.browse
	if browse == nil {
		browse = func(ctx context.Context, channel int, log *slog.Logger) ([]rendezvous.Announcer, error) {
			return rendezvous.Browse(ctx, channel, nil, log)
		}
	}
	start := time.Now()
	found, err := browse(bctx, code.Channel, l.log.With("component", "pairing"))
	if err != nil {
		looked := time.Since(start).Round(100 * time.Millisecond)
		if bctx.Err() == nil { // ended before its time: it could not look
			return nil, refusef(ErrNoInviter, "could not look for code %d-… on this network (stopped after %v: %v); on a network without multicast, add --pair-addr HOST:PORT as `danyue invite` prints it", code.Channel, looked, err)
		}
		return nil, refusef(ErrNoInviter, "no device on this network offers code %d-… (looked for %v): the code may have been used, cancelled or expired (it lasts five minutes), or `danyue invite` is not waiting there; on a network without multicast, add --pair-addr HOST:PORT as `danyue invite` prints it", code.Channel, looked)
	}
	return found, nil
}

// pairByCode finds the inviter of a short code, runs the pairing and
// returns the library invite it handed over, with what the devices tried
// before the inviter said.
func (l *Library) pairByCode(ctx context.Context, code pair.Code, pairAddr string) (peer.Invite, []string, error) {
	anns, err := l.findInviter(ctx, code, pairAddr)
	if err != nil {
		return peer.Invite{}, nil, err
	}
	var inv peer.Invite
	j := &rendezvous.Joiner{
		Code: code,
		AD:   l.pairAD(),
		Accept: func(payload, _ []byte) error {
			var err error
			inv, err = peer.DecodeInvite(string(payload))
			return err
		},
		Logger: l.log.With("component", "pairing"),
	}
	joined, err := j.JoinAny(ctx, anns)
	if err != nil {
		return peer.Invite{}, nil, joinRefusal(code, err, isLocalIP)
	}
	var warnings []string
	for _, a := range joined.Before {
		if w, ok := beforeWarning(code, a); ok {
			warnings = append(warnings, w)
			l.log.Warn("pairing: a device that was not the inviter answered on the code's channel", "addr", a.Addr, "channel", code.Channel, "err", a.Err)
		}
	}
	l.log.Info("paired by short code", "inviter", parsePairAD(joined.PeerAD).Name, "addr", joined.Addr)
	return inv, warnings, nil
}

// beforeWarning is what to tell of a device that answered on the code's
// channel before the inviter did: one that did not know the code, or
// refused it, was not the inviter.
func beforeWarning(code pair.Code, a rendezvous.Attempt) (string, bool) {
	host := a.Addr
	if h, _, err := net.SplitHostPort(a.Addr); err == nil {
		host = h
	}
	switch {
	case a.Tested():
		return fmt.Sprintf("another device that answered on channel %d did not know the code — possibly someone else on this network pretending to be the inviter (%s)", code.Channel, host), true
	case errors.Is(a.Err, pair.ErrRefused):
		return fmt.Sprintf("another device that answered on channel %d (%s) refused the code without trying it — possibly someone else on this network pretending to be the inviter", code.Channel, host), true
	}
	return "", false
}

// ErrRefusedHere is the kind of a Refusal of Join whose inviter refuses
// this device's address for a while: codes were burned from it.
var ErrRefusedHere = errors.New("refused by the inviter")

// said is one device's answer, as a sentence, and the kind of refusal it
// makes the join; rank orders them, the one that decides the kind first.
type said struct {
	rank int
	kind error
	text string
}

// joinRefusal says why a short-code join did not pair: what each device
// that answered said, the deciding answer first. isLocal tells this
// device's own addresses, so that a code this device burned earlier (a
// mistyped code) is not blamed on someone else.
func joinRefusal(code pair.Code, err error, isLocal func(netip.Addr) bool) *Refusal {
	je, ok := errors.AsType[*rendezvous.JoinError](err)
	if !ok {
		return refusef(ErrPairingFailed, "pairing with the inviter failed: %v", err)
	}
	var all []said
	for _, a := range je.Attempts {
		all = append(all, attemptSaid(code, a, isLocal))
	}
	if len(all) == 0 {
		return refusef(ErrNoInviter, "no device announcing channel %d could be tried; run `danyue invite` again on the other device", code.Channel)
	}
	slices.SortStableFunc(all, func(a, b said) int { return cmp.Compare(a.rank, b.rank) })
	texts := make([]string, len(all))
	for i, s := range all {
		texts[i] = s.text
	}
	msg := strings.Join(texts, "; ")
	if je.Skipped > 0 {
		msg += fmt.Sprintf("; %d more devices announcing channel %d were not tried: a code is tried with at most %d devices that do not know it, since each gets one guess at it", je.Skipped, code.Channel, rendezvous.MaxTested)
	}
	if all[0].kind != ErrNoInviter {
		msg += "; run `danyue invite` again on the other device for a new code"
	}
	return &Refusal{Kind: all[0].kind, Msg: msg}
}

// attemptSaid is what one device answered.
func attemptSaid(code pair.Code, a rendezvous.Attempt, isLocal func(netip.Addr) bool) said {
	host := a.Addr
	if h, _, err := net.SplitHostPort(a.Addr); err == nil {
		host = h
	}
	if _, proved := errors.AsType[*rendezvous.ProvedError](a.Err); proved {
		return said{0, ErrPairingFailed, fmt.Sprintf("the inviter at %s knew the code, but the pairing failed after that: %v", a.Addr, a.Err)}
	}
	if r, ok := errors.AsType[*pair.Refusal](a.Err); ok {
		return refusalSaid(a.Addr, r, isLocal)
	}
	switch {
	case a.Tested():
		return said{3, ErrWrongCode, fmt.Sprintf("the device that answered on channel %d did not know the code — possibly someone else on this network pretending to be the inviter (%s); or the code was mistyped (a wrong code), and then that was the inviter and its code is spent now", code.Channel, host)}
	case errors.Is(a.Err, rendezvous.ErrUnreachable):
		return said{4, ErrNoInviter, fmt.Sprintf("cannot reach the inviter at %s: its code may have been used or expired, or a firewall blocks the port (%v)", a.Addr, a.Err)}
	}
	return said{5, ErrPairingFailed, fmt.Sprintf("pairing with the device at %s failed: %v", a.Addr, a.Err)}
}

// refusalSaid is what a device that refused to test the code said. It is
// its word only: the refusal is not authenticated.
func refusalSaid(addr string, r *pair.Refusal, isLocal func(netip.Addr) bool) said {
	by, local := "another device at "+r.By.String(), r.By.IsValid() && isLocal(r.By)
	switch {
	case !r.By.IsValid():
		by = "another device"
	case local:
		by = "this device"
	}
	// Who else might it be: nobody, when it was this device.
	who := " — if that was not this device, someone on this network is trying to pair"
	if local {
		who = " (a mistyped code?)"
	}
	var text string
	kind := ErrCodeSpent
	switch r.Reason {
	case pair.ReasonBurned:
		text = fmt.Sprintf("this code was spent by a failed try from %s at %s, says the inviter at %s%s", by, clockOf(r.At), addr, who)
	case pair.ReasonInUse:
		text = fmt.Sprintf("the inviter at %s has been testing this code with another device since %s, and a code takes one try only — if that device is not the one you are adding, someone on this network is trying to pair; try again in a minute to learn who", addr, clockOf(r.At))
	case pair.ReasonBlocked:
		kind = ErrRefusedHere
		text = fmt.Sprintf("the inviter at %s refuses this device's address (%s) for now: %d codes were spent by failed tries from it in the last %d minutes, the last at %s; if this device did not try them, someone else on this network may be using its address", addr, r.By, r.Burns, int(rendezvous.BurnWindow.Minutes()), clockOf(r.At))
	case pair.ReasonUsed:
		text = fmt.Sprintf("the inviter at %s says this code was already used", addr)
	case pair.ReasonExpired:
		text = fmt.Sprintf("the inviter at %s says this code has expired", addr)
	default:
		text = fmt.Sprintf("the inviter at %s says this code was already used or has expired", addr)
	}
	// A refusal of this device's address decides the kind before any
	// other answer: retyping a new code will not help until it ends.
	rank := 2
	if kind == ErrRefusedHere {
		rank = 1
	}
	return said{rank: rank, kind: kind, text: text}
}

// clockOf is a time a device sent, as a time of day here.
func clockOf(t time.Time) string {
	if t.IsZero() {
		return "an unknown time"
	}
	return clock(t)
}

// isLocalIP reports whether a is an address of this device.
func isLocalIP(a netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, ia := range addrs {
		if n, ok := ia.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == a.Unmap() {
				return true
			}
		}
	}
	return false
}
