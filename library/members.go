package library

import (
	"cmp"
	"slices"
	"sync"

	"github.com/danyue/danyue/crdt"
)

// Who is in the library: the member set. The members are replicated
// records (crdt.Member, one per device of the library); membership.go says
// who writes them. A removal (danyue forget) wins over every addition, and
// the peer layer's gater refuses a removed device's connections on every
// member that has merged the removal.
//
// Every decision that depends on membership asks the set, and nothing
// else:
//
//   - removed: the gater of every node refuses the device
//     (peer.Config.Removed);
//   - current: a restricted node admits the device (peer.Config.Admit), a
//     new secret it offers is taken (rotate.go), its summary counts for
//     collection and is gossiped (summaries.go);
//   - admitted (membership.go): the word of a device the gater let in
//     counts (its summaries, its residues), adding it first if it is not
//     known yet.

// memberSet is the member records of the library this device is in. It
// has a lock of its own: the gater reads it on libp2p's goroutines for
// every dial and connection, and must never wait for another lock.
type memberSet struct {
	mu   sync.RWMutex
	lib  crdt.LibraryID
	byID map[crdt.DeviceID]crdt.Member
	// hinted are devices a member said were removed when it handed over a
	// new secret (rotate.go): refused before the records reach this device.
	hinted map[crdt.DeviceID]bool
}

// reset makes the set that of library lib, holding list.
func (s *memberSet) reset(lib crdt.LibraryID, list []crdt.Member) {
	byID := make(map[crdt.DeviceID]crdt.Member, len(list))
	for _, m := range list {
		byID[m.ID] = m
	}
	s.mu.Lock()
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
	s.lib, s.byID = lib, byID
	s.mu.Unlock()
}

// loadedFor reports whether the set holds the records of library lib.
func (s *memberSet) loadedFor(lib crdt.LibraryID) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byID != nil && s.lib == lib
}

// hint records devices a member said were removed.
func (s *memberSet) hint(ids []crdt.DeviceID) {
	if len(ids) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hinted == nil {
		s.hinted = make(map[crdt.DeviceID]bool)
	}
	for _, id := range ids {
		s.hinted[id] = true
	}
}

// current reports whether device id is a member that was not removed: the
// only devices a restricted node admits, and the only ones whose new
// secret this device takes.
func (s *memberSet) current(id crdt.DeviceID) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m, ok := s.byID[id]
	return ok && !m.Added.IsZero() && !m.IsRemoved() && !s.hinted[id]
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
	m, ok := s.byID[id]
	return (ok && m.IsRemoved()) || s.hinted[id]
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

// update takes the new state of a record, as committed, and reports
// whether the device was removed by it. Records of other libraries are not
// this set's.
func (s *memberSet) update(m crdt.Member) (removedNow bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.Library != s.lib || s.byID == nil {
		return false
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
	return merged.IsRemoved() && !old.IsRemoved()
}
