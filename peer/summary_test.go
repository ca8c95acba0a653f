package peer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

// gossip collects the summaries a node receives.
type gossip struct {
	mu   sync.Mutex
	from []crdt.DeviceID
	got  [][]crdt.Summary
}

func (g *gossip) take(from crdt.DeviceID, list []crdt.Summary) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.from, g.got = append(g.from, from), append(g.got, list)
}

func (g *gossip) list() ([]crdt.DeviceID, [][]crdt.Summary) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.from), slices.Clone(g.got)
}

func testSummary(d crdt.DeviceID, seq uint64) crdt.Summary {
	return crdt.Summary{
		Device: d, Epoch: 7, Seq: seq,
		At:      crdt.Timestamp{Wall: 1_700_000_000_000 + seq, Device: d},
		Cursors: []crdt.Cursor{{Device: d + 1, Epoch: 3, Seq: seq * 2}},
	}
}

// Issue 15: summaries go to a peer when it connects and on demand, and a
// device a node's gater refuses neither gets nor gives any.
func TestSummaryGossip(t *testing.T) {
	lib := newLib(t)
	a, b, c := newDevice(t, "A"), newDevice(t, "B"), newDevice(t, "C")
	aDev, cDev := DeviceIDOf(a.id), DeviceIDOf(c.id)
	var atA, atB, atC gossip
	first := []crdt.Summary{testSummary(aDev, 5)}
	a.start(t, lib, nil, func(cfg *Config) {
		cfg.Summaries = func() []crdt.Summary { return first }
		cfg.OnSummaries = atA.take
		cfg.Removed = func(d crdt.DeviceID) bool { return d == cDev }
	})
	b.start(t, lib, a.node.Addrs(), func(cfg *Config) { cfg.OnSummaries = atB.take })
	c.start(t, lib, a.node.Addrs(), func(cfg *Config) { cfg.OnSummaries = atC.take })
	poll.Until(t, "B to receive A's summaries on connecting", 10*time.Second, func() bool { f, _ := atB.list(); return len(f) == 1 })
	next := []crdt.Summary{testSummary(aDev, 9)}
	sent, err := a.node.GossipSummaries(t.Context(), next)
	if err != nil || sent != 1 {
		t.Fatalf("GossipSummaries sent to %d peers (%v), want B alone", sent, err)
	}
	poll.Until(t, "B to receive the second", 10*time.Second, func() bool { f, _ := atB.list(); return len(f) == 2 })
	from, got := atB.list()
	if from[0] != aDev || from[1] != aDev || got[0][0].Seq != 5 || got[1][0].Seq != 9 || len(got[1][0].Cursors) != 1 {
		t.Fatalf("B received %+v from %v", got, from)
	}
	if f, _ := atC.list(); len(f) != 0 {
		t.Fatalf("a refused device received %d lists", len(f))
	}
	if f, _ := atA.list(); len(f) != 0 {
		t.Fatalf("A received %d lists from peers with nothing to send", len(f))
	}
}

// A message is refused, before its body is read, if its length is out of
// bounds, and whole if its body is not a canonical list of summaries.
func TestReadSummaryMessage(t *testing.T) {
	good, err := encodeSummaryMessage([]crdt.Summary{testSummary(3, 1), testSummary(9, 2)})
	if err != nil {
		t.Fatal(err)
	}
	list, err := readSummaryMessage(bytes.NewReader(good))
	if err != nil || len(list) != 2 || list[1].Device != 9 {
		t.Fatalf("read back %+v, %v", list, err)
	}
	huge := binary.BigEndian.AppendUint32(nil, crdt.MaxEncodedSummaries+1)
	corrupt := slices.Clone(good)
	corrupt[len(corrupt)-1] ^= 0xff
	for _, tc := range []struct {
		name string
		msg  []byte
	}{
		{"empty", []byte{0, 0, 0, 0}},
		{"too long", huge},
		{"not CBOR", append(binary.BigEndian.AppendUint32(nil, 3), 1, 2, 3)},
		{"corrupt", corrupt},
		{"truncated", good[:len(good)-1]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := readSummaryMessage(bytes.NewReader(tc.msg)); err == nil {
				t.Fatal("accepted")
			} else if tc.name != "truncated" && !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v does not wrap ErrProtocol", err)
			}
		})
	}
	if _, err := encodeSummaryMessage([]crdt.Summary{testSummary(9, 1), testSummary(3, 1)}); err == nil {
		t.Fatal("encoded an unsorted list")
	}
}

