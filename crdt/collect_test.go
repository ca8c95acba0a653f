package crdt_test

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/danyue/danyue/crdt"
)

// sum makes a summary of dev (epoch dev*100) at seq, stamped at wall,
// with cursors given as device, seq pairs into those devices' epochs.
func sum(dev crdt.DeviceID, seq uint64, wall uint64, cursors ...uint64) crdt.Summary {
	s := crdt.Summary{Device: dev, Epoch: uint64(dev) * 100, Seq: seq, At: ts(wall, 0, dev)}
	for i := 0; i+1 < len(cursors); i += 2 {
		d := crdt.DeviceID(cursors[i])
		s.Cursors = append(s.Cursors, crdt.Cursor{Device: d, Epoch: uint64(d) * 100, Seq: cursors[i+1]})
	}
	return s
}

func known(ss ...crdt.Summary) crdt.Summaries {
	m := crdt.Summaries{}
	for _, s := range ss {
		m.Add(s)
	}
	return m
}

// TestStable checks the rule (collect.go): a record of A's store at seq s
// may go once every current member holds A up to s, directly or through
// relays whose summaries its cursors have passed.
func TestStable(t *testing.T) {
	const epochA = uint64(devA) * 100
	tests := []struct {
		name      string
		members   []crdt.DeviceID
		known     crdt.Summaries
		upTo      uint64
		holding   []crdt.DeviceID
		regressed []crdt.DeviceID
	}{
		{"alone", []crdt.DeviceID{devA}, nil, 10, nil, nil},
		{"member without a summary holds everything back", []crdt.DeviceID{devA, devB}, nil, 0, []crdt.DeviceID{devB}, nil},
		{"direct cursors: the least wins", []crdt.DeviceID{devA, devB, devC},
			known(sum(devB, 3, t0, uint64(devA), 7), sum(devC, 3, t0, uint64(devA), 5)), 5, []crdt.DeviceID{devC}, nil},
		{"a cursor of another epoch of A counts for nothing", []crdt.DeviceID{devA, devB},
			known(crdt.Summary{Device: devB, Epoch: 1, Seq: 1, At: ts(t0, 0, devB), Cursors: []crdt.Cursor{{Device: devA, Epoch: 999, Seq: 9}}}), 0, []crdt.DeviceID{devB}, nil},
		{"relay: C pulled B past B's summary, which covers A to 6", []crdt.DeviceID{devA, devB, devC},
			known(sum(devB, 4, t0, uint64(devA), 6), sum(devC, 2, t0, uint64(devB), 4)), 6, []crdt.DeviceID{devB, devC}, nil},
		{"relay not passed: C's cursor into B is short of B's summary", []crdt.DeviceID{devA, devB, devC},
			known(sum(devB, 4, t0, uint64(devA), 6), sum(devC, 2, t0, uint64(devB), 3)), 0, []crdt.DeviceID{devC}, nil},
		{"a forgotten device holds nothing back", []crdt.DeviceID{devA, devB},
			known(sum(devB, 4, t0, uint64(devA), 8), sum(devC, 1, t0)), 8, []crdt.DeviceID{devB}, nil},
		{"a forgotten device still relays", []crdt.DeviceID{devA, devB},
			known(sum(devC, 4, t0, uint64(devA), 9), sum(devB, 1, t0, uint64(devC), 4)), 9, []crdt.DeviceID{devB}, nil},
		{"a cursor past the end: A went back, nothing is collected", []crdt.DeviceID{devA, devB, devC},
			known(sum(devB, 4, t0, uint64(devA), 12), sum(devC, 1, t0, uint64(devA), 10)), 0, []crdt.DeviceID{devB}, []crdt.DeviceID{devB}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.known == nil {
				tt.known = crdt.Summaries{}
			}
			st := crdt.Stable(devA, epochA, 10, tt.members, tt.known)
			if st.UpTo != tt.upTo {
				t.Errorf("UpTo = %d, want %d (%+v)", st.UpTo, tt.upTo, st)
			}
			if got := st.Holding(10); !slices.Equal(got, tt.holding) {
				t.Errorf("Holding = %v, want %v (%+v)", got, tt.holding, st)
			}
			if !slices.Equal(st.Regressed, tt.regressed) {
				t.Errorf("Regressed = %v, want %v", st.Regressed, tt.regressed)
			}
		})
	}
}

