package crdt_test

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/danyue/danyue/crdt"
	"pgregory.net/rapid"
)

// Random valid kosync records. The fixed-key generators make records of one
// identity, which is what merges; genKosyncProgressAnyKey varies the key too,
// for the codec's round-trip and injectivity tests.
var (
	genKosyncUser = rapid.Custom(func(t *rapid.T) crdt.KosyncUser {
		u := crdt.KosyncUser{Name: simKosyncUsers[0]}
		if rapid.Bool().Draw(t, "written") {
			u.Auth = crdt.Text{At: genStamp.Draw(t, "at"), Value: rapid.SampledFrom(simKosyncAuths).Draw(t, "auth")}
		}
		return u
	})
	genKosyncProgress       = kosyncProgressGen(false)
	genKosyncProgressAnyKey = kosyncProgressGen(true)
)

func kosyncProgressGen(anyKey bool) *rapid.Generator[crdt.KosyncProgress] {
	return rapid.Custom(func(t *rapid.T) crdt.KosyncProgress {
		p := crdt.KosyncProgress{User: simKosyncUsers[0], Document: simKosyncDocs[0]}
		if anyKey {
			p.User = rapid.SampledFrom(simKosyncUsers).Draw(t, "user")
			p.Document = rapid.SampledFrom(simKosyncDocs).Draw(t, "document")
		}
		if rapid.Bool().Draw(t, "written") {
			p.At = genStamp.Draw(t, "at")
			p.Progress = rapid.SampledFrom(simKosyncProgress).Draw(t, "progress")
			p.Percentage = rapid.SampledFrom(simKosyncPercents).Draw(t, "percentage")
			p.Device = rapid.SampledFrom(simKosyncReaders).Draw(t, "reader")
			p.DeviceID = rapid.SampledFrom(simKosyncReaderIDs).Draw(t, "reader id")
		}
		return p
	})
}

// Rule (doc "Merge", "Records"): the kosync registers merge as a semilattice
// too, including writes with equal timestamps and other contents, which the
// tie-break by content must order the same way on every replica.
func TestKosyncMergeIsASemilattice(t *testing.T) {
	checkSemilattice(t, kosyncTwin,
		rapid.Map(genKosyncUser, crdt.KosyncUserEntry),
		rapid.Map(genKosyncProgress, crdt.KosyncProgressEntry))
}

// kosyncTwin returns e with the same timestamp and other contents.
func kosyncTwin(t *rapid.T, e crdt.Entry) crdt.Entry {
	if e.Kind == crdt.KindKosyncUser {
		if !e.KosyncUser.Auth.At.IsZero() {
			e.KosyncUser.Auth.Value = rapid.SampledFrom(simKosyncAuths).Draw(t, "other auth")
		}
		return e
	}
	if p := &e.KosyncProgress; !p.At.IsZero() {
		p.Progress = rapid.SampledFrom(simKosyncProgress).Draw(t, "other progress")
		p.Percentage = rapid.SampledFrom(simKosyncPercents).Draw(t, "other percentage")
		p.Device = rapid.SampledFrom(simKosyncReaders).Draw(t, "other reader")
	}
	return e
}

