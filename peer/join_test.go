package peer

import (
	"fmt"
	"testing"
	"time"

	"github.com/danyue/danyue/internal/poll"
	ma "github.com/multiformats/go-multiaddr"
)

// joined is what a device joining a library moved.
type joined struct {
	received, sent uint64 // records
	bytes          uint64 // sync bytes received
}

// joinLibrary starts others devices sharing books books, all connected to
// each other and converged, then a new device that dials all of them, and
// returns what the new device received and sent until every store holds the
// same records and every other device has merged everything the new one has.
func joinLibrary(t testing.TB, books, others int, opts ...func(*Config)) joined {
	t.Helper()
	// What the devices know of each other settles soon after their syncs.
	opts = append(opts, func(c *Config) { c.caughtEvery = 50 * time.Millisecond })
	lib := newLib(t)
	devs := make([]*device, others)
	var addrs []ma.Multiaddr
	var stores []*memStore
	for i := range devs {
		devs[i] = newDevice(t, fmt.Sprintf("D%d", i))
		if i == 0 {
			if err := devs[i].store.fill(books); err != nil {
				t.Fatal(err)
			}
		}
		devs[i].start(t, lib, addrs, opts...)
		addrs = append(addrs, devs[i].node.Addrs()...)
		stores = append(stores, devs[i].store)
	}
	poll.Until(t, "the library to converge", 5*time.Minute, func() bool {
		return stores[others-1].len() == books && converged(stores...)
	})
	// Settled: every device has merged all of every other and knows it
	// (a full mark, knowledge.go), so the library is quiet when the new
	// device joins.
	poll.Until(t, "the library to settle", time.Minute, func() bool {
		for _, d := range devs {
			for _, o := range devs {
				if d != o && (!mergedAll(d.node, o) || !knowsAll(d.node, o)) {
					return false
				}
			}
		}
		return true
	})
	return joinNew(t, lib, devs, addrs, books, opts...)
}

// joinNew starts a new device in lib that dials addrs, the devices devs
// sharing books books, and returns what it received and sent until every
// store holds the same records and every device of devs has merged
// everything the new one has.
func joinNew(t testing.TB, lib Library, devs []*device, addrs []ma.Multiaddr, books int, opts ...func(*Config)) joined {
	t.Helper()
	nd := newDevice(t, "new")
	nd.start(t, lib, addrs, opts...)
	stores := []*memStore{nd.store}
	for _, d := range devs {
		stores = append(stores, d.store)
	}
	poll.Until(t, "the new device to have every book", 5*time.Minute, func() bool {
		return nd.store.len() == books && converged(stores...)
	})
	poll.Until(t, "the others to have merged the new device", time.Minute, func() bool {
		for _, d := range devs {
			if !mergedAll(d.node, nd) {
				return false
			}
		}
		return true
	})
	st := nd.node.Stats()
	return joined{received: st.RecordsReceived, sent: st.RecordsSent, bytes: st.BytesReceived}
}

// knowsAll reports whether n holds a full mark of everything in d's store.
func knowsAll(n *Node, d *device) bool {
	last, _ := d.store.Watch()
	n.kn.mu.Lock()
	defer n.kn.mu.Unlock()
	m, ok := n.kn.full[DeviceIDOf(d.id)]
	return ok && m.lineage == d.lineage() && m.seq >= last
}

// A device joining a library shared by several devices takes each record
// about once, not once per device it meets, and sends nothing back.
func TestJoinReceivesEachRecordOnce(t *testing.T) {
	for _, others := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d others", others), func(t *testing.T) {
			const books = 600
			j := joinLibrary(t, books, others)
			t.Logf("joined %d books shared by %d: received %d records (%d bytes), sent %d", books, others, j.received, j.bytes, j.sent)
			if limit := uint64(books * 11 / 10); j.received > limit {
				t.Errorf("received %d records for %d books; the bound is %d", j.received, books, limit)
			}
			if j.sent != 0 {
				t.Errorf("sent %d records back to devices that had them", j.sent)
			}
		})
	}
}

// The joining device's received records, at library sizes: run with
// -bench=Join -benchtime=1x.
func BenchmarkJoin(b *testing.B) {
	for _, books := range []int{1_000, 10_000, 100_000} {
		for _, others := range []int{2, 5} {
			b.Run(fmt.Sprintf("books=%d/others=%d", books, others), func(b *testing.B) {
				var j joined
				for b.Loop() {
					j = joinLibrary(b, books, others, quiet)
				}
				b.ReportMetric(float64(j.received), "records-received")
				b.ReportMetric(float64(j.sent), "records-sent")
				b.ReportMetric(float64(j.bytes)/float64(books), "bytes-received/book")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// A device that joins right after a burst of writes sends none of them
// back either. The devices that hold the library have merged the writes,
// but have not yet said so in a Caught frame (those wait for a quiet
// second, and come at most every 10 s): what they tell the joining device
// of their own stores when they start pulling from it must already cover
// the writes.
func TestJoinRightAfterWritesSendsNothingBack(t *testing.T) {
	for _, others := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d others", others), func(t *testing.T) {
			const books = 600
			lib := newLib(t)
			devs := make([]*device, others)
			var addrs []ma.Multiaddr
			for i := range devs {
				devs[i] = newDevice(t, fmt.Sprintf("D%d", i))
				devs[i].start(t, lib, addrs, quiet)
				addrs = append(addrs, devs[i].node.Addrs()...)
			}
			poll.Until(t, "the devices to meet", time.Minute, func() bool {
				for _, d := range devs {
					for _, o := range devs {
						if d != o && !mergedAll(d.node, o) {
							return false
						}
					}
				}
				return true
			})
			w := devs[0]
			if err := w.store.fill(books); err != nil {
				t.Fatal(err)
			}
			// Each knows it has all of the others' stores from their
			// batches (relays held back are resolved within deferWindow),
			// not from Caught frames.
			poll.Until(t, "every device to have merged every other", time.Minute, func() bool {
				for _, d := range devs {
					for _, o := range devs {
						last, _ := o.store.Watch()
						if d != o && !d.node.kn.hasAll(DeviceIDOf(o.id), mark{o.lineage(), last}) {
							return false
						}
					}
				}
				return true
			})
			j := joinNew(t, lib, devs, addrs, books, quiet)
			t.Logf("joined right after %d writes shared by %d: received %d records, sent %d", books, others, j.received, j.sent)
			if limit := uint64(books * 11 / 10); j.received > limit {
				t.Errorf("received %d records for %d books; the bound is %d", j.received, books, limit)
			}
			if j.sent != 0 {
				t.Errorf("sent %d records back to devices that had them", j.sent)
			}
		})
	}
}
