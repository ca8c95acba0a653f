package crdt_test

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/danyue/danyue/crdt"
	"pgregory.net/rapid"
)

var (
	lib1 = crdt.LibraryID{0: 1, 15: 1}
	lib2 = crdt.LibraryID{0: 2}
)

// genMember draws records of member devA in lib1: additions by A or B,
// removals, and names from a small pool of stamps and values, so that equal
// stamps and more names than MaxMemberNames are both frequent.
var genMember = rapid.Custom(func(t *rapid.T) crdt.Member {
	m := crdt.Member{Library: lib1, ID: devA}
	if rapid.Bool().Draw(t, "added") {
		m.Added = genStamp.Draw(t, "added at")
		m.AddedBy = rapid.SampledFrom([]crdt.DeviceID{devA, devB}).Draw(t, "added by")
		// An addition of an epoch is its adder's own record.
		if m.AddedBy == m.Added.Device {
			m.AddedEpoch = rapid.Uint64Range(0, 3).Draw(t, "epoch")
		}
	}
	if rapid.Bool().Draw(t, "removed") {
		m.Removed = genStamp.Draw(t, "removed at")
		m.RemovedEpoch = rapid.Uint64Range(0, 3).Draw(t, "removed in")
	}
	var names []crdt.Text
	for range rapid.IntRange(0, crdt.MaxMemberNames+4).Draw(t, "names") {
		at := ts(t0+rapid.Uint64Range(0, 24).Draw(t, "wall"), 0, devA)
		names = append(names, crdt.Text{At: at, Value: rapid.SampledFrom(simTitles).Draw(t, "name")})
	}
	// A valid record holds its names in order and at most the bound: fold
	// them in as the merge would.
	for _, n := range names {
		o := crdt.Member{Library: lib1, ID: devA, Names: []crdt.Text{n}}
		m.Merge(&o)
	}
	return m
})

// Rule (doc "Merge"): the member record is a semilattice like every other
// record: commutative, associative and idempotent, whatever the order and
// duplication of delivery, bounded name history included.
func TestMemberMergeIsASemilattice(t *testing.T) {
	checkSemilattice(t, func(_ *rapid.T, e crdt.Entry) crdt.Entry { return e.Clone() }, rapid.Map(genMember, crdt.MemberEntry))
}

// Rule: a removal wins. Whatever additions and names arrive, in any order,
// before or after it, a replica that has merged a removal holds a removed
// device, and the removal kept is the earliest one.
func TestMemberRemovalWins(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		removal := must(t)(crdt.RemoveMember(lib1, devA, genStamp.Draw(t, "removed at"), rapid.Uint64Range(0, 3).Draw(t, "removed in")))
		others := rapid.SliceOfN(rapid.Map(genMember, crdt.MemberEntry), 0, 5).Draw(t, "others")
		at := rapid.IntRange(0, len(others)).Draw(t, "removal position")
		seq := append(append(append([]crdt.Entry{}, others[:at]...), removal), others[at:]...)
		got := fold(t, append([]crdt.Entry{crdt.MemberEntry(crdt.Member{Library: lib1, ID: devA})}, seq...)...)
		if !got.Member.IsRemoved() || got.Member.IsMember() {
			t.Fatalf("a removal was merged but the device is a member: %+v", got.Member)
		}
		want := removal.Member.Removed
		for _, o := range others {
			if r := o.Member.Removed; !r.IsZero() && r.Compare(want) < 0 {
				want = r
			}
		}
		if got.Member.Removed != want {
			t.Fatalf("removal kept %v, want the earliest %v", got.Member.Removed, want)
		}
	})
}

// Rule: within an epoch the earliest addition says who added a device, so
// a pairing's addition is not undone by a later one; an addition of a newer
// epoch (the device paired again after a rotation) wins over any older
// one, whatever its stamp.
func TestMemberAdditionOfTheNewestEpochWins(t *testing.T) {
	pairing := must(t)(crdt.AddMember(lib1, devB, ts(t0, 0, devA), 2))
	later := must(t)(crdt.AddMember(lib1, devB, ts(t0+minute, 0, devC), 2))
	older := must(t)(crdt.AddMember(lib1, devB, ts(t0-minute, 0, devC), 1))
	for _, order := range [][]crdt.Entry{{pairing, later, older}, {later, older, pairing}, {older, pairing, later}} {
		got := fold(t, order...)
		if got.Member.AddedBy != devA || got.Member.Added != pairing.Member.Added || got.Member.AddedEpoch != 2 || !got.Member.IsMember() {
			t.Errorf("added by %s at %v in epoch %d, want %s at %v in epoch 2", got.Member.AddedBy, got.Member.Added, got.Member.AddedEpoch, devA, pairing.Member.Added)
		}
	}
	again := must(t)(crdt.AddMember(lib1, devB, ts(t0+hour, 0, devC), 3))
	if got := fold(t, pairing, again, older); got.Member.AddedBy != devC || got.Member.AddedEpoch != 3 {
		t.Errorf("paired again in epoch 3: added by %s in epoch %d", got.Member.AddedBy, got.Member.AddedEpoch)
	}
}

