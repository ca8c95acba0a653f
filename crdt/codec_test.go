package crdt_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/danyue/danyue/crdt"
	"github.com/fxamacker/cbor/v2"
	"pgregory.net/rapid"
)

// Device ids as the daemon makes them (from identity keys): full 64-bit
// values, which is what a typical record's size must be measured with.
const (
	phone  crdt.DeviceID = 0x8f3c2a1d9e4b7f60
	laptop crdt.DeviceID = 0x1d5e9a0b7c3f2e48
	nas    crdt.DeviceID = 0xc47a61e2093bd5f1
)

// typicalBook is a book read on three devices: the position is the furthest
// point (the common case, encoded once), hours of reading on each device,
// and a 20-character title.
func typicalBook() crdt.Book {
	at := ts(t0+37*day+5*hour, 0, phone)
	pos := crdt.Position{At: at, Char: 412_345, Percent: 387_512}
	return crdt.Book{
		Key:      keyMD5,
		Position: pos,
		Furthest: pos,
		ReadTime: crdt.ReadTime{{Device: laptop, Ms: 5*hour + 17*minute}, {Device: phone, Ms: 10*hour + 3*minute}, {Device: nas, Ms: 2 * hour}},
		Title:    crdt.Text{At: ts(t0, 2, laptop), Value: "A Tale of Two Cities"},
	}
}

// furthestAheadBook is typicalBook after the reader went back a chapter on
// the laptop: the furthest position is encoded as well.
func furthestAheadBook() crdt.Book {
	b := typicalBook()
	b.Position = crdt.Position{At: ts(t0+38*day, 0, laptop), Char: 398_000, Percent: 374_030}
	return b
}

// goldenRecords are pinned byte for byte in testdata/golden.txt.
func goldenRecords() []struct {
	name  string
	entry crdt.Entry
} {
	cjk := typicalBook()
	cjk.Key = keySHA256
	cjk.Title.Value = "红楼梦（程乙本）第一回至第八十回"
	deleted := typicalBook()
	deleted.Deleted = ts(t0+40*day, 0, nas)
	pos := crdt.Position{At: ts(crdt.MaxWall, math.MaxUint32, math.MaxUint64), Char: crdt.MaxChar, Percent: crdt.PercentOne}
	return append([]struct {
		name  string
		entry crdt.Entry
	}{
		{"book-key-only", crdt.BookEntry(crdt.Book{Key: keyMD5})},
		{"book-typical", crdt.BookEntry(typicalBook())},
		{"book-furthest-ahead", crdt.BookEntry(furthestAheadBook())},
		{"book-deleted", crdt.BookEntry(deleted)},
		{"book-sha256-cjk-title", crdt.BookEntry(cjk)},
		{"book-limits", crdt.BookEntry(crdt.Book{Key: keyMD5, Position: pos, Furthest: pos,
			ReadTime: crdt.ReadTime{{Device: math.MaxUint64, Ms: crdt.MaxSlotMs}}, Deleted: pos.At,
			Title: crdt.Text{At: pos.At, Value: strings.Repeat("x", crdt.MaxTitleBytes)}})},
		{"device-named", crdt.DeviceEntry(crdt.Device{ID: phone, Name: crdt.Text{At: ts(t0, 0, phone), Value: "Pixel 9"}})},
		{"device-unnamed", crdt.DeviceEntry(crdt.Device{ID: nas})},
	}, append(kosyncGoldenRecords(), memberGoldenRecords()...)...)
}

const goldenFile = "testdata/golden.txt"

// Issue 3: the golden test pins the encoding of a few records so that the
// wire format cannot drift unnoticed. A diff here is a format change: it
// needs a new FormatVersion, not -update.
func TestGoldenEncoding(t *testing.T) {
	var out bytes.Buffer
	out.WriteString("# Encoded records, pinned. Regenerate with: go test ./crdt -run TestGoldenEncoding -update\n")
	out.WriteString("# Each record: its name and size, the CBOR diagnostic notation, the bytes in hex.\n")
	for _, g := range goldenRecords() {
		b := encode(t, g.entry)
		diag, err := cbor.Diagnose(b)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "\n== %s (%d bytes)\n%s\n%x\n", g.name, len(b), diag, b)
	}
	if *update {
		if err := os.WriteFile(goldenFile, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("the encoding changed; got:\n%s", out.Bytes())
	}
	// The pinned bytes decode to the records they pin.
	pinned := goldenBytes(t)
	for _, g := range goldenRecords() {
		got, err := crdt.Decode(pinned[g.name])
		if err != nil || !reflect.DeepEqual(got, g.entry) {
			t.Errorf("%s: Decode(pinned) = %+v, %v; want %+v", g.name, got, err, g.entry)
		}
	}
}

