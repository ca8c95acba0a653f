package peer

import (
	"context"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// A puller that speaks an older protocol is not sent the records its
// version would refuse (kosync links before version 3, members before 4):
// it gets the rest,
// and its cursor moves past what it was not sent.
func TestOlderPullerGetsOnlyKindsItKnows(t *testing.T) {
	for _, tc := range []struct {
		proto   protocol.ID
		links   bool
		members bool
	}{
		{"/danyue/sync/3", true, false},
		{"/danyue/sync/2", false, false},
		{"/danyue/sync/1", false, false},
		{ProtocolID, true, true},
	} {
		t.Run(string(tc.proto), func(t *testing.T) {
			lib := newLib(t)
			a := newDevice(t, "A")
			if err := a.store.fill(1); err != nil {
				t.Fatal(err)
			}
			link, err := crdt.LinkKosyncDocument(a.store.now(), "0b229176d4e8db7f6d2b5a4952368d7a", bookKey(0), "a.txt")
			if err != nil {
				t.Fatal(err)
			}
			if err := a.store.write(link); err != nil {
				t.Fatal(err)
			}
			member, err := crdt.AddMember(crdt.LibraryID(lib.ID), DeviceIDOf(a.id), DeviceIDOf(a.id), a.store.now())
			if err != nil {
				t.Fatal(err)
			}
			if err := a.store.write(member); err != nil {
				t.Fatal(err)
			}
			if err := a.store.fill(1); err != nil { // a later change, after the link
				t.Fatal(err)
			}
			a.start(t, lib, nil)
			r := rawHost(t, lib)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			if err := r.Connect(ctx, lpeer.AddrInfo{ID: a.id, Addrs: a.node.host.Addrs()}); err != nil {
				t.Fatal(err)
			}
			s, err := r.NewStream(ctx, a.id, tc.proto)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Reset()
			version := streamVersion(s)
			writeRaw(t, s, helloBody(t, &wireHello{Version: version, Library: lib.ID[:], Device: uint64(DeviceIDOf(r.ID())), Epoch: 5, WantEpoch: a.store.Epoch()}))
			if f, err := readRaw(s); err != nil || f.Hello == nil {
				t.Fatalf("hello: %+v, %v", f, err)
			}
			if version >= 4 {
				writeRaw(t, s, startBody(t, a.store.Epoch(), 0))
			}
			var kinds []crdt.Kind
			var seq uint64
			last, _ := a.store.Watch()
			for seq < last {
				f, err := readRaw(s)
				if err == nil && f.Caught != nil {
					continue
				}
				if err != nil || f.Batch == nil {
					t.Fatalf("batch: %+v, %v", f, err)
				}
				for _, rec := range f.Batch.Records {
					kinds = append(kinds, crdt.KindOfEncoded(rec))
				}
				seq = f.Batch.Seq
			}
			sawLink, sawMember := false, false
			for _, k := range kinds {
				sawLink = sawLink || k == crdt.KindKosyncLink
				sawMember = sawMember || k == crdt.KindMember
			}
			if sawLink != tc.links || sawMember != tc.members {
				t.Errorf("version %d puller got kinds %v; links sent: %v, want %v; members sent: %v, want %v", version, kinds, sawLink, tc.links, sawMember, tc.members)
			}
			if len(kinds) == 0 || kinds[len(kinds)-1] != crdt.KindBook {
				t.Errorf("the change after the link did not arrive: %v", kinds)
			}
		})
	}
}