// TestDistrust: a cursor into A past what its device can have merged of A
// (A went back under its epoch and numbered new changes over the lost
// ones) holds collection back, though it is behind A's end.
func TestDistrust(t *testing.T) {
	const epochA = uint64(devA) * 100
	members := []crdt.DeviceID{devA, devB, devC}
	tests := []struct {
		name      string
		known     crdt.Summaries
		delivered map[crdt.DeviceID]uint64
		upTo      uint64
		regressed []crdt.DeviceID
	}{
		{"every cursor within what was delivered", known(sum(devB, 1, t0, uint64(devA), 8), sum(devC, 1, t0, uint64(devA), 6)),
			map[crdt.DeviceID]uint64{devB: 8, devC: 9}, 6, nil},
		{"B's cursor past what it can have", known(sum(devB, 1, t0, uint64(devA), 8), sum(devC, 1, t0, uint64(devA), 6)),
			map[crdt.DeviceID]uint64{devB: 7, devC: 9}, 0, []crdt.DeviceID{devB}},
		{"a relay's cursor counts too", known(sum(devB, 1, t0, uint64(devA), 8), sum(devC, 1, t0, uint64(devA), 6), sum(crdt.DeviceID(0xd), 1, t0, uint64(devA), 9)),
			map[crdt.DeviceID]uint64{devB: 8, devC: 9, crdt.DeviceID(0xd): 3}, 0, []crdt.DeviceID{crdt.DeviceID(0xd)}},
		{"a cursor into another epoch of A is no claim", known(sum(devB, 1, t0, uint64(devA), 8),
			crdt.Summary{Device: devC, Epoch: 1, Seq: 1, At: ts(t0, 0, devC), Cursors: []crdt.Cursor{{Device: devA, Epoch: 999, Seq: 9}}}),
			map[crdt.DeviceID]uint64{devB: 8}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := crdt.Stable(devA, epochA, 10, members, tt.known)
			st.Distrust(devA, epochA, tt.known, func(d crdt.DeviceID) uint64 { return tt.delivered[d] })
			if st.UpTo != tt.upTo || !slices.Equal(st.Regressed, tt.regressed) {
				t.Errorf("UpTo %d, Regressed %v; want %d, %v", st.UpTo, st.Regressed, tt.upTo, tt.regressed)
			}
			if len(tt.regressed) > 0 && !slices.Equal(st.Holding(10), tt.regressed) {
				t.Errorf("Holding = %v, want %v", st.Holding(10), tt.regressed)
			}
		})
	}
}

// TestStableChain: coverage flows along a chain of relays of any length.
func TestStableChain(t *testing.T) {
	var ss []crdt.Summary
	members := []crdt.DeviceID{1}
	ss = append(ss, sum(2, 5, t0, 1, 9))
	for d := uint64(3); d <= 8; d++ {
		ss = append(ss, sum(crdt.DeviceID(d), 5, t0, d-1, 5))
		members = append(members, crdt.DeviceID(d))
	}
	st := crdt.Stable(1, 100, 9, members, known(ss...))
	if st.UpTo != 9 {
		t.Fatalf("UpTo = %d through a chain 1-2-...-8, want 9: %+v", st.UpTo, st)
	}
}

