package library

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/danyue/danyue/crdt"
)

// Who is in the library: the member set. The members are replicated
// records (crdt.Member, one per device of the library); membership.go says
// who writes them, and doc.go the rules by which a record makes a member.
// A removal (danyue forget) wins over every addition, and the peer layer's
// gater refuses a removed device's connections on every member that has
// merged the removal.
//
// Every decision that depends on membership asks the set, and nothing
// else:
//
//   - removed: the gater of every node refuses the device
//     (peer.Config.Removed);
//   - current: the device is given anything at all (peer.Config.Member:
//     synced with, offered a secret, sent summaries and residues), a
//     restricted node admits it (peer.Config.Admit), a new secret it offers
//     is taken (rotate.go), its summary counts for collection and is
//     gossiped (summaries.go), and it is named in the roster of the next
//     epoch when this device rotates.

// memberSet is the member records of the library this device is in, the
// rules that say which of them make members now, and the devices they
// make members (counted). It has a lock of its own: the gater reads it on
// libp2p's goroutines for every dial and connection, and must never wait
// for another lock.
type memberSet struct {
	mu   sync.RWMutex
	lib  crdt.LibraryID
	byID map[crdt.DeviceID]crdt.Member
	// hinted are devices a member said were removed when it handed over a
	// new secret (rotate.go): refused before the records reach this device.
	hinted  map[crdt.DeviceID]bool
	rules   memberRules
	counted map[crdt.DeviceID]bool
	// units is the charge unit of every device that counts (bounds_units.go),
	// worked out with counted; gen tells each working out from the last.
	units map[crdt.DeviceID]crdt.DeviceID
	gen   uint64
}

// memberRules is what, besides the records, decides who is a member:
// this device, the library's epoch, that epoch's roster, and the inviter
// this device joined by.
type memberRules struct {
	self  crdt.DeviceID
	epoch uint64
	// roster is the members the device that moved this one to epoch named
	// (or this device's own, if it rotated); nil when none is known: the
	// secret never rotated, or an older build told the epoch.
	roster map[crdt.DeviceID]bool
	// inviter is the device whose invite this device joined by: trusted
	// here as a member from the join on, before any record says so.
	inviter crdt.DeviceID
}

// strict reports whether additions made before the epoch count only for
// the roster's devices: whenever a roster is known.
func (r *memberRules) strict() bool { return r.roster != nil && r.epoch > 0 }

// setChange is how the devices that count as members changed.
type setChange struct {
	gained, lost []crdt.DeviceID
	removed      []crdt.DeviceID // removed by the record just taken
}

// reset makes the set that of library lib, holding list, under rules.
func (s *memberSet) reset(lib crdt.LibraryID, list []crdt.Member, rules memberRules) setChange {
	byID := make(map[crdt.DeviceID]crdt.Member, len(list))
	for _, m := range list {
		byID[m.ID] = m
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if lib != s.lib {
		s.hinted = nil // hints are about one library
	} else {
		// A change committed while the list was read may have reached
		// the set already: merge, never go back.
		for id, m := range s.byID {
			if read, ok := byID[id]; ok {
				m.Merge(&read)
			}
			byID[id] = m
		}
	}
	s.lib, s.byID, s.rules = lib, byID, rules
	return s.recomputeLocked()
}

// setRules replaces the rules (a new epoch, its roster) and reports how
// the members changed.
func (s *memberSet) setRules(rules memberRules) setChange {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = rules
	return s.recomputeLocked()
}

// loadedFor reports whether the set holds the records of library lib.
func (s *memberSet) loadedFor(lib crdt.LibraryID) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byID != nil && s.lib == lib
}

// hint records devices a member said were removed.
func (s *memberSet) hint(ids []crdt.DeviceID) setChange {
	if len(ids) == 0 {
		return setChange{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hinted == nil {
		s.hinted = make(map[crdt.DeviceID]bool)
	}
	for _, id := range ids {
		s.hinted[id] = true
	}
	return s.recomputeLocked()
}

// current reports whether device id is a member now: the only devices
// given anything.
func (s *memberSet) current(id crdt.DeviceID) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.counted[id]
}

// currentIDs returns the members, this device included, in id order.
func (s *memberSet) currentIDs() []crdt.DeviceID {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]crdt.DeviceID, 0, len(s.counted))
	for id := range s.counted {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// removedIDs returns the removed devices.
func (s *memberSet) removedIDs() []crdt.DeviceID {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []crdt.DeviceID
	for id, m := range s.byID {
		if m.IsRemoved() {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// removed reports whether device id was removed from the library: what
// the gater asks (peer.Config.Removed).
func (s *memberSet) removed(id crdt.DeviceID) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.removedLocked(id)
}

func (s *memberSet) removedLocked(id crdt.DeviceID) bool {
	m, ok := s.byID[id]
	return (ok && m.IsRemoved()) || s.hinted[id]
}

// counts reports whether device id is a member now or was one until it was
// removed: a writer that the bounds count as itself (bounds.go).
func (s *memberSet) counts(id crdt.DeviceID) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.countsLocked(id)
}

func (s *memberSet) countsLocked(id crdt.DeviceID) bool {
	m, ok := s.byID[id]
	return s.counted[id] || (ok && m.IsRemoved())
}

func (s *memberSet) get(id crdt.DeviceID) (crdt.Member, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m, ok := s.byID[id]
	return m, ok
}

func (s *memberSet) library() crdt.LibraryID {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.lib
}

func (s *memberSet) epoch() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rules.epoch
}

// list returns every record of the library, in device id order.
func (s *memberSet) list() []crdt.Member {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]crdt.Member, 0, len(s.byID))
	for _, m := range s.byID {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b crdt.Member) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// update takes the new state of a record, as committed, and reports how
