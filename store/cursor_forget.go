package store

import (
	"context"
	"fmt"

	"github.com/danyue/danyue/crdt"
)

// ForgetCursor drops this store's cursor into device d, through the writer
// so that it is ordered with every merge of d's changes: for a device
// forgotten by the library, which then holds tombstone collection back no
// more (crdt/collect.go). If it ever comes back, a pull from it starts from
// 0 and its whole store is merged again, where a collected book in it
// meets its residue. It reports whether there was a cursor.
func (s *Store) ForgetCursor(ctx context.Context, d crdt.DeviceID) (bool, error) {
	if d == 0 {
		return false, fmt.Errorf("forget a cursor in store %s: no device: %w", s.dir, crdt.ErrInvalid)
	}
	_, had, err := s.Cursor(ctx, d)
	if err != nil || !had {
		return false, err
	}
	if _, err := s.Apply(ctx, Batch{forget: d}); err != nil {
		return false, err
	}
	return true, nil
}