// TestCollectible: a tombstone is collected only once every member holds
// it (UpTo) and its undo window has passed (DeletedBy); a table over both.
func TestCollectible(t *testing.T) {
	del := crdt.BookEntry(crdt.Book{Key: keyMD5, Deleted: ts(t0, 0, devA)})
	revived := crdt.BookEntry(crdt.Book{Key: keyMD5, Deleted: ts(t0, 0, devA), Position: crdt.Position{At: ts(t0+1, 0, devB)}})
	tie := crdt.BookEntry(crdt.Book{Key: keyMD5, Deleted: ts(t0, 0, devA), Position: crdt.Position{At: ts(t0, 0, devB)}})
	live := crdt.BookEntry(crdt.Book{Key: keyMD5, Position: crdt.Position{At: ts(t0, 0, devB)}})
	dev := crdt.DeviceEntry(crdt.Device{ID: devA, Name: crdt.Text{At: ts(t0, 0, devA), Value: "x"}})
	for _, tt := range []struct {
		name      string
		e         crdt.Entry
		seq       uint64
		deletedBy uint64
		want      bool // Collectible
		held      bool // HeldByWindow
	}{
		{"deleted, held by all", del, 5, 0, true, false},
		{"deleted, not yet held by all", del, 6, 0, false, false},
		{"revived by a later write", revived, 1, 0, false, false},
		{"tie goes to the delete", tie, 1, 0, true, false},
		{"never deleted", live, 1, 0, false, false},
		{"not a book", dev, 1, 0, false, false},
		{"held by all, window passed", del, 5, t0 + 1, true, false},
		{"held by all, window ends at the delete", del, 5, t0, true, false},
		{"held by all, inside the window", del, 5, t0 - 1, false, true},
		{"not held by all, inside the window", del, 6, t0 - 1, false, false},
		{"not held by all, window passed", del, 6, t0 + 1, false, false},
		{"revived, inside the window", revived, 1, t0 - 1, false, false},
		{"tie, inside the window", tie, 1, t0 - 1, false, true},
		{"never deleted, any window", live, 1, t0 - 1, false, false},
	} {
		st := crdt.Stability{UpTo: 5, DeletedBy: tt.deletedBy}
		if got := crdt.Collectible(&tt.e, tt.seq, &st); got != tt.want {
			t.Errorf("%s: Collectible = %v, want %v", tt.name, got, tt.want)
		}
		if got := crdt.HeldByWindow(&tt.e, tt.seq, &st); got != tt.held {
			t.Errorf("%s: HeldByWindow = %v, want %v", tt.name, got, tt.held)
		}
	}
}

// TestCollectibleRule: over every combination of what a record is, where it
// sits and where the window ends, Collectible is exactly "a deleted book,
// held by every member, deleted no later than the window's end", and a
// record the window alone keeps is collectible once the window moves past
// its tombstone.
func TestCollectibleRule(t *testing.T) {
	for wall := t0 - 2; wall <= t0+2; wall++ {
		for _, pos := range []uint64{0, wall - 1, wall, wall + 1} {
			b := crdt.Book{Key: keyMD5, Deleted: ts(wall, 0, devA)}
			if pos != 0 {
				b.Position = crdt.Position{At: ts(pos, 0, devB)}
			}
			e := crdt.BookEntry(b)
			for seq := uint64(3); seq <= 7; seq++ {
				for _, by := range []uint64{0, t0 - 3, t0 - 2, t0 - 1, t0, t0 + 1, t0 + 2, t0 + 3} {
					st := crdt.Stability{UpTo: 5, DeletedBy: by}
					want := !b.Visible() && seq <= 5 && (by == 0 || wall <= by)
					got := crdt.Collectible(&e, seq, &st)
					if got != want {
						t.Fatalf("deleted at %d, written at %d, seq %d, window to %d: Collectible = %v, want %v", wall, pos, seq, by, got, want)
					}
					if crdt.HeldByWindow(&e, seq, &st) {
						later := crdt.Stability{UpTo: 5, DeletedBy: wall}
						if got || !crdt.Collectible(&e, seq, &later) {
							t.Fatalf("deleted at %d, seq %d, window to %d: held by the window, but not collectible once it passes", wall, seq, by)
						}
					}
				}
			}
		}
	}
}

