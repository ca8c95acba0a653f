package crdt_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/danyue/danyue/crdt"
)

// FuzzDecode feeds arbitrary bytes to Decode (every decoder of outside bytes
// is fuzzed: docs/style.md, Tests). It must never panic; what it accepts must be
// exactly what Encode makes of the record (one byte form per record), must
// re-encode and decode to an equal record, and must merge like a valid
// record. Allocation bounds are checked on hostile inputs by
// TestDecodeAllocationIsBounded, since the fuzzer cannot measure them
// reliably. Seeds: the golden records and the hostile table.
//
//	go test ./crdt -run '^$' -fuzz FuzzDecode -fuzztime 2m
func FuzzDecode(f *testing.F) {
	for _, b := range goldenBytes(f) {
		f.Add(b)
	}
	for _, h := range hostileInputs() {
		if len(h.in) <= 4096 {
			f.Add(h.in)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := crdt.Decode(data)
		if err != nil {
			if !reflect.DeepEqual(e, crdt.Entry{}) {
				t.Fatalf("partial record with error %v: %+v", err, e)
			}
			return
		}
		enc, err := e.Encode()
		if err != nil {
			t.Fatalf("a decoded record does not encode: %v\n%+v", err, e)
		}
		if !bytes.Equal(enc, data) {
			t.Fatalf("decode then encode changed the bytes:\n in %x\nout %x", data, enc)
		}
		back, err := crdt.Decode(enc)
		if err != nil || !reflect.DeepEqual(back, e) {
			t.Fatalf("re-decoding gave %+v, %v; want %+v", back, err, e)
		}
		if again, _ := back.Encode(); !bytes.Equal(again, enc) {
			t.Fatalf("encoding is not deterministic:\n%x\n%x", enc, again)
		}
		// A decoded record is a valid record: merging it into itself and
		// into the empty record of its identity behaves.
		self := e.Clone()
		if changed, err := self.Merge(&e); err != nil || changed {
			t.Fatalf("merging a record into itself: %v, %v", changed, err)
		}
		empty := emptyOf(e)
		if _, err := empty.Merge(&e); err != nil {
			t.Fatal(err)
		}
		if got, _ := empty.Encode(); !bytes.Equal(got, enc) {
			t.Fatalf("merging into an empty record gave another record:\n%x\n%x", got, enc)
		}
		if ts := e.MaxTimestamp(); ts.Wall > crdt.MaxWall {
			t.Fatalf("accepted a timestamp past MaxWall: %v", ts)
		}
	})
}