// residue returns the encoding of what is left of book i once collected.
func residue(t *testing.T, i int, deleted crdt.Timestamp) []byte {
	t.Helper()
	e := crdt.BookEntry(crdt.Book{Key: bookKey(i), Deleted: deleted})
	b, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Issue 15: residues reach a connected member whole, and the sender learns
// that they did; a stream that carries anything but residues is refused at
// that record, and a receiver that cannot apply them says so.
func TestSendResidues(t *testing.T) {
	lib := newLib(t)
	a, b := newDevice(t, "A"), newDevice(t, "B")
	var (
		mu     sync.Mutex
		got    []crdt.Entry
		refuse bool
	)
	a.start(t, lib, nil)
	b.start(t, lib, a.node.Addrs(), func(cfg *Config) {
		cfg.OnResidues = func(_ context.Context, _ crdt.DeviceID, es []crdt.Entry) error {
			mu.Lock()
			defer mu.Unlock()
			if refuse {
				return errors.New("store failed")
			}
			got = append(got, es...)
			return nil
		}
	})
	received := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
	bDev := DeviceIDOf(b.id)
	poll.Until(t, "A to be connected to B", 10*time.Second, func() bool { return len(a.node.host.Network().ConnsToPeer(b.id)) > 0 })
	del := crdt.Timestamp{Wall: 1_700_000_000_000, Device: DeviceIDOf(a.id)}
	var records [][]byte
	for i := range residueChunk + 3 {
		records = append(records, residue(t, i, del))
	}
	if err := a.node.SendResidues(t.Context(), bDev, records); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "B to take every residue", 10*time.Second, func() bool { return received() == len(records) })

	at := crdt.Position{Char: 5, At: crdt.Timestamp{Wall: del.Wall + 1, Device: del.Device}}
	live := crdt.BookEntry(crdt.Book{Key: bookKey(9999), Position: at, Furthest: at})
	liveEnc, err := live.Encode()
	if err != nil {
		t.Fatal(err)
	}
	// B resets the stream at the live record.
	if err := a.node.SendResidues(t.Context(), bDev, [][]byte{residue(t, 5000, del), liveEnc, residue(t, 5001, del)}); err == nil {
		t.Fatal("SendResidues reported a stream B refused as handed over")
	}
	poll.Until(t, "B to take the residue before the live record", 10*time.Second, func() bool { return received() == len(records)+1 })
	mu.Lock()
	refuse = true
	mu.Unlock()
	if err := a.node.SendResidues(t.Context(), bDev, records[:2]); !errors.Is(err, ErrResiduesRefused) {
		t.Fatalf("SendResidues to a receiver whose store failed: %v, want ErrResiduesRefused", err)
	}
	if err := a.node.SendResidues(t.Context(), crdt.DeviceID(12345), records); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("SendResidues to an unknown device: %v, want ErrNotConnected", err)
	}
}

// A signed summary goes signed only to a peer whose hello said it reads
// signatures (capSignedSummaries); an older build, which refuses a message
// that carries one, and a peer not heard from yet get it without.
func TestSignedSummariesOnlyToThoseThatReadThem(t *testing.T) {
	d := newDevice(t, "A")
	d.start(t, newLib(t), nil, func(*Config) {})
	signed := testSummary(DeviceIDOf(d.id), 3)
	signed.Sig, signed.Key = bytes.Repeat([]byte{1}, 64), bytes.Repeat([]byte{2}, 36)
	msgs, err := encodeSummaryMessages([]crdt.Summary{signed})
	if err != nil {
		t.Fatal(err)
	}
	newer, older, unknown := newDeviceID(t), newDeviceID(t), newDeviceID(t)
	d.node.noteCaps(newer, ourCaps)
	d.node.noteCaps(older, 0)
	for _, tc := range []struct {
		name   string
		p      lpeer.ID
		signed bool
	}{{"a peer that reads signatures", newer, true}, {"an older build", older, false}, {"a peer not heard from", unknown, false}} {
		got, err := readSummaryMessage(bytes.NewReader(d.node.summaryFor(tc.p, msgs)))
		if err != nil || len(got) != 1 || (got[0].Sig != nil) != tc.signed || got[0].Seq != 3 {
			t.Errorf("%s: got %+v, %v; want signed %v", tc.name, got, err, tc.signed)
		}
	}
}