// TestAbsorbs: which arrivals a residue (the collected record) drops, and
// which bring the collected book back.
func TestAbsorbs(t *testing.T) {
	res := crdt.Book{Key: keyMD5, Position: crdt.Position{At: ts(t0, 0, devB), Char: 7}, Furthest: crdt.Position{At: ts(t0, 0, devB), Char: 7},
		ReadTime: crdt.ReadTime{{Device: devB, Ms: 9}}, Deleted: ts(t0+5, 0, devA), Title: crdt.Text{At: ts(t0+9, 0, devC), Value: "t"}}
	stale := res
	stale.Deleted = crdt.Timestamp{}
	later := res
	later.Position = crdt.Position{At: ts(t0+6, 0, devB)}
	moreTime := res.Clone()
	moreTime.ReadTime[0].Ms = 10
	lessTime := res.Clone()
	lessTime.ReadTime[0].Ms = 8
	newerDelete := res
	newerDelete.Deleted = ts(t0+8, 0, devC)
	oldTitle := res
	oldTitle.Title = crdt.Text{At: ts(t0+1, 0, devC), Value: "s"}
	furtherBefore := res
	furtherBefore.Furthest = crdt.Position{At: ts(t0+1, 0, devA), Char: 70}
	for _, tt := range []struct {
		name string
		in   crdt.Book
		want bool
	}{
		{"a copy of what was collected", res.Clone(), true},
		{"a copy without the delete (restored, or joining)", stale, false},
		{"a later position write revives", later, false},
		{"more read time is news", moreTime, false},
		{"less read time: the sender lacks a slot", lessTime, false},
		{"a later delete is news", newerDelete, false},
		{"an older title: the sender lacks the last one", oldTitle, false},
		{"a furthest position from before the delete is news", furtherBefore, false},
		{"a title alone lacks the delete", crdt.Book{Key: keyMD5, Title: crdt.Text{At: ts(t0+9, 0, devC), Value: "u"}}, false},
	} {
		if got := crdt.Absorbs(&res, &tt.in); got != tt.want {
			t.Errorf("%s: Absorbs = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestSummariesAddAndBehind(t *testing.T) {
	m := crdt.Summaries{}
	if !m.Add(sum(devB, 5, t0+2)) || m.Add(sum(devB, 9, t0+1)) || m.Add(sum(devB, 9, t0+2)) {
		t.Fatal("Add must keep only a later summary")
	}
	if m[devB].Seq != 5 {
		t.Fatalf("kept %+v", m[devB])
	}
	epochB := uint64(devB) * 100
	if !m.Behind(devB, epochB, 4) || m.Behind(devB, epochB, 5) || m.Behind(devB, 1, 0) || m.Behind(devC, 1, 0) {
		t.Fatal("Behind wrong")
	}
	if l := (crdt.Summaries{devC: sum(devC, 1, t0), devA: sum(devA, 1, t0)}).List(); l[0].Device != devA || l[1].Device != devC {
		t.Fatalf("List not sorted: %+v", l)
	}
}

func TestSummariesEncoding(t *testing.T) {
	signed := sum(devB, 12, t0+5, uint64(devA), 3, uint64(devC), 1<<40)
	signed.Sig, signed.Key = bytes.Repeat([]byte{1}, 64), bytes.Repeat([]byte{2}, 36)
	list := []crdt.Summary{sum(devA, 0, t0), signed}
	b, err := crdt.EncodeSummaries(list)
	if err != nil {
		t.Fatal(err)
	}
	back, err := crdt.DecodeSummaries(b)
	if err != nil || !reflect.DeepEqual(back, list) {
		t.Fatalf("round trip: %+v, %v; want %+v", back, err, list)
	}
	bad := []struct {
		name string
		list []crdt.Summary
	}{
		{"no device", []crdt.Summary{{Epoch: 1, At: ts(t0, 0, devA)}}},
		{"no epoch", []crdt.Summary{{Device: devA, At: ts(t0, 0, devA)}}},
		{"stamped by another device", []crdt.Summary{{Device: devA, Epoch: 1, At: ts(t0, 0, devB)}}},
		{"cursor into itself", []crdt.Summary{sum(devA, 1, t0, uint64(devA), 1)}},
		{"cursors unsorted", []crdt.Summary{sum(devA, 1, t0, uint64(devC), 1, uint64(devB), 1)}},
		{"summaries unsorted", []crdt.Summary{sum(devB, 1, t0), sum(devA, 1, t0)}},
		{"two of one device", []crdt.Summary{sum(devB, 1, t0), sum(devB, 2, t0+1)}},
		{"past the year 9999", []crdt.Summary{sum(devB, 1, crdt.MaxWall+1)}},
		{"a signature without its key", []crdt.Summary{func() crdt.Summary { s := sum(devB, 1, t0); s.Sig = []byte{1}; return s }()}},
		{"a key without a signature", []crdt.Summary{func() crdt.Summary { s := sum(devB, 1, t0); s.Key = []byte{1}; return s }()}},
		{"a signature too long", []crdt.Summary{func() crdt.Summary {
			s := sum(devB, 1, t0)
			s.Sig, s.Key = make([]byte, crdt.MaxSummarySig+1), []byte{1}
			return s
		}()}},
	}
	// What a signature signs is the summary without it: the same bytes
	// whatever the signature.
	bare := signed
	bare.Sig, bare.Key = nil, nil
	signing := func(s crdt.Summary) []byte {
		b, err := s.SigningBytes()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if !bytes.Equal(signing(signed), signing(bare)) {
		t.Error("the signing bytes depend on the signature")
	}
	moved := signed.Clone()
	moved.Cursors[0].Seq++
	if bytes.Equal(signing(signed), signing(moved)) {
		t.Error("the signing bytes do not cover the cursors")
	}
	for _, tt := range bad {
		if _, err := crdt.EncodeSummaries(tt.list); !errors.Is(err, crdt.ErrInvalid) {
			t.Errorf("%s: EncodeSummaries error %v, want ErrInvalid", tt.name, err)
		}
	}
	// Another version is told apart from a broken input.
	other := bytes.Clone(b)
	other[2] = 2
	if _, err := crdt.DecodeSummaries(other); !errors.Is(err, crdt.ErrVersion) {
		t.Errorf("version 2: %v, want ErrVersion", err)
	}
	for _, in := range summaryHostile(b) {
		if l, err := crdt.DecodeSummaries(in); err == nil || l != nil {
			t.Errorf("DecodeSummaries(%x) = %v, %v; want an error and nothing", in, l, err)
		}
	}
}

// summaryHostile returns inputs DecodeSummaries must refuse, built from a
// valid encoding b.
func summaryHostile(b []byte) [][]byte {
	return [][]byte{
		nil,
		{0xa0},                         // no version
		{0xa1, 0x00, 0x01, 0x00},       // trailing byte
		{0xa2, 0x00, 0x01, 0x01, 0x80}, // an empty list written out (not canonical)
		{0xa1, 0x00, 0x18, 0x01},       // version in long form
		b[:len(b)-1],                   // cut short
		append(bytes.Clone(b), 0),      // trailing byte
		bytes.Repeat([]byte{0x81}, 64), // deep nesting
		make([]byte, crdt.MaxEncodedSummaries+1),
	}
}

// FuzzDecodeSummaries: DecodeSummaries never panics, returns all or
// nothing, and accepts only what EncodeSummaries makes.
//
//	go test ./crdt -run '^$' -fuzz FuzzDecodeSummaries -fuzztime 1m
func FuzzDecodeSummaries(f *testing.F) {
	good, err := crdt.EncodeSummaries([]crdt.Summary{sum(devA, 3, t0), sum(devB, 12, t0+5, uint64(devA), 3, uint64(devC), 9)})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	for _, h := range summaryHostile(good) {
		if len(h) < 4096 {
			f.Add(h)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		list, err := crdt.DecodeSummaries(data)
		if err != nil {
			if list != nil {
				t.Fatalf("partial result with error %v: %+v", err, list)
			}
			return
		}
		enc, err := crdt.EncodeSummaries(list)
		if err != nil || !bytes.Equal(enc, data) {
			t.Fatalf("decode then encode: %x, %v; want %x", enc, err, data)
		}
		m := crdt.Summaries{}
		for _, s := range list {
			if err := s.Validate(); err != nil {
				t.Fatalf("decoded an invalid summary: %v", err)
			}
			m.Add(s)
		}
		if len(list) == 0 {
			return
		}
		// The rule works on anything decoded, and never covers past the end.
		st := crdt.Stable(list[0].Device, list[0].Epoch, 5, []crdt.DeviceID{list[0].Device, devA, devB}, m)
		if st.UpTo > 5 {
			t.Fatalf("UpTo %d past the end 5", st.UpTo)
		}
	})
}
