package crdt_test

import (
	"testing"

	"github.com/danyue/danyue/crdt"
	"pgregory.net/rapid"
)

// Seed 000: the phone read 10h, the laptop 5h; the old client wrote the
// displayed total (15h) back into its own counter and time doubled every sync
// round. Here the total is derived and no operation can write it: the phone's
// next hour raises its own slot from 10h to 11h, not from 15h to 16h.
func TestSeed000DisplayedTotalIsNeverWrittenBack(t *testing.T) {
	phone, laptop := devA, devB
	local := fold(t,
		must(t)(crdt.AddReadTime(keyMD5, nil, phone, 10*hour)),
		must(t)(crdt.AddReadTime(keyMD5, nil, laptop, 5*hour)),
	).Book
	if got := local.ReadTime.Total(); got != 15*hour {
		t.Fatalf("total = %d, want 15h", got)
	}
	delta := must(t)(crdt.AddReadTime(keyMD5, &local, phone, hour))
	want := crdt.ReadTime{{Device: phone, Ms: 11 * hour}}
	if got := delta.Book.ReadTime; len(got) != 1 || got[0] != want[0] {
		t.Fatalf("delta = %+v, want only the phone's own slot at 11h", got)
	}
	local.Merge(&delta.Book)
	if got := local.ReadTime.Total(); got != 16*hour {
		t.Errorf("total after one more hour = %v ms, want 16h", got)
	}
}

// Rule (doc "Local operations"): AddReadTime raises the caller's own slot by
// exactly the delta and touches no other slot, whatever the local record holds.
func TestAddReadTimeRaisesOnlyTheCallersSlot(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		local := genBook.Draw(t, "local")
		self := rapid.SampledFrom([]crdt.DeviceID{1, devA, devB, devC, 99}).Draw(t, "self")
		ms := rapid.Uint64Range(1, crdt.MaxSlotMs).Draw(t, "ms")
		delta, err := crdt.AddReadTime(keyMD5, &local, self, ms)
		if local.ReadTime.Of(self)+ms > crdt.MaxSlotMs {
			if err == nil {
				t.Fatalf("a slot past MaxSlotMs was accepted")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if want := (crdt.Book{Key: keyMD5, ReadTime: crdt.ReadTime{{Device: self, Ms: local.ReadTime.Of(self) + ms}}}); !sameBytes(t, delta, crdt.BookEntry(want)) {
			t.Fatalf("delta %+v, want %+v", delta.Book, want)
		}
		after := local.Clone()
		after.Merge(&delta.Book)
		for _, s := range local.ReadTime {
			if s.Device != self && after.ReadTime.Of(s.Device) != s.Ms {
				t.Fatalf("slot of %v changed", s.Device)
			}
		}
		if after.ReadTime.Total() != local.ReadTime.Total()+ms {
			t.Fatalf("total rose by %d, want %d", after.ReadTime.Total()-local.ReadTime.Total(), ms)
		}
	})
}

// Seed 000's table, generalised: 10h read on device A and 5h on device B, in
// random chunks, on a library of 2-6 devices that sync at random between any
// pair, with current states and with old copies of any device's earlier
// states. No device ever shows more than 15h or more than what it has heard
// of, and once everyone has heard of everything, every device shows exactly
// 15h, however many more rounds follow.
func TestSeed000TotalsSurviveAnySyncRounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2, 6).Draw(t, "devices")
		ids := make([]crdt.DeviceID, n)
		states := make([]crdt.Book, n)
		for i := range n {
			ids[i] = crdt.DeviceID(i + 1)
			states[i] = crdt.Book{Key: keyMD5}
		}
		target := []uint64{10 * hour, 5 * hour} // read on ids[0] and ids[1]
		var history []crdt.Book                 // every state any device has held
		read := func(dev int, ms uint64) {
			d := must(t)(crdt.AddReadTime(keyMD5, &states[dev], ids[dev], ms))
			states[dev].Merge(&d.Book)
			target[dev] -= ms
		}
		send := func(to int, b crdt.Book) {
			before := states[to].ReadTime.Total()
			in := b.Clone()
			states[to].Merge(&in)
			history = append(history, states[to].Clone())
			got := states[to].ReadTime
			if got.Total() < before || got.Total() > 15*hour || got.Of(ids[0]) > 10*hour || got.Of(ids[1]) > 5*hour {
				t.Fatalf("device %d shows %v ms (A %v, B %v) after a sync", to, got.Total(), got.Of(ids[0]), got.Of(ids[1]))
			}
			if got.Total() != got.Of(ids[0])+got.Of(ids[1]) {
				t.Fatalf("device %d counts time nobody read: %+v", to, got)
			}
		}
		rounds := rapid.IntRange(0, 80).Draw(t, "rounds")
		for range rounds {
			switch rapid.IntRange(0, 3).Draw(t, "action") {
			case 0: // A or B reads a chunk
				dev := rapid.IntRange(0, 1).Draw(t, "reader")
				if target[dev] > 0 {
					read(dev, rapid.Uint64Range(1, target[dev]).Draw(t, "chunk"))
				}
			case 1: // a sync between any two devices
				send(rapid.IntRange(0, n-1).Draw(t, "to"), states[rapid.IntRange(0, n-1).Draw(t, "from")])
			case 2: // an old copy arrives late
				if len(history) > 0 {
					send(rapid.IntRange(0, n-1).Draw(t, "to"), rapid.SampledFrom(history).Draw(t, "old copy"))
				}
			case 3: // a device merges its own state, or an older copy of it
				dev := rapid.IntRange(0, n-1).Draw(t, "self")
				send(dev, states[dev])
			}
		}
		for dev := range 2 {
			if target[dev] > 0 {
				read(dev, target[dev])
			}
		}
		// Everyone hears of everything (through device 0), then more rounds.
		for i := range n {
			send(0, states[i])
		}
		for i := range n {
			send(i, states[0])
		}
		extra := rapid.IntRange(0, 20).Draw(t, "extra rounds")
		for range extra {
			from := states[rapid.IntRange(0, n-1).Draw(t, "from")]
			if len(history) > 0 && rapid.Bool().Draw(t, "old") {
				from = rapid.SampledFrom(history).Draw(t, "old copy")
			}
			send(rapid.IntRange(0, n-1).Draw(t, "to"), from)
		}
		for i, s := range states {
			if s.ReadTime.Total() != 15*hour {
				t.Fatalf("device %d shows %d ms, want 15h", i, s.ReadTime.Total())
			}
		}
	})
}

// Issue 3: merging any state with itself or with older copies of itself, any
// number of times, changes nothing, and reports no change.
func TestMergeWithOlderSelfChangesNothing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// A record's history: each state is the previous one merged with
		// another record, as happens on a device over time.
		cur := crdt.BookEntry(genBook.Draw(t, "start"))
		history := []crdt.Entry{cur.Clone()}
		for range rapid.IntRange(1, 10).Draw(t, "history") {
			in := crdt.BookEntry(genBook.Draw(t, "received"))
			cur.Merge(&in)
			history = append(history, cur.Clone())
		}
		want := encode(t, cur)
		for range rapid.IntRange(1, 20).Draw(t, "merges") {
			old := rapid.SampledFrom(history).Draw(t, "old copy")
			if changed, _ := cur.Merge(&old); changed {
				t.Fatalf("merging an older copy reported a change")
			}
		}
		if got := encode(t, cur); string(got) != string(want) {
			t.Fatalf("merging older copies changed the record")
		}
	})
}
