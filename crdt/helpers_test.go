package crdt_test

import (
	"bytes"
	"flag"

	"github.com/danyue/danyue/crdt"
	"pgregory.net/rapid"
)

// update rewrites the golden files under testdata instead of comparing with
// them. Commit only diffs you understand: they are wire-format or behaviour
// changes.
var update = flag.Bool("update", false, "rewrite golden files in testdata")

// t0 is 2026-01-01T00:00:00Z in Unix milliseconds. Tests use literal times
// relative to it so that failures print readable numbers.
const t0 uint64 = 1_767_225_600_000

const (
	second uint64 = 1000
	minute        = 60 * second
	hour          = 60 * minute
	day           = 24 * hour
	year          = 365 * day
)

// Small device ids whose order is obvious: where a tie between devices is
// decided by id, A < B < C.
const (
	devA crdt.DeviceID = 0xa
	devB crdt.DeviceID = 0xb
	devC crdt.DeviceID = 0xc
)

var (
	keyMD5    = crdt.MustParseBookKey("md5:0123456789abcdef0123456789abcdef")
	keySHA256 = crdt.MustParseBookKey("sha256:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff")
)

func ts(wall uint64, logical uint32, dev crdt.DeviceID) crdt.Timestamp {
	return crdt.Timestamp{Wall: wall, Logical: logical, Device: dev}
}

// must returns the entry an operation made, failing the test if it refused:
// must(t)(crdt.SetPosition(...)).
func must(t rapid.TB) func(crdt.Entry, error) crdt.Entry {
	return func(e crdt.Entry, err error) crdt.Entry {
		t.Helper()
		if err != nil {
			t.Fatalf("operation failed: %v", err)
		}
		return e
	}
}

func encode(t rapid.TB, e crdt.Entry) []byte {
	t.Helper()
	b, err := e.Encode()
	if err != nil {
		t.Fatalf("encode %+v: %v", e, err)
	}
	return b
}

func encodeBook(t rapid.TB, b crdt.Book) []byte {
	t.Helper()
	return encode(t, crdt.BookEntry(b))
}

// fold merges entries, in the given order, into a copy of the first one.
func fold(t rapid.TB, entries ...crdt.Entry) crdt.Entry {
	t.Helper()
	acc := entries[0].Clone()
	for _, e := range entries[1:] {
		if _, err := acc.Merge(&e); err != nil {
			t.Fatalf("merge: %v", err)
		}
	}
	return acc
}

// sameBytes reports whether two records have the same encoding, which is the
// equality that matters between replicas.
func sameBytes(t rapid.TB, a, b crdt.Entry) bool {
	t.Helper()
	return bytes.Equal(encode(t, a), encode(t, b))
}

// permutations calls f with every ordering of the indices 0..n-1.
func permutations(n int, f func([]int)) {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	var rec func(k int)
	rec = func(k int) {
		if k == n {
			f(p)
			return
		}
		for i := k; i < n; i++ {
			p[k], p[i] = p[i], p[k]
			rec(k + 1)
			p[k], p[i] = p[i], p[k]
		}
	}
	rec(0)
}
