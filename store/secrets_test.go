package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"slices"
	"testing"
)

func TestLibrarySupersedes(t *testing.T) {
	id, other := [16]byte{1}, [16]byte{2}
	lo, hi := [32]byte{3}, [32]byte{4}
	if a, b := sha256.Sum256(lo[:]), sha256.Sum256(hi[:]); bytes.Compare(a[:], b[:]) > 0 {
		lo, hi = hi, lo
	}
	for _, tc := range []struct {
		name string
		l, o Library
		want bool
	}{
		{"higher epoch", Library{ID: id, Secret: lo, Epoch: 2}, Library{ID: id, Secret: hi, Epoch: 1}, true},
		{"lower epoch", Library{ID: id, Secret: hi, Epoch: 1}, Library{ID: id, Secret: lo, Epoch: 2}, false},
		{"same epoch, larger hash", Library{ID: id, Secret: hi, Epoch: 1}, Library{ID: id, Secret: lo, Epoch: 1}, true},
		{"same epoch, smaller hash", Library{ID: id, Secret: lo, Epoch: 1}, Library{ID: id, Secret: hi, Epoch: 1}, false},
		{"same secret", Library{ID: id, Secret: hi, Epoch: 5}, Library{ID: id, Secret: hi, Epoch: 1}, false},
		{"another library", Library{ID: other, Secret: hi, Epoch: 9}, Library{ID: id, Secret: lo, Epoch: 1}, false},
	} {
		if got := tc.l.Supersedes(tc.o); got != tc.want {
			t.Errorf("%s: Supersedes = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A rotation is durable and keeps the secrets it replaced, newest first and
// bounded; a secret that does not supersede the current one changes
// nothing; moving to another library drops them.
func TestRotateLibrary(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	ctx := context.Background()
	lib := Library{ID: [16]byte{1}, Secret: [32]byte{1}}
	if err := s.SetLibrary(ctx, lib); err != nil {
		t.Fatal(err)
	}
	want := []Library{lib}
	cur := lib
	for i := range maxPrevious + 2 {
		next := Library{ID: lib.ID, Secret: [32]byte{byte(i + 2)}, Epoch: uint64(i + 1)}
		if err := s.RotateLibrary(ctx, next, nil); err != nil {
			t.Fatal(err)
		}
		want = append([]Library{cur}, want...)
		cur = next
	}
	want = want[:maxPrevious]
	if err := s.RotateLibrary(ctx, lib, nil); !errors.Is(err, ErrNotNewer) {
		t.Fatalf("rotating back to an old secret: %v, want ErrNotNewer", err)
	}
	if err := s.SetLibraryEpoch(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, dir, Options{})
	if got, _ := s.Library(); got != cur {
		t.Errorf("after reopening, current %v, want %v", got, cur)
	}
	if got := s.PreviousLibraries(); !slices.Equal(got, want) {
		t.Errorf("previous %v, want %v", got, want)
	}
	if err := s.SetLibraryEpoch(ctx, cur.Epoch+3, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Library(); got.Epoch != cur.Epoch+3 || got.Secret != cur.Secret {
		t.Errorf("after SetLibraryEpoch: %v", got)
	}
	if err := s.DropPreviousLibraries(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.PreviousLibraries(); len(got) != 0 {
		t.Errorf("previous after drop: %v", got)
	}
	if err := s.RotateLibrary(ctx, Library{ID: [16]byte{9}, Secret: [32]byte{9}, Epoch: 99}, nil); !errors.Is(err, ErrNotNewer) {
		t.Errorf("rotating to another library's secret: %v, want ErrNotNewer", err)
	}
}
