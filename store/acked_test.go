package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/testfs"
)

// The journal keeps the last ackSlots changes across the ring's wrap, and
// skips slots of another epoch or that fail their checksum.
func TestAckJournalRing(t *testing.T) {
	dir := t.TempDir()
	j, err := openAckJournal(dir, 7)
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	var ents []ackEntry
	for seq := uint64(1); seq <= ackSlots+100; seq++ {
		ents = append(ents, ackEntry{seq: seq, id: []byte{1, byte(seq), byte(seq >> 8)}})
	}
	// In groups of uneven size, as syncs write them, one crossing the wrap.
	for i := 0; i < len(ents); i += 777 {
		if err := j.write(ents[i:min(len(ents), i+777)]); err != nil {
			t.Fatal(err)
		}
	}
	got, ok, err := readAckJournal(dir, 7, 0)
	if err != nil || !ok {
		t.Fatalf("readAckJournal: %v, %v", ok, err)
	}
	want := ents[100:]
	if len(got) != len(want) || got[0].seq != want[0].seq || got[len(got)-1].seq != want[len(want)-1].seq {
		t.Fatalf("got %d entries %d..%d, want %d..%d", len(got), got[0].seq, got[len(got)-1].seq, want[0].seq, want[len(want)-1].seq)
	}
	for i := range got {
		if got[i].seq != want[i].seq || string(got[i].id) != string(want[i].id) {
			t.Fatalf("entry %d: got %v, want %v", i, got[i], want[i])
		}
	}
	if other, _, _ := readAckJournal(dir, 8, 0); len(other) != 0 {
		t.Errorf("another epoch reads %d entries", len(other))
	}
	// A flipped bit voids its slot only.
	data, _ := os.ReadFile(filepath.Join(dir, ackedFile))
	data[slotSize*5+30] ^= 1
	os.WriteFile(filepath.Join(dir, ackedFile), data, 0o600)
	if got, _, _ := readAckJournal(dir, 7, 0); len(got) != len(want)-1 {
		t.Errorf("after a flipped bit: %d entries, want %d", len(got), len(want)-1)
	}
}

// A store that comes back short reports the loss once, names the records,
// forgets its cursors (so peers send everything again), starts a new epoch
// (so that peers pull all of it again: its records sit at older numbers
// than their cursors may say) and continues its sequence after the last
// acknowledged change.
func TestLossFoundAtOpen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{IdleClose: -1})
	ctx := context.Background()
	apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 1, 10, 1)}, Cursor: &Cursor{Device: 5, Epoch: 9, Seq: 3}})
	for i := range 50 {
		apply(t, s, Batch{Entries: []crdt.Entry{pos(t, i, uint64(100+i), 1)}})
	}
	acked := s.LastSeq()
	// What a power cut leaves, then the WAL loses its tail.
	crashed := filepath.Join(t.TempDir(), "store")
	testfs.CopyTree(t, dir, crashed)
	mems, _ := filepath.Glob(filepath.Join(crashed, "db", "*.mem"))
	slices.Sort(mems)
	wal := mems[len(mems)-1]
	truncate(t, wal, writtenLen(t, wal)/2)

	c := open(t, crashed, Options{IdleClose: -1})
	l, ok := c.Loss()
	if !ok {
		t.Fatal("no loss reported")
	}
	if c.Epoch() == s.Epoch() || c.Epoch() != l.Epoch {
		t.Errorf("epoch %d after the loss (reported %d), was %d: want a new one", c.Epoch(), l.Epoch, s.Epoch())
	}
	if l.Acked != acked || l.Kept >= acked || l.Changes() == 0 {
		t.Fatalf("loss %+v, acknowledged up to %d", l, acked)
	}
	if got := c.LastSeq(); got != acked {
		t.Errorf("LastSeq %d after the loss, want %d (the sequence continues after what was acknowledged)", got, acked)
	}
	for _, r := range l.Records {
		if r.Kind() != crdt.KindBook || r.Seq <= l.Kept {
			t.Errorf("lost record %s at %d, kept up to %d", r.Name(), r.Seq, l.Kept)
		}
	}
	if last := l.Records[len(l.Records)-1]; last.Name() != "book "+key(49).String() {
		t.Errorf("last lost record %s, want book %s", last.Name(), key(49))
	}
	if cs, err := c.Cursors(ctx); err != nil || len(cs) != 0 {
		t.Errorf("cursors after a loss: %v, %v; want none", cs, err)
	}
	res := apply(t, c, Batch{Entries: []crdt.Entry{pos(t, 1, 1000, 1)}})
	if res.Changed[0].Seq != acked+1 {
		t.Errorf("next change took seq %d, want %d", res.Changed[0].Seq, acked+1)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = open(t, crashed, Options{IdleClose: -1})
	if l2, ok := c.Loss(); !ok || !l2.FoundAt.Equal(l.FoundAt) || l2.Acked != l.Acked || c.Epoch() != l.Epoch {
		t.Errorf("after a clean restart: loss %+v, %v; want the first report kept, no new one", l2, ok)
	}
}

// A store closed and reopened, or killed and reopened, reports no loss.
func TestNoLossOnCleanReopen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{IdleClose: -1})
	for i := range 20 {
		apply(t, s, Batch{Entries: []crdt.Entry{pos(t, i, uint64(100+i), 1)}})
	}
	crashed := filepath.Join(t.TempDir(), "store")
	testfs.CopyTree(t, dir, crashed)
	s.Close()
	for _, d := range []string{dir, crashed} {
		r := open(t, d, Options{IdleClose: -1})
		if l, ok := r.Loss(); ok {
			t.Errorf("%s: loss %+v reported, nothing was lost", d, l)
		}
	}
}

// Repair moves the database aside, keeps the secrets, and the next Open
// starts anew with another epoch; it refuses while the store is open.
func TestRepair(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	lib := Library{ID: [16]byte{1}, Secret: [32]byte{2}}
	if err := s.SetLibrary(context.Background(), lib); err != nil {
		t.Fatal(err)
	}
	if err := s.SetDeviceName(context.Background(), "书房"); err != nil {
		t.Fatal(err)
	}
	apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 1, 10, 1)}})
	epoch := s.Epoch()
	if _, err := Repair(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("Repair of an open store: %v, want ErrLocked", err)
	}
	s.Close()
	aside, err := Repair(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(aside, "db", manifestName)); err != nil {
		t.Errorf("the old database is not kept: %v", err)
	}
	s = open(t, dir, Options{})
	if got, _ := s.Library(); got != lib {
		t.Errorf("library after repair: %v, want %v", got, lib)
	}
	// Issue 49: the device's name is kept beside its identity.
	if got := s.DeviceName(); got != "书房" {
		t.Errorf("device name after repair: %q, want 书房", got)
	}
	if s.Epoch() == epoch || s.LastSeq() != 0 {
		t.Errorf("after repair: epoch %d (was %d), LastSeq %d; want a new, empty store", s.Epoch(), epoch, s.LastSeq())
	}
	if _, ok := s.Loss(); ok {
		t.Error("a repaired store reports a loss")
	}
}
