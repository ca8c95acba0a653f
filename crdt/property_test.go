package crdt_test

import (
	"bytes"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/danyue/danyue/crdt"
	"pgregory.net/rapid"
)

// Random valid records of one book. Timestamps, offsets and values come from
// small pools so that equal timestamps with different contents (which only a
// broken peer makes, doc "Records") and equal offsets are frequent.
var (
	genStamp = rapid.Custom(func(t *rapid.T) crdt.Timestamp {
		return ts(
			rapid.SampledFrom([]uint64{t0, t0 + 1, crdt.MaxWall}).Draw(t, "wall"),
			rapid.SampledFrom([]uint32{0, math.MaxUint32}).Draw(t, "logical"),
			rapid.SampledFrom([]crdt.DeviceID{devA, devB}).Draw(t, "device"))
	})
	genPosition = rapid.Custom(func(t *rapid.T) crdt.Position {
		return crdt.Position{
			At:      genStamp.Draw(t, "at"),
			Char:    rapid.SampledFrom(simChars).Draw(t, "char"),
			Percent: rapid.SampledFrom([]crdt.Percent{0, 1, 500_000, crdt.PercentOne}).Draw(t, "percent"),
		}
	})
	genText = rapid.Custom(func(t *rapid.T) crdt.Text {
		if rapid.Bool().Draw(t, "unset") {
			return crdt.Text{}
		}
		return crdt.Text{At: genStamp.Draw(t, "at"), Value: rapid.SampledFrom(simTitles).Draw(t, "value")}
	})
	genBook = rapid.Custom(func(t *rapid.T) crdt.Book {
		b := crdt.Book{Key: keyMD5, Title: genText.Draw(t, "title")}
		if rapid.Bool().Draw(t, "written") {
			b.Position = genPosition.Draw(t, "position")
			// A valid record's furthest is never behind its position.
			b.Furthest = b.Position
			if f := genPosition.Draw(t, "furthest"); f.Char >= b.Position.Char && rapid.Bool().Draw(t, "own furthest") {
				b.Furthest = f
			}
		}
		if rapid.Bool().Draw(t, "deleted") {
			b.Deleted = genStamp.Draw(t, "deleted at")
		}
		for _, d := range []crdt.DeviceID{1, devA, devB, devC, math.MaxUint64} {
			if ms := rapid.SampledFrom([]uint64{0, 0, 1, hour, crdt.MaxSlotMs}).Draw(t, "ms"); ms > 0 {
				b.ReadTime = append(b.ReadTime, crdt.Slot{Device: d, Ms: ms})
			}
		}
		return b
	})
	genDevice = rapid.Custom(func(t *rapid.T) crdt.Device {
		return crdt.Device{ID: devA, Name: genText.Draw(t, "name")}
	})
	genEntry = rapid.OneOf(
		rapid.Map(genBook, crdt.BookEntry),
		rapid.Map(genDevice, crdt.DeviceEntry),
		rapid.Map(genKosyncUser, crdt.KosyncUserEntry),
		rapid.Map(genKosyncProgressAnyKey, crdt.KosyncProgressEntry),
		rapid.Map(genMember, crdt.MemberEntry),
	)
)

// merged returns a ⊔ b as a new record, checking that Merge left b alone
// and reported a change exactly when a's bytes changed.
func merged(t *rapid.T, a, b crdt.Entry) crdt.Entry {
	out, in := a.Clone(), b.Clone()
	changed, err := out.Merge(&in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, b) {
		t.Fatalf("Merge modified its argument")
	}
	if changed == sameBytes(t, out, a) {
		t.Fatalf("Merge reported changed=%v:\nbefore %+v\nafter  %+v", changed, a, out)
	}
	return out
}

// Rule (doc "Merge"): merge is commutative, associative and idempotent, so
// replicas that received the same records are equal whatever the order or
// duplication of delivery. Equality is of encoded bytes, what replicas
// compare and ship.
func TestMergeIsASemilattice(t *testing.T) {
	checkSemilattice(t, twin, rapid.Map(genBook, crdt.BookEntry), rapid.Map(genDevice, crdt.DeviceEntry))
}

