package library

import (
	"encoding/binary"
	"hash/fnv"
	"sync"

	"github.com/danyue/danyue/crdt"
)

// deviceNames is what the library knows of the devices' names: each one's
// newest name (from its device record) and its name history (from its
// member records, of every library it was in: a device's names are its
// own). It has a lock of its own: every record rendered for an app asks
// it, on the handlers' goroutines, while batches from peers update it.
type deviceNames struct {
	mu      sync.RWMutex
	newest  map[crdt.DeviceID]string
	history map[crdt.DeviceID][]crdt.Text
}

func newDeviceNames() deviceNames {
	return deviceNames{newest: make(map[crdt.DeviceID]string), history: make(map[crdt.DeviceID][]crdt.Text)}
}

// get returns device id's newest name, "" if it never told.
func (n *deviceNames) get(id crdt.DeviceID) string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.newest[id]
}

// set records device id's newest name, from its device record.
func (n *deviceNames) set(id crdt.DeviceID, name string) {
	n.mu.Lock()
	n.newest[id] = name
	n.mu.Unlock()
}

// noteMember merges a member record's names into the device's history.
func (n *deviceNames) noteMember(m *crdt.Member) {
	if len(m.Names) == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	h := crdt.Member{ID: m.ID, Names: n.history[m.ID]}
	if h.Merge(&crdt.Member{ID: m.ID, Names: m.Names}) {
		n.history[m.ID] = h.Names
	}
}

// at is the name device t.Device had at t: from its name history if it has
// one, else its newest name.
func (n *deviceNames) at(t crdt.Timestamp) string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if h := n.history[t.Device]; len(h) > 0 {
		m := crdt.Member{Names: h}
		return m.NameAt(t)
	}
	return n.newest[t.Device]
}

// digest is a digest of every name records are shown with (the newest
// names and the name histories), which change without the records
// changing.
func (n *deviceNames) digest() uint64 {
	n.mu.RLock()
	defer n.mu.RUnlock()
	var sum uint64
	for id, name := range n.newest {
		h := fnv.New64a()
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(id)))
		h.Write([]byte(name))
		sum += h.Sum64() // order-free: maps have none
	}
	for id, names := range n.history {
		h := fnv.New64a()
		h.Write(binary.BigEndian.AppendUint64([]byte{'h'}, uint64(id)))
		for _, t := range names {
			h.Write(binary.BigEndian.AppendUint64(nil, t.At.Wall))
			h.Write(binary.BigEndian.AppendUint32(nil, t.At.Logical))
			h.Write([]byte(t.Value))
			h.Write([]byte{0})
		}
		sum += h.Sum64()
	}
	return sum
}

// NameAt is the name device t.Device had at t, the name a write stamped t
// is shown with: a rename never changes how history is shown.
func (l *Library) NameAt(t crdt.Timestamp) string { return l.names.at(t) }

// DeviceName is device id's newest name, from its device record; "" if it
// never told.
func (l *Library) DeviceName(id crdt.DeviceID) string { return l.names.get(id) }

// NamesDigest is a digest of every name records are shown with, which
// changes when a name does: records do not change when their writer is
// renamed, and a rendering of them does.
func (l *Library) NamesDigest() uint64 { return l.names.digest() }
