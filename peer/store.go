package peer

import (
	"context"

	"github.com/danyue/danyue/crdt"
)

// Store is what the sync protocol needs of the local replica. The daemon
// adapts the real store to it; peer never imports the store package.
//
// Every change to the local state (a local write, or a merge that changed a
// record) gets the next number of the store's local change sequence, in the
// same transaction as the state. A merge that changes nothing gets no number,
// which is what keeps relayed changes from echoing around a loop forever.
type Store interface {
	// Epoch identifies this incarnation of the store: a wiped store starts a
	// new epoch, so peers' cursors into it restart at 0.
	Epoch() uint64
	// Since calls fn, in sequence order, with the current encoded state of
	// every record whose last change has a sequence number above after, at
	// most limit records. data is only valid during the call. An error from
	// fn stops the iteration and is returned.
	Since(ctx context.Context, after uint64, limit int, fn func(seq uint64, data []byte) error) error
	// Watch returns the last sequence number and a channel closed at the
	// next commit.
	Watch() (last uint64, changed <-chan struct{})
	// Cursor returns the epoch and sequence number of device from's store
	// up to which this store has merged its changes; zeros if none.
	Cursor(ctx context.Context, from crdt.DeviceID) (epoch, seq uint64, err error)
	// ApplyRemote merges entries received from device from, covering its
	// changes up to seq in its store epoch, and advances the cursor of from
	// to (epoch, seq), atomically and durably: after a crash either all of
	// it happened or none. It may refuse some records (their writer is over
	// its bounds): it then merges the others, moves no cursor and returns an
	// error wrapping ErrRecordsRefused (refused.go says what the stream does).
	ApplyRemote(ctx context.Context, from crdt.DeviceID, epoch, seq uint64, entries []crdt.Entry) error
	// SkipPast makes every later change take a sequence number above seq,
	// durably (store.Store.SkipPast): for a store that a peer has pulled
	// further than it holds.
	SkipPast(ctx context.Context, seq uint64) error
	// Delivered returns device dev's delivered mark: how far changes were
	// sent to dev, as recorded durably. MarkDelivered raises the marks of
	// devs (never lowers one, never past the last change), durably by the
	// store's next sync at the latest; a node raises them just behind what
	// it sends (delivered.go). It is how a
	// node tells a puller's cursor into a store that went back from one
	// into what the store still holds, across restarts (Node.Delivered).
	Delivered(dev crdt.DeviceID) uint64
	MarkDelivered(ctx context.Context, seq uint64, devs ...crdt.DeviceID) error
}
