package peer

import (
	"context"
	"sync"
	"sync/atomic"
)

// What a puller says on a send stream, and the window it keeps: a puller
// acknowledges the batches it has applied and says which devices it
// pulls from itself (have frames), and the sender keeps no more than
// maxUnacked batches between the two stores.

// watchPuller reads what the puller sends back on a send stream until the
// stream ends or the puller sends what it may not, and then cancels the
// stream.
func (n *Node) watchPuller(ctx context.Context, cancel context.CancelFunc, fr *frameReader, st *peerState, acks *streamAcks, fo *fanout) {
	defer cancel()
	for {
		body, err := fr.next()
		if err != nil || ctx.Err() != nil {
			return
		}
		f, err := decodeFrame(body)
		switch {
		case err == nil && f.Error != nil:
			n.log.Warn("peer ended its sync stream", "peer", st.id, "err", refusal(f.Error))
			return
		case err == nil && f.Ack != nil:
			if err := n.acked(st, acks, f.Ack); err != nil {
				n.log.Warn("peer sent a bad ack on its sync stream", "peer", st.id, "err", err)
				return
			}
		case err == nil && f.Have != nil && acks.version >= 4:
			if err := fo.have(f.Have, acks.version); err != nil {
				n.log.Warn("peer sent a bad have frame on its sync stream", "peer", st.id, "err", err)
				return
			}
		default:
			n.log.Warn("peer sent an unexpected frame on its sync stream", "peer", st.id)
			return
		}
	}
}

// maxUnacked bounds the batches a send stream has in flight: sent and not
// yet acknowledged as applied. The puller reads a batch only after it has
// applied the one before, so what a fast sender would otherwise queue for a
// slow puller sits in transport buffers; with this window the sender reads
// the next batch from its store only when the puller has caught up to
// within a few batches, and no more than maxUnacked batches are ever
// between the two stores. (A version 1 puller sends no acks; its stream is
// bounded by the transport's window only.)
const maxUnacked = 4

// streamAcks is what one send stream has sent and had acknowledged.
type streamAcks struct {
	epoch   uint64 // of our store
	enabled bool   // the stream's version has acks
	version uint64 // the stream's
	sent    atomic.Uint64
	acked   uint64 // only watchPuller touches it

	mu      sync.Mutex
	unacked []uint64      // seqs of the batches in flight, in order
	room    chan struct{} // signalled when an ack makes room
}

func newStreamAcks(epoch, version, cursor uint64) *streamAcks {
	sa := &streamAcks{epoch: epoch, enabled: version >= 2, version: version, acked: cursor, room: make(chan struct{}, 1)}
	sa.sent.Store(cursor)
	return sa
}

// waitRoom returns once fewer than maxUnacked batches are in flight.
func (sa *streamAcks) waitRoom(ctx context.Context, waited func()) error {
	for first := true; ; first = false {
		sa.mu.Lock()
		full := sa.enabled && len(sa.unacked) >= maxUnacked
		sa.mu.Unlock()
		if !full {
			return nil
		}
		if first {
			waited()
		}
		select {
		case <-sa.room:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// sentBatch records a batch up to seq as sent.
func (sa *streamAcks) sentBatch(seq uint64) {
	sa.sent.Store(seq)
	if !sa.enabled {
		return
	}
	sa.mu.Lock()
	sa.unacked = append(sa.unacked, seq)
	sa.mu.Unlock()
}

// ackedUpTo retires the batches an ack of seq covers.
func (sa *streamAcks) ackedUpTo(seq uint64) {
	sa.mu.Lock()
	i := 0
	for i < len(sa.unacked) && sa.unacked[i] <= seq {
		i++
	}
	sa.unacked = append(sa.unacked[:0], sa.unacked[i:]...)
	sa.mu.Unlock()
	select {
	case sa.room <- struct{}{}:
	default:
	}
}

// acked records that the puller st has merged our changes up to a.Seq. An
// ack must name this stream's epoch, and may neither go back nor pass what
// this stream sent: a peer cannot make a device believe it is delivered
// further than it is.
func (n *Node) acked(st *peerState, sa *streamAcks, a *wireAck) error {
	epoch := a.Epoch
	if sa.version >= 5 {
		if epoch != 0 {
			return protoErrorf("ack names an epoch on a version %d stream", sa.version)
		}
		epoch = sa.epoch
	}
	switch sent := sa.sent.Load(); {
	case !sa.enabled:
		return protoErrorf("ack on a version 1 stream")
	case epoch != sa.epoch:
		return protoErrorf("ack for epoch %d on a stream of epoch %d", a.Epoch, sa.epoch)
	case a.Seq < sa.acked || a.Seq > sent:
		return protoErrorf("ack of %d outside [%d, %d]", a.Seq, sa.acked, sent)
	}
	sa.acked = a.Seq
	sa.ackedUpTo(a.Seq)
	n.mu.Lock()
	defer n.mu.Unlock()
	st.acked = max(st.acked, a.Seq)
	n.progressedLocked()
	return nil
}
