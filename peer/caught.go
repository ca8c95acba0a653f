package peer

import (
	"fmt"
	"time"
)

// A stream's first Caught frame goes out as soon as it has caught up: it
// is what a joining device waits for. Later ones only keep what pullers
// know fresh for a later join, and on a busy library one per change (with
// every device's cursor moving) would cost more than the changes: they wait
// until the stream has been idle for caughtIdle, and come at most every
// defaultCaughtEvery.
const (
	defaultCaughtEvery = 10 * time.Second
	caughtIdle         = time.Second
)

// caughtState is what a send stream last said in a Caught frame.
type caughtState struct {
	sent bool
	seq  uint64 // up to where
	ver  uint64 // the version of our knowledge it carried
	at   time.Time
}

// sayCaught sends a Caught frame for cursor, the end of what this stream
// has sent, if the store has nothing newer and the frame would say
// something new; or, when a later one is not yet due, returns a channel
// that fires when it is.
func (snd *sender) sayCaught(cursor uint64) (<-chan time.Time, error) {
	n, c := snd.n, &snd.caught
	// Our knowledge is read before we look at the store: what it says was
	// true of us before the moment our last sequence number is seen to be
	// cursor, and so of the puller, which has everything up to there.
	weak, full, ver := n.kn.since(c.ver, snd.st.device)
	// Of a device the puller pulls from itself it has its own cursor and
	// full marks, as good as ours: in a mesh, that is every device.
	weak, full = snd.fo.indirect(weak), snd.fo.indirect(full)
	if c.sent && c.seq == cursor && len(weak) == 0 && len(full) == 0 {
		c.ver = ver
		return nil, nil
	}
	every := n.cfg.caughtEvery
	if every == 0 {
		every = defaultCaughtEvery
	}
	if c.sent {
		wait := max(time.Until(c.at.Add(every)), time.Until(snd.lastBatch.Add(min(caughtIdle, every))))
		if wait > 0 {
			return time.After(wait), nil
		}
	}
	if last, _ := n.store.Watch(); last > cursor || n.store.Epoch() != snd.epoch {
		return nil, nil // not caught up after all: the caller goes on
	}
	snd.out.Reset()
	f := &wireFrame{Caught: &wireCaught{Epoch: snd.epoch, Seq: cursor, Cursors: weak, Full: full}}
	if err := appendFrame(&snd.out, f); err != nil {
		return nil, err
	}
	if err := n.writeFrame(snd.s, snd.out.Bytes()); err != nil {
		return nil, fmt.Errorf("send caught: %w", err)
	}
	*c = caughtState{sent: true, seq: cursor, ver: ver, at: time.Now()}
	return nil, nil
}