// Rule: a rename never rewrites history: the name at a time is the newest
// name written at or before it.
func TestMemberNameAt(t *testing.T) {
	m := fold(t,
		must(t)(crdt.NameMember(lib1, ts(t0+hour, 0, devA), "Pixel")),
		must(t)(crdt.NameMember(lib1, ts(t0+3*hour, 0, devA), "Reading phone")),
	).Member
	for _, tc := range []struct {
		at   crdt.Timestamp
		want string
	}{
		{ts(t0, 0, devB), "Pixel"}, // before any name: the oldest known
		{ts(t0+hour, 0, devA), "Pixel"},
		{ts(t0+2*hour, 5, devB), "Pixel"},
		{ts(t0+3*hour, 0, devA), "Reading phone"},
		{ts(t0+3*hour, 0, devB), "Reading phone"},
		{ts(crdt.MaxWall, 0, devB), "Reading phone"},
	} {
		if got := m.NameAt(tc.at); got != tc.want {
			t.Errorf("NameAt(%v) = %q, want %q", tc.at, got, tc.want)
		}
	}
	if got := m.Name(); got != "Reading phone" {
		t.Errorf("Name() = %q", got)
	}
	var none crdt.Member
	if got := none.NameAt(ts(t0, 0, devA)); got != "" {
		t.Errorf("NameAt of a member without names = %q", got)
	}
}

// The name history keeps the newest MaxMemberNames names.
func TestMemberNamesBounded(t *testing.T) {
	e := crdt.MemberEntry(crdt.Member{Library: lib1, ID: devA})
	for i := range crdt.MaxMemberNames + 3 {
		n := must(t)(crdt.NameMember(lib1, ts(t0+uint64(i), 0, devA), "name"))
		if _, err := e.Merge(&n); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(e.Member.Names); got != crdt.MaxMemberNames {
		t.Fatalf("%d names kept, want %d", got, crdt.MaxMemberNames)
	}
	if first := e.Member.Names[0].At.Wall; first != t0+3 {
		t.Fatalf("oldest kept name at %d, want %d", first, t0+3)
	}
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
}

// Bad input gets a clear error and no record.
func TestMemberOperationsRefuse(t *testing.T) {
	at := ts(t0, 0, devA)
	for _, tc := range []struct {
		name string
		op   func() (crdt.Entry, error)
	}{
		{"no library", func() (crdt.Entry, error) { return crdt.AddMember(crdt.LibraryID{}, devB, at, 1) }},
		{"no device", func() (crdt.Entry, error) { return crdt.AddMember(lib1, 0, at, 1) }},
		{"no adder", func() (crdt.Entry, error) { return crdt.AddMember(lib1, devB, crdt.Timestamp{Wall: t0}, 1) }},
		{"no stamp", func() (crdt.Entry, error) { return crdt.RemoveMember(lib1, devB, crdt.Timestamp{}, 0) }},
		{"empty name", func() (crdt.Entry, error) { return crdt.NameMember(lib1, at, "") }},
		{"control character", func() (crdt.Entry, error) { return crdt.NameMember(lib1, at, "a\nb") }},
		{"long name", func() (crdt.Entry, error) {
			return crdt.NameMember(lib1, at, strings.Repeat("x", crdt.MaxDeviceNameBytes+1))
		}},
	} {
		e, err := tc.op()
		if !errors.Is(err, crdt.ErrInvalid) || !reflect.DeepEqual(e, crdt.Entry{}) {
			t.Errorf("%s: got %+v, %v; want ErrInvalid and no record", tc.name, e, err)
		}
	}
}

// Records of two libraries, or of two devices, are two records.
func TestMemberIdentity(t *testing.T) {
	a := must(t)(crdt.AddMember(lib1, devA, ts(t0, 0, devA), 0))
	b := must(t)(crdt.AddMember(lib2, devA, ts(t0, 0, devA), 0))
	c := must(t)(crdt.AddMember(lib1, devB, ts(t0, 0, devA), 0))
	if bytes.Equal(a.AppendID(nil), b.AppendID(nil)) || bytes.Equal(a.AppendID(nil), c.AppendID(nil)) {
		t.Fatal("member ids collide")
	}
	for _, o := range []crdt.Entry{b, c} {
		x := a.Clone()
		if _, err := x.Merge(&o); !errors.Is(err, crdt.ErrInvalid) {
			t.Errorf("merge of another member: %v", err)
		}
	}
}

// Member records round-trip through the codec, and a decoder refuses names
// out of order, duplicated, written by another device or over the bound.
func TestMemberCodec(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := crdt.MemberEntry(genMember.Draw(t, "member"))
		b := encode(t, e)
		if crdt.KindOfEncoded(b) != crdt.KindMember {
			t.Fatalf("KindOfEncoded = %v", crdt.KindOfEncoded(b))
		}
		got, err := crdt.Decode(b)
		if err != nil || !reflect.DeepEqual(got, e) {
			t.Fatalf("round trip gave %+v, %v; want %+v", got, err, e)
		}
	})
	n1, n2 := crdt.Text{At: ts(t0, 0, devA), Value: "a"}, crdt.Text{At: ts(t0+1, 0, devA), Value: "b"}
	many := make([]crdt.Text, crdt.MaxMemberNames+1)
	for i := range many {
		many[i] = crdt.Text{At: ts(t0+uint64(i), 0, devA), Value: "x"}
	}
	for name, m := range map[string]crdt.Member{
		"out of order":           {Library: lib1, ID: devA, Names: []crdt.Text{n2, n1}},
		"duplicate":              {Library: lib1, ID: devA, Names: []crdt.Text{n1, n1}},
		"another's name":         {Library: lib1, ID: devB, Names: []crdt.Text{n1}},
		"too many":               {Library: lib1, ID: devA, Names: many},
		"adder, no time":         {Library: lib1, ID: devA, AddedBy: devB},
		"unstamped name":         {Library: lib1, ID: devA, Names: []crdt.Text{{Value: "x"}}},
		"removal past max":       {Library: lib1, ID: devA, Removed: ts(crdt.MaxWall+1, 0, devA)},
		"device zero":            {Library: lib1, Added: ts(t0, 0, devA), AddedBy: math.MaxUint64},
		"epoch, no added":        {Library: lib1, ID: devA, AddedEpoch: 2},
		"epoch, not its adder's": {Library: lib1, ID: devA, Added: ts(t0, 0, devA), AddedBy: devB, AddedEpoch: 2},
	} {
		e := crdt.MemberEntry(m)
		if _, err := e.Encode(); !errors.Is(err, crdt.ErrInvalid) {
			t.Errorf("%s: Encode gave %v, want ErrInvalid", name, err)
		}
	}
}

