package daemon

import (
	"context"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/kosync"
	"github.com/danyue/danyue/internal/lan"
	"github.com/danyue/danyue/library"
	"github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

func (d *Daemon) handleStatus(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, d.status())
	return nil
}

// status is this device, its library and its peers, for the API and the page.
func (d *Daemon) status() api.Status {
	lib := d.lib.ID()
	peers := d.peers()
	st := api.Status{
		Library:   api.Library{ID: hex.EncodeToString(lib[:])},
		Peers:     peers,
		Addresses: []string{},
	}
	for _, p := range peers {
		st.Counts.PeersKnown++
		if p.Connected {
			st.Counts.PeersConnected++
		}
	}
	self := d.lib.Self()
	st.Device = api.Device{ID: self.String(), Name: d.lib.DeviceName(self)}
	st.Counts.Books, st.Counts.Deleted = d.lib.Counts()
	st.Counts.LocalChanges = d.store.LastSeq()
	st.HTTP, st.Kosync = d.HTTPAddr(), d.KosyncAddr()
	if st.Kosync != "" {
		prefix, _ := kosync.CleanPrefix(d.cfg.KosyncPrefix)
		st.KosyncURLs = reachableURLs(st.Kosync, prefix)
	}
	st.ClockWarnings = d.clockWarnings()
	st.PairingWarnings = d.pairingWarnings()
	st.BoundsWarnings = d.boundsWarnings()
	st.StoreLoss = storeLoss(d.store)
	if ns, ok := d.lib.Traffic(); ok {
		st.Traffic = api.Traffic{BytesSent: ns.BytesSent, BytesReceived: ns.BytesReceived, RecordsSent: ns.RecordsSent, RecordsReceived: ns.RecordsReceived}
	}
	for _, a := range d.lib.Addrs() {
		st.Addresses = append(st.Addresses, a.String())
	}
	st.Unreachable = unreachable(peers)
	return st
}

// unreachable is api.Status.Unreachable: set when no other member is
// connected and at least one was dialled from here and failed, so that a
// device away from home says so rather than look merely idle.
func unreachable(peers []api.Peer) string {
	var why string
	for _, p := range peers {
		if p.Connected {
			return ""
		}
		if p.State == "unreachable" && p.LastError != "" && why == "" {
			why = p.LastError
		}
	}
	if why == "" {
		return ""
	}
	return "no member of the library can be reached from this network (" + why + "); sync resumes as soon as one can. " +
		"To sync away from home, make one member reachable from the internet: forward a TCP port to it on its router " +
		"and start it with --listen /ip4/0.0.0.0/tcp/PORT --announce /ip4/PUBLIC-ADDRESS/tcp/PORT (or /dns4/NAME/tcp/PORT), " +
		"or run a member on a host with a public address"
}

// clockWarnings renders the library's clock warnings for GET /v1/status.
func (d *Daemon) clockWarnings() []api.ClockWarning {
	out := []api.ClockWarning{}
	for _, w := range d.lib.ClockWarnings() {
		out = append(out, api.ClockWarning{
			Device:  w.Writer.String(),
			Name:    w.Name,
			AheadMs: int64(w.AheadMs), // at most crdt.MaxWall
			Stamp:   rfc3339(w.Stamp.Wall),
			Via:     w.Via.String(),
			Warning: w.Message(),
		})
	}
	return out
}

// boundsWarnings renders the library's refusals for GET /v1/status.
func (d *Daemon) boundsWarnings() []api.BoundsWarning {
	out := []api.BoundsWarning{}
	for _, w := range d.lib.BoundsWarnings() {
		dev := ""
		if w.Writer != 0 {
			dev = w.Writer.String()
		}
		out = append(out, api.BoundsWarning{
			Device:  dev,
			Name:    w.Name,
			Reason:  w.Reason,
			Refused: w.Refused,
			First:   w.First.UTC().Format(time.RFC3339),
			Last:    w.Last.UTC().Format(time.RFC3339),
			Warning: w.Message(),
		})
	}
	return out
}

func (d *Daemon) handlePeers(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, api.Peers{Peers: d.peers()})
	return nil
}

func (d *Daemon) peers() []api.Peer {
	out := []api.Peer{}
	met := make(map[crdt.DeviceID]bool)
	for _, p := range d.lib.Peers() {
		name := p.Name // from its hello, which a rename changes only at its next start
		if m, ok := d.lib.Member(p.Device); ok && m.Name() != "" {
			name = m.Name()
		}
		pj := api.Peer{
			Device:        p.Device.String(),
			Name:          name,
			PeerID:        p.ID.String(),
			Connected:     p.Connected,
			Addresses:     []string{},
			ClockOffsetMs: p.ClockOffset.Milliseconds(),
			InSync:        library.InSync(p),
		}
		if p.RemoteLast > p.Merged {
			pj.Behind = p.RemoteLast - p.Merged
		}
		pj.Pulling = syncProgress(p.Pulling.ToGo, p.Pulling.In, p.Pulling.Started, d.now())
		if !p.LastSeen.IsZero() {
			s := p.LastSeen.UTC().Format(time.RFC3339)
			pj.LastSeen = &s
		}
		for _, a := range p.Addrs {
			pj.Addresses = append(pj.Addresses, a.String())
		}
		pj.State = peerState(p.Connected, p.Relayed, pj.LastSeen != nil || len(pj.Addresses) > 0)
		switch {
		case p.Connected:
			pj.Via, pj.HolePunched = via(p.Addrs), p.HolePunched
		case p.Relayed:
			pj.Via = "relayed"
		default:
			pj.LastError = shortDialError(p.LastError)
		}
		if off := p.ClockOffset.Abs(); p.ClockKnown && off > library.ClockWarnAfter {
			dir := "ahead of"
			if p.ClockOffset < 0 {
				dir = "behind"
			}
			pj.ClockWarning = fmt.Sprintf("%s's clock is %s %s this device's", name, off.Round(time.Second), dir)
		}
		out = append(out, pj)
		met[p.Device] = true
	}
	// The members the peer network has no address of: never met, or met
	// only by an earlier node of this daemon (d.seen).
	for _, m := range d.lib.Members() {
		if m.ID == d.lib.Self() || met[m.ID] || !d.lib.Standing(m.ID).Member {
			continue
		}
		pj := api.Peer{Device: m.ID.String(), Name: d.lib.MemberName(&m), Addresses: []string{}, LastSeen: d.seen.get(m.ID)}
		pj.State = peerState(false, false, pj.LastSeen != nil)
		out = append(out, pj)
	}
	return out
}

