package crdt_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/danyue/danyue/crdt"
)

// Hostile input is written as CBOR in hex, built from pieces whose meaning is
// spelled out here, so that each case differs from a valid record by the one
// thing it tests.
const (
	hKey   = "00 51 01 0123456789abcdef0123456789abcdef" // 0: h'01 + 16 bytes' (an md5 key)
	hT0    = "1b 0000019b76daa800"                       // t0 as a uint64
	hStamp = hT0 + " 00 0a"                              // [t0, 0, devA] without the array header
	hPos   = "01 85 " + hStamp + " 19 03e8 1a 0007a120"  // 1: position at char 1000, 50%
)

// hx turns spaced hex into bytes.
func hx(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

// bookOf is an entry {0: 1, 1: {fields...}} with n book fields.
func bookOf(n int, fields ...string) string {
	return "a2 00 01 01 " + hex.EncodeToString([]byte{0xa0 + byte(n)}) + " " + strings.Join(fields, " ")
}

type hostile struct {
	name string
	in   []byte
	want error // crdt.ErrInvalid or crdt.ErrVersion
}

func hostileInputs() []hostile {
	slots := func(n int) string { // n sorted slots [device i+1, 1 ms]
		var b strings.Builder
		b.WriteString("03 99 " + hex.EncodeToString([]byte{byte(n >> 8), byte(n)}))
		for i := 1; i <= n; i++ {
			b.WriteString(" 82 19 " + hex.EncodeToString([]byte{byte(i >> 8), byte(i)}) + " 01")
		}
		return b.String()
	}
	inv, ver := crdt.ErrInvalid, crdt.ErrVersion
	return append([]hostile{
		{"empty", nil, inv},
		{"not a map", hx("01"), inv},
		{"truncated map", hx("a2 00 01"), inv},
		{"trailing byte after a valid record", hx(bookOf(1, hKey) + " 00"), inv},
		{"two records back to back", hx(bookOf(1, hKey) + bookOf(1, hKey)), inv},
		// Fields and structure a correct peer never sends.
		{"unknown entry field", hx("a3 00 01 01 a1 " + hKey + " 03 00"), inv},
		{"unknown book field", hx(bookOf(2, hKey, "06 00")), inv},
		{"unknown device field", hx("a2 00 01 02 a2 00 0a 02 00"), inv},
		{"duplicate entry key", hx("a3 00 01 00 01 01 a1 " + hKey), inv},
		{"duplicate book key", hx(bookOf(2, hKey, hKey)), inv},
		{"indefinite-length entry map", hx("bf 00 01 01 a1 " + hKey + " ff"), inv},
		{"indefinite-length key bytes", hx(bookOf(1, "00 5f 41 01 50 0123456789abcdef0123456789abcdef ff")), inv},
		{"indefinite-length slot array", hx(bookOf(2, hKey, "03 9f 82 0a 01 ff")), inv},
		{"tag on the entry (self-described CBOR)", hx("d9 d9f7 " + bookOf(1, hKey)), inv},
		{"tag on a field", hx(bookOf(2, hKey, "04 c1 83 "+hStamp)), inv},
		{"timestamp with 4 elements", hx(bookOf(2, hKey, "04 84 "+hStamp+" 00")), inv},
		{"timestamp with 2 elements", hx(bookOf(2, hKey, "04 82 "+hT0+" 00")), inv},
		{"slot as a map", hx(bookOf(2, hKey, "03 81 a1 0a 01")), inv},
		{"nesting deeper than the format", hx(bookOf(2, hKey, "03 81 82 81 81 0a 01")), inv},
		{"negative integer", hx(bookOf(2, hKey, "04 83 20 00 0a")), inv},
		{"float for an integer", hx(bookOf(2, hKey, "04 83 fb 4279b76daa800000 00 0a")), inv},
		{"both book and device", hx("a3 00 01 01 a1 " + hKey + " 02 a1 00 0a"), inv},
		{"neither book nor device", hx("a1 00 01"), inv},
		// Versions: a record in a version this build does not know is
		// refused as such, even when it holds fields this build does not
		// know, which is what a newer version looks like.
		{"version 2", hx("a2 00 02 01 a1 " + hKey), ver},
		{"version 2 with a new field", hx("a2 00 02 01 a2 " + hKey + " 06 00"), ver},
		{"version 2 with a new entry kind", hx("a2 00 02 03 a1 00 00"), ver},
		{"version 0", hx("a2 00 00 01 a1 " + hKey), ver},
		{"no version", hx("a1 01 a1 " + hKey), inv},
		{"version as text", hx("a2 00 61 31 01 a1 " + hKey), inv},
		// Values outside the data model.
		{"key of an unknown algorithm", hx(bookOf(1, "00 51 03 0123456789abcdef0123456789abcdef")), inv},
		{"md5 key one byte short", hx(bookOf(1, "00 50 01 0123456789abcdef0123456789abcd")), inv},
		{"key as text", hx(bookOf(1, "00 71 01 30313233343536373839616263646566")), inv},
		{"unsorted read-time slots", hx(bookOf(2, hKey, "03 82 82 0b 01 82 0a 01")), inv},
		{"duplicate read-time slot", hx(bookOf(2, hKey, "03 82 82 0a 01 82 0a 02")), inv},
		{"empty read-time slot", hx(bookOf(2, hKey, "03 81 82 0a 00")), inv},
		{"read-time slot without a device", hx(bookOf(2, hKey, "03 81 82 00 01")), inv},
		{"read-time slot past MaxSlotMs", hx(bookOf(2, hKey, "03 81 82 0a 1b 00001cc2a9eb4001")), inv},
		{"more than MaxDevices slots", hx(bookOf(2, hKey, slots(crdt.MaxDevices+1))), inv},
		{"furthest behind position", hx(bookOf(3, hKey, hPos, "02 85 "+hStamp+" 19 03e7 00")), inv},
		{"furthest without position", hx(bookOf(2, hKey, "02 85 "+hStamp+" 19 03e8 00")), inv},
		{"explicit furthest equal to position (non-canonical)", hx(bookOf(3, hKey, hPos, "02 85 "+hStamp+" 19 03e8 1a 0007a120")), inv},
		{"offset without a timestamp", hx(bookOf(2, hKey, "01 85 00 00 00 19 03e8 00")), inv},
		{"offset past MaxChar", hx(bookOf(2, hKey, "01 85 "+hStamp+" 1b 0000010000000001 00")), inv},
		{"percent over 1", hx(bookOf(2, hKey, "01 85 "+hStamp+" 00 1a 000f4241")), inv},
		{"logical counter over 32 bits", hx(bookOf(2, hKey, "04 83 "+hT0+" 1b 0000000100000000 0a")), inv},
		{"wall time past year 9999", hx(bookOf(2, hKey, "04 83 1b 0000e677d21fdc00 00 0a")), inv},
		{"timestamp without a device", hx(bookOf(2, hKey, "04 83 "+hT0+" 00 00")), inv},
		{"title of invalid UTF-8", hx(bookOf(2, hKey, "05 84 "+hStamp+" 62 fffe")), inv},
		{"empty title", hx(bookOf(2, hKey, "05 84 "+hStamp+" 60")), inv},
		{"title over MaxTitleBytes", hx(bookOf(2, hKey, "05 84 "+hStamp+" 79 0401 "+strings.Repeat("78", crdt.MaxTitleBytes+1))), inv},
		{"title as bytes", hx(bookOf(2, hKey, "05 84 "+hStamp+" 41 61")), inv},
		{"device id zero", hx("a2 00 01 02 a1 00 00"), inv},
		// Lengths that claim more than the input holds: refused before
		// anything that size is allocated (see TestDecodeAllocationIsBounded).
		{"byte string claiming 2^64-1 bytes", hx(bookOf(1, "00 5b ffffffffffffffff 01")), inv},
		{"title claiming 4 GiB", hx(bookOf(2, hKey, "05 84 "+hStamp+" 7a ffffffff 61")), inv},
		{"array claiming 2^63 elements", hx(bookOf(2, hKey, "03 9b 7fffffffffffffff 82 0a 01")), inv},
		{"map claiming 2^32 pairs", hx("a2 00 01 01 ba ffffffff " + hKey), inv},
		{"array claiming MaxDevices elements, holding one", hx(bookOf(2, hKey, "03 99 0400 82 0a 01")), inv},
		{"larger than MaxEncodedSize", append(hx(bookOf(1, hKey)), make([]byte, crdt.MaxEncodedSize)...), inv},
		// Second encodings of valid records. Accepting them would break
		// "decode then encode gives the same bytes" (package doc, Encoding).
		{"non-shortest integer", hx("a2 00 18 01 01 a1 " + hKey), inv},
		{"non-shortest length", hx(bookOf(1, "00 58 11 01 0123456789abcdef0123456789abcdef")), inv},
		{"unsorted map keys", hx("a2 01 a1 " + hKey + " 00 01"), inv},
		{"explicit null title", hx(bookOf(2, hKey, "05 f6")), inv},
		{"null device beside a book", hx("a3 00 01 01 a1 " + hKey + " 02 f6"), inv},
		{"empty read-time array", hx(bookOf(2, hKey, "03 80")), inv},
		{"explicit empty position", hx(bookOf(2, hKey, "01 85 00 00 00 00 00")), inv},
	}, kosyncHostileInputs()...)
}

// Issue 3: the decoder refuses hostile input with the right error and no
// partial record (package doc, Encoding).
func TestDecodeRejectsHostileInput(t *testing.T) {
	for _, tt := range hostileInputs() {
		t.Run(tt.name, func(t *testing.T) {
			e, err := crdt.Decode(tt.in)
			if !errors.Is(err, tt.want) {
				t.Errorf("Decode(%x) error = %v, want %v", tt.in, err, tt.want)
			}
			if errors.Is(err, crdt.ErrVersion) && errors.Is(err, crdt.ErrInvalid) {
				t.Errorf("error %v is both ErrVersion and ErrInvalid: a caller cannot tell a newer peer from a broken one", err)
			}
			if !reflect.DeepEqual(e, crdt.Entry{}) {
				t.Errorf("partial record returned with the error: %+v", e)
			}
		})
	}
}

// The hostile table is only meaningful if its pieces are right: assembled
// without the fault, they decode.
func TestHostilePiecesAreValid(t *testing.T) {
	for _, in := range []string{
		bookOf(1, hKey),
		bookOf(2, hKey, hPos),
		bookOf(3, hKey, hPos, "02 85 "+hStamp+" 19 03e9 00"),
		bookOf(2, hKey, "03 82 82 0a 01 82 0b 01"),
		bookOf(2, hKey, "04 83 "+hStamp),
		bookOf(2, hKey, "05 84 "+hStamp+" 61 78"),
		"a2 00 01 02 a1 00 0a",
	} {
		if _, err := crdt.Decode(hx(in)); err != nil {
			t.Errorf("Decode(%s): %v", in, err)
		}
	}
}

// A record cut anywhere is refused, never read as a shorter record.
func TestDecodeRejectsEveryTruncation(t *testing.T) {
	for name, b := range goldenBytes(t) {
		for n := range len(b) {
			if e, err := crdt.Decode(b[:n]); err == nil {
				t.Fatalf("%s cut to %d of %d bytes decoded as %+v", name, n, len(b), e)
			}
		}
	}
}

// Issue 3: a hostile peer cannot make the decoder allocate beyond what the
// input's size allows. Measured in bytes per call against the input's length,
// on inputs that claim much more than they hold and on the largest valid
// ones.
func TestDecodeAllocationIsBounded(t *testing.T) {
	inputs := map[string][]byte{}
	for _, h := range hostileInputs() {
		inputs[h.name] = h.in
	}
	big := crdt.Book{Key: keyMD5}
	for d := range crdt.DeviceID(crdt.MaxDevices) {
		big.ReadTime = append(big.ReadTime, crdt.Slot{Device: d + 1, Ms: crdt.MaxSlotMs})
	}
	valid := encodeBook(t, big)
	inputs["MaxDevices slots (valid)"] = valid
	// The same with two slots swapped: refused by the last check, after
	// everything has been decoded.
	unsorted := bytes.Clone(valid)
	i, j := bytes.Index(unsorted, []byte{0x82, 0x05, 0x1b}), bytes.Index(unsorted, []byte{0x82, 0x06, 0x1b})
	unsorted[i+1], unsorted[j+1] = 0x06, 0x05
	if _, err := crdt.Decode(unsorted); !errors.Is(err, crdt.ErrInvalid) {
		t.Fatalf("unsorted slots: %v", err)
	}
	inputs["MaxDevices slots, unsorted"] = unsorted
	for name, in := range inputs {
		allocs, bytesPer := measureDecode(in)
		// A decode holds a wire copy, a domain copy and the re-encoding
		// that checks canonical form: a few times the input, never more.
		if limit := 8*len(in) + 8<<10; bytesPer > limit {
			t.Errorf("%s: %d input bytes allocated %d bytes per Decode, over %d", name, len(in), bytesPer, limit)
		}
		if allocs > 64 {
			t.Errorf("%s: %v allocations per Decode", name, allocs)
		}
	}
}

// measureDecode returns the allocations and bytes allocated per Decode of in.
func measureDecode(in []byte) (allocs float64, bytesPer int) {
	const runs = 20
	crdt.Decode(in) // warm up: lazily built decoder tables are not per call
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		crdt.Decode(in)
	}
	runtime.ReadMemStats(&after)
	allocs = testing.AllocsPerRun(runs, func() { crdt.Decode(in) })
	return allocs, int(after.TotalAlloc-before.TotalAlloc) / runs
}