// memberGoldenRecords pins the member encoding: a device added by pairing
// and renamed once, and one that was removed.
func memberGoldenRecords() []struct {
	name  string
	entry crdt.Entry
} {
	lib := crdt.LibraryID{0x5d, 0x1e, 0x8a, 0x02, 0x73, 0xc4, 0x19, 0xbe, 0x60, 0x0f, 0x44, 0xd2, 0x9a, 0x31, 0x7c, 0xe5}
	return []struct {
		name  string
		entry crdt.Entry
	}{
		{"member-paired-renamed", crdt.MemberEntry(crdt.Member{Library: lib, ID: phone, Added: ts(t0, 0, laptop), AddedBy: laptop,
			Names: []crdt.Text{{At: ts(t0, 1, phone), Value: "Pixel 9"}, {At: ts(t0+day, 0, phone), Value: "Reading phone"}}})},
		{"member-removed", crdt.MemberEntry(crdt.Member{Library: lib, ID: nas, Added: ts(t0, 0, nas), AddedBy: nas, Removed: ts(t0+40*day, 0, laptop)})},
		{"member-added-in-epoch", crdt.MemberEntry(crdt.Member{Library: lib, ID: phone, Added: ts(t0+50*day, 0, laptop), AddedBy: laptop, AddedEpoch: 3})},
		{"member-removed-in-epoch", crdt.MemberEntry(crdt.Member{Library: lib, ID: nas, Removed: ts(t0+60*day, 0, laptop), RemovedEpoch: 3})},
	}
}

// FuzzMemberMerge decodes two arbitrary member records and checks that
// whatever a peer sends, merging commutes, is idempotent and keeps a
// removal. Seeds: the golden member records.
//
//	go test ./crdt -run '^$' -fuzz FuzzMemberMerge -fuzztime 1m
func FuzzMemberMerge(f *testing.F) {
	golden := memberGoldenRecords()
	for _, a := range golden {
		for _, b := range golden {
			x, _ := a.entry.Encode()
			y, _ := b.entry.Encode()
			f.Add(x, y)
		}
	}
	f.Fuzz(func(t *testing.T, x, y []byte) {
		a, errA := crdt.Decode(x)
		b, errB := crdt.Decode(y)
		if errA != nil || errB != nil || a.Kind != crdt.KindMember || b.Kind != crdt.KindMember {
			return
		}
		// Records of two members never merge; make b one of a's.
		b.Member.Library, b.Member.ID = a.Member.Library, a.Member.ID
		if b.Validate() != nil {
			return // its names were written by another device
		}
		ab, ba := a.Clone(), b.Clone()
		if _, err := ab.Merge(&b); err != nil {
			t.Fatal(err)
		}
		if _, err := ba.Merge(&a); err != nil {
			t.Fatal(err)
		}
		if x, y := encode(t, ab), encode(t, ba); !bytes.Equal(x, y) {
			t.Fatalf("not commutative:\n%+v\n%+v", ab, ba)
		}
		again := ab.Clone()
		if changed, err := again.Merge(&b); err != nil || changed {
			t.Fatalf("merging b again changed a⊔b: %v %v", changed, err)
		}
		if (a.Member.IsRemoved() || b.Member.IsRemoved()) && !ab.Member.IsRemoved() {
			t.Fatalf("a removal was lost: %+v", ab.Member)
		}
	})
}
