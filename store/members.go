package store

import (
	"context"

	"github.com/danyue/danyue/crdt"
)

// Members returns the member records of library lib, removed ones included,
// in device id order. A library has a handful of members, so this is one
// scan of the member records, which also hold those of libraries this
// device was in before.
func (s *Store) Members(ctx context.Context, lib crdt.LibraryID) ([]crdt.Member, error) {
	var out []crdt.Member
	err := s.Scan(ctx, crdt.KindMember, func(e crdt.Entry) error {
		if e.Member.Library == lib {
			out = append(out, e.Member)
		}
		return nil
	})
	return out, err
}
