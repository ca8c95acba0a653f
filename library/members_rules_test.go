package library

import (
	"slices"
	"testing"

	"github.com/danyue/danyue/crdt"
)

// The devices of the member rules' tests: this device, the device that
// made the library, two members and two strangers.
const (
	ruleSelf  crdt.DeviceID = 0x5e1f
	ruleMaker crdt.DeviceID = 0xa
	ruleB     crdt.DeviceID = 0xb
	ruleC     crdt.DeviceID = 0xc
	ruleX     crdt.DeviceID = 0x7
	ruleY     crdt.DeviceID = 0x8
)

var ruleLib = crdt.LibraryID{0x47}

// added is the record of device id added by by in epoch epoch.
func added(id, by crdt.DeviceID, wall, epoch uint64) crdt.Member {
	return crdt.Member{Library: ruleLib, ID: id, Added: crdt.Timestamp{Wall: wall, Device: by}, AddedBy: by, AddedEpoch: epoch}
}

// removedIn is m removed by device by in epoch epoch.
func removedIn(m crdt.Member, by crdt.DeviceID, wall, epoch uint64) crdt.Member {
	m.Removed, m.RemovedEpoch = crdt.Timestamp{Wall: wall, Device: by}, epoch
	return m
}

func rosterOf(ids ...crdt.DeviceID) map[crdt.DeviceID]bool {
	out := map[crdt.DeviceID]bool{}
	for _, id := range ids {
		out[id] = true
	}
	return out
}

// Rule (doc.go, "Who is a member"): a device is a member only through an
// addition a member made, bound to the library's epoch; nothing else
// makes one. Each case is a line of the threat model.
func TestMemberRules(t *testing.T) {
	maker := added(ruleMaker, ruleMaker, 1, 0)
	self := added(ruleSelf, ruleMaker, 2, 0)
	b := added(ruleB, ruleMaker, 3, 0)
	for _, tc := range []struct {
		name    string
		records []crdt.Member
		rules   memberRules
		hinted  []crdt.DeviceID
		want    []crdt.DeviceID
	}{{
		name:    "a device no member added is none, whatever secret it holds (a hello adds nobody)",
		records: []crdt.Member{maker, self, b},
		rules:   memberRules{self: ruleSelf},
		want:    []crdt.DeviceID{ruleMaker, ruleB, ruleSelf},
	}, {
		name:    "an addition by a device that is no member counts for nobody",
		records: []crdt.Member{maker, self, added(ruleX, ruleY, 4, 0)},
		rules:   memberRules{self: ruleSelf},
		want:    []crdt.DeviceID{ruleMaker, ruleSelf},
	}, {
		name:    "a forgotten device is none, and what it added before it was forgotten stays",
		records: []crdt.Member{maker, self, removedIn(b, ruleMaker, 9, 1), added(ruleX, ruleB, 4, 1)},
		rules:   memberRules{self: ruleSelf, epoch: 2},
		want:    []crdt.DeviceID{ruleX, ruleMaker, ruleSelf},
	}, {
		name:    "what a forgotten device claims to add in a later epoch counts for nobody",
		records: []crdt.Member{maker, self, removedIn(b, ruleMaker, 9, 1), added(ruleX, ruleB, 10, 2)},
		rules:   memberRules{self: ruleSelf, epoch: 2},
		want:    []crdt.DeviceID{ruleMaker, ruleSelf},
	}, {
		name:    "with a roster, an addition of an older epoch counts only for the roster (an offline member's partition)",
		records: []crdt.Member{maker, self, added(ruleC, ruleMaker, 4, 1), added(ruleX, ruleC, 5, 1), added(ruleY, ruleMaker, 6, 2)},
		rules:   memberRules{self: ruleSelf, epoch: 2, roster: rosterOf(ruleSelf, ruleMaker, ruleC)},
		want:    []crdt.DeviceID{ruleY, ruleMaker, ruleC, ruleSelf},
	}, {
		name:    "with a roster, a device that added itself is none",
		records: []crdt.Member{maker, self, added(ruleX, ruleX, 5, 0)},
		rules:   memberRules{self: ruleSelf, epoch: 1, roster: rosterOf(ruleSelf, ruleMaker)},
		want:    []crdt.DeviceID{ruleMaker, ruleSelf},
	}, {
		name:    "a device a member said was forgotten is none and adds nobody",
		records: []crdt.Member{maker, self, b, added(ruleX, ruleB, 5, 0)},
		rules:   memberRules{self: ruleSelf},
		hinted:  []crdt.DeviceID{ruleB},
		want:    []crdt.DeviceID{ruleMaker, ruleSelf},
	}, {
		name:  "a joiner holds its inviter for a member until a roster says otherwise",
		rules: memberRules{self: ruleSelf, inviter: ruleMaker},
		want:  []crdt.DeviceID{ruleMaker, ruleSelf},
	}, {
		name:  "a roster that leaves the inviter out wins over the invite's word",
		rules: memberRules{self: ruleSelf, inviter: ruleMaker, epoch: 3, roster: rosterOf(ruleSelf, ruleB)},
		want:  []crdt.DeviceID{ruleB, ruleSelf},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var s memberSet
			s.reset(ruleLib, tc.records, tc.rules)
			s.hint(tc.hinted)
			want := slices.Sorted(slices.Values(tc.want))
			if got := s.currentIDs(); !slices.Equal(got, want) {
				t.Errorf("members %v, want %v", got, want)
			}
		})
	}
}

// A change of the rules (a rotation, a roster learned) reports who stopped
// being a member, and a record that arrives reports who became one.
func TestMemberSetChanges(t *testing.T) {
	var s memberSet
	maker := added(ruleMaker, ruleMaker, 1, 0)
	s.reset(ruleLib, []crdt.Member{maker, added(ruleSelf, ruleMaker, 2, 0), added(ruleX, ruleSelf, 3, 0)}, memberRules{self: ruleSelf})
	ch := s.update(added(ruleY, ruleMaker, 4, 0))
	if !slices.Equal(ch.gained, []crdt.DeviceID{ruleY}) || len(ch.lost) > 0 {
		t.Errorf("an addition: %+v", ch)
	}
	ch = s.setRules(memberRules{self: ruleSelf, epoch: 1, roster: rosterOf(ruleSelf, ruleMaker, ruleY)})
	if !slices.Equal(ch.lost, []crdt.DeviceID{ruleX}) || len(ch.gained) > 0 {
		t.Errorf("a roster that leaves X out: %+v", ch)
	}
	if st := s.standing(ruleX); st.Member || st.Note == "" {
		t.Errorf("X's standing: %+v", st)
	}
	ch = s.update(removedIn(added(ruleY, ruleMaker, 4, 0), ruleMaker, 5, 1))
	if !slices.Equal(ch.lost, []crdt.DeviceID{ruleY}) || !slices.Equal(ch.removed, []crdt.DeviceID{ruleY}) {
		t.Errorf("a removal: %+v", ch)
	}
}
