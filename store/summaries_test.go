package store

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/danyue/danyue/crdt"
)

func TestSavedSummariesOutliveAReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, Options{})
	if list, err := s.Summaries(ctx); err != nil || list != nil {
		t.Fatalf("a new store's summaries: %v, %v; want none", list, err)
	}
	apply(t, s, Batch{Entries: []crdt.Entry{fullBook(t, 1, 1000)}})
	last := s.LastSeq()
	first := []crdt.Summary{{Device: dev + 1, Epoch: 3, Seq: 10, At: crdt.Timestamp{Wall: 2000, Device: dev + 1},
		Cursors: []crdt.Cursor{{Device: dev, Epoch: s.Epoch(), Seq: last}}}}
	second := []crdt.Summary{
		{Device: dev + 1, Epoch: 3, Seq: 12, At: crdt.Timestamp{Wall: 3000, Device: dev + 1}},
		{Device: dev + 2, Epoch: 5, Seq: 1, At: crdt.Timestamp{Wall: 3000, Device: dev + 2}},
	}
	for _, list := range [][]crdt.Summary{first, second} {
		if err := s.SaveSummaries(ctx, list); err != nil {
			t.Fatal(err)
		}
	}
	if s.LastSeq() != last {
		t.Fatalf("saving summaries took a sequence number: %d, was %d", s.LastSeq(), last)
	}
	s.Close()
	s = open(t, dir, Options{})
	got, err := s.Summaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, second) {
		t.Fatalf("after a reopen: %+v\nwant the last saved %+v", got, second)
	}
	if seqs, _ := since(t, s, 0, 0); len(seqs) != 1 {
		t.Fatalf("saved summaries are shipped as changes: %v", seqs)
	}
}

// A save starts no sync of its own: the next change's sync (a purge's, in
// the collection loop) makes it durable with that change.
func TestSavedSummariesRideTheNextSync(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, Options{})
	list := []crdt.Summary{{Device: dev + 1, Epoch: 3, Seq: 7, At: crdt.Timestamp{Wall: 2000, Device: dev + 1}}}
	s = ridesTheNextSync(t, s, dir, func() error { return s.SaveSummaries(ctx, list) })
	if got, err := s.Summaries(ctx); err != nil || !reflect.DeepEqual(got, list) {
		t.Fatalf("after a reopen: %+v, %v; want %+v", got, err, list)
	}
}

func TestDamagedSavedSummaries(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir(), Options{})
	if _, err := s.Apply(ctx, Batch{summaries: []byte{0xa1, 0x01}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Summaries(ctx); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged summaries: %v, want ErrCorrupt", err)
	}
	if err := s.SaveSummaries(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if list, err := s.Summaries(ctx); err != nil || len(list) != 0 {
		t.Fatalf("after saving none over the damage: %v, %v", list, err)
	}
}
