package library

import (
	"context"

	"github.com/danyue/danyue/peer"
)

var _ peer.RecordCounter = syncStore{}

// CountSince counts the records a sync from after would send, so that a
// peer pulling a long backlog sees how many are still to come (peer's
// togo.go).
func (s syncStore) CountSince(ctx context.Context, after uint64) (uint64, error) {
	return s.l.store.CountSince(ctx, after)
}
