package peer

import (
	"sync"
	"time"

	"github.com/danyue/danyue/crdt"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// MaxClockOffset is how far a peer's wall clock may be from ours before the
// peer is reported as skewed. Hybrid logical clocks keep causality whatever
// the offset; this is about concurrent writes being decided by a wrong clock.
const MaxClockOffset = time.Minute

// PeerInfo is what the node knows about one device of the library.
type PeerInfo struct {
	Device    crdt.DeviceID
	Name      string // from its hello; empty until one arrived
	ID        lpeer.ID
	Addrs     []ma.Multiaddr // of the live connections if connected, else known dial addresses
	Connected bool
	// Relayed: not connected, but reached through a member's relay,
	// which carries no sync; a hole punch is under way (away.go).
	Relayed bool
	// HolePunched: the connection was made by hole punching.
	HolePunched bool
	Kept        bool // a static peer, given to Connect, or a member once connected: redialled when it goes away
	LastSeen    time.Time
	// ClockOffset is how far the peer's wall clock is ahead of ours
	// (negative: behind), estimated at the last hello with half the round
	// trip as the correction. Valid if ClockKnown.
	ClockOffset time.Duration
	ClockKnown  bool
	ClockSkewed bool // |ClockOffset| > MaxClockOffset
	// Sync progress of pulling from this peer: the sequence number merged up
	// to, and the peer's last sequence number as it last told us.
	Merged     uint64
	RemoteLast uint64
	CaughtUp   bool
	// Delivered says that the peer's pull from us runs on the current
	// connection and has acknowledged merging our last change.
	Delivered bool
	// Records received from and sent to it since the node started.
	RecordsIn, RecordsOut uint64
	// LastError is the last reason a dial or sync stream to it failed, empty
	// once it works again.
	LastError string
	// Pulling is how the current round of pulling from it goes, while it
	// has records to come (togo.go); zero otherwise.
	Pulling SyncProgress
}

// EventKind says what happened to a peer.
type EventKind uint8

const (
	// PeerConnected: a sync stream with the peer completed its hello.
	PeerConnected EventKind = iota + 1
	// PeerDisconnected: the last connection to a peer that had connected
	// closed.
	PeerDisconnected
	// PeerClockSkewed: the peer's clock is off by more than MaxClockOffset.
	PeerClockSkewed
	// PeerRefused: the peer and this device cannot sync (another sync
	// protocol, another library); Err says why.
	PeerRefused
)

func (k EventKind) String() string {
	switch k {
	case PeerConnected:
		return "peer-connected"
	case PeerDisconnected:
		return "peer-disconnected"
	case PeerClockSkewed:
		return "peer-clock-skewed"
	case PeerRefused:
		return "peer-refused"
	}
	return "event"
}

// Event is passed to Config.OnEvent.
type Event struct {
	Kind EventKind
	Peer PeerInfo
	Err  error // PeerRefused only
}

// eventQueue hands events to the callback from one goroutine, in order,
// without ever blocking the goroutine that emits them: emitters run inside
// libp2p's notification paths and sync streams.
type eventQueue struct {
	fn     func(Event)
	mu     sync.Mutex
	queue  []Event
	wake   chan struct{}
	closed bool
}

func newEventQueue(fn func(Event)) *eventQueue {
	return &eventQueue{fn: fn, wake: make(chan struct{}, 1)}
}

func (q *eventQueue) emit(e Event) {
	if q.fn == nil {
		return
	}
	q.mu.Lock()
	if !q.closed {
		q.queue = append(q.queue, e)
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// run delivers events until done is closed, then delivers what is left.
func (q *eventQueue) run(done <-chan struct{}) {
	for {
		select {
		case <-q.wake:
		case <-done:
			q.mu.Lock()
			q.closed = true
			q.mu.Unlock()
			q.deliver()
			return
		}
		q.deliver()
	}
}

func (q *eventQueue) deliver() {
	for {
		q.mu.Lock()
		batch := q.queue
		q.queue = nil
		q.mu.Unlock()
		if len(batch) == 0 {
			return
		}
		for _, e := range batch {
			q.fn(e)
		}
	}
}
