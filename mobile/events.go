package mobile

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/danyue/danyue/daemon/client"
)

// EventHandler receives the node's events. kind is "book" (another device
// changed a book; json is the book as the HTTP API shows it), "deleted"
// (another device removed a book; json has a message to show as it is),
// "peer" (a device connected or left) or "resync" (events may have been
// lost, as when the app did not keep up: reload the shelf). json is the
// same document as the data of the HTTP API's /v1/events stream.
//
// OnEvent is called from a goroutine of the node, one event at a time; an
// app hands the event to its UI thread and returns. It must not call
// SetEventHandler or Stop itself: they wait for delivery to end.
type EventHandler interface {
	OnEvent(kind string, json string)
}

// openTimeout bounds how long SetEventHandler waits for the stream to open.
const openTimeout = 10 * time.Second

// reconnectDelay paces reopening a stream the daemon ended.
const reconnectDelay = 500 * time.Millisecond

// SetEventHandler sends the node's events to h, replacing any handler set
// before; nil stops delivery. It returns once the node is delivering, so
// no change made after it returns is missed.
func (n *Node) SetEventHandler(h EventHandler) {
	if n.d == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.delivery != nil {
		n.delivery.stop()
		n.delivery = nil
	}
	if h == nil || n.stopped {
		return
	}
	ctx, cancel := context.WithCancel(n.ctx)
	opened := make(chan struct{})
	dv := &delivery{cancel: cancel, done: make(chan struct{})}
	go dv.run(ctx, n.rt, h, opened, n.log)
	n.delivery = dv
	timer := time.NewTimer(openTimeout)
	defer timer.Stop()
	select {
	case <-opened:
	case <-dv.done:
	case <-timer.C:
		n.log.Warn("the event stream did not open in time; events will follow once it does", "timeout", openTimeout)
	}
}

// delivery is one running event loop.
type delivery struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (dv *delivery) stop() {
	dv.cancel()
	<-dv.done
}

// run streams events to h until ctx ends, reopening the stream when the
// daemon ends it (it does so for a client that falls behind). opened is
// closed when the first stream is open.
func (dv *delivery) run(ctx context.Context, rt http.RoundTripper, h EventHandler, opened chan<- struct{}, log *slog.Logger) {
	defer close(dv.done)
	streams := 0
	// RoundTrip runs in this goroutine, before the stream's first event, so
	// OnEvent is never called concurrently.
	c := client.NewTransport(onOpen{rt: rt, fn: func() {
		if streams++; streams == 1 {
			close(opened)
			return
		}
		// Events may have been lost between the two streams.
		h.OnEvent("resync", "{}")
	}})
	defer c.Close()
	for {
		err := c.Events(ctx, func(e client.Event) error {
			h.OnEvent(e.Type, string(e.Data))
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		log.Info("event stream ended; reopening", "err", err)
		timer := time.NewTimer(reconnectDelay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// onOpen passes requests through and calls fn when an event stream opened:
// the daemon answers /v1/events only once it has subscribed.
type onOpen struct {
	rt http.RoundTripper
	fn func()
}

func (o onOpen) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := o.rt.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusOK && req.URL.Path == "/v1/events" {
		o.fn()
	}
	return resp, err
}
