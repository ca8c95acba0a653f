package library

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/danyue/danyue/crdt"
)

// The rule of bounds.go, with literal times: a writer's bucket gives at
// most its burst at once and its rate after, never refills past the burst
// nor when the clock goes back, and always gives again once a token's
// time has passed; a writer's total is never passed by what is admitted.

func genBounds(t *rapid.T) Bounds {
	return Bounds{
		Burst:     rapid.IntRange(1, 500).Draw(t, "burst"),
		PerMinute: rapid.IntRange(1, 100_000).Draw(t, "perMinute"),
		Total:     rapid.IntRange(1, 500).Draw(t, "total"),
	}
}

// TestBucketRate: over any run of takes at any times, what is taken is at
// most the burst plus what the elapsed time refills, exactly (in
// 1/minuteMs of a record).
func TestBucketRate(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := genBounds(t)
		start := rapid.Uint64Range(0, 1<<45).Draw(t, "start")
		now, taken := start, uint64(0)
		var k bucket
		for range rapid.IntRange(1, 200).Draw(t, "steps") {
			now += rapid.Uint64Range(0, 5_000).Draw(t, "dt")
			for range rapid.IntRange(0, 50).Draw(t, "takes") {
				if k.take(now, b) {
					taken++
				}
			}
			if limit := uint64(b.Burst)*minuteMs + (now-start)*uint64(b.PerMinute); taken*minuteMs > limit {
				t.Fatalf("took %d records in %d ms, past a burst of %d and %d a minute", taken, now-start, b.Burst, b.PerMinute)
			}
		}
	})
}

// TestBucketRefills: a bucket left alone long enough gives exactly its
// burst, and after a refusal it gives again once one token's time passed.
func TestBucketRefills(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := genBounds(t)
		now := rapid.Uint64Range(0, 1<<45).Draw(t, "start")
		var k bucket
		for range rapid.IntRange(0, 1000).Draw(t, "takes before") {
			k.take(now, b)
			now += rapid.Uint64Range(0, 10).Draw(t, "dt")
		}
		now += uint64(b.Burst) * minuteMs // refills any burst at 1 a minute
		got := 0
		for k.take(now, b) {
			got++
		}
		if got != b.Burst {
			t.Fatalf("a bucket left alone gave %d records at once, want its burst %d", got, b.Burst)
		}
		// Refused now; one token's time later (rounded up) it gives one.
		now += (minuteMs + uint64(b.PerMinute) - 1) / uint64(b.PerMinute)
		if !k.take(now, b) {
			t.Fatalf("no token %d ms after a refusal, at %d a minute", (minuteMs+b.PerMinute-1)/b.PerMinute, b.PerMinute)
		}
	})
}

// TestBucketClockBack: a clock that goes back refills nothing, and the
// bucket goes on from where it was once the clock is past it again.
func TestBucketClockBack(t *testing.T) {
	b := Bounds{Burst: 2, PerMinute: 1, Total: 10}
	var k bucket
	const t0 = 10 * minuteMs
	if !k.take(t0, b) || !k.take(t0, b) || k.take(t0, b) {
		t.Fatal("a new bucket does not give exactly its burst")
	}
	if k.take(0, b) {
		t.Fatal("a clock that went back refilled the bucket")
	}
	if k.take(t0+minuteMs-1, b) {
		t.Fatal("a token before its minute passed")
	}
	if !k.take(t0+minuteMs, b) {
		t.Fatal("no token a minute after the bucket was spent")
	}
}