func (d *Daemon) handleEvents(w http.ResponseWriter, r *http.Request) error {
	flusher, ok := w.(http.Flusher)
	if !ok {
		return errorf(http.StatusInternalServerError, api.CodeInternal, "streaming is not supported on this connection")
	}
	sub := d.hub.subscribe()
	defer d.hub.unsubscribe(sub)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	// A comment line, so the client knows the stream is open before the
	// first event.
	fmt.Fprint(w, ": danyue events\n\n")
	flusher.Flush()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-d.closing:
			return nil
		case <-sub.dropped:
			return nil
		case ev := <-sub.ch:
			data, err := json.Marshal(ev.Data)
			if err != nil {
				return nil
			}
			if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.Type, data); err != nil {
				return nil
			}
			flusher.Flush()
		}
	}
}

// maxStatsDays bounds /v1/stats/daily.
const maxStatsDays = 366

// handleDaily returns this device's reading time per day: local statistics,
// never synced (seed 000: "today" is what this device read today).
func (d *Daemon) handleDaily(w http.ResponseWriter, r *http.Request) error {
	days := 30
	if v := r.URL.Query().Get("days"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxStatsDays {
			return errorf(http.StatusBadRequest, api.CodeInvalid, "days must be an integer in [1, %d], not %q", maxStatsDays, v)
		}
		days = n
	}
	daily, err := d.daily(r.Context(), days)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, daily)
	return nil
}

// daily is this device's reading time for each of the last days days.
func (d *Daemon) daily(ctx context.Context, days int) (api.Daily, error) {
	today := d.now()
	from := today.AddDate(0, 0, -(days - 1)).Format(time.DateOnly)
	got, err := d.store.Daily(ctx, from, today.Format(time.DateOnly))
	if err != nil {
		return api.Daily{}, err
	}
	byDay := make(map[string]uint64, len(got))
	for _, g := range got {
		byDay[g.Day] = g.Ms
	}
	out := make([]api.Day, 0, days)
	var total uint64
	for i := days - 1; i >= 0; i-- {
		day := today.AddDate(0, 0, -i).Format(time.DateOnly)
		out = append(out, api.Day{Day: day, Ms: byDay[day]})
		total += byDay[day]
	}
	return api.Daily{Days: out, TotalMs: total}, nil
}

func (d *Daemon) handleInvite(w http.ResponseWriter, r *http.Request) error {
	code, err := d.lib.Invite()
	if err != nil {
		return errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "%v", err)
	}
	writeJSON(w, http.StatusOK, api.Invite{Code: code})
	return nil
}

//go:embed openapi.json
var openapiJSON []byte

func handleOpenAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(openapiJSON)
	return err
}

// peerState is api.Peer.State.
func peerState(connected, relayed, known bool) string {
	switch {
	case connected:
		return "connected"
	case relayed:
		return "relayed"
	case known:
		return "unreachable"
	}
	return "never-met"
}

// via is api.Peer.Via for a peer connected at addrs: lan if any of them is
// a private address (lan.Private), otherwise internet.
func via(addrs []multiaddr.Multiaddr) string {
	if len(addrs) == 0 {
		return ""
	}
	for _, a := range addrs {
		ip, err := manet.ToIP(a)
		if err != nil {
			continue
		}
		if lan.Private(ip) {
			return "lan"
		}
	}
	return "internet"
}

// shortDialError cuts a libp2p dial error, which lists every address tried
// with its whole error chain, to what a person acts on. A member's loopback
// addresses are kept (they reach a device on the same host), and a refusal
// there says nothing about where the member is: the other addresses'
// errors are judged when there are any.
func shortDialError(s string) string {
	var other []string
	for _, l := range strings.Split(s, "\n") {
		if a, ok := strings.CutPrefix(strings.TrimSpace(l), "* ["); ok {
			if strings.HasPrefix(a, "/ip4/127.") || strings.HasPrefix(a, "/ip6/::1/") {
				continue
			}
			other = append(other, l)
		}
	}
	if len(other) > 0 {
		s = strings.Join(other, "\n")
	}
	for _, c := range []struct{ has, say string }{
		{"connection refused", "connection refused (nothing listens there: the device is off, or danyue is not running)"},
		{"no route to host", "no route to host"},
		{"network is unreachable", "network unreachable"},
		{"i/o timeout", "timed out"},
		{"deadline exceeded", "timed out"},
		{"no addresses", "no address known"},
		{"no good addresses", "no address known"},
		{"failed to negotiate security", "handshake failed (not this library's secret?)"},
	} {
		if strings.Contains(s, c.has) {
			return c.say
		}
	}
	const max = 120
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max], "") + "…"
	}
	return s
}
