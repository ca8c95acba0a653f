package daemon

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
	"github.com/danyue/danyue/internal/poll"
)

const hour = int64(time.Hour / time.Millisecond)

// TestTwoDevices is the product's promise end to end on loopback: two
// daemons, an invite and a join, and progress flowing both ways.
func TestTwoDevices(t *testing.T) {
	a := startDaemon(t, func(c *Config) { c.Name = "laptop" })
	b := startDaemon(t, func(c *Config) { c.Name = "phone" })
	ctx := ctxT(t)

	// B has a book of its own before it joins: it must be kept and merged.
	mustDo(b.client.SetPosition(ctx, keyB, 42, 0.01, "B's own book"))(t)
	code := mustDo(a.client.Invite(ctx))(t)
	joined := mustDo(b.client.Join(ctx, code))(t)
	aStatus := mustDo(a.client.Status(ctx))(t)
	if joined.Library.ID != aStatus.Library.ID {
		t.Fatalf("joined library %s, want A's %s", joined.Library.ID, aStatus.Library.ID)
	}
	waitBook(t, a.client, keyB, "A to receive B's own book", func(bk api.Book) bool { return bk.Position != nil && bk.Position.Char == 42 })

	events := subscribe(t, b)

	// A position set on A shows on B, through the API and the event stream.
	mustDo(a.client.SetPosition(ctx, keyA, 1234, 0.12, "Shared"))(t)
	waitBook(t, b.client, keyA, "B to see A's position", func(bk api.Book) bool {
		return bk.Position != nil && bk.Position.Char == 1234 && bk.Position.DeviceName == "laptop"
	})
	ev := events.next(t, "book")
	var evBook api.Book
	if err := json.Unmarshal(ev.Data, &evBook); err != nil || evBook.Key != keyA || evBook.Position.Char != 1234 {
		t.Fatalf("book event = %s (%v), want A's position", ev.Data, err)
	}

	readTimeAddsUp(t, a, b)

	// A delete on A shows on B as deleted, with an honest event.
	mustDo(a.client.Delete(ctx, keyA))(t)
	waitBook(t, b.client, keyA, "B to see the delete", func(bk api.Book) bool { return bk.Deleted })
	ev = events.next(t, "deleted")
	var del api.Deleted
	if err := json.Unmarshal(ev.Data, &del); err != nil {
		t.Fatal(err)
	}
	if del.Key != keyA || del.DeviceName != "laptop" || !strings.Contains(del.Message, "laptop") ||
		!strings.Contains(del.Message, "Nothing on this device was deleted") || !strings.Contains(del.Message, "brings it back") {
		t.Fatalf("deleted event = %+v", del)
	}

	// Reading on B brings it back on A, with all its read time.
	mustDo(b.client.SetPosition(ctx, keyA, 5000, 0.5, ""))(t)
	waitBook(t, a.client, keyA, "A to see the book back", func(bk api.Book) bool { return !bk.Deleted && bk.Position.Char == 5000 })
	if bk := mustDo(a.client.Book(ctx, keyA))(t); bk.ReadTime.TotalMs != uint64(15*hour) {
		t.Fatalf("revived book has %d ms, want 15 h", bk.ReadTime.TotalMs)
	}

	// Both see each other as connected peers.
	peers := mustDo(a.client.Peers(ctx))(t)
	if len(peers) != 1 || !peers[0].Connected || peers[0].Name != "phone" {
		t.Fatalf("A's peers = %+v, want phone connected", peers)
	}
}

// readTimeAddsUp checks that read time from both devices adds up: 10 h +
// 5 h = 15 h, on both, and stays 15 h however many sync rounds follow;
// and that a write made after seeing the other side's last write wins on
// both.
func readTimeAddsUp(t *testing.T, a, b *testDaemon) {
	t.Helper()
	ctx := ctxT(t)
	mustDo(a.client.AddReadTime(ctx, keyA, 10*hour, ""))(t)
	mustDo(b.client.AddReadTime(ctx, keyA, 5*hour, ""))(t)
	for _, d := range []*testDaemon{a, b} {
		waitBook(t, d.client, keyA, "15 h on "+d.cfg.Name, func(bk api.Book) bool { return bk.ReadTime.TotalMs == uint64(15*hour) })
	}
	var lastA api.Book
	for i := range 20 {
		// Each round changes the book on both sides, so both ship the whole
		// record back and forth again.
		lastA = mustDo(a.client.SetPosition(ctx, keyA, int64(2000+i), 0.2, ""))(t)
		mustDo(b.client.SetPosition(ctx, keyA, int64(3000+i), 0.3, ""))(t)
	}
	// Concurrent writes are decided by the hybrid clock; a write made after
	// seeing the other side's last write wins on both.
	// Once B's winning position is at least as late as A's last write, B's
	// clock has passed it, so B's next write wins everywhere.
	waitBook(t, b.client, keyA, "B to catch up with A's last write", func(bk api.Book) bool { return bk.Position.Stamp >= lastA.Position.Stamp })
	mustDo(b.client.SetPosition(ctx, keyA, 4000, 0.4, ""))(t)
	for _, d := range []*testDaemon{a, b} {
		waitBook(t, d.client, keyA, "B's causally last position on "+d.cfg.Name, func(bk api.Book) bool { return bk.Position.Char == 4000 })
		bk := mustDo(d.client.Book(ctx, keyA))(t)
		if bk.ReadTime.TotalMs != uint64(15*hour) {
			t.Fatalf("after 20 sync rounds %s shows %d ms, want exactly 15 h", d.cfg.Name, bk.ReadTime.TotalMs)
		}
	}
	bk := mustDo(b.client.Book(ctx, keyA))(t)
	if bk.ReadTime.ThisDeviceMs != uint64(5*hour) || bk.ReadTime.ByDevice[a.Device().String()] != uint64(10*hour) {
		t.Fatalf("B's read time = %+v, want 5 h here and 10 h on A", bk.ReadTime)
	}

}

func waitBook(t *testing.T, c *client.Client, key, what string, cond func(api.Book) bool) {
	t.Helper()
	poll.Until(t, what, 10*time.Second, func() bool {
		bk, err := c.Book(context.Background(), key)
		return err == nil && cond(bk)
	})
}

type eventStream struct {
	ch chan client.Event
}

// subscribe opens the event stream and returns once it is open.
func subscribe(t *testing.T, d *testDaemon) *eventStream {
	t.Helper()
	c := d.client
	before := d.hub.count()
	ctx, cancel := context.WithCancel(context.Background())
	es := &eventStream{ch: make(chan client.Event, 1024)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Events(ctx, func(e client.Event) error {
			es.ch <- e
			return nil
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	// The stream is open once the daemon counts the subscriber.
	poll.Until(t, "the event stream to open", 5*time.Second, func() bool { return d.hub.count() > before })
	return es
}

// next returns the next event of type typ, skipping others.
func (es *eventStream) next(t *testing.T, typ string) client.Event {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-es.ch:
			if e.Type == typ {
				return e
			}
		case <-timeout:
			t.Fatalf("no %q event within 10s", typ)
		}
	}
}
