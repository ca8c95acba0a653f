package daemon

// TEMPORARY: replaced by the lead's SyncOnce. This file only gives package
// mobile the lead's types and signature to build against; delete it when the
// real SyncOnce lands.

import (
	"context"
	"errors"
	"time"

	"github.com/danyue/danyue/crdt"
)

// SyncReport is what one SyncOnce did.
type SyncReport struct {
	Peers    []SyncPeer // every member reached
	CaughtUp bool       // caught up (both directions) with every peer reached, and at least one reached
	Received uint64     // records received
	Sent     uint64     // records sent
	Elapsed  time.Duration
}

// SyncPeer is one member SyncOnce reached.
type SyncPeer struct {
	Device         crdt.DeviceID
	Name           string
	CaughtUp       bool
	Received, Sent uint64
	Err            string
}

// SyncOnce waits until the daemon has caught up with every connected peer, or
// ctx ends.
//
// TEMPORARY: replaced by the lead's SyncOnce.
func (d *Daemon) SyncOnce(ctx context.Context) (SyncReport, error) {
	start := time.Now()
	d.mu.Lock()
	node := d.node
	d.mu.Unlock()
	if node == nil {
		return SyncReport{}, errors.New("the peer network is not running")
	}
	before := node.Stats()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var rep SyncReport
		all := true
		for _, p := range node.Peers() {
			if !p.Connected {
				continue
			}
			rep.Peers = append(rep.Peers, SyncPeer{Device: p.Device, Name: p.Name, CaughtUp: p.CaughtUp, Err: p.LastError})
			all = all && p.CaughtUp
		}
		st := node.Stats()
		rep.Received, rep.Sent = st.RecordsReceived-before.RecordsReceived, st.RecordsSent-before.RecordsSent
		rep.Elapsed = time.Since(start)
		rep.CaughtUp = all && len(rep.Peers) > 0
		if rep.CaughtUp {
			return rep, nil
		}
		select {
		case <-ctx.Done():
			return rep, nil
		case <-tick.C:
		}
	}
}
