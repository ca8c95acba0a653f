package daemon

import (
	"sync"
	"time"

	"github.com/danyue/danyue/crdt"
)

// lastSeen remembers when each device was last connected, from the
// library's peer events. The peer node's own record goes with the node: a
// new library secret (a forget, a leave) starts a new node that has not
// met the forgotten device, and the member list then said "never" of a
// device that had been connected minutes before. This record lasts as long
// as the daemon; it is not persisted, so a restart starts it empty.
type lastSeen struct {
	mu sync.Mutex
	at map[crdt.DeviceID]time.Time
}

func (s *lastSeen) note(id crdt.DeviceID, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at == nil {
		s.at = make(map[crdt.DeviceID]time.Time)
	}
	if at.After(s.at[id]) {
		s.at[id] = at
	}
}

// get returns when id was last seen connected, RFC 3339 in UTC as the API
// writes times, or nil if never since the daemon started.
func (s *lastSeen) get(id crdt.DeviceID) *string {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.at[id]
	if !ok {
		return nil
	}
	v := t.UTC().Format(time.RFC3339)
	return &v
}
