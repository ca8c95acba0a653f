package peer

import "time"

// A sync, as the log tells it: from the moment this device and a peer are
// found not to hold everything of each other until they are back in sync
// (each has merged everything of the other, as library.InSync reads it),
// one INFO line with the records each way and the time it took. A long
// first sync is then one line at its end, and a busy library one line per
// change and peer, which is what a user reading the log asks of it: did it
// sync, with whom, how much. A connection's first round is logged even when
// nothing moved (the two were already in sync); later ones only when a
// record did.

// syncRound is where the current round with a peer stands.
type syncRound struct {
	busy    bool      // out of sync since start
	start   time.Time // when it was first seen out of sync
	in, out uint64    // recordsIn and recordsOut when the last round ended
	logged  bool      // a round was logged on this connection
	conn    time.Time // connectedAt of the connection logged is of
}

// noteSyncLocked ends or starts a round with st after its sync state
// changed, and logs a round that ends. n.mu must be held.
func (n *Node) noteSyncLocked(st *peerState) {
	r := &st.round
	if !st.connected {
		r.busy = false
		return
	}
	if r.conn != st.connectedAt {
		r.logged, r.conn = false, st.connectedAt
	}
	last, _ := n.store.Watch()
	inSync := st.announced && st.merged >= st.remoteLast && st.theyPull && st.acked >= last
	switch {
	case !inSync && !r.busy:
		r.busy, r.start = true, n.now()
	case inSync && r.busy:
		r.busy = false
		in, out := st.recordsIn-r.in, st.recordsOut-r.out
		r.in, r.out = st.recordsIn, st.recordsOut
		if in == 0 && out == 0 && r.logged {
			return
		}
		r.logged = true
		n.log.Info("synced with peer", "peer", st.id, "device", st.device, "name", st.name,
			"records_in", in, "records_out", out, "took", n.now().Sub(r.start).Round(time.Millisecond))
	}
}
