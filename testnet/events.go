package testnet

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
)

// EventStream follows a node's /v1/events (client.Events) and stamps each
// event with the moment it arrived.
type EventStream struct {
	n       *Node
	ch      chan TimedEvent
	cancel  context.CancelFunc
	done    chan struct{}
	dropped atomic.Int64
	once    sync.Once
}

// TimedEvent is an event and when this process received it.
type TimedEvent struct {
	client.Event
	At time.Time
}

// eventBuffer is how many events a stream keeps unread before dropping.
const eventBuffer = 1 << 14

// Events opens n's event stream. It is open for sure once Ready returned;
// it closes when the test ends, or with Close.
func (n *Node) Events() *EventStream {
	ctx, cancel := context.WithCancel(context.Background())
	s := &EventStream{n: n, ch: make(chan TimedEvent, eventBuffer), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		err := n.c.Events(ctx, func(e client.Event) error {
			select {
			case s.ch <- TimedEvent{Event: e, At: time.Now()}:
			default:
				s.dropped.Add(1)
			}
			return nil
		})
		if err != nil && ctx.Err() == nil {
			n.net.logf("%s: [testnet] event stream ended: %v", n.name, err)
		}
	}()
	n.net.t.Cleanup(s.Close)
	return s
}

// Close ends the stream and waits for its goroutine.
func (s *EventStream) Close() {
	s.once.Do(func() {
		s.cancel()
		<-s.done
	})
}

// Ready makes sure the stream is open: via writes a probe book, and Ready
// waits for its event (events only report what other devices did).
func (s *EventStream) Ready(t TB, via *Node) {
	t.Helper()
	key := BookKey(fmt.Sprintf("probe %s %p", s.n.name, s))
	deadline := time.Now().Add(15 * time.Second)
	for i := int64(1); ; i++ {
		via.SetPosition(key, i, 0, "")
		if _, ok := s.next(200*time.Millisecond, func(e client.Event) bool { return BookEventIs(e, key, uint64(i)) }); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the event stream did not show %s's write within 15s", s.n.name, via.name)
		}
	}
}

// Next returns the next event that match accepts, skipping others, or fails
// t after timeout.
func (s *EventStream) Next(t TB, timeout time.Duration, what string, match func(client.Event) bool) TimedEvent {
	t.Helper()
	e, ok := s.next(timeout, match)
	if !ok {
		t.Fatalf("%s: no event %s within %v (%d dropped)", s.n.name, what, timeout, s.dropped.Load())
	}
	return e
}

func (s *EventStream) next(timeout time.Duration, match func(client.Event) bool) (TimedEvent, bool) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case e := <-s.ch:
			if match(e.Event) {
				return e, true
			}
		case <-timer.C:
			return TimedEvent{}, false
		}
	}
}

// BookEventIs reports whether e is a "book" event showing key at char.
func BookEventIs(e client.Event, key string, char uint64) bool {
	if e.Type != "book" {
		return false
	}
	var b api.Book
	return json.Unmarshal(e.Data, &b) == nil && b.Key == key && b.Position != nil && b.Position.Char == char
}
