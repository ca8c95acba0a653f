package crdt_test

import (
	"testing"

	"github.com/danyue/danyue/crdt"
)

// divergedBooks are two replicas of one 3-device book that each hold writes
// the other lacks: remote has a newer position and a further one, local a
// newer title, and each has a read-time slot the other lacks.
func divergedBooks() (crdt.Book, crdt.Book) {
	local := typicalBook() // phone, laptop and nas slots
	remote := typicalBook()
	remote.Position = crdt.Position{At: ts(t0+40*day, 0, laptop), Char: 400_000, Percent: 376_000}
	remote.Furthest = crdt.Position{At: ts(t0+39*day, 0, nas), Char: 450_000, Percent: 423_000}
	remote.ReadTime = crdt.ReadTime{{Device: devA, Ms: hour}, {Device: laptop, Ms: 6 * hour}, {Device: nas, Ms: hour}}
	local.ReadTime = local.ReadTime[1:] // local lacks the laptop's slot, remote the phone's
	local.Title = crdt.Text{At: ts(t0+41*day, 0, phone), Value: "A Tale of Two Cities."}
	return local, remote
}

// BenchmarkMerge merges one diverged replica into the other. Each iteration
// first resets the destination to its prepared state by copying it back into
// buffers allocated once (a few ns, timed, allocation-free), so only Merge's
// own allocations are counted. Target (issue 3): under 1 µs and under 5
// allocations.
func BenchmarkMerge(b *testing.B) {
	local, remote := divergedBooks()
	orig, in := crdt.BookEntry(local), crdt.BookEntry(remote)
	encode(b, orig) // valid records only: Merge's cost on broken ones is not the question
	encode(b, in)
	for _, p := range [][2]crdt.Entry{{orig, in}, {in, orig}} {
		if c := p[0].Clone(); !mustChange(b, &c, &p[1]) {
			b.Fatal("the benchmark's records are not diverged")
		}
	}
	var dst crdt.Entry
	slots := make(crdt.ReadTime, len(local.ReadTime))
	b.ReportAllocs()
	for b.Loop() {
		dst = orig
		dst.Book.ReadTime = slots[:copy(slots, orig.Book.ReadTime)]
		dst.Merge(&in)
	}
	if !sameBytes(b, dst, fold(b, orig, in)) {
		b.Fatal("the last merge did not produce the merged record")
	}
}

// TestMergeAllocations pins the allocation target of BenchmarkMerge, which
// unlike its time does not depend on the machine.
func TestMergeAllocations(t *testing.T) {
	local, remote := divergedBooks()
	in := crdt.BookEntry(remote)
	copies := make([]crdt.Entry, 101)
	for i := range copies {
		copies[i] = crdt.BookEntry(local.Clone())
	}
	n := 0
	allocs := testing.AllocsPerRun(100, func() {
		copies[n].Merge(&in)
		n++
	})
	if allocs >= 5 {
		t.Errorf("Merge of diverged 3-device books: %v allocations, target under 5", allocs)
	}
	// The slots of both sides merge into a new slice: that one allocation is
	// the floor, and merging records that hold the same devices needs none.
	same := crdt.BookEntry(remote.Clone())
	if allocs := testing.AllocsPerRun(100, func() { same.Merge(&in) }); allocs != 0 {
		t.Errorf("Merge of a record into an equal one: %v allocations, want 0", allocs)
	}
}

func BenchmarkEncode(b *testing.B) {
	e := crdt.BookEntry(typicalBook())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Encode(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	data := encode(b, crdt.BookEntry(typicalBook()))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := crdt.Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecordSize reports the encoded size of book records as
// bytes/record (the timing is meaningless). Target (issue 3): a typical
// 3-device record under 150 bytes.
func BenchmarkRecordSize(b *testing.B) {
	cjk := typicalBook()
	cjk.Title.Value = "红楼梦（程乙本）第一回至第八十回" // 16 characters, 48 bytes
	for _, c := range []struct {
		name string
		book crdt.Book
	}{
		{"typical", typicalBook()},
		{"furthest-ahead", furthestAheadBook()},
		{"cjk-title", cjk},
	} {
		b.Run(c.name, func(b *testing.B) {
			var n int
			for b.Loop() {
				n = len(encodeBook(b, c.book))
			}
			b.ReportMetric(float64(n), "bytes/record")
		})
	}
}

// TestTypicalRecordSize pins the size target, so a format change that
// misses it fails here and not only in a benchmark nobody reads.
func TestTypicalRecordSize(t *testing.T) {
	if n := len(encodeBook(t, typicalBook())); n >= 150 {
		t.Errorf("a typical 3-device record encodes to %d bytes, target under 150", n)
	}
}

func mustChange(b *testing.B, dst, in *crdt.Entry) bool {
	changed, err := dst.Merge(in)
	if err != nil {
		b.Fatal(err)
	}
	return changed
}