// Issue 8: the newest write wins by causal time, not by arrival. A daemon
// that was cut off holds a write made before the one the others have; when
// it reconnects and its write arrives last, the newer write stays. And a
// write made after seeing another wins over it even on a device whose wall
// clock is a day behind.
func TestKosyncNewestWriteWinsNotLastArrival(t *testing.T) {
	a, b := crdt.NewClock(devA, crdt.Timestamp{}), crdt.NewClock(devB, crdt.Timestamp{})
	write := func(c *crdt.Clock, wall uint64, floor crdt.Timestamp, progress string) crdt.Entry {
		return must(t)(crdt.SetKosyncProgress(c.NowAfter(wall, floor), crdt.KosyncProgress{
			User: "alice", Document: simKosyncDocs[0], Progress: progress, Percentage: 0.5, Device: "Kobo", DeviceID: "k1",
		}))
	}
	stale := write(b, t0, crdt.Timestamp{}, "page 10")      // B, partitioned, at 08:00
	fresh := write(a, t0+hour, crdt.Timestamp{}, "page 90") // A, an hour later
	replica := fold(t, emptyOf(fresh), fresh)               // what A and its peers hold
	if changed, err := replica.Merge(&stale); err != nil || changed {
		t.Fatalf("the partitioned daemon's older write, arriving last: changed=%v err=%v", changed, err)
	}
	if got := replica.KosyncProgress.Progress; got != "page 90" {
		t.Fatalf("after the reconnect the record says %q, want the newer %q", got, "page 90")
	}
	// Merged in the other order, the same record.
	if other := fold(t, emptyOf(stale), stale, fresh); !sameBytes(t, other, replica) {
		t.Fatalf("the order of arrival changed the result:\n%+v\n%+v", other, replica)
	}
	// C's wall clock is a day behind, but it has seen A's write: its next
	// write to the record orders after it and wins everywhere, though its
	// clock did not follow A's that far.
	c := crdt.NewClock(devC, crdt.Timestamp{})
	c.Observe(replica.MaxTimestamp(), t0-day)
	later := write(c, t0-day, replica.MaxTimestamp(), "page 95")
	if changed, _ := replica.Merge(&later); !changed || replica.KosyncProgress.Progress != "page 95" {
		t.Fatalf("a write made after observing the winner lost: %+v", replica.KosyncProgress)
	}
}

