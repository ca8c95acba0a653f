package peer

import (
	"context"
	"encoding/binary"
	"testing"
	"time"
	"unsafe"

	"github.com/danyue/danyue/crdt"
)

// provenanceRecords makes n distinct record encodings and the book entries
// they stand for (live books, so their states get a provenance).
func provenanceRecords(from, n int) ([][]byte, []crdt.Entry) {
	recs := make([][]byte, n)
	for i := range recs {
		recs[i] = binary.BigEndian.AppendUint64([]byte("state "), uint64(from+i))
	}
	return recs, make([]crdt.Entry, n)
}

func TestProvenance(t *testing.T) {
	var p provenance
	recs, entries := provenanceRecords(0, 5000)
	seq := func(i int) uint64 { return uint64(100 + i) }
	p.add(1, 7, seq, recs, entries)
	// A state sent again by another device keeps its first source.
	p.add(2, 9, func(int) uint64 { return 1 }, recs[:10], entries[:10])
	for i, r := range recs {
		src, ok := p.source(r)
		if want := (source{1, mark{7, uint64(100 + i)}}); !ok || src != want {
			t.Fatalf("state %d: source %+v, %v; want %+v", i, src, ok, want)
		}
	}
	if _, ok := p.source([]byte("never sent")); ok {
		t.Error("a state never added has a source")
	}
	have := map[crdt.DeviceID]mark{1: {7, 150}}
	if !p.coveredBy(have, recs[50]) || p.coveredBy(have, recs[51]) {
		t.Error("a full mark at 150 must cover the state at 150 and not the one at 151")
	}
	if p.coveredBy(map[crdt.DeviceID]mark{1: {8, 1 << 40}}, recs[0]) {
		t.Error("a mark of another epoch covers a state")
	}
	// A state that collection may take out gets no provenance.
	tomb := crdt.BookEntry(crdt.Book{Deleted: crdt.Timestamp{Wall: 5, Device: 1}})
	if !crdt.MayBeCollected(&tomb) {
		t.Fatal("the test's tombstone is not one collection may take")
	}
	p.add(1, 7, seq, [][]byte{[]byte("a delete")}, []crdt.Entry{tomb})
	if _, ok := p.source([]byte("a delete")); ok {
		t.Error("a state that may be collected has a provenance")
	}
}

// The table stays within its bound whatever is added, and keeps what was
// added last: a relay needs the provenance of the states it merged lately.
func TestProvenanceBounded(t *testing.T) {
	var p provenance
	seq := func(int) uint64 { return 1 }
	const batch = 512
	total := 3 * provenanceMax
	for from := 0; from < total; from += batch {
		recs, entries := provenanceRecords(from, batch)
		p.add(1, 1, seq, recs, entries)
		if len(p.slots) > provenanceMax {
			t.Fatalf("%d slots after %d states, bound %d", len(p.slots), from+batch, provenanceMax)
		}
	}
	if len(p.slots) != provenanceMax {
		t.Errorf("%d slots after %d states, want the bound %d", len(p.slots), total, provenanceMax)
	}
	// The newest half of a table's worth: a state in a full table is
	// pushed out by one in 131,072 of the states added after it (1 - 1/e
	// of them after a table's worth), so about 21% of these are gone.
	recent, _ := provenanceRecords(total-provenanceMax/2, provenanceMax/2)
	lost := 0
	for _, r := range recent {
		if _, ok := p.source(r); !ok {
			lost++
		}
	}
	if lost > len(recent)*3/10 {
		t.Errorf("%d of the last %d states forgotten", lost, len(recent))
	}
	t.Logf("%d of the last %d states forgotten", lost, len(recent))
}

