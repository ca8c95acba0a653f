package library

import (
	"fmt"
	"maps"
	"testing"

	"pgregory.net/rapid"

	"github.com/danyue/danyue/crdt"
)

// The charge rule of bounds_units.go, against a naive model: the units
// are the groups that "D was added by A" joins, for every device D that
// counts, added by a device A that counts and is neither D nor this
// device; each group is named by the device where its chains end, or the
// smallest id of the cycle it holds.

// memberGraph is a set of member records of small ids, this device among
// them, with the devices that count.
type memberGraph struct {
	self   crdt.DeviceID
	byID   map[crdt.DeviceID]crdt.Member
	counts map[crdt.DeviceID]bool
}

func genMemberGraph(t *rapid.T) memberGraph {
	n := rapid.IntRange(1, 14).Draw(t, "devices")
	g := memberGraph{
		self:   crdt.DeviceID(rapid.IntRange(1, n).Draw(t, "self")),
		byID:   map[crdt.DeviceID]crdt.Member{},
		counts: map[crdt.DeviceID]bool{},
	}
	g.counts[g.self] = true
	for id := crdt.DeviceID(1); id <= crdt.DeviceID(n); id++ {
		if id != g.self && rapid.IntRange(0, 5).Draw(t, fmt.Sprintf("counts %d", id)) > 0 {
			g.counts[id] = true
		}
		if rapid.IntRange(0, 7).Draw(t, fmt.Sprintf("record %d", id)) == 0 {
			continue // no record: a roster's or an inviter's device, say
		}
		m := crdt.Member{ID: id}
		if rapid.IntRange(0, 7).Draw(t, fmt.Sprintf("added %d", id)) > 0 {
			// Ids up to n+2: some adders have no record and never count.
			m.AddedBy = crdt.DeviceID(rapid.IntRange(1, n+2).Draw(t, fmt.Sprintf("adder %d", id)))
			m.Added = crdt.Timestamp{Wall: 1, Device: m.AddedBy}
		}
		g.byID[id] = m
	}
	return g
}

// edge returns the device that d is charged with, under the model: its
// adder, if that joins them.
func (g *memberGraph) edge(d crdt.DeviceID) (crdt.DeviceID, bool) {
	m, ok := g.byID[d]
	if !ok || !g.counts[d] || d == g.self || m.Added.IsZero() {
		return 0, false
	}
	a := m.AddedBy
	return a, a != d && a != g.self && g.counts[a]
}

// model works out the units naively: union the edges, then name each
// group by its end or by its cycle's smallest id.
func (g *memberGraph) model() map[crdt.DeviceID]crdt.DeviceID {
	parent := map[crdt.DeviceID]crdt.DeviceID{}
	var find func(crdt.DeviceID) crdt.DeviceID
	find = func(d crdt.DeviceID) crdt.DeviceID {
		if p, ok := parent[d]; ok && p != d {
			return find(p)
		}
		return d
	}
	for d := range g.counts {
		parent[d] = d
	}
	for d := range g.counts {
		if a, ok := g.edge(d); ok {
			parent[find(d)] = find(a)
		}
	}
	name := map[crdt.DeviceID]crdt.DeviceID{}
	for d := range g.counts {
		if _, ok := g.edge(d); !ok {
			name[find(d)] = d // the end of the group's chains
		}
	}
	for d := range g.counts {
		r := find(d)
		if _, ok := name[r]; ok {
			continue
		}
		// No end: the chains run into one cycle. Walk it from d.
		cur := d
		for range len(g.counts) {
			cur, _ = g.edge(cur)
		}
		low := cur
		for c, _ := g.edge(cur); c != cur; c, _ = g.edge(c) {
			low = min(low, c)
		}
		name[r] = low
	}
	units := map[crdt.DeviceID]crdt.DeviceID{}
	for d := range g.counts {
		units[d] = name[find(d)]
	}
	return units
}

func (g *memberGraph) units() map[crdt.DeviceID]crdt.DeviceID {
	return chargeUnits(g.self, g.byID, func(d crdt.DeviceID) bool { return g.counts[d] })
}

// TestChargeUnitsModel: the units are the model's, device by device.
func TestChargeUnitsModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := genMemberGraph(t)
		got, want := g.units(), g.model()
		for d, u := range want {
			// A device the rule leaves out is a unit of its own in the
			// bounds (writerBounds.unitLocked).
			have, ok := got[d]
			if !ok {
				have = d
			}
			if have != u {
				t.Fatalf("device %d is in unit %d, want %d (units %v, records %v, self %d)", d, have, u, got, g.byID, g.self)
			}
		}
		for d := range got {
			if !g.counts[d] {
				t.Fatalf("device %d does not count, and has unit %d", d, got[d])
			}
		}
	})
}

// TestInventedDevicesShareOneUnit: whichever member means harm, it and
// every device added through it (not through this device) are one unit;
// what this device added itself is a unit of its own, as it is.
func TestInventedDevicesShareOneUnit(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := genMemberGraph(t)
		got := g.units()
		units := map[crdt.DeviceID]crdt.DeviceID{}
		for d := range g.counts {
			units[d] = d
		}
		maps.Copy(units, got)
		if units[g.self] != g.self {
			t.Fatalf("this device is in unit %d", units[g.self])
		}
		for d, m := range g.byID {
			if g.counts[d] && !m.Added.IsZero() && m.AddedBy == g.self && d != g.self && units[d] != d {
				t.Fatalf("device %d, added by this device, is in unit %d", d, units[d])
			}
		}
		for r := range g.counts {
			if r == g.self {
				continue
			}
			// Every device whose chain reaches r, r's inventions.
			for d := range g.counts {
				cur, seen := d, map[crdt.DeviceID]bool{}
				for cur != r && !seen[cur] {
					seen[cur] = true
					a, ok := g.edge(cur)
					if !ok {
						break
					}
					cur = a
				}
				if cur == r && units[d] != units[r] {
					t.Fatalf("device %d, added through %d, is in unit %d, and %d in unit %d", d, r, units[d], r, units[r])
				}
			}
		}
	})
}

// A rogue added by this device, forgotten, and the devices it added
// before: they stay members, and in its unit.
func TestForgottenAddersUnitStays(t *testing.T) {
	const v, r, d1, d2, other = 1, 2, 3, 4, 5
	added := func(id, by crdt.DeviceID) crdt.Member {
		return crdt.Member{ID: id, AddedBy: by, Added: crdt.Timestamp{Wall: 1, Device: by}}
	}
	rogue := added(r, v)
	rogue.Removed = crdt.Timestamp{Wall: 2, Device: v}
	var s memberSet
	s.reset(crdt.LibraryID{1}, []crdt.Member{added(v, v), rogue, added(d1, r), added(d2, d1), added(other, v)}, memberRules{self: v})
	if !s.current(d1) || !s.current(d2) || s.current(r) {
		t.Fatalf("members %v, want the rogue's devices still in and the rogue out", s.currentIDs())
	}
	units, _, _ := s.unitsAfter(0)
	for _, d := range []crdt.DeviceID{r, d1, d2} {
		if units[d] != r {
			t.Errorf("device %d is in unit %d, want the forgotten rogue's %d", d, units[d], r)
		}
	}
	if units[other] != other || units[v] != v {
		t.Errorf("units %v: the others are units of their own", units)
	}
}