// Rule (doc "Local operations"): the kosync operations refuse invalid input
// and return no delta then.
func TestKosyncOpsRejectInvalidInput(t *testing.T) {
	at := ts(t0, 0, devA)
	good := crdt.KosyncProgress{User: "alice", Document: simKosyncDocs[0], Progress: "p", Percentage: 0.5, Device: "d", DeviceID: "i"}
	with := func(f func(p *crdt.KosyncProgress)) crdt.KosyncProgress { p := good; f(&p); return p }
	long := func(n int) string { return strings.Repeat("x", n+1) }
	tests := []struct {
		name string
		op   func() (crdt.Entry, error)
	}{
		{"user: zero timestamp", func() (crdt.Entry, error) { return crdt.SetKosyncUser(crdt.Timestamp{}, "alice", "h") }},
		{"user: timestamp without device", func() (crdt.Entry, error) { return crdt.SetKosyncUser(ts(t0, 0, 0), "alice", "h") }},
		{"user: empty name", func() (crdt.Entry, error) { return crdt.SetKosyncUser(at, "", "h") }},
		{"user: name with NUL", func() (crdt.Entry, error) { return crdt.SetKosyncUser(at, "al\x00ice", "h") }},
		{"user: name too long", func() (crdt.Entry, error) { return crdt.SetKosyncUser(at, long(crdt.MaxKosyncUserBytes), "h") }},
		{"user: name not UTF-8", func() (crdt.Entry, error) { return crdt.SetKosyncUser(at, "al\xffice", "h") }},
		{"user: name with ESC", func() (crdt.Entry, error) { return crdt.SetKosyncUser(at, "al\x1bice", "h") }},
		{"user: empty hash", func() (crdt.Entry, error) { return crdt.SetKosyncUser(at, "alice", "") }},
		{"user: hash too long", func() (crdt.Entry, error) { return crdt.SetKosyncUser(at, "alice", long(crdt.MaxKosyncAuthBytes)) }},
	}
	progress := []struct {
		name string
		p    crdt.KosyncProgress
	}{
		{"empty user", with(func(p *crdt.KosyncProgress) { p.User = "" })},
		{"empty document", with(func(p *crdt.KosyncProgress) { p.Document = "" })},
		{"document with NUL", with(func(p *crdt.KosyncProgress) { p.Document = "a\x00b" })},
		{"document too long", with(func(p *crdt.KosyncProgress) { p.Document = long(crdt.MaxKosyncDocumentBytes) })},
		{"progress too long", with(func(p *crdt.KosyncProgress) { p.Progress = long(crdt.MaxKosyncProgressBytes) })},
		{"progress not UTF-8", with(func(p *crdt.KosyncProgress) { p.Progress = "\xe7\xac" })},
		{"progress with newline", with(func(p *crdt.KosyncProgress) { p.Progress = "/body\n" })},
		{"device with ESC", with(func(p *crdt.KosyncProgress) { p.Device = "Kobo\x1b[31m" })},
		{"device id with C1", with(func(p *crdt.KosyncProgress) { p.DeviceID = "\u0085" })},
		{"document with tab", with(func(p *crdt.KosyncProgress) { p.Document = "a\tb" })},
		{"device too long", with(func(p *crdt.KosyncProgress) { p.Device = long(crdt.MaxKosyncDeviceBytes) })},
		{"device id too long", with(func(p *crdt.KosyncProgress) { p.DeviceID = long(crdt.MaxKosyncDeviceBytes) })},
		{"negative percentage", with(func(p *crdt.KosyncProgress) { p.Percentage = -0.01 })},
		{"percentage over 1", with(func(p *crdt.KosyncProgress) { p.Percentage = 1.0000001 })},
		{"NaN percentage", with(func(p *crdt.KosyncProgress) { p.Percentage = math.NaN() })},
		{"infinite percentage", with(func(p *crdt.KosyncProgress) { p.Percentage = math.Inf(1) })},
	}
	for _, p := range progress {
		tests = append(tests, struct {
			name string
			op   func() (crdt.Entry, error)
		}{"progress: " + p.name, func() (crdt.Entry, error) { return crdt.SetKosyncProgress(at, p.p) }})
	}
	tests = append(tests, struct {
		name string
		op   func() (crdt.Entry, error)
	}{"progress: zero timestamp", func() (crdt.Entry, error) { return crdt.SetKosyncProgress(crdt.Timestamp{}, good) }})
	for _, tt := range tests {
		e, err := tt.op()
		if !errors.Is(err, crdt.ErrInvalid) || !reflect.DeepEqual(e, crdt.Entry{}) {
			t.Errorf("%s: got %+v, %v; want no change and ErrInvalid", tt.name, e, err)
		}
	}
	// The edges are valid: percentage 0 (and -0, written as 0) and 1, empty
	// values, the longest ones.
	for _, p := range []crdt.KosyncProgress{
		with(func(p *crdt.KosyncProgress) { p.Percentage = 0 }),
		with(func(p *crdt.KosyncProgress) { p.Percentage = math.Copysign(0, -1) }),
		with(func(p *crdt.KosyncProgress) { p.Percentage = 1; p.Progress, p.Device, p.DeviceID = "", "", "" }),
		with(func(p *crdt.KosyncProgress) { p.Progress = long(crdt.MaxKosyncProgressBytes - 1) }),
	} {
		e, err := crdt.SetKosyncProgress(at, p)
		if err != nil || math.Signbit(e.KosyncProgress.Percentage) {
			t.Errorf("SetKosyncProgress(%+v) = %+v, %v; want a valid record", p, e.KosyncProgress, err)
			continue
		}
		encode(t, e)
	}
}

