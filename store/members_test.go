package store

import (
	"context"
	"testing"

	"github.com/danyue/danyue/crdt"
)

// Issue 15: member records are stored and merged like every other record,
// survive a reopen, and Members returns those of one library only.
func TestMembers(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	lib, other := crdt.LibraryID{1}, crdt.LibraryID{2}
	at := func(wall uint64, dev crdt.DeviceID) crdt.Timestamp { return crdt.Timestamp{Wall: wall, Device: dev} }
	mustEntry := func(e crdt.Entry, err error) crdt.Entry {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	apply(t, s, Batch{Entries: []crdt.Entry{
		mustEntry(crdt.AddMember(lib, 0xa, at(1, 0xa), 0)),
		mustEntry(crdt.AddMember(lib, 0xb, at(2, 0xa), 0)),
		mustEntry(crdt.AddMember(other, 0xc, at(3, 0xc), 0)),
	}})
	apply(t, s, Batch{Entries: []crdt.Entry{
		mustEntry(crdt.RemoveMember(lib, 0xb, at(5, 0xa), 0)),
		mustEntry(crdt.AddMember(lib, 0xb, at(6, 0xb), 0)), // too late: removed for good
	}})
	s.Close()
	s = open(t, dir, Options{})
	got, err := s.Members(context.Background(), lib)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != 0xa || got[1].ID != 0xb {
		t.Fatalf("Members = %+v, want devices a and b", got)
	}
	if !got[0].IsMember() || !got[1].IsRemoved() || got[1].AddedBy != 0xa {
		t.Fatalf("Members = %+v: want a a member, b added by a and removed", got)
	}
}
