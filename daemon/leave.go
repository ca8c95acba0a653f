package daemon

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/peer"
)

// leaveDeliverTimeout bounds how long a leaving device waits for a member
// to merge its removal.
const leaveDeliverTimeout = 10 * time.Second

// POST /v1/leave (danyue leave): this device leaves its library.
func (d *Daemon) handleLeave(w http.ResponseWriter, r *http.Request) error {
	left, err := d.leave(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, left)
	return nil
}

// leave removes this device from its library, waits (a bounded time) for
// a connected member to merge the removal, and moves the device to a new
// library of its own, with a new secret: the old secret is gone from it,
// and the members that learn of the leave rotate theirs (rotate.go). The
// books stay on the device.
func (d *Daemon) leave(ctx context.Context) (api.Left, error) {
	lib := d.members.library()
	if _, err := d.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) { return crdt.RemoveMember(lib, d.self, at) }); err != nil {
		return api.Left{}, fmt.Errorf("record that this device leaves: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, leaveDeliverTimeout)
	delivered := d.waitDelivered(wctx)
	cancel()
	if !delivered {
		d.log.Warn("no member confirmed this device's leave before it went; the others learn of it only if it reached one of them")
	}
	next, err := peer.NewLibrary()
	if err != nil {
		return api.Left{}, err
	}
	if err := d.join(context.WithoutCancel(ctx), peer.Invite{Library: next}); err != nil {
		return api.Left{}, fmt.Errorf("start a library of this device's own: %w", err)
	}
	d.log.Info("left the library", "library", hex.EncodeToString(lib[:]), "delivered", delivered)
	return api.Left{Library: api.Library{ID: hex.EncodeToString(next.ID[:])}, Delivered: delivered}, nil
}

// waitDelivered waits until a member has merged everything this device
// wrote, or a member it was connected to drops it (its gater refuses a
// removed device once it has merged the removal), or ctx ends.
func (d *Daemon) waitDelivered(ctx context.Context) bool {
	var had map[crdt.DeviceID]bool
	for {
		node := d.net.current()
		if node == nil {
			return false
		}
		state, changed := node.SyncState()
		now := make(map[crdt.DeviceID]bool)
		for _, p := range state.Peers {
			if !p.Connected {
				continue
			}
			if p.Delivered {
				return true
			}
			now[p.Device] = true
		}
		if had == nil {
			had = now
			if len(had) == 0 {
				return false // nobody to tell
			}
		}
		for id := range had {
			if !now[id] {
				return true
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		case <-d.closing:
			return false
		}
	}
}