// Rule (doc "Merge"): Merge reports a change exactly when the record
// changed, and refuses records of another identity.
func TestKosyncMergeReportsChange(t *testing.T) {
	base := must(t)(crdt.SetKosyncProgress(ts(t0, 1, devB), crdt.KosyncProgress{User: "alice", Document: "d", Progress: "m", Percentage: 0.5}))
	at := func(wall uint64, logical uint32, dev crdt.DeviceID, progress string) crdt.Entry {
		return must(t)(crdt.SetKosyncProgress(ts(wall, logical, dev), crdt.KosyncProgress{User: "alice", Document: "d", Progress: progress, Percentage: 0.5}))
	}
	tests := []struct {
		name    string
		in      crdt.Entry
		changed bool
	}{
		{"itself", base, false},
		{"key only", emptyOf(base), false},
		{"older", at(t0, 0, devC, "z"), false},
		{"same time, lower device", at(t0, 1, devA, "z"), false},
		{"same stamp, smaller content", at(t0, 1, devB, "a"), false},
		{"same stamp, larger content (broken peer)", at(t0, 1, devB, "z"), true},
		{"newer", at(t0+1, 0, devA, "a"), true},
	}
	for _, tt := range tests {
		e := base.Clone()
		if changed, err := e.Merge(&tt.in); err != nil || changed != tt.changed {
			t.Errorf("%s: changed=%v err=%v, want %v", tt.name, changed, err, tt.changed)
		}
	}
	for _, other := range []crdt.Entry{
		must(t)(crdt.SetKosyncProgress(ts(t0, 2, devB), crdt.KosyncProgress{User: "bob", Document: "d"})),
		must(t)(crdt.SetKosyncProgress(ts(t0, 2, devB), crdt.KosyncProgress{User: "alice", Document: "e"})),
		must(t)(crdt.SetKosyncUser(ts(t0, 2, devB), "alice", "h")),
	} {
		e := base.Clone()
		if changed, err := e.Merge(&other); !errors.Is(err, crdt.ErrInvalid) || changed || !sameBytes(t, e, base) {
			t.Errorf("merge of %+v: changed=%v err=%v; want a refusal", other, changed, err)
		}
	}
	u := must(t)(crdt.SetKosyncUser(ts(t0, 0, devA), "alice", "h1"))
	bob := must(t)(crdt.SetKosyncUser(ts(t0, 1, devA), "bob", "h2"))
	if _, err := u.Merge(&bob); !errors.Is(err, crdt.ErrInvalid) {
		t.Errorf("merging bob's account into alice's: %v", err)
	}
}

// Record ids (AppendID) key the store: they differ between kinds and between
// (user, document) pairs that would concatenate alike, and a write keeps the
// id of its record.
func TestKosyncIDs(t *testing.T) {
	id := func(e crdt.Entry) string { return string(e.AppendID(nil)) }
	distinct := map[string]bool{}
	for _, e := range []crdt.Entry{
		crdt.KosyncUserEntry(crdt.KosyncUser{Name: "ab"}),
		crdt.KosyncProgressEntry(crdt.KosyncProgress{User: "a", Document: "bc"}),
		crdt.KosyncProgressEntry(crdt.KosyncProgress{User: "ab", Document: "c"}),
		crdt.DeviceEntry(crdt.Device{ID: devA}),
	} {
		distinct[id(e)] = true
	}
	if len(distinct) != 4 {
		t.Errorf("4 records have %d distinct ids", len(distinct))
	}
	written := must(t)(crdt.SetKosyncProgress(ts(t0, 0, devA), crdt.KosyncProgress{User: "ab", Document: "c", Progress: "p"}))
	if got, want := id(written), "\x04ab\x00c"; got != want {
		t.Errorf("id of ab/c = %q, want %q", got, want)
	}
}

// A removed account stays removed against every earlier write, in any
// order of arrival, and comes back only by a later one.
func TestKosyncUserRemoval(t *testing.T) {
	at := func(ms uint64) crdt.Timestamp { return crdt.Timestamp{Wall: 1767225600000 + ms, Device: 7} }
	add1, _ := crdt.SetKosyncUser(at(1000), "alice", "v1:aa")
	del2, _ := crdt.RemoveKosyncUser(at(2000), "alice")
	add3, _ := crdt.SetKosyncUser(at(3000), "alice", "v1:bb")
	for _, tc := range []struct {
		name   string
		writes []crdt.Entry
		exists bool
	}{
		{"added", []crdt.Entry{add1}, true},
		{"removed", []crdt.Entry{add1, del2}, false},
		{"removal arrives first", []crdt.Entry{del2, add1}, false},
		{"made again", []crdt.Entry{add1, del2, add3}, true},
		{"made again, out of order", []crdt.Entry{add3, add1, del2}, true},
	} {
		u := crdt.KosyncUser{Name: "alice"}
		for _, w := range tc.writes {
			u.Merge(&w.KosyncUser)
		}
		if u.Exists() != tc.exists {
			t.Errorf("%s: exists %v, want %v (%+v)", tc.name, u.Exists(), tc.exists, u)
		}
	}
	if (&crdt.KosyncUser{Name: "alice"}).Exists() {
		t.Error("a never-written account exists")
	}
}
