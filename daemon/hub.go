package daemon

import (
	"runtime"
	"sync"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/library"
)

// Event is one message of the /v1/events stream.
type Event struct {
	Type string // "book", "deleted" or "peer"
	Data any    // marshalled as the event's JSON data
}

// hub fans events out to the connected /v1/events clients. A client that does
// not keep up loses its subscription (its stream ends and it reconnects)
// rather than blocking the daemon or growing a queue without bound.
type hub struct {
	mu   sync.Mutex
	subs map[*subscription]struct{}
}

type subscription struct {
	ch      chan Event
	dropped chan struct{} // closed when the hub gave up on a slow client
}

// subscriberBuffer is how many events a client may fall behind by.
const subscriberBuffer = 256

func newHub() *hub { return &hub{subs: make(map[*subscription]struct{})} }

func (h *hub) subscribe() *subscription {
	s := &subscription{ch: make(chan Event, subscriberBuffer), dropped: make(chan struct{})}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

func (h *hub) unsubscribe(s *subscription) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

// active reports whether any client is subscribed: events nobody would
// read are not worth rendering, a batch of hundreds at a time under a flood
// of records from a peer.
func (h *hub) active() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs) > 0
}

func (h *hub) publish(e Event) {
	h.mu.Lock()
	sent := false
	for s := range h.subs {
		select {
		case s.ch <- e:
			sent = true
		default:
			delete(h.subs, s)
			close(s.dropped)
		}
	}
	h.mu.Unlock()
	if sent {
		// The caller is the goroutine that applied a peer's batch, which
		// still has its bookkeeping and the batch's ack to send; the
		// streams' writers it just woke would otherwise wait on this
		// processor until it blocks. An app waiting for the event is what
		// a user sees; the ack can wait while the writers format and flush
		// one event each.
		runtime.Gosched()
	}
}

// publish turns what the library reports other devices did into events of
// the stream (library.Config.OnEvent).
func (d *Daemon) publish(ev library.Event) {
	switch ev.Kind {
	case library.BookChanged:
		d.hub.publish(Event{Type: "book", Data: d.viewer().book(&ev.Book)})
	case library.BookDeleted:
		d.hub.publish(Event{Type: "deleted", Data: d.viewer().deleted(&ev.Book)})
	case library.PeerConnected, library.PeerDisconnected:
		d.seen.note(ev.Device, d.now())
		d.hub.publish(Event{Type: "peer", Data: api.PeerEvent{Device: ev.Device.String(), Name: ev.Name, Connected: ev.Kind == library.PeerConnected}})
	}
}
