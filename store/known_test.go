package store

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The address book outlives a reopen, takes no sequence number, and a save
// past its bounds is refused and changes nothing.
func TestKnownAddrsOutliveAReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, Options{})
	if list, err := s.KnownAddrs(ctx); err != nil || list != nil {
		t.Fatalf("a new store's address book: %v, %v; want none", list, err)
	}
	last := s.LastSeq()
	book := []Known{
		{Peer: "12D3KooWA", Addrs: []string{"/ip4/192.168.1.5/tcp/4001", "/dns4/home.example.net/tcp/4001"}, Seen: time.UnixMilli(1_800_000_000_000)},
		{Peer: "12D3KooWB", Addrs: []string{"/ip4/10.0.0.2/tcp/4001"}, Seen: time.UnixMilli(1_800_000_001_000)},
	}
	if err := s.SaveKnown(ctx, book); err != nil {
		t.Fatal(err)
	}
	if s.LastSeq() != last {
		t.Fatalf("saving the address book took a sequence number: %d, was %d", s.LastSeq(), last)
	}
	many := make([]string, MaxKnownAddrs+1)
	for i := range many {
		many[i] = fmt.Sprintf("/ip4/10.0.0.%d/tcp/1", i)
	}
	tooMany := make([]Known, MaxKnown+1)
	for i := range tooMany {
		tooMany[i] = Known{Peer: fmt.Sprint("p", i), Addrs: []string{"/ip4/10.0.0.1/tcp/1"}}
	}
	for _, bad := range []struct {
		name string
		list []Known
	}{
		{"too many devices", tooMany},
		{"too many addresses", []Known{{Peer: "p", Addrs: many}}},
		{"long address", []Known{{Peer: "p", Addrs: []string{strings.Repeat("a", 300)}}}},
		{"no peer", []Known{{Addrs: []string{"/ip4/10.0.0.1/tcp/1"}}}},
	} {
		if err := s.SaveKnown(ctx, bad.list); err == nil {
			t.Errorf("%s: saved", bad.name)
		}
	}
	s.Close()
	s = open(t, dir, Options{})
	got, err := s.KnownAddrs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		got[i].Seen = got[i].Seen.In(book[i].Seen.Location())
	}
	if !reflect.DeepEqual(got, book) {
		t.Fatalf("after a reopen: %+v, want %+v", got, book)
	}
}
