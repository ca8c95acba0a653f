package crdt

import (
	"cmp"
	"slices"
)

// KindMember records hold who belongs to a library.
const KindMember Kind = 6

// LibraryID names a library; it is not secret. A member record belongs to
// one library, so that what a device learned in a library it left (its
// members, who was forgotten there) says nothing about the one it is in now.
type LibraryID [16]byte

// MaxMemberNames bounds the name history of a member: the newest names are
// kept. A position older than every kept name shows the oldest kept one.
const MaxMemberNames = 16

// Member is one device's membership of a library: who added it, when and
// in which epoch of the library's secret, whether it was removed, and the
// names it has had. It is keyed by (library, device).
//
//	Added, AddedBy, AddedEpoch
//	                the addition of the newest epoch wins, then the
//	                earliest, then the smaller adder: a device is added by
//	                the member that paired it, in the epoch it paired it
//	                in, or by itself when it made the library. What an
//	                addition is worth (whether the device is a member now)
//	                is not the record's to say: an addition made before a
//	                rotation of the secret counts only for a device the
//	                rotation carried over, which the library decides
//	                (library/doc.go). So a device paired again in a later
//	                epoch takes that epoch's addition, and an older one
//	                never hides it.
//	Removed, RemovedEpoch
//	                the earliest removal wins (then the older epoch); once
//	                removed, a device is removed for good, whatever
//	                additions come later: a removal wins. Removed.Device is
//	                the device that removed it, RemovedEpoch the epoch of
//	                the library's secret it was removed in: what the device
//	                added in that epoch or before may still count, what it
//	                claims to add in a later one never does (library/doc.go).
//	Names           grow-only set of name writes, of which the newest
//	                MaxMemberNames are kept: the name at any time is the
//	                newest write at or before it, so a rename never rewrites
//	                what history showed
//
// Each field is a semilattice (max then min, min, bounded union), so the
// record is one.
//
// An addition is written by its adder: AddedBy is the device of Added.
// Records of older builds may say otherwise (a joiner recorded its
// inviter's addition itself); they carry no epoch, and an addition that
// carries one must be its adder's own.
type Member struct {
	Library LibraryID
	ID      DeviceID

	Added   Timestamp // zero in a record that only names or removes
	AddedBy DeviceID  // zero exactly when Added is
	// AddedEpoch is the epoch of the library's secret the addition was
	// made in: 0 for a library whose secret never rotated, and in records
	// of older builds.
	AddedEpoch uint64
	Removed    Timestamp // zero while a member
	// RemovedEpoch is the epoch of the library's secret the removal was
	// made in: 0 before the secret first rotated, and in records of older
	// builds.
	RemovedEpoch uint64
	Names        []Text // ascending by (At, Value), no duplicates, each written
}

// MemberEntry wraps a member record.
func MemberEntry(m Member) Entry { return Entry{Kind: KindMember, Member: m} }

// IsMember reports whether the device was added and not removed.
func (m *Member) IsMember() bool { return !m.Added.IsZero() && m.Removed.IsZero() }

// IsRemoved reports whether the device was removed.
func (m *Member) IsRemoved() bool { return !m.Removed.IsZero() }

// Name returns the device's newest name, "" if it never had one.
func (m *Member) Name() string {
	if len(m.Names) == 0 {
		return ""
	}
	return m.Names[len(m.Names)-1].Value
}

// NameAt returns the name the device had at t: the newest name written at
// or before t, else the oldest name known (history older than what is kept,
// or a write made before the device named itself), "" if it has none.
func (m *Member) NameAt(t Timestamp) string {
	i, _ := slices.BinarySearchFunc(m.Names, t, func(n Text, t Timestamp) int {
		if n.At.After(t) {
			return 1
		}
		return -1
	})
	switch {
	case i > 0:
		return m.Names[i-1].Value
	case len(m.Names) > 0:
		return m.Names[0].Value
	}
	return ""
}

// AddMember records, as of at, that device id was added to the library
// by at.Device (the inviter of a pairing, or id itself when it made the
// library), in the library's epoch epoch.
func AddMember(lib LibraryID, id DeviceID, at Timestamp, epoch uint64) (Entry, error) {
	if err := checkStamp(at); err != nil {
		return Entry{}, err
	}
	m := Member{Library: lib, ID: id, Added: at, AddedBy: at.Device, AddedEpoch: epoch}
	if err := m.validate(); err != nil {
		return Entry{}, err
	}
	return MemberEntry(m), nil
}

// RemoveMember records, as of at, that device id was removed from the library
// by at.Device, in the library's epoch epoch.
func RemoveMember(lib LibraryID, id DeviceID, at Timestamp, epoch uint64) (Entry, error) {
	if err := checkStamp(at); err != nil {
		return Entry{}, err
	}
	m := Member{Library: lib, ID: id, Removed: at, RemovedEpoch: epoch}
	if err := m.validate(); err != nil {
		return Entry{}, err
	}
	return MemberEntry(m), nil
}

