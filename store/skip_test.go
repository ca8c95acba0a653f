package store

import (
	"context"
	"errors"
	"testing"

	"github.com/danyue/danyue/crdt"
)

func TestSkipPast(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := Open(ctx, dir, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 1, 10, 1), pos(t, 2, 10, 1)}})
	_, ch := s.Watch()
	if err := s.SkipPast(ctx, 1); err != nil || s.LastSeq() != 2 {
		t.Fatalf("SkipPast below LastSeq: %v, LastSeq %d, want 2", err, s.LastSeq())
	}
	if err := s.SkipPast(ctx, maxSkip+1); !errors.Is(err, crdt.ErrInvalid) {
		t.Fatalf("SkipPast far ahead: %v, want ErrInvalid", err)
	}
	if err := s.SkipPast(ctx, 40); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Error("Watch not told of the skip")
	}
	if got := s.LastSeq(); got != 40 {
		t.Fatalf("LastSeq %d after SkipPast(40)", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The skip outlives a reopen, and the next change comes after it.
	s = open(t, dir, Options{})
	if got := s.LastSeq(); got != 40 {
		t.Fatalf("LastSeq %d after a reopen, want 40", got)
	}
	res := apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 3, 10, 1)}})
	if len(res.Changed) != 1 || res.Changed[0].Seq != 41 {
		t.Fatalf("change after the skip: %+v, want sequence 41", res.Changed)
	}
	seqs, _ := since(t, s, 2, 0)
	if len(seqs) != 1 || seqs[0] != 41 {
		t.Errorf("Since(2) = %v, want [41]", seqs)
	}
}
