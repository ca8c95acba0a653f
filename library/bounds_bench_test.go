package library

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/danyue/danyue/crdt"
)

// BenchmarkApplyFromPeer: batches of new books from a peer, as a device
// that joins takes a library: what the bounds add to each batch (the
// books' writer is within its bounds throughout). Per record.
func BenchmarkApplyFromPeer(b *testing.B) {
	cfg := testConfig(b, b.TempDir(), "V")
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.Bounds = Bounds{Burst: 1 << 40, PerMinute: 1, Total: 1 << 40}
	l := mustDo(Open(ctxT(b), cfg))(b)
	b.Cleanup(func() { l.Close(); cfg.Store.Close() })
	_, writer := deviceKey(b)
	clock := crdt.NewClock(writer, crdt.Timestamp{})
	const batch = 512
	seq := uint64(0)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		entries := make([]crdt.Entry, batch)
		for j := range entries {
			key := crdt.MustParseBookKey(fmt.Sprintf("md5:%032x", i*batch+j+1))
			entries[j] = mustDo(crdt.SetPosition(key, clock.Now(l.wallMs()), uint64(j), 0.5))(b)
		}
		seq += batch
		b.StartTimer()
		if err := (syncStore{l}).ApplyRemote(ctxT(b), writer, 1, seq, entries); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/record")
}
