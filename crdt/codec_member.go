package crdt

import "bytes"

// The wire form of a member record: a map with small integer keys like the
// others, the addition a fixed array like a position, the names an array of
// texts in the record's order.

type wireMember struct {
	Library []byte      `cbor:"0,keyasint"` // 16 bytes
	ID      uint64      `cbor:"1,keyasint"`
	Added   *wireAdded  `cbor:"2,keyasint,omitempty"`
	Removed *wireStamp  `cbor:"3,keyasint,omitempty"`
	Names   []*wireText `cbor:"4,keyasint,omitempty"`
	// Epoch is the addition's epoch, absent when 0 (an older build's
	// record encodes as it did).
	Epoch uint64 `cbor:"5,keyasint,omitempty"`
	// RemovedEpoch is the removal's epoch, absent when 0.
	RemovedEpoch uint64 `cbor:"6,keyasint,omitempty"`
}

type wireAdded struct {
	_       struct{} `cbor:",toarray"`
	Wall    uint64
	Logical uint32
	Device  uint64
	By      uint64
}

func (m *Member) wire() *wireMember {
	// A copy: a slice of m.Library would make every Entry that is encoded
	// escape to the heap, a whole record's allocation for each record
	// decoded (Decode encodes to check).
	w := &wireMember{Library: bytes.Clone(m.Library[:]), ID: uint64(m.ID), Removed: stampWire(m.Removed), RemovedEpoch: m.RemovedEpoch}
	if !m.Added.IsZero() {
		w.Added = &wireAdded{Wall: m.Added.Wall, Logical: m.Added.Logical, Device: uint64(m.Added.Device), By: uint64(m.AddedBy)}
		w.Epoch = m.AddedEpoch
	}
	for _, n := range m.Names {
		w.Names = append(w.Names, textWire(n))
	}
	return w
}

func (w *wireMember) domain() (Member, error) {
	if len(w.Library) != len(LibraryID{}) {
		return Member{}, invalidf("member record with a library id of %d bytes", len(w.Library))
	}
	m := Member{ID: DeviceID(w.ID), Removed: w.Removed.domain(), AddedEpoch: w.Epoch, RemovedEpoch: w.RemovedEpoch}
	copy(m.Library[:], w.Library)
	if w.Added != nil {
		m.Added = Timestamp{Wall: w.Added.Wall, Logical: w.Added.Logical, Device: DeviceID(w.Added.Device)}
		m.AddedBy = DeviceID(w.Added.By)
	}
	for _, n := range w.Names {
		if n == nil {
			return Member{}, invalidf("member record with a null name")
		}
		m.Names = append(m.Names, n.domain())
	}
	return m, nil
}
