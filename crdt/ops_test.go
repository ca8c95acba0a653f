package crdt_test

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/danyue/danyue/crdt"
)

// Rule (doc "Local operations", issue 3): invalid input returns an error and
// changes nothing. The operations are pure, so "nothing" means: the zero
// Entry comes back (no delta to apply or ship by mistake) and the local record
// handed to AddReadTime is untouched.
func TestLocalOpsRejectInvalidInput(t *testing.T) {
	at := ts(t0, 0, devA)
	local := crdt.Book{Key: keyMD5, ReadTime: crdt.ReadTime{{Device: devA, Ms: crdt.MaxSlotMs - 10}, {Device: devB, Ms: hour}}}
	localBytes := encodeBook(t, local)
	other := crdt.Book{Key: keySHA256}

	tests := []struct {
		name string
		op   func() (crdt.Entry, error)
	}{
		{"position: zero key", func() (crdt.Entry, error) { return crdt.SetPosition(crdt.BookKey{}, at, 1, 0) }},
		{"position: zero timestamp", func() (crdt.Entry, error) { return crdt.SetPosition(keyMD5, crdt.Timestamp{}, 1, 0) }},
		{"position: timestamp without a device", func() (crdt.Entry, error) { return crdt.SetPosition(keyMD5, ts(t0, 0, 0), 1, 0) }},
		{"position: timestamp past year 9999", func() (crdt.Entry, error) { return crdt.SetPosition(keyMD5, ts(crdt.MaxWall+1, 0, devA), 1, 0) }},
		{"position: offset over MaxChar", func() (crdt.Entry, error) { return crdt.SetPosition(keyMD5, at, crdt.MaxChar+1, 0) }},
		{"position: offset at MaxUint64", func() (crdt.Entry, error) { return crdt.SetPosition(keyMD5, at, math.MaxUint64, 0) }},
		{"position: negative percent", func() (crdt.Entry, error) { return crdt.SetPosition(keyMD5, at, 1, -0.000001) }},
		{"position: percent over 1", func() (crdt.Entry, error) { return crdt.SetPosition(keyMD5, at, 1, 1.0000001) }},
		{"position: NaN percent", func() (crdt.Entry, error) { return crdt.SetPosition(keyMD5, at, 1, math.NaN()) }},
		{"position: +Inf percent", func() (crdt.Entry, error) { return crdt.SetPosition(keyMD5, at, 1, math.Inf(1)) }},
		{"position: -Inf percent", func() (crdt.Entry, error) { return crdt.SetPosition(keyMD5, at, 1, math.Inf(-1)) }},
		{"read time: zero delta", func() (crdt.Entry, error) { return crdt.AddReadTime(keyMD5, &local, devB, 0) }},
		{"read time: delta past MaxSlotMs", func() (crdt.Entry, error) { return crdt.AddReadTime(keyMD5, &local, devA, 11) }},
		{"read time: delta that would wrap uint64", func() (crdt.Entry, error) { return crdt.AddReadTime(keyMD5, &local, devA, math.MaxUint64-5) }},
		{"read time: first delta past MaxSlotMs", func() (crdt.Entry, error) { return crdt.AddReadTime(keyMD5, nil, devC, crdt.MaxSlotMs+1) }},
		{"read time: zero key", func() (crdt.Entry, error) { return crdt.AddReadTime(crdt.BookKey{}, nil, devA, 1) }},
		{"read time: no device", func() (crdt.Entry, error) { return crdt.AddReadTime(keyMD5, &local, 0, 1) }},
		{"read time: local record of another book", func() (crdt.Entry, error) { return crdt.AddReadTime(keyMD5, &other, devA, 1) }},
		{"delete: zero key", func() (crdt.Entry, error) { return crdt.Delete(crdt.BookKey{}, at) }},
		{"delete: zero timestamp", func() (crdt.Entry, error) { return crdt.Delete(keyMD5, crdt.Timestamp{}) }},
		{"delete: timestamp without a device", func() (crdt.Entry, error) { return crdt.Delete(keyMD5, ts(t0, 1, 0)) }},
		{"title: empty", func() (crdt.Entry, error) { return crdt.SetTitle(keyMD5, at, "") }},
		{"title: one byte too long", func() (crdt.Entry, error) {
			return crdt.SetTitle(keyMD5, at, strings.Repeat("x", crdt.MaxTitleBytes+1))
		}},
		{"title: too long in CJK", func() (crdt.Entry, error) {
			return crdt.SetTitle(keyMD5, at, strings.Repeat("书", crdt.MaxTitleBytes/3+1))
		}},
		{"title: invalid UTF-8", func() (crdt.Entry, error) { return crdt.SetTitle(keyMD5, at, "Dream of the Red\xffChamber") }},
		{"title: truncated UTF-8", func() (crdt.Entry, error) { return crdt.SetTitle(keyMD5, at, "红楼\xe6\xa2") }},
		{"title: zero key", func() (crdt.Entry, error) { return crdt.SetTitle(crdt.BookKey{}, at, "t") }},
		{"title: zero timestamp", func() (crdt.Entry, error) { return crdt.SetTitle(keyMD5, crdt.Timestamp{}, "t") }},
		{"device name: empty", func() (crdt.Entry, error) { return crdt.RenameDevice(at, "") }},
		{"device name: too long", func() (crdt.Entry, error) {
			return crdt.RenameDevice(at, strings.Repeat("p", crdt.MaxDeviceNameBytes+1))
		}},
		{"device name: invalid UTF-8", func() (crdt.Entry, error) { return crdt.RenameDevice(at, "Pixel\xc0") }},
		{"title: ESC (terminal escape)", func() (crdt.Entry, error) { return crdt.SetTitle(keyMD5, at, "Red\x1b[2JChamber") }},
		{"title: NUL", func() (crdt.Entry, error) { return crdt.SetTitle(keyMD5, at, "Red\x00") }},
		{"title: newline", func() (crdt.Entry, error) { return crdt.SetTitle(keyMD5, at, "Red\nChamber") }},
		{"title: tab", func() (crdt.Entry, error) { return crdt.SetTitle(keyMD5, at, "Red\tChamber") }},
		{"title: DEL", func() (crdt.Entry, error) { return crdt.SetTitle(keyMD5, at, "Red\x7f") }},
		{"title: C1 CSI", func() (crdt.Entry, error) { return crdt.SetTitle(keyMD5, at, "Red\u009b2J") }},
		{"device name: newline", func() (crdt.Entry, error) { return crdt.RenameDevice(at, "Pixel\nfake log line") }},
		{"device name: ESC", func() (crdt.Entry, error) { return crdt.RenameDevice(at, "\x1b]0;owned\x07") }},
		{"device name: zero timestamp", func() (crdt.Entry, error) { return crdt.RenameDevice(crdt.Timestamp{}, "Pixel") }},
		{"device name: timestamp without a device", func() (crdt.Entry, error) { return crdt.RenameDevice(ts(t0, 0, 0), "Pixel") }},
		{"device name: timestamp past year 9999", func() (crdt.Entry, error) { return crdt.RenameDevice(ts(crdt.MaxWall+1, 0, devA), "Pixel") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := tt.op()
			if !errors.Is(err, crdt.ErrInvalid) {
				t.Errorf("err = %v, want ErrInvalid", err)
			}
			if !reflect.DeepEqual(e, crdt.Entry{}) {
				t.Errorf("returned a partial change %+v with the error", e)
			}
			if !bytes.Equal(encodeBook(t, local), localBytes) {
				t.Errorf("the local record changed")
			}
		})
	}
}

