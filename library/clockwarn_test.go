package library

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
)

// Issue 12, item 5: a record stamped in the year 9999 from a member,
// received through the path the peer layer uses, is merged, but does not
// drag this device's clock there. The next local write to another book is
// stamped near now; a local write to the same book wins over the far-future
// one, and so do a delete and a rename of this device over forged far-future
// records; the warnings name the writer (not the relay) by a sane amount;
// and a restart does not pin the clock there either.
func TestFarFutureRecordDoesNotDragTheClock(t *testing.T) {
	dir := t.TempDir()
	l := startAt(t, dir, "laptop")
	ctx := ctxT(t)
	const writer, relay crdt.DeviceID = 0x2099, 0x4242
	far := crdt.Timestamp{Wall: crdt.MaxWall, Logical: 0, Device: writer}
	farKey := crdt.MustParseBookKey("md5:99999999999999999999999999999999")
	before := l.wallMs()
	farBatch(t, l, writer, relay, far, farKey)

	// The record is merged: it is the library's data.
	if b, err := l.Book(ctx, farKey); err != nil || b.Position.At != far {
		t.Fatalf("the far-future record was not merged: %+v, %v", b.Position, err)
	}
	// Another book: stamped near now, not at the end of time.
	other := mustDo(l.SetPosition(ctx, crdt.MustParseBookKey("md5:00000000000000000000000000000001"), 10, 0.01, ""))(t)
	if at := other.Position.At.Wall; at < before || at > l.wallMs()+crdt.MaxAhead {
		t.Errorf("a write to another book after receiving a 9999 record is stamped %v, want within a minute of now", other.Position.At)
	}
	localWritesWin(t, l, farKey)

	// Another device's write ordered after the far-future one (as this
	// device's own were) has the far wall time with a counter: its device's
	// clock is not to blame.
	follower := mustDo(crdt.SetPosition(farKey, crdt.Timestamp{Wall: crdt.MaxWall, Logical: 9, Device: 0x3333}, 4000, 0.4))(t)
	if err := (syncStore{l}).ApplyRemote(ctx, relay, 1, 2, []crdt.Entry{follower}); err != nil {
		t.Fatalf("ApplyRemote: %v", err)
	}

	// The warnings name the writer, not the relay, by the right amount,
	// and no one else.
	ws := l.ClockWarnings()
	if len(ws) != 1 {
		t.Fatalf("%d clock warnings, want 1: %+v", len(ws), ws)
	}
	w := ws[0]
	wantAhead := crdt.MaxWall - before
	if w.Writer != writer || w.Name != "BrokenPhone" || w.Via != relay || w.Stamp != far ||
		math.Abs(float64(w.AheadMs)-float64(wantAhead)) > float64(time.Minute.Milliseconds()) ||
		!strings.Contains(w.Message(), "BrokenPhone") || !strings.Contains(w.Message(), "9999-12-31T23:59:59.999Z") || !strings.Contains(w.Message(), "years ahead") {
		t.Errorf("clock warning %+v, want the writer %s (BrokenPhone) via %s, about %d ms ahead, stamped at the end of 9999", w, writer, relay, wantAhead)
	}
	t.Logf("warning: %q", w.Message())

	// A restart resumes near now, not at the far-future high-water mark.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.store.Close(); err != nil {
		t.Fatal(err)
	}
	l = startAt(t, dir, "laptop")
	again := mustDo(l.SetPosition(ctx, crdt.MustParseBookKey("md5:00000000000000000000000000000002"), 10, 0.01, ""))(t)
	if at := again.Position.At.Wall; at > l.wallMs()+crdt.MaxAhead {
		t.Errorf("after a restart a write is stamped %v, want within a minute of now", again.Position.At)
	}
}

// startAt opens and starts a library on the store in dir.
func startAt(t *testing.T, dir, name string) *Library {
	t.Helper()
	return start(t, testConfig(t, dir, name))
}

// farBatch merges, as a batch relayed by relay, writer's name, its write
// to key stamped far, and a forged far-future name for l's own device.
func farBatch(t *testing.T, l *Library, writer, relay crdt.DeviceID, far crdt.Timestamp, key crdt.BookKey) {
	t.Helper()
	name := mustDo(crdt.RenameDevice(crdt.Timestamp{Wall: l.wallMs(), Device: writer}, "BrokenPhone"))(t)
	pos := mustDo(crdt.SetPosition(key, far, 1000, 0.1))(t)
	hijack := mustDo(crdt.RenameDevice(crdt.Timestamp{Wall: crdt.MaxWall, Logical: 7, Device: writer}, "hijacked"))(t)
	hijack.Device.ID = l.Self()
	if err := (syncStore{l}).ApplyRemote(ctxT(t), relay, 1, 1, []crdt.Entry{name, pos, hijack}); err != nil {
		t.Fatalf("ApplyRemote: %v", err)
	}
}

// localWritesWin checks that a local write to key wins over its far-future
// one, and so do a delete and a rename of this device over forged
// far-future records.
func localWritesWin(t *testing.T, l *Library, key crdt.BookKey) {
	t.Helper()
	ctx := ctxT(t)
	same := mustDo(l.SetPosition(ctx, key, 2000, 0.2, ""))(t)
	if same.Position.Char != 2000 || same.Position.At.Device != l.Self() {
		t.Errorf("a local write to the far-future book lost: position %+v", same.Position)
	}
	// A delete made after it hides it; reading again revives it.
	mustDo(l.DeleteBook(ctx, key))(t)
	if b, _ := l.Book(ctx, key); b.Visible() {
		t.Errorf("a delete made after the far-future write did not hide the book: %+v", b)
	}
	mustDo(l.SetPosition(ctx, key, 3000, 0.3, ""))(t)
	if b, _ := l.Book(ctx, key); !b.Visible() || b.Position.Char != 3000 {
		t.Errorf("a write after the delete did not revive the book: %+v", b)
	}
	// Renaming this device wins over the forged far-future name.
	if err := l.Rename(ctx, "laptop 2"); err != nil {
		t.Fatal(err)
	}
	if got := l.DeviceName(l.Self()); got != "laptop 2" {
		t.Errorf("after a rename the device is called %q, want %q", got, "laptop 2")
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
