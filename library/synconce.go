package library

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/peer"
)

// SyncOnce is what a device that cannot stay up runs: a phone's background
// job (Android WorkManager, an iOS background task), cron, a laptop that
// wakes for a minute. The library is opened as usual; SyncOnce waits until
// this device has caught up with every peer it could reach, both ways, and
// reports what moved.

// SyncReport says what one SyncOnce did.
type SyncReport struct {
	// Peers are the devices of the library that the node knows of, reached
	// or not.
	Peers []SyncPeer
	// CaughtUp: at least one peer was reached, and this device has merged
	// everything of every peer reached, and each of them everything of this
	// device.
	CaughtUp bool
	// Records received and sent since the peer network started: for a node
	// started to sync once, what this sync moved.
	Received, Sent uint64
	Elapsed        time.Duration
}

// SyncPeer is one peer in a SyncReport.
type SyncPeer struct {
	Device crdt.DeviceID
	Name   string
	// Reached: connected, and the sync streams said hello.
	Reached bool
	// CaughtUp: this device has merged everything of the peer, and the
	// peer has acknowledged merging everything of this device.
	CaughtUp       bool
	Received, Sent uint64
	// Err is why the peer could not be reached, if it was not.
	Err string
}

// Reached counts the peers reached.
func (r SyncReport) Reached() int {
	n := 0
	for _, p := range r.Peers {
		if p.Reached {
			n++
		}
	}
	return n
}

// Summary is the report in one line, for a log or a terminal.
func (r SyncReport) Summary() string {
	reached, caughtUp := 0, 0
	var missing []string
	for _, p := range r.Peers {
		switch {
		case p.CaughtUp:
			reached++
			caughtUp++
		case p.Reached:
			reached++
			missing = append(missing, peerLabel(p)+" (still syncing)")
		default:
			missing = append(missing, peerLabel(p)+" (not reachable)")
		}
	}
	var b strings.Builder
	switch {
	case r.CaughtUp:
		fmt.Fprintf(&b, "caught up with %d of %d peers", caughtUp, len(r.Peers))
	case reached == 0:
		b.WriteString("no peer reachable")
	default:
		fmt.Fprintf(&b, "not caught up: %d of %d peers reached, %d caught up", reached, len(r.Peers), caughtUp)
	}
	fmt.Fprintf(&b, " in %s; received %d records, sent %d", r.Elapsed.Round(time.Millisecond), r.Received, r.Sent)
	if len(missing) > 0 {
		fmt.Fprintf(&b, "; %s", strings.Join(missing, ", "))
	}
	return b.String()
}

func peerLabel(p SyncPeer) string {
	if p.Name != "" {
		return p.Name
	}
	return p.Device.String()
}

// SyncOnce returns when this device has caught up, both ways, with every
// peer it could reach (see peer.SyncState for when a peer counts as not
// reachable), or when ctx ends: then the report says how far it got, and
// the error is nil. The error is for a library that closed meanwhile.
// Nothing is re-sent that a peer already has: the sync streams resume from
// their cursors, as they always do.
func (l *Library) SyncOnce(ctx context.Context) (SyncReport, error) {
	start := time.Now()
	for {
		// Read each time: a join replaces the network.
		node := l.net.current()
		if node == nil {
			return SyncReport{}, errors.New("sync: the library is closed")
		}
		state, changed := node.SyncState()
		r := syncReport(state)
		r.Elapsed = time.Since(start)
		if r.CaughtUp {
			return r, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return r, nil
		case <-l.life.Done():
			return r, errors.New("sync: the library is closing")
		}
	}
}

// syncReport judges a SyncState: caught up once the node has tried every
// peer it knows of and is caught up with each one it reached.
func syncReport(state peer.SyncState) SyncReport {
	var r SyncReport
	all := true
	for _, p := range state.Peers {
		if !p.Kept && !p.Connected && p.LastError == "" {
			continue // heard of (mDNS) but never tried: not a device of ours yet
		}
		sp := SyncPeer{
			Device:   p.Device,
			Name:     p.Name,
			Reached:  p.Connected && p.Name != "",
			Received: p.RecordsIn,
			Sent:     p.RecordsOut,
		}
		sp.CaughtUp = sp.Reached && InSync(p)
		if !sp.Reached {
			sp.Err = p.LastError
		}
		if sp.Reached && !sp.CaughtUp {
			all = false
		}
		r.Received += sp.Received
		r.Sent += sp.Sent
		r.Peers = append(r.Peers, sp)
	}
	r.CaughtUp = state.Settled && all && r.Reached() > 0
	return r
}

// InSync reports whether this device and p have each merged everything of
// the other.
func InSync(p peer.PeerInfo) bool {
	return p.Connected && p.CaughtUp && p.Delivered
}
