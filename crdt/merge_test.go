package crdt_test

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/danyue/danyue/crdt"
)

// Rule (doc "Merge"): Merge reports whether the local record changed; the
// store gives a change a sequence number and the daemon emits an event only
// then, so a false "changed" echoes forever and a false "unchanged" loses a
// write.
func TestBookMergeReportsChange(t *testing.T) {
	base := crdt.Book{
		Key:      keyMD5,
		Position: crdt.Position{At: ts(t0, 1, devA), Char: 500, Percent: 50_000},
		Furthest: crdt.Position{At: ts(t0, 0, devB), Char: 900, Percent: 90_000},
		ReadTime: crdt.ReadTime{{Device: devA, Ms: hour}, {Device: devC, Ms: 2 * hour}},
		Deleted:  ts(t0-day, 0, devC),
		Title:    crdt.Text{At: ts(t0, 0, devA), Value: "B"},
	}
	tests := []struct {
		name        string
		in          crdt.Book
		wantChanged bool
		check       func(b crdt.Book) bool // what must hold after the merge
	}{
		{"the record itself", base.Clone(), false, nil},
		{"key only", crdt.Book{Key: keyMD5}, false, nil},
		{"older position", crdt.Book{Key: keyMD5, Position: crdt.Position{At: ts(t0, 0, devC), Char: 1}}, false, nil},
		{"newer position", crdt.Book{Key: keyMD5, Position: crdt.Position{At: ts(t0, 2, devB), Char: 1}}, true,
			func(b crdt.Book) bool { return b.Position.Char == 1 && b.Position.At.Device == devB }},
		{"same timestamp, other content (broken peer): larger content wins", crdt.Book{Key: keyMD5, Position: crdt.Position{At: ts(t0, 1, devA), Char: 501}}, true,
			func(b crdt.Book) bool { return b.Position.Char == 501 }},
		{"same timestamp, smaller content", crdt.Book{Key: keyMD5, Position: crdt.Position{At: ts(t0, 1, devA), Char: 499}}, false, nil},
		{"smaller furthest, newer", crdt.Book{Key: keyMD5, Furthest: crdt.Position{At: ts(t0+hour, 0, devC), Char: 899}}, false, nil},
		{"same furthest offset, newer write: who and when move", crdt.Book{Key: keyMD5, Furthest: crdt.Position{At: ts(t0+hour, 0, devC), Char: 900}}, true,
			func(b crdt.Book) bool { return b.Furthest.At.Device == devC && b.Furthest.Char == 900 }},
		{"larger furthest, older", crdt.Book{Key: keyMD5, Furthest: crdt.Position{At: ts(t0-day, 0, devC), Char: 901}}, true,
			func(b crdt.Book) bool { return b.Furthest.Char == 901 && b.Position.Char == 500 }},
		{"lower slot", crdt.Book{Key: keyMD5, ReadTime: crdt.ReadTime{{Device: devA, Ms: 1}}}, false, nil},
		{"equal slots", crdt.Book{Key: keyMD5, ReadTime: crdt.ReadTime{{Device: devA, Ms: hour}, {Device: devC, Ms: 2 * hour}}}, false, nil},
		{"higher slot", crdt.Book{Key: keyMD5, ReadTime: crdt.ReadTime{{Device: devC, Ms: 3 * hour}}}, true,
			func(b crdt.Book) bool { return b.ReadTime.Of(devC) == 3*hour && b.ReadTime.Total() == 4*hour }},
		{"new device's slot", crdt.Book{Key: keyMD5, ReadTime: crdt.ReadTime{{Device: devB, Ms: 1}}}, true,
			func(b crdt.Book) bool {
				return reflect.DeepEqual(b.ReadTime, crdt.ReadTime{{devA, hour}, {devB, 1}, {devC, 2 * hour}})
			}},
		{"older delete", crdt.Book{Key: keyMD5, Deleted: ts(t0-2*day, 0, devA)}, false, nil},
		{"newer delete", crdt.Book{Key: keyMD5, Deleted: ts(t0+day, 0, devA)}, true,
			func(b crdt.Book) bool { return !b.Visible() }},
		{"older title", crdt.Book{Key: keyMD5, Title: crdt.Text{At: ts(t0-1, 0, devB), Value: "Z"}}, false, nil},
		{"same title timestamp, larger value", crdt.Book{Key: keyMD5, Title: crdt.Text{At: ts(t0, 0, devA), Value: "C"}}, true,
			func(b crdt.Book) bool { return b.Title.Value == "C" }},
		{"newer title", crdt.Book{Key: keyMD5, Title: crdt.Text{At: ts(t0+1, 0, devB), Value: "A"}}, true,
			func(b crdt.Book) bool { return b.Title.Value == "A" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := base.Clone()
			before := encodeBook(t, b)
			in := tt.in.Clone()
			changed := b.Merge(&in)
			after := encodeBook(t, b)
			if changed != tt.wantChanged {
				t.Errorf("Merge = %v, want %v", changed, tt.wantChanged)
			}
			if changed != !bytes.Equal(before, after) {
				t.Errorf("Merge = %v but the encoding changed: %v", changed, !bytes.Equal(before, after))
			}
			if tt.check != nil && !tt.check(b) {
				t.Errorf("after merge: %+v", b)
			}
			if !reflect.DeepEqual(in, tt.in) {
				t.Errorf("Merge modified its argument: %+v", in)
			}
		})
	}
}