// A library that fits keeps every state: the table grows before a set
// fills, and at its bound a state moves to its other set to make room.
// Several libraries, as two choices alone lost about one state in each.
func TestProvenanceKeepsAllThatFit(t *testing.T) {
	n := provenanceMax * 3 / 4
	for lib := range 4 {
		var p provenance
		recs, entries := provenanceRecords(lib*n, n)
		p.add(1, 1, func(int) uint64 { return 1 }, recs, entries)
		lost := 0
		for _, r := range recs {
			if _, ok := p.source(r); !ok {
				lost++
			}
		}
		if lost > 0 {
			t.Errorf("library %d: %d of %d states forgotten by a table of %d slots", lib, lost, n, len(p.slots))
		}
	}
}

// Each state's source comes back whole though a slot keeps only an index
// of its device and epoch, and the list of those stays bounded: a table
// that would name more forgets everything and starts again.
func TestProvenanceOrigins(t *testing.T) {
	if size := unsafe.Sizeof(provenanceSlot{}); size != 16 {
		t.Errorf("a provenance slot takes %d bytes; the table's bound is sized for 16", size)
	}
	var p provenance
	const devices, epochs = 5, 3
	for d := range devices {
		for e := range epochs {
			recs, entries := provenanceRecords(1000*(d*epochs+e), 10)
			p.add(crdt.DeviceID(d+1), uint64(e+1), func(i int) uint64 { return uint64(i) }, recs, entries)
		}
	}
	for d := range devices {
		for e := range epochs {
			recs, _ := provenanceRecords(1000*(d*epochs+e), 10)
			for i, r := range recs {
				want := source{crdt.DeviceID(d + 1), mark{uint64(e + 1), uint64(i)}}
				if src, ok := p.source(r); !ok || src != want {
					t.Fatalf("device %d epoch %d state %d: source %+v, %v; want %+v", d+1, e+1, i, src, ok, want)
				}
			}
		}
	}
	if len(p.origins) != devices*epochs {
		t.Errorf("%d origins for %d devices of %d epochs", len(p.origins), devices, epochs)
	}
	// The largest sequence number a slot holds comes back whole; a larger
	// one is not remembered.
	big, bigEntries := provenanceRecords(1<<29, 2)
	p.add(1, 1, func(i int) uint64 { return 1<<seqBits - 1 + uint64(i) }, big, bigEntries)
	if src, ok := p.source(big[0]); !ok || src != (source{1, mark{1, 1<<seqBits - 1}}) {
		t.Errorf("the state at the largest sequence number has source %+v, %v", src, ok)
	}
	if src, ok := p.source(big[1]); ok {
		t.Errorf("a state numbered past a slot's bits has source %+v", src)
	}

	first, firstEntries := provenanceRecords(1<<30, 1)
	p.add(1, 1, func(int) uint64 { return 1 }, first, firstEntries)
	for e := range uint64(maxOrigins) {
		recs, entries := provenanceRecords(1<<31+int(e), 1)
		p.add(9, 100+e, func(int) uint64 { return 1 }, recs, entries)
		if len(p.origins) > maxOrigins {
			t.Fatalf("%d origins, bound %d", len(p.origins), maxOrigins)
		}
	}
	if _, ok := p.source(first[0]); ok {
		t.Error("a table that reached its bound of origins still holds what came before")
	}
	last, _ := provenanceRecords(1<<31+maxOrigins-1, 1)
	if src, ok := p.source(last[0]); !ok || src != (source{9, mark{100 + maxOrigins - 1, 1}}) {
		t.Errorf("the last state added has source %+v, %v", src, ok)
	}
}

// A stream waits at the gate while its holder takes batches, however long
// that lasts, and gives up once the holder has taken none for the gate's
// wait.
func TestCatchUpGateWaitsForProgress(t *testing.T) {
	ctx := context.Background()
	g := catchUpGate{wait: time.Second}
	holder, waiter := new(peerState), new(peerState)
	if _, err := g.acquire(ctx, holder); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := g.acquire(ctx, waiter); err != nil {
			t.Error(err)
		}
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); <-tick.C {
		g.progress(holder)
		select {
		case <-done:
			t.Fatal("the waiter gave up while the holder took batches")
		default:
		}
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the waiter still waits a minute after the holder took its last batch")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.holder != holder {
		t.Error("the waiter took the gate from a holder that had not let go")
	}
}
