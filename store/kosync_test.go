package store

import (
	"context"
	"testing"

	"github.com/danyue/danyue/crdt"
)

// Issue 8: the kosync records are records like the others: stored, scanned
// by kind, and counted in a full Since, which checks that it read as many
// records as the store holds.
func TestKosyncRecordsAreCounted(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	user, err := crdt.SetKosyncUser(ts(1), "alice", "v1:00:11")
	if err != nil {
		t.Fatal(err)
	}
	progress, err := crdt.SetKosyncProgress(ts(2), crdt.KosyncProgress{User: "alice", Document: "d", Progress: "p", Percentage: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	apply(t, s, Batch{Entries: []crdt.Entry{pos(t, 1, 1, 1), user, progress}})
	if _, entries := since(t, s, 0, 0); len(entries) != 3 {
		t.Fatalf("a full Since found %d records, want 3", len(entries))
	}
	for kind, want := range map[crdt.Kind]int{crdt.KindBook: 1, crdt.KindKosyncUser: 1, crdt.KindKosyncProgress: 1, crdt.KindDevice: 0} {
		n := 0
		if err := s.Scan(context.Background(), kind, func(crdt.Entry) error { n++; return nil }); err != nil || n != want {
			t.Errorf("Scan(%v) = %d records, %v; want %d", kind, n, err, want)
		}
	}
	if e, ok := get(t, s, idOf(progress)); !ok || e.KosyncProgress.Progress != "p" {
		t.Errorf("Get(progress) = %+v, %v", e, ok)
	}
}