// NameMember records that device at.Device is called name as of at.
func NameMember(lib LibraryID, at Timestamp, name string) (Entry, error) {
	if err := checkStamp(at); err != nil {
		return Entry{}, err
	}
	if err := cleanText("device name", name, MaxDeviceNameBytes); err != nil {
		return Entry{}, err
	}
	m := Member{Library: lib, ID: at.Device, Names: []Text{{At: at, Value: name}}}
	if err := m.validate(); err != nil {
		return Entry{}, err
	}
	return MemberEntry(m), nil
}

// Merge folds o, a record of the same member, into m and reports whether m
// changed.
func (m *Member) Merge(o *Member) bool {
	changed := false
	if !o.Added.IsZero() && (m.Added.IsZero() || compareAdd(o, m) < 0) {
		m.Added, m.AddedBy, m.AddedEpoch = o.Added, o.AddedBy, o.AddedEpoch
		changed = true
	}
	if !o.Removed.IsZero() && (m.Removed.IsZero() || compareRemove(o, m) < 0) {
		m.Removed, m.RemovedEpoch = o.Removed, o.RemovedEpoch
		changed = true
	}
	if names, ok := mergeNames(m.Names, o.Names); ok {
		m.Names = names
		changed = true
	}
	return changed
}

// compareAdd orders two additions, the one that wins first: the newer
// epoch, then the earlier stamp, then the smaller adder.
func compareAdd(a, b *Member) int {
	if c := cmp.Compare(b.AddedEpoch, a.AddedEpoch); c != 0 {
		return c
	}
	if c := a.Added.Compare(b.Added); c != 0 {
		return c
	}
	return cmp.Compare(a.AddedBy, b.AddedBy)
}

// compareRemove orders two removals, the one that wins first: the
// earlier stamp, then the older epoch.
func compareRemove(a, b *Member) int {
	if c := a.Removed.Compare(b.Removed); c != 0 {
		return c
	}
	return cmp.Compare(a.RemovedEpoch, b.RemovedEpoch)
}

// mergeNames returns the newest MaxMemberNames of the union of a and b, both
// in the order validate requires, and whether that differs from a. It never
// modifies a or b.
func mergeNames(a, b []Text) ([]Text, bool) {
	out := make([]Text, 0, min(len(a)+len(b), MaxMemberNames))
	// Merge from the newest end, stopping at the bound.
	i, j := len(a)-1, len(b)-1
	for len(out) < MaxMemberNames && (i >= 0 || j >= 0) {
		var next Text
		switch {
		case j < 0:
			next, i = a[i], i-1
		case i < 0:
			next, j = b[j], j-1
		default:
			switch c := a[i].compare(b[j]); {
			case c > 0:
				next, i = a[i], i-1
			case c < 0:
				next, j = b[j], j-1
			default:
				next, i, j = a[i], i-1, j-1
			}
		}
		out = append(out, next)
	}
	slices.Reverse(out)
	if slices.Equal(out, a) {
		return a, false
	}
	return out, true
}

// Clone returns a copy of m that shares no memory with it.
func (m *Member) Clone() Member {
	c := *m
	c.Names = slices.Clone(m.Names)
	return c
}

func (m *Member) maxTimestamp() Timestamp {
	t := m.Added
	if m.Removed.After(t) {
		t = m.Removed
	}
	if n := len(m.Names); n > 0 && m.Names[n-1].At.After(t) {
		t = m.Names[n-1].At
	}
	return t
}

func (m *Member) validate() error {
	if m.ID == 0 {
		return invalidf("member record without a device id")
	}
	if m.Library == (LibraryID{}) {
		return invalidf("member record of device %s without a library", m.ID)
	}
	if err := m.Added.validate(); err != nil {
		return err
	}
	if m.Added.IsZero() != (m.AddedBy == 0) {
		return invalidf("member %s: an addition needs both its time and its adder", m.ID)
	}
	if m.AddedEpoch != 0 && (m.Added.IsZero() || m.AddedBy != m.Added.Device) {
		return invalidf("member %s: an addition of epoch %d is written by its adder", m.ID, m.AddedEpoch)
	}
	if err := m.Removed.validate(); err != nil {
		return err
	}
	if m.RemovedEpoch != 0 && m.Removed.IsZero() {
		return invalidf("member %s: a removal's epoch without the removal", m.ID)
	}
	if len(m.Names) > MaxMemberNames {
		return invalidf("member %s has %d names, more than %d", m.ID, len(m.Names), MaxMemberNames)
	}
	for i, n := range m.Names {
		if n.At.IsZero() {
			return invalidf("member %s has a name without a timestamp", m.ID)
		}
		if n.At.Device != m.ID {
			return invalidf("member %s has a name written by device %s: a device names only itself", m.ID, n.At.Device)
		}
		if err := n.validate("device name", MaxDeviceNameBytes); err != nil {
			return err
		}
		if i > 0 && m.Names[i-1].compare(n) >= 0 {
			return invalidf("member %s: names out of order", m.ID)
		}
	}
	return nil
}
