package library

import "github.com/danyue/danyue/crdt"

// Whose bounds a writer's records spend: its charge unit.
//
// A member may add devices, and each device it adds is a member that
// writes. Were every writer bounded as itself, a member that means harm
// would add (or mint the records of) devices of its own making and write
// through each of them, with bounds of its own each: what it writes in all
// would grow with the devices it invents. So a writer is bounded together
// with the device that added it, and that one with its own adder, up the
// "added by" chain (crdt.Member.AddedBy), as far as one of these:
//
//   - a device this device added itself: this device's owner paired it
//     here, and vouches for it, so it is a unit of its own (and the
//     devices it added are in its unit);
//   - this device;
//   - a device whose adder this device does not count as a member that is
//     or was (a device that made the library adds itself, the inviter this
//     device joined by may have no record yet): the chain ends there;
//   - a chain that comes back on itself (two devices that each added the
//     other, in different epochs): its devices are one unit, under the
//     smallest id among them.
//
// The device where the chain ends is the unit, and names it. A member and
// every device it added, transitively, are then in one unit, whichever
// member it is: unless it is this device itself, or was added through
// it, every device it added is in the unit of the first device on its
// chain above it that ends the walk, which is its own unit's. So a member
// plus any number of devices it invents spend one device's bounds in all.
// This is the finest split that holds for every member: since any member
// could be the one that means harm, the devices added through a member
// that this device did not add itself can never have bounds apart from
// it.
//
// What honest use pays for it: each device sees the devices it added as
// units of their own, and every other one in the unit of the top of its
// chain. Devices are usually all added by the one device a person starts
// with, so on that device each has bounds of its own, as before, and on
// each of the others all the rest share one device's bounds. Those are
// sized for a whole library written through one device (bounds.go), so a
// join and normal use fit in them; what they cost is a device writing too
// much there holding back, for as long as it does, the records of the
// others in its unit (delayed, never lost: refused records are offered
// again).
//
// A device forgotten is still in the chains it was in: the devices it
// added before its removal stay members (doc.go) and stay in its unit,
// so forgetting a member frees nothing it invented into bounds of their
// own. The chain is what the member records say, and those are written by
// their adder, as itself (membership.go): a member that stamps records
// with another device's id (a modified build) can claim additions it did
// not make, as it can claim another's writes (bounds.go).

// chargeUnits returns the unit of every device that counts (a member now
// or a removed one, counts), under the rule above, for a device self whose
// member records are byID. Devices that do not count are absent: their
// records share the bounds of id 0 (bounds.go). It is pure, and linear in
// byID.
func chargeUnits(self crdt.DeviceID, byID map[crdt.DeviceID]crdt.Member, counts func(crdt.DeviceID) bool) map[crdt.DeviceID]crdt.DeviceID {
	units := make(map[crdt.DeviceID]crdt.DeviceID, len(byID)+1)
	if counts(self) {
		units[self] = self
	}
	var path []crdt.DeviceID
	onPath := make(map[crdt.DeviceID]int)
	for id := range byID {
		if _, done := units[id]; done || !counts(id) {
			continue
		}
		path = path[:0]
		clear(onPath)
		cur := id
		var unit crdt.DeviceID
		for {
			if u, done := units[cur]; done {
				unit = u
				break
			}
			if at, ok := onPath[cur]; ok {
				unit = minID(path[at:])
				break
			}
			onPath[cur] = len(path)
			path = append(path, cur)
			m := byID[cur]
			adder := m.AddedBy
			if m.Added.IsZero() || adder == cur || adder == self || !counts(adder) {
				unit = cur
				break
			}
			cur = adder
		}
		for _, d := range path {
			units[d] = unit
		}
	}
	return units
}

func minID(ids []crdt.DeviceID) crdt.DeviceID {
	m := ids[0]
	for _, id := range ids[1:] {
		m = min(m, id)
	}
	return m
}