// checkSemilattice checks the merge laws on records drawn from one of kinds,
// where b is sometimes twin(a): the same timestamps with other contents.
func checkSemilattice(t *testing.T, twin func(*rapid.T, crdt.Entry) crdt.Entry, kinds ...*rapid.Generator[crdt.Entry]) {
	rapid.Check(t, func(t *rapid.T) {
		kind := rapid.SampledFrom(kinds).Draw(t, "kind")
		a, b, c := kind.Draw(t, "a"), kind.Draw(t, "b"), kind.Draw(t, "c")
		if rapid.Bool().Draw(t, "b twins a") {
			b = twin(t, a)
		}
		if ab, ba := merged(t, a, b), merged(t, b, a); !sameBytes(t, ab, ba) {
			t.Fatalf("not commutative:\na⊔b %+v\nb⊔a %+v", ab, ba)
		}
		if l, r := merged(t, merged(t, a, b), c), merged(t, a, merged(t, b, c)); !sameBytes(t, l, r) {
			t.Fatalf("not associative:\n(a⊔b)⊔c %+v\na⊔(b⊔c) %+v", l, r)
		}
		if aa := merged(t, a, a); !sameBytes(t, aa, a) {
			t.Fatalf("not idempotent: a⊔a %+v", aa)
		}
		// Re-delivery: whatever a replica has merged, merging it again
		// changes nothing.
		ab := merged(t, a, b)
		if abb := merged(t, ab, b); !sameBytes(t, abb, ab) {
			t.Fatalf("merging b again changed a⊔b")
		}
		// The result of a merge of valid records is a valid record.
		if err := ab.Validate(); err != nil {
			t.Fatalf("a⊔b is invalid: %v", err)
		}
	})
}

// twin returns e with the same timestamps and other contents: what a broken
// peer (or a bug) could send, and what the tie-breaking by content must
// merge the same way on every replica.
func twin(t *rapid.T, e crdt.Entry) crdt.Entry {
	e = e.Clone()
	other := func(s string) string {
		return rapid.SampledFrom(simTitles).Filter(func(v string) bool { return v != s }).Draw(t, "other")
	}
	if e.Kind == crdt.KindDevice {
		if !e.Device.Name.At.IsZero() {
			e.Device.Name.Value = other(e.Device.Name.Value)
		}
		return e
	}
	b := &e.Book
	if !b.Title.At.IsZero() {
		b.Title.Value = other(b.Title.Value)
	}
	if !b.Position.At.IsZero() {
		b.Position.Percent = crdt.PercentOne - b.Position.Percent
		b.Position.Char = min(b.Position.Char, b.Furthest.Char) / 2
	}
	return e
}

// Issue 3: random operations on 2-6 devices, each with its own clock and
// wall-clock offset, delivered in random order, duplicated and delayed,
// converge to identical bytes equal to the oracle over the whole operation
// history, and every record matches the oracle at every step in between.
func TestReplicasConvergeToTheOracle(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2, 6).Draw(t, "devices")
		offsets := make([]int64, n)
		for i := range offsets {
			offsets[i] = rapid.SampledFrom(allOffsets).Draw(t, "offset")
		}
		newSimulation(t, offsets).run(t)
	})
}

// Issue 3, clock skew: devices whose wall clocks are a year ahead, a day
// behind and right. The simulation checks at every write that it orders after
// everything its device has seen (a write made after observing another write
// wins over it) and that every record matches the oracle.
func TestSkewedClocksConverge(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		newSimulation(t, skewOffsets).run(t)
	})
}

// Issue 12: devices whose clocks are wildly wrong, at the year 9999 and at
// the Unix epoch, among right and skewed ones. Every record still matches the
// oracle at every step and the replicas converge; every write made after its
// device has seen another write to the same record wins over it; and no
// device's clock is dragged more than MaxAhead past its own wall clock, so
// writes to other records stay near the device's time.
func TestWildClocksConverge(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		offsets := slices.Clone(wildOffsets)
		for range rapid.IntRange(1, 4).Draw(t, "more devices") {
			offsets = append(offsets, rapid.SampledFrom(allOffsets).Draw(t, "offset"))
		}
		newSimulation(t, offsets).run(t)
	})
}

// The simulation compares encodings, so its verdict is only as good as the
// claim that equal records encode to equal bytes and different records to
// different ones.
func TestEncodingIsInjective(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := genEntry.Draw(t, "a"), genEntry.Draw(t, "b")
		if eq := bytes.Equal(encode(t, a), encode(t, b)); eq != reflect.DeepEqual(a, b) {
			t.Fatalf("bytes equal = %v but records equal = %v:\n%+v\n%+v", eq, !eq, a, b)
		}
	})
}