// TestWriterTotal: whatever is admitted, committed or given up, and
// however other writers take records over, the records a writer is the
// last writer of never pass its total by what the bounds admitted.
func TestWriterTotal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := genBounds(t)
		b.Burst = 1 << 20 // only the total here
		w := writerBounds{b: b, counted: true}
		const k, other writerKey = 7, 9
		now := uint64(1)
		for range rapid.IntRange(1, 100).Draw(t, "batches") {
			n := rapid.IntRange(1, 40).Draw(t, "records")
			quick := rapid.Bool().Draw(t, "quick")
			pending := map[writerKey]int{}
			claimed := 0
			w.mu.Lock()
			if quick && w.reserveLocked(k, n, now) {
				pending[k] = n
				claimed = rapid.IntRange(0, n).Draw(t, "claimed")
			} else {
				for range n {
					claims := rapid.Bool().Draw(t, "claims")
					v := w.admitLocked(k, claims, now)
					if v == admitted && claims {
						pending[k]++
						claimed++
					} else if v == admitted {
						// As admitOne does: a token without a place.
						w.get(k).pending++
						pending[k]++
					}
				}
			}
			if rapid.Bool().Draw(t, "committed") {
				for range claimed {
					w.movedLocked(other, rapid.Bool().Draw(t, "was another's"), k, true)
				}
			}
			w.settleLocked(pending)
			// Another writer takes some of k's records over.
			for range rapid.IntRange(0, 3).Draw(t, "taken over") {
				w.movedLocked(k, true, other, true)
			}
			if wr := w.get(k); wr.live > b.Total || wr.pending != 0 {
				t.Fatalf("writer holds %d records, %d pending, past its total %d", wr.live, wr.pending, b.Total)
			}
			w.mu.Unlock()
		}
	})
}

// TestRefusalLogsOncePerMinute: refusals are logged the first time, then
// at most once a minute, with what was refused meanwhile.
func TestRefusalLogsOncePerMinute(t *testing.T) {
	var w writerBounds
	const t0 = 1_000_000
	steps := []struct {
		at, n    uint64
		log      bool
		unlogged uint64
	}{
		{t0, 3, true, 3},
		{t0 + 1, 5, false, 0},
		{t0 + minuteMs - 1, 1, false, 0},
		{t0 + minuteMs, 2, true, 8},
		{t0 + minuteMs + 10, 1, false, 0},
	}
	for i, s := range steps {
		w.mu.Lock()
		r, logNow := w.refusedLocked(7, 7, int(s.n), overRate, s.at)
		w.mu.Unlock()
		if logNow != s.log || (logNow && r.unlogged != s.unlogged) {
			t.Errorf("step %d: log %v with %d refused, want %v with %d", i, logNow, r.unlogged, s.log, s.unlogged)
		}
	}
	if r := w.get(7).refusal; r.total != 12 || r.firstMs != t0 {
		t.Errorf("refusal %+v, want 12 in all since %d", r, t0)
	}
}

// TestUnitTotal: the devices of one unit share its total, whichever of
// them the records are of; a unit that the units' change made larger than
// its total (two merged) takes no place until it is back under it.
func TestUnitTotal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := genBounds(t)
		b.Burst = 1 << 20 // only the total here
		w := writerBounds{b: b, counted: true}
		const rogue, invented, honest writerKey = 7, 8, 9
		gen := uint64(0)
		for range rapid.IntRange(1, 60).Draw(t, "batches") {
			if rapid.IntRange(0, 5).Draw(t, "units change") == 0 {
				gen++
				units := map[crdt.DeviceID]crdt.DeviceID{}
				if rapid.Bool().Draw(t, "invented in the rogue's unit") {
					units[crdt.DeviceID(invented)] = crdt.DeviceID(rogue)
				}
				w.mu.Lock()
				w.setUnitsLocked(gen, units)
				w.mu.Unlock()
			}
			w.mu.Lock()
			before := map[writerKey]int{}
			for _, k := range []writerKey{rogue, invented} {
				before[w.unitLocked(k)] = w.get(w.unitLocked(k)).live
			}
			pending := map[writerKey]int{}
			var claimed []writerKey
			for range rapid.IntRange(1, 40).Draw(t, "records") {
				k := rapid.SampledFrom([]writerKey{rogue, invented}).Draw(t, "writer")
				u := w.unitLocked(k)
				claims := rapid.Bool().Draw(t, "claims")
				switch v := w.admitLocked(u, claims, 1); {
				case v == admitted && claims:
					pending[u]++
					claimed = append(claimed, k)
				case v == admitted:
					w.get(u).pending++
					pending[u]++
				}
			}
			if rapid.Bool().Draw(t, "committed") {
				for _, k := range claimed {
					w.movedLocked(honest, rapid.Bool().Draw(t, "was another's"), k, true)
				}
			}
			w.settleLocked(pending)
			for u, had := range before {
				if wr := w.get(u); wr.live > max(b.Total, had) || wr.pending != 0 {
					t.Fatalf("unit %d holds %d records (%d before), %d pending, past its total %d", u, wr.live, had, wr.pending, b.Total)
				}
			}
			for range rapid.IntRange(0, 3).Draw(t, "taken over") {
				k := rapid.SampledFrom([]writerKey{rogue, invented}).Draw(t, "from")
				if w.live[k] > 0 {
					w.movedLocked(k, true, honest, true)
				}
			}
			w.mu.Unlock()
		}
	})
}

