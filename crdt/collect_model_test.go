package crdt_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/danyue/danyue/crdt"
)

// The properties the model of collect_sim_test.go must keep, after every
// step and once every device has caught up, and the tests that run it.

// check is the property after every step: each device shows every book
// as its shadow (everything it ever received, uncollected) does.
func (s *collectSim) check() error {
	for _, d := range s.devices {
		for k, sh := range d.shadow {
			v, has := d.view(k)
			if err := sameVisible(v, has, sh); err != nil {
				return fmt.Errorf("device %s, book %s: %w", d.id, k, err)
			}
		}
	}
	return nil
}

// sameVisible compares what a device holds of a book (has: anything) with
// the uncollected book: it must be shown or hidden alike (a device that
// shows a book its uncollected state deletes resurrected it; one that hides
// a book its uncollected state shows lost a write), and if shown, equal to
// it in every field: collection may never show, after a later write, less
// than the uncollected book would.
func sameVisible(v crdt.Book, has bool, sh crdt.Book) error {
	vis := has && v.Visible()
	switch {
	case vis && !sh.Visible():
		return fmt.Errorf("resurrected: shows %+v, though it holds the delete %+v", v, sh)
	case !vis && sh.Visible():
		return fmt.Errorf("lost a write: hides the book (holds %+v), uncollected it shows %+v", v, sh)
	case !vis:
		return nil
	case !equalBooks(v, sh):
		return fmt.Errorf("shows %+v, uncollected %+v", v, sh)
	}
	return nil
}

// catchUp brings every device online and syncs every member with every
// other, collecting between rounds, until nothing changes; then the members
// must agree, show what the library knows, and have collected every deleted
// book.
func (s *collectSim) catchUp() error {
	for _, d := range s.devices {
		s.collectedBeforeCatchUp += d.collected
	}
	s.logf("catch up")
	for _, d := range s.devices {
		d.online = true
	}
	s.now += 30 * day // so that the timer rule, too, collects all it would
	var ms []*cDevice
	for _, d := range s.devices {
		if d.member {
			ms = append(ms, d)
		}
	}
	stable := 0
	for round := 0; round < 40 && stable < 2; round++ {
		before := s.fingerprint(ms)
		for _, a := range ms {
			for _, b := range ms {
				if a != b {
					s.pull(a, b, 0)
				}
			}
		}
		for _, d := range ms {
			s.collect(d, 1<<30)
		}
		if err := s.check(); err != nil {
			return err
		}
		if s.fingerprint(ms) == before {
			stable++
		} else {
			stable = 0
		}
	}
	if stable < 2 {
		return fmt.Errorf("the members did not settle in 40 rounds")
	}
	// What the library as a whole knows: every member's uncollected state.
	lib := map[crdt.BookKey]crdt.Book{}
	for _, d := range ms {
		for k, b := range d.shadow {
			l := lib[k]
			if l.Key.IsZero() {
				l = crdt.Book{Key: k}
			}
			l.Merge(&b)
			lib[k] = l
		}
	}
	first := ms[0]
	for _, d := range ms {
		for k, l := range lib {
			v, has := d.view(k)
			if err := sameVisible(v, has, l); err != nil {
				return fmt.Errorf("after catching up, device %s, book %s: %w", d.id, k, err)
			}
			// Members hold equal records. A member may lack the residue
			// of a book it never held again after a restore (its old
			// cursors skip where the book was collected): it shows
			// nothing, and an old copy reaching it is sent on and answered
			// by those that hold the residue.
			f, fhas := first.view(k)
			_, rec := d.records[k]
			_, frec := first.records[k]
			if (rec || frec || has && fhas) && !equalBooks(v, f) {
				return fmt.Errorf("after catching up, devices %s and %s differ on %s: %+v and %+v", d.id, first.id, k, v, f)
			}
			if r, ok := d.records[k]; ok && !r.book.Visible() {
				return fmt.Errorf("after catching up, device %s still holds deleted book %s (seq %d), which every member holds", d.id, k, r.seq)
			}
		}
	}
	return nil
}

func equalBooks(a, b crdt.Book) bool {
	ea, eb := crdt.BookEntry(a), crdt.BookEntry(b)
	if a.Key.IsZero() || b.Key.IsZero() {
		return a.Key.IsZero() == b.Key.IsZero()
	}
	x, _ := ea.Encode()
	y, _ := eb.Encode()
	return string(x) == string(y)
}

func (s *collectSim) fingerprint(ms []*cDevice) string {
	out := ""
	for _, d := range ms {
		out += fmt.Sprintf("%s:%d:%d:%d;", d.id, d.seq, len(d.records), len(d.residues))
	}
	return out
}

// rapidChooser draws from rapid.
type rapidChooser struct{ t *rapid.T }

func (c rapidChooser) intn(label string, n int) int {
	return rapid.IntRange(0, n-1).Draw(c.t, label)
}

// seededChooser draws from a seeded generator.
type seededChooser struct{ r *rand.Rand }

func (c seededChooser) intn(_ string, n int) int { return c.r.IntN(n) }

// TestCollectModel is the model check (see the top of this file): rapid
// draws whole histories, shrinks any that breaks a property to a short one,
// and prints its steps.
//
//	go test ./crdt -run TestCollectModel -rapid.checks=20000
func TestCollectModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := newCollectSim(rapidChooser{rt}, ruleStable)
		if err := s.run(rapid.IntRange(5, 120).Draw(rt, "steps")); err != nil {
			rt.Fatalf("%v\nhistory:\n  %s", err, strings.Join(s.steps, "\n  "))
		}
	})
}

// TestCollectModelCatchesWrongRules shows the model check can fail: with
// each deliberately wrong rule, some history among the first 2000 of a
// fixed seed breaks a property, and the search for it stops there. The
// right rule passes all 2000, and collects books before the final catch-up
// in enough of them for the check to be worth something.
func TestCollectModelCatchesWrongRules(t *testing.T) {
	if testing.Short() {
		t.Skip("thousands of histories for the right rule")
	}
	const histories = 2000
	history := func(i int, r rule) (*collectSim, error) {
		s := newCollectSim(seededChooser{rand.New(rand.NewPCG(uint64(i), 15))}, r)
		return s, s.run(60)
	}
	t.Run(ruleStable.String(), func(t *testing.T) {
		collecting := 0
		for i := range histories {
			s, err := history(i, ruleStable)
			if err != nil {
				t.Fatalf("history %d: %v (%d steps)", i, err, len(s.steps))
			}
			if s.collectedBeforeCatchUp > 0 {
				collecting++
			}
		}
		if collecting < histories/6 {
			t.Fatalf("only %d of %d histories collected anything before the final catch-up: the check is too weak", collecting, histories)
		}
		t.Logf("%d of %d histories collected books before the final catch-up", collecting, histories)
	})
	for _, r := range []rule{ruleTimer, ruleIgnoreMember, ruleNoResidue, ruleAbsorbAll, ruleTrimResidue} {
		t.Run(r.String(), func(t *testing.T) {
			for i := range histories {
				if s, err := history(i, r); err != nil {
					t.Logf("caught by history %d: %v (%d steps)", i, err, len(s.steps))
					return
				}
			}
			t.Fatalf("the wrong rule %s passed all %d histories: the model check cannot tell", r, histories)
		})
	}
}
