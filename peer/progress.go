package peer

// Sync progress, for callers that run the node until it has caught up
// (SyncOnce in the daemon, for a phone's background job or cron) rather than
// for ever. They read a snapshot and wait on a channel that closes at the
// next change, so they wake on events instead of polling.

// SyncState is a snapshot of where the node stands with its peers.
type SyncState struct {
	Peers []PeerInfo
	// Settled: every peer the node knows of so far has been tried, namely
	// mDNS has finished its first query round (or is off), no dial is under
	// way, and every static peer has been dialled at least once. A peer not
	// connected once the node is settled was not reachable.
	Settled bool
}

// SyncState returns where the node stands, and a channel closed at the next
// change of it.
func (n *Node) SyncState() (SyncState, <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	state := SyncState{Settled: n.discovered}
	for _, st := range n.peers {
		if st.dialsActive > 0 || (st.kept && !st.connected && st.dialCount == 0) {
			state.Settled = false
		}
		state.Peers = append(state.Peers, n.info(st))
	}
	if n.progress == nil {
		n.progress = make(chan struct{})
	}
	return state, n.progress
}

// progressedLocked wakes the callers waiting on SyncState. The channel is
// made only when someone asks, so that a daemon nobody waits on allocates
// nothing per batch. n.mu must be held.
func (n *Node) progressedLocked() {
	if n.progress != nil {
		close(n.progress)
		n.progress = nil
	}
}

// firstDiscoveryDone records that mDNS has finished its first query round.
func (n *Node) firstDiscoveryDone() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.discovered {
		n.discovered = true
		n.progressedLocked()
	}
}