// the members changed. Records of other libraries are not this set's.
func (s *memberSet) update(m crdt.Member) setChange {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.Library != s.lib || s.byID == nil {
		return setChange{}
	}
	// The commits of concurrent batches report their changes in no fixed
	// order, so a record's older state can arrive after its newer one:
	// merge (the records are a CRDT) rather than replace.
	old, ok := s.byID[m.ID]
	merged := m
	if ok {
		merged = old
		merged.Merge(&m)
	}
	s.byID[m.ID] = merged
	ch := s.recomputeLocked()
	if merged.IsRemoved() && !old.IsRemoved() {
		ch.removed = []crdt.DeviceID{m.ID}
	}
	return ch
}

// recomputeLocked works out who is a member under the rules (doc.go,
// "Who is a member") and returns how that changed. s.mu must be held.
//
// The devices reached are the base (this device, and the roster, or
// without one the inviter and the devices that added themselves: the one
// that made the library) and every device an addition reached from them may
// count for; the members are those reached and not removed. A removed
// device is still reached (what it added before its removal counts), but
// its additions count only up to the epoch it was removed in, and a device
// a member only hinted was removed adds nobody.
func (s *memberSet) recomputeLocked() setChange {
	r := &s.rules
	strict := r.strict()
	reached := make(map[crdt.DeviceID]bool, len(s.byID)+len(r.roster)+2)
	var queue []crdt.DeviceID
	reach := func(id crdt.DeviceID) {
		if id != 0 && !reached[id] {
			reached[id] = true
			queue = append(queue, id)
		}
	}
	reach(r.self)
	if !strict {
		// Until a member has told this device the epoch's roster, which
		// names the inviter, the inviter is taken at the invite's word.
		reach(r.inviter)
	}
	for id := range r.roster {
		reach(id)
	}
	byAdder := make(map[crdt.DeviceID][]crdt.DeviceID)
	for id, m := range s.byID {
		switch {
		case m.Added.IsZero():
		case m.AddedBy == id:
			if !strict {
				reach(id) // the device that made the library
			}
		case strict && m.AddedEpoch < r.epoch:
			// Made before the epoch: the roster says whether it still
			// counts.
		default:
			byAdder[m.AddedBy] = append(byAdder[m.AddedBy], id)
		}
	}
	for len(queue) > 0 {
		adder := queue[0]
		queue = queue[1:]
		if s.hinted[adder] {
			continue
		}
		am, removed := s.byID[adder]
		removed = removed && am.IsRemoved()
		for _, id := range byAdder[adder] {
			if removed && s.byID[id].AddedEpoch > am.RemovedEpoch {
				continue // claimed after the adder was removed
			}
			reach(id)
		}
	}
	counted := make(map[crdt.DeviceID]bool, len(reached))
	for id := range reached {
		if !s.removedLocked(id) {
			counted[id] = true
		}
	}
	var ch setChange
	for id := range counted {
		if !s.counted[id] {
			ch.gained = append(ch.gained, id)
		}
	}
	for id := range s.counted {
		if !counted[id] {
			ch.lost = append(ch.lost, id)
		}
	}
	slices.Sort(ch.gained)
	slices.Sort(ch.lost)
	s.counted = counted
	if units := chargeUnits(r.self, s.byID, s.countsLocked); !maps.Equal(units, s.units) {
		s.units = units
		s.gen++
	}
	return ch
}

// unitsAfter returns the charge units of the devices that count, and their
// generation, if they were worked out again since generation gen.
func (s *memberSet) unitsAfter(gen uint64) (map[crdt.DeviceID]crdt.DeviceID, uint64, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.gen == gen {
		return nil, gen, false
	}
	return maps.Clone(s.units), s.gen, true
}

// Standing is what a device's record is worth now, for a person: whether
// it makes the device a member, and if not, why.
type Standing struct {
	Member bool
	// Note says why a device is not a member, or what it is waiting for.
	Note string
}

// standing says what device id's record is worth under the rules.
func (s *memberSet) standing(id crdt.DeviceID) Standing {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m := s.byID[id]
	r := &s.rules
	switch {
	case m.IsRemoved():
		return Standing{}
	case s.hinted[id]:
		return Standing{Note: "a member said it was forgotten; its record has not arrived yet"}
	case s.counted[id] && id == r.self && (m.Added.IsZero() || m.AddedBy == id) && r.inviter != 0:
		return Standing{Member: true, Note: "joining: the inviter has not confirmed this device yet"}
	case s.counted[id]:
		return Standing{Member: true}
	case m.Added.IsZero():
		return Standing{Note: "no member added it"}
	case r.strict() && m.AddedEpoch < r.epoch:
		return Standing{Note: fmt.Sprintf("added in epoch %d, and the library's secret changed since without it (a device was forgotten or left while it was being paired): pair it again", m.AddedEpoch)}
	}
	adder := s.byID[m.AddedBy]
	if adder.IsRemoved() {
		return Standing{Note: "added by a device that was forgotten, after it was"}
	}
	return Standing{Note: "added by a device that is not a member"}
}