// The limits are inclusive: the largest valid input is accepted, so the
// rejections above are at the boundary and not somewhere below it.
func TestLocalOpsAcceptBoundaries(t *testing.T) {
	at := ts(crdt.MaxWall, math.MaxUint32, devA)
	ops := map[string]func() (crdt.Entry, error){
		"offset at MaxChar":         func() (crdt.Entry, error) { return crdt.SetPosition(keyMD5, at, crdt.MaxChar, 1) },
		"offset and percent zero":   func() (crdt.Entry, error) { return crdt.SetPosition(keyMD5, at, 0, 0) },
		"negative zero percent":     func() (crdt.Entry, error) { return crdt.SetPosition(keyMD5, at, 0, math.Copysign(0, -1)) },
		"wall at 0 with a device":   func() (crdt.Entry, error) { return crdt.Delete(keyMD5, ts(0, 0, devA)) },
		"read time up to MaxSlotMs": func() (crdt.Entry, error) { return crdt.AddReadTime(keyMD5, nil, devA, crdt.MaxSlotMs) },
		"title of MaxTitleBytes":    func() (crdt.Entry, error) { return crdt.SetTitle(keyMD5, at, strings.Repeat("x", crdt.MaxTitleBytes)) },
		"name of MaxDeviceNameBytes": func() (crdt.Entry, error) {
			return crdt.RenameDevice(at, strings.Repeat("p", crdt.MaxDeviceNameBytes))
		},
	}
	for name, op := range ops {
		e, err := op()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		// Whatever an operation makes must be a valid record that encodes.
		encode(t, e)
	}
}

