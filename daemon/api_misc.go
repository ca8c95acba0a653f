package daemon

import (
	"context"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/kosync"
	"github.com/danyue/danyue/peer"
	"github.com/danyue/danyue/store"
)

func (d *Daemon) handleStatus(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, d.status())
	return nil
}

// status is this device, its library and its peers, for the API and the page.
func (d *Daemon) status() api.Status {
	lib, _ := d.store.Library()
	peers := d.peers()
	st := api.Status{
		Library:   api.Library{ID: hex.EncodeToString(lib.ID[:])},
		Peers:     peers,
		Addresses: []string{},
	}
	for _, p := range peers {
		st.Counts.PeersKnown++
		if p.Connected {
			st.Counts.PeersConnected++
		}
	}
	st.Device = api.Device{ID: d.self.String(), Name: d.names.get(d.self)}
	st.Counts.Books, st.Counts.Deleted = d.counts.get()
	node := d.net.current()
	st.Counts.LocalChanges = d.store.LastSeq()
	st.HTTP, st.Kosync = d.HTTPAddr(), d.KosyncAddr()
	if st.Kosync != "" {
		prefix, _ := kosync.CleanPrefix(d.cfg.KosyncPrefix)
		st.KosyncURLs = reachableURLs(st.Kosync, prefix)
	}
	st.ClockWarnings = d.clockWarnings()
	st.StoreLoss = storeLoss(d.store)
	if node != nil {
		ns := node.Stats()
		st.Traffic = api.Traffic{BytesSent: ns.BytesSent, BytesReceived: ns.BytesReceived, RecordsSent: ns.RecordsSent, RecordsReceived: ns.RecordsReceived}
		for _, a := range node.Addrs() {
			st.Addresses = append(st.Addresses, a.String())
		}
	}
	return st
}

func (d *Daemon) handlePeers(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, api.Peers{Peers: d.peers()})
	return nil
}

// clockWarnAfter is the clock offset beyond which a peer's clock is reported.
const clockWarnAfter = time.Minute

func (d *Daemon) peers() []api.Peer {
	node := d.net.current()
	out := []api.Peer{}
	if node == nil {
		return out
	}
	for _, p := range node.Peers() {
		name := p.Name // from its hello, which a rename changes only at its next start
		if m, ok := d.members.get(p.Device); ok && m.Name() != "" {
			name = m.Name()
		}
		pj := api.Peer{
			Device:        p.Device.String(),
			Name:          name,
			PeerID:        p.ID.String(),
			Connected:     p.Connected,
			Addresses:     []string{},
			ClockOffsetMs: p.ClockOffset.Milliseconds(),
			InSync:        inSync(p),
		}
		if p.RemoteLast > p.Merged {
			pj.Behind = p.RemoteLast - p.Merged
		}
		if !p.LastSeen.IsZero() {
			s := p.LastSeen.UTC().Format(time.RFC3339)
			pj.LastSeen = &s
		}
		for _, a := range p.Addrs {
			pj.Addresses = append(pj.Addresses, a.String())
		}
		if off := p.ClockOffset.Abs(); p.ClockKnown && off > clockWarnAfter {
			dir := "ahead of"
			if p.ClockOffset < 0 {
				dir = "behind"
			}
			pj.ClockWarning = fmt.Sprintf("%s's clock is %s %s this device's", name, off.Round(time.Second), dir)
		}
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
	node := d.net.current()
	if node == nil {
		return errorf(http.StatusServiceUnavailable, api.CodeUnavailable, "the peer network is not running")
	}
	writeJSON(w, http.StatusOK, api.Invite{Code: node.Invite()})
	return nil
}

func (d *Daemon) handleJoin(w http.ResponseWriter, r *http.Request) error {
	var req api.JoinRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	if req.Code == nil || *req.Code == "" {
		return errorf(http.StatusBadRequest, api.CodeInvalid, "code is required")
	}
	inv, err := d.inviteOf(r.Context(), *req.Code, req.PairAddr)
	if err != nil {
		return err
	}
	if err := d.join(r.Context(), inv); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.Joined{Library: api.Library{ID: hex.EncodeToString(inv.Library.ID[:])}})
	return nil
}

// join moves this device into the invite's library: the new library is
// stored, the peer network restarts under its key and dials the inviter.
// Every book this device has stays and merges into the library.
func (d *Daemon) join(ctx context.Context, inv peer.Invite) error {
	d.joinMu.Lock()
	defer d.joinMu.Unlock()
	if old := d.net.take(false); old != nil {
		if err := old.Close(); err != nil {
			d.log.Warn("stop peer network for join", "err", err)
		}
	}
	if err := d.store.SetLibrary(ctx, store.Library{ID: inv.Library.ID, Secret: inv.Library.Secret}); err != nil {
		return errors.Join(err, d.startNode(context.WithoutCancel(ctx), nil))
	}
	if err := d.joined(ctx, inv); err != nil {
		d.log.Warn("record this device as added by its inviter", "err", err)
	}
	d.log.Info("joined library", "library", hex.EncodeToString(inv.Library.ID[:]), "inviter", inv.Peer)
	return d.startNode(context.WithoutCancel(ctx), inv.PeerAddrs())
}

//go:embed openapi.json
var openapiJSON []byte

func handleOpenAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(openapiJSON)
	return err
}