// Rule (Book.Furthest): the furthest position is a max register of the
// offset: going back in the book moves the position, not the furthest, and
// the furthest keeps who got there and when.
func TestFurthestIsAMaxRegister(t *testing.T) {
	far := must(t)(crdt.SetPosition(keyMD5, ts(t0, 0, devA), 5000, 0.5))
	back := must(t)(crdt.SetPosition(keyMD5, ts(t0+hour, 0, devB), 1000, 0.1))
	got := fold(t, far, back)
	if p := got.Book.Position; p.Char != 1000 || p.At != ts(t0+hour, 0, devB) {
		t.Errorf("position = %+v, want 1000 by B (the latest write)", p)
	}
	if f := got.Book.Furthest; f.Char != 5000 || f.At != ts(t0, 0, devA) || f.Percent != 500_000 {
		t.Errorf("furthest = %+v, want 5000 at 50%% by A", f)
	}
}

// Rule (Entry.Merge): records merge only with the same record; otherwise
// Merge fails and changes nothing.
func TestEntryMergeRefusesAnotherRecord(t *testing.T) {
	book := must(t)(crdt.SetPosition(keyMD5, ts(t0, 0, devA), 1, 0))
	otherBook := must(t)(crdt.SetPosition(keySHA256, ts(t0+1, 0, devA), 2, 0))
	dev := must(t)(crdt.RenameDevice(ts(t0, 0, devA), "Pixel"))
	otherDev := must(t)(crdt.RenameDevice(ts(t0+1, 0, devB), "MacBook"))
	tests := []struct {
		name    string
		dst, in crdt.Entry
	}{
		{"device into book", book, dev},
		{"book into device", dev, book},
		{"another book", book, otherBook},
		{"another device", dev, otherDev},
		{"unknown kinds", crdt.Entry{Kind: 9}, crdt.Entry{Kind: 9}},
		{"zero entries", crdt.Entry{}, crdt.Entry{}},
	}
	for _, tt := range tests {
		dst := tt.dst.Clone()
		changed, err := dst.Merge(&tt.in)
		if !errors.Is(err, crdt.ErrInvalid) || changed {
			t.Errorf("%s: Merge = %v, %v; want false, ErrInvalid", tt.name, changed, err)
		}
		if !reflect.DeepEqual(dst, tt.dst) {
			t.Errorf("%s: the record changed to %+v", tt.name, dst)
		}
	}
}

// Records held by the store and records received from peers must not alias:
// a later merge into one must not show up in the other.
func TestMergeSharesNoMemory(t *testing.T) {
	in := crdt.Book{Key: keyMD5, ReadTime: crdt.ReadTime{{Device: devA, Ms: 1}, {Device: devC, Ms: 3}}}
	var b crdt.Book
	b.Key = keyMD5
	b.Merge(&in)
	in.ReadTime[0].Ms = 100
	if b.ReadTime.Of(devA) != 1 {
		t.Errorf("the merged record shares the argument's slots")
	}

	clone := b.Clone()
	more := crdt.Book{Key: keyMD5, ReadTime: crdt.ReadTime{{Device: devA, Ms: 7}}}
	b.Merge(&more) // raises an existing slot in place
	if clone.ReadTime.Of(devA) != 1 {
		t.Errorf("Clone shares slots with the original")
	}
	e := crdt.BookEntry(b)
	ec := e.Clone()
	e.Book.ReadTime[0].Ms = 9
	if ec.Book.ReadTime.Of(devA) != 7 {
		t.Errorf("Entry.Clone shares slots with the original")
	}
}

func TestDeviceMerge(t *testing.T) {
	d := crdt.Device{ID: devA}
	older := crdt.Device{ID: devA, Name: crdt.Text{At: ts(t0, 0, devA), Value: "Pixel"}}
	newer := crdt.Device{ID: devA, Name: crdt.Text{At: ts(t0+1, 0, devA), Value: "Pixel 9"}}
	steps := []struct {
		in          crdt.Device
		wantChanged bool
		wantName    string
	}{
		{older, true, "Pixel"},
		{older, false, "Pixel"},
		{newer, true, "Pixel 9"},
		{older, false, "Pixel 9"},
		{crdt.Device{ID: devA}, false, "Pixel 9"},
	}
	for i, s := range steps {
		if changed := d.Merge(&s.in); changed != s.wantChanged || d.Name.Value != s.wantName {
			t.Errorf("step %d: Merge = %v, name %q; want %v, %q", i, changed, d.Name.Value, s.wantChanged, s.wantName)
		}
	}
}
