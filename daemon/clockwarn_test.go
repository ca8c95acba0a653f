package daemon

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/daemon/client"
)

// Issue 12, item 5: a record stamped in the year 9999 from a member,
// received through the path the peer layer uses, is merged, but does not
// drag this device's clock there. The next local write to another book is
// stamped near now; a local write to the same book wins over the far-future
// one, and so do a delete and a rename of this device over forged far-future
// records; status names the writer (not the relay) by a sane amount; and a
// restart does not pin the clock there either.
func TestFarFutureRecordDoesNotDragTheClock(t *testing.T) {
	dir := tempDir(t)
	cfg := Config{
		DataDir: filepath.Join(dir, "data"),
		Name:    "laptop",
		Listen:  []string{"/ip4/127.0.0.1/tcp/0"},
		NoMDNS:  true,
		Logger:  testLogger(t),
	}
	ctx := ctxT(t)
	d, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			d.Close()
		}
	})
	const writer, relay crdt.DeviceID = 0x2099, 0x4242
	far := crdt.Timestamp{Wall: crdt.MaxWall, Logical: 0, Device: writer}
	farKey := crdt.MustParseBookKey("md5:99999999999999999999999999999999")
	name, err := crdt.RenameDevice(crdt.Timestamp{Wall: d.wallMs(), Device: writer}, "BrokenPhone")
	if err != nil {
		t.Fatal(err)
	}
	pos, err := crdt.SetPosition(farKey, far, 1000, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	// A forged name for this very device, far in the future too.
	hijack, err := crdt.RenameDevice(crdt.Timestamp{Wall: crdt.MaxWall, Logical: 7, Device: writer}, "hijacked")
	if err != nil {
		t.Fatal(err)
	}
	hijack.Device.ID = d.self
	before := d.wallMs()
	if err := (syncStore{d}).ApplyRemote(ctx, relay, 1, 1, []crdt.Entry{name, pos, hijack}); err != nil {
		t.Fatalf("ApplyRemote: %v", err)
	}

	// The record is merged: it is the library's data.
	if b, err := d.book(ctx, farKey); err != nil || b.Position.At != far {
		t.Fatalf("the far-future record was not merged: %+v, %v", b.Position, err)
	}
	// Another book: stamped near now, not at the end of time.
	c := newClientFor(t, d)
	other, err := c.SetPosition(ctx, "md5:00000000000000000000000000000001", 10, 0.01, "")
	if err != nil {
		t.Fatal(err)
	}
	at, err := time.Parse(time.RFC3339Nano, other.Position.At)
	if err != nil {
		t.Fatalf("position at %q: %v", other.Position.At, err)
	}
	after := d.wallMs()
	if ms := uint64(at.UnixMilli()); ms < before || ms > after+crdt.MaxAhead {
		t.Errorf("a write to another book after receiving a 9999 record is stamped %s (%s), want within a minute of now", other.Position.At, other.Position.Stamp)
	}
	// The same book: the local write wins over the far-future one.
	same, err := c.SetPosition(ctx, farKey.String(), 2000, 0.2, "")
	if err != nil {
		t.Fatal(err)
	}
	if same.Position.Char != 2000 || same.Position.Device != d.self.String() {
		t.Errorf("a local write to the far-future book lost: position %+v", same.Position)
	}
	// A delete made after it hides it; reading again revives it.
	if _, err := c.Delete(ctx, farKey.String()); err != nil {
		t.Fatal(err)
	}
	if b, _ := d.book(ctx, farKey); b.Visible() {
		t.Errorf("a delete made after the far-future write did not hide the book: %+v", b)
	}
	if _, err := c.SetPosition(ctx, farKey.String(), 3000, 0.3, ""); err != nil {
		t.Fatal(err)
	}
	if b, _ := d.book(ctx, farKey); !b.Visible() || b.Position.Char != 3000 {
		t.Errorf("a write after the delete did not revive the book: %+v", b)
	}
	// Renaming this device wins over the forged far-future name.
	if err := d.renameSelf(ctx, "laptop 2"); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Status(ctx); err != nil || st.Device.Name != "laptop 2" {
		t.Errorf("after a rename the device is called %q (%v), want %q", st.Device.Name, err, "laptop 2")
	}

	// Another device's write ordered after the far-future one (as this
	// device's own were) has the far wall time with a counter: its device's
	// clock is not to blame.
	follower, err := crdt.SetPosition(farKey, crdt.Timestamp{Wall: crdt.MaxWall, Logical: 9, Device: 0x3333}, 4000, 0.4)
	if err != nil {
		t.Fatal(err)
	}
	if err := (syncStore{d}).ApplyRemote(ctx, relay, 1, 2, []crdt.Entry{follower}); err != nil {
		t.Fatalf("ApplyRemote: %v", err)
	}

	// Status names the writer, not the relay, by the right amount, and no
	// one else.
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.ClockWarnings) != 1 {
		t.Fatalf("status lists %d clock warnings, want 1: %+v", len(st.ClockWarnings), st.ClockWarnings)
	}
	w := st.ClockWarnings[0]
	wantAhead := int64(crdt.MaxWall - before)
	if w.Device != writer.String() || w.Name != "BrokenPhone" || w.Via != relay.String() ||
		w.AheadMs <= 0 || math.Abs(float64(w.AheadMs-wantAhead)) > float64(time.Minute.Milliseconds()) ||
		w.Stamp != "9999-12-31T23:59:59.999Z" || !strings.Contains(w.Warning, "BrokenPhone") || !strings.Contains(w.Warning, "years ahead") {
		t.Errorf("clock warning %+v, want the writer %s (BrokenPhone) via %s, about %d ms ahead, stamped 9999-12-31T23:59:59.999Z", w, writer, relay, wantAhead)
	}
	t.Logf("status: %q", w.Warning)

	// A restart resumes near now, not at the far-future high-water mark.
	closed = true
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d, err = Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	closed = false
	c = newClientFor(t, d)
	again, err := c.SetPosition(ctx, "md5:00000000000000000000000000000002", 10, 0.01, "")
	if err != nil {
		t.Fatal(err)
	}
	if at, _ := time.Parse(time.RFC3339Nano, again.Position.At); uint64(at.UnixMilli()) > d.wallMs()+crdt.MaxAhead {
		t.Errorf("after a restart a write is stamped %s, want within a minute of now", again.Position.At)
	}
}

// Each clock warning amount reads right, far past what a time.Duration
// holds.
func TestAheadText(t *testing.T) {
	tests := []struct {
		ms   uint64
		want string
	}{
		{61_000, "1m1s"},
		{uint64(47 * time.Hour / time.Millisecond), "47h0m0s"},
		{uint64(3 * 24 * time.Hour / time.Millisecond), "3 days"},
		{3 * 31_556_952_000, "3.0 years"},
		{crdt.MaxWall - 1_767_225_600_000, "7974.0 years"}, // 2026 to the end of 9999
	}
	for _, tt := range tests {
		if got := aheadText(tt.ms); got != tt.want {
			t.Errorf("aheadText(%d) = %q, want %q", tt.ms, got, tt.want)
		}
	}
}

func newClientFor(t *testing.T, d *Daemon) *client.Client {
	c := client.New(d.Socket())
	t.Cleanup(func() { c.Close() })
	return c
}
