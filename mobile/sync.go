package mobile

import (
	"context"
	"fmt"
	"time"

	"github.com/danyue/danyue/daemon"
)

// SyncReport is what one SyncOnce did.
type SyncReport struct {
	// CaughtUp says the node caught up, both ways, with every peer it
	// reached, and reached at least one.
	CaughtUp bool
	// PeersKnown is how many devices of the library the node knew of,
	// PeersReached how many it reached, PeersCaughtUp how many of those it
	// caught up with.
	PeersKnown    int
	PeersReached  int
	PeersCaughtUp int
	// Received and Sent count the records exchanged since Start.
	Received  int64
	Sent      int64
	ElapsedMs int64
	// Summary is one line for a log or a notification.
	Summary string

	peers []*SyncPeerReport
}

// SyncPeerReport is how SyncOnce went with one peer.
type SyncPeerReport struct {
	Device   string // 16 hex digits
	Name     string
	Reached  bool
	CaughtUp bool
	Received int64
	Sent     int64
	// Err says why the node did not reach this peer, if it did not.
	Err string
}

// PeerAt returns the i-th peer known, 0 <= i < PeersKnown, or nil.
func (r *SyncReport) PeerAt(i int) *SyncPeerReport {
	if i < 0 || i >= len(r.peers) {
		return nil
	}
	return r.peers[i]
}

// SyncOnce syncs with the peers this node can reach until it has caught up
// with each of them or timeoutMs milliseconds pass, and reports what
// happened. That is the work of a background job: Start, SyncOnce, Stop. A
// timeout is not an error: the report says who was not caught up.
func (n *Node) SyncOnce(timeoutMs int64) (*SyncReport, error) {
	if err := n.alive(); err != nil {
		return nil, err
	}
	if timeoutMs <= 0 {
		return nil, fmt.Errorf("sync once: the timeout must be > 0 ms, not %d", timeoutMs)
	}
	ctx, cancel := context.WithTimeout(n.ctx, time.Duration(timeoutMs)*time.Millisecond)
	defer cancel()
	rep, err := n.d.SyncOnce(ctx)
	if err != nil {
		return nil, n.fail("sync once", err)
	}
	return syncReport(rep), nil
}

func syncReport(rep daemon.SyncReport) *SyncReport {
	out := &SyncReport{
		CaughtUp:     rep.CaughtUp,
		PeersKnown:   len(rep.Peers),
		PeersReached: rep.Reached(),
		Received:     clamp(rep.Received),
		Sent:         clamp(rep.Sent),
		ElapsedMs:    rep.Elapsed.Milliseconds(),
		Summary:      rep.Summary(),
		peers:        make([]*SyncPeerReport, len(rep.Peers)),
	}
	for i, p := range rep.Peers {
		if p.CaughtUp {
			out.PeersCaughtUp++
		}
		out.peers[i] = &SyncPeerReport{
			Device: p.Device.String(), Name: p.Name, Reached: p.Reached, CaughtUp: p.CaughtUp,
			Received: clamp(p.Received), Sent: clamp(p.Sent), Err: p.Err,
		}
	}
	return out
}