// Rule (doc "Local operations"): an operation's delta holds only what it
// wrote. SetPosition also raises the furthest position (with the same write).
func TestLocalOpsDeltas(t *testing.T) {
	at := ts(t0, 3, devB)
	tests := []struct {
		name string
		got  crdt.Entry
		want crdt.Entry
	}{
		{
			"position", must(t)(crdt.SetPosition(keyMD5, at, 1234, 0.25)),
			crdt.BookEntry(crdt.Book{Key: keyMD5,
				Position: crdt.Position{At: at, Char: 1234, Percent: 250_000},
				Furthest: crdt.Position{At: at, Char: 1234, Percent: 250_000}}),
		},
		{
			"percent rounds to the nearest millionth", must(t)(crdt.SetPosition(keyMD5, at, 1, 0.1234565001)),
			crdt.BookEntry(crdt.Book{Key: keyMD5,
				Position: crdt.Position{At: at, Char: 1, Percent: 123_457},
				Furthest: crdt.Position{At: at, Char: 1, Percent: 123_457}}),
		},
		{
			"read time on a book this device has no record of", must(t)(crdt.AddReadTime(keyMD5, nil, devB, 5*hour)),
			crdt.BookEntry(crdt.Book{Key: keyMD5, ReadTime: crdt.ReadTime{{Device: devB, Ms: 5 * hour}}}),
		},
		{"delete", must(t)(crdt.Delete(keyMD5, at)), crdt.BookEntry(crdt.Book{Key: keyMD5, Deleted: at})},
		{
			"title", must(t)(crdt.SetTitle(keyMD5, at, "红楼梦")),
			crdt.BookEntry(crdt.Book{Key: keyMD5, Title: crdt.Text{At: at, Value: "红楼梦"}}),
		},
		{
			"device name: the record of the writing device", must(t)(crdt.RenameDevice(at, "Pixel")),
			crdt.DeviceEntry(crdt.Device{ID: devB, Name: crdt.Text{At: at, Value: "Pixel"}}),
		},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.name, tt.got, tt.want)
		}
	}
}

// Rule (CheckText): text a device writes holds no control characters, but a
// record from a peer or from disk that holds one (an older version wrote
// it) still decodes and merges: refusing it would stop sync with that
// device for good. Printable text, U+FFFD and format characters pass.
func TestControlCharactersRefusedOnlyOnLocalWrites(t *testing.T) {
	at := ts(t0, 0, devA)
	for _, ok := range []string{"红楼梦", "Dream of the Red Chamber", "a\uFFFDb", "\u200dzwj", "é"} {
		if _, err := crdt.SetTitle(keyMD5, at, ok); err != nil {
			t.Errorf("SetTitle(%q) = %v, want accepted", ok, err)
		}
		if err := crdt.CheckText("title", ok); err != nil {
			t.Errorf("CheckText(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"\x1b", "a\nb", "\r", "\x00", "\x7f", "\u0080", "\u009f", "\xff", "a\xed\xa0\x80"} {
		if err := crdt.CheckText("title", bad); !errors.Is(err, crdt.ErrInvalid) {
			t.Errorf("CheckText(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	old := crdt.BookEntry(crdt.Book{Key: keyMD5, Title: crdt.Text{At: at, Value: "old\x1b[31m title\n"}})
	got, err := crdt.Decode(encode(t, old))
	if err != nil || got.Book.Title.Value != old.Book.Title.Value {
		t.Fatalf("Decode of an older device's record with control characters = %q, %v; want it kept", got.Book.Title.Value, err)
	}
}