// TestUnitLiveSums: a unit's records are the sum of its devices', through
// any moves and any change of the units.
func TestUnitLiveSums(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var w writerBounds
		keys := []writerKey{0, 1, 2, 3, 4, 5}
		gen := uint64(0)
		for range rapid.IntRange(1, 100).Draw(t, "steps") {
			if rapid.IntRange(0, 4).Draw(t, "units change") == 0 {
				gen++
				units := map[crdt.DeviceID]crdt.DeviceID{}
				for _, k := range keys[1:] {
					units[crdt.DeviceID(k)] = crdt.DeviceID(rapid.SampledFrom(keys[1:]).Draw(t, "unit"))
				}
				// A stale generation changes nothing.
				w.setUnitsLocked(gen-uint64(rapid.IntRange(0, 1).Draw(t, "stale")), units)
				gen = max(gen, w.unitsGen)
			}
			from, to := rapid.SampledFrom(keys).Draw(t, "from"), rapid.SampledFrom(keys).Draw(t, "to")
			had := w.live[from] > 0 && rapid.Bool().Draw(t, "had")
			w.movedLocked(from, had, to, true)
			sums := map[writerKey]int{}
			for k, n := range w.live {
				sums[w.unitLocked(k)] += n
			}
			for u, wr := range w.writers {
				if wr.live != sums[u] {
					t.Fatalf("unit %d counts %d records, its devices %d", u, wr.live, sums[u])
				}
			}
		}
	})
}

// TestResidueRate: the residues one sender's unit hands over are taken at
// most at its bucket's rate, whatever units their records are of, and
// they spend no writer's bucket.
func TestResidueRate(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := genBounds(t)
		b.Residues = rapid.IntRange(1, 500).Draw(t, "residues")
		b.Total = 1 << 20
		w := writerBounds{b: b, counted: true}
		rate := b.residueRate()
		start := rapid.Uint64Range(0, 1<<45).Draw(t, "start")
		now, taken := start, uint64(0)
		for range rapid.IntRange(1, 100).Draw(t, "steps") {
			now += rapid.Uint64Range(0, 60_000).Draw(t, "dt")
			for range rapid.IntRange(0, 50).Draw(t, "residues handed") {
				u := rapid.SampledFrom([]writerKey{0, 7, 9}).Draw(t, "writer unit")
				if w.admitResidueLocked(7, u, false, now) == admitted {
					taken++
				}
			}
			if limit := uint64(rate.Burst)*minuteMs + (now-start)*uint64(rate.PerMinute); taken*minuteMs > limit {
				t.Fatalf("took %d residues in %d ms, past %d at once and %d a minute", taken, now-start, rate.Burst, rate.PerMinute)
			}
		}
		for u, wr := range w.writers {
			if wr.used {
				t.Fatalf("residues spent the bucket of writer unit %d", u)
			}
		}
	})
}