// goldenBytes reads the pinned encodings back, by record name.
func goldenBytes(t testing.TB) map[string][]byte {
	f, err := os.Open(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	var name string
	var lines int
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "== "):
			name, lines = strings.Fields(line)[1], 0
		case name != "":
			if lines++; lines == 2 { // the hex line follows the diagnostic one
				if out[name], err = hex.DecodeString(line); err != nil {
					t.Fatalf("%s: %v", goldenFile, err)
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s holds no records", goldenFile)
	}
	return out
}

// Rule (doc "Encoding"): equal records encode to equal bytes, and decoding
// gives back exactly the record that was encoded.
func TestCodecRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := genEntry.Draw(t, "entry")
		b := encode(t, e)
		if again := encode(t, e.Clone()); !bytes.Equal(b, again) {
			t.Fatalf("two encodings of one record differ:\n%x\n%x", b, again)
		}
		got, err := crdt.Decode(b)
		if err != nil {
			t.Fatalf("Decode(Encode(%+v)): %v", e, err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Fatalf("Decode(Encode(x)) != x:\n got %+v\nwant %+v", got, e)
		}
	})
}

// Encode validates first: an invalid record never reaches the wire or the
// disk, and no partial encoding comes back.
func TestEncodeRefusesInvalidRecords(t *testing.T) {
	valid := typicalBook()
	tests := []struct {
		name  string
		entry crdt.Entry
	}{
		{"zero entry", crdt.Entry{}},
		{"unknown kind", crdt.Entry{Kind: 9, Book: valid}},
		{"book without key", crdt.BookEntry(crdt.Book{Position: valid.Position, Furthest: valid.Furthest})},
		{"furthest behind position", func() crdt.Entry {
			b := valid.Clone()
			b.Furthest.Char--
			return crdt.BookEntry(b)
		}()},
		{"unsorted slots", func() crdt.Entry {
			b := valid.Clone()
			b.ReadTime[0], b.ReadTime[1] = b.ReadTime[1], b.ReadTime[0]
			return crdt.BookEntry(b)
		}()},
		{"empty slot", crdt.BookEntry(crdt.Book{Key: keyMD5, ReadTime: crdt.ReadTime{{Device: devA}}})},
		{"title without timestamp", crdt.BookEntry(crdt.Book{Key: keyMD5, Title: crdt.Text{Value: "x"}})},
		{"device without id", crdt.DeviceEntry(crdt.Device{})},
		{"device name too long", crdt.DeviceEntry(crdt.Device{ID: devA, Name: crdt.Text{At: ts(t0, 0, devA), Value: strings.Repeat("x", 129)}})},
		{"too many devices", func() crdt.Entry {
			b := crdt.Book{Key: keyMD5}
			for d := range crdt.DeviceID(crdt.MaxDevices + 1) {
				b.ReadTime = append(b.ReadTime, crdt.Slot{Device: d + 1, Ms: 1})
			}
			return crdt.BookEntry(b)
		}()},
	}
	for _, tt := range tests {
		b, err := tt.entry.Encode()
		if !errors.Is(err, crdt.ErrInvalid) || b != nil {
			t.Errorf("%s: Encode = %x, %v; want nil, ErrInvalid", tt.name, b, err)
		}
	}
}

// KindOfEncoded reads the kind of every pinned record without decoding it,
// and nothing from bytes that are not a record.
func TestKindOfEncoded(t *testing.T) {
	for _, g := range goldenRecords() {
		if got := crdt.KindOfEncoded(encode(t, g.entry)); got != g.entry.Kind {
			t.Errorf("%s: kind %v, want %v", g.name, got, g.entry.Kind)
		}
	}
	for _, b := range [][]byte{nil, {0xa2}, {0xa2, 0x00, 0x02, 0x01}, {0xa1, 0x00, 0x01, 0x01}, {0xa2, 0x00, 0x01, 0x00}, {0xa2, 0x00, 0x01, 0x18, 0x20}} {
		if got := crdt.KindOfEncoded(b); got != 0 {
			t.Errorf("% x: kind %v, want none", b, got)
		}
	}
}
