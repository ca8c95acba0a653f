package daemon

import (
	"cmp"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/library"
)

// GET /v1/devices: every member of the library, removed ones included, with
// what /v1/peers knows of each as a peer.
func (d *Daemon) handleDevices(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, api.Members{Devices: d.devices()})
	return nil
}

// devices is the member list: this device first, then members by name,
// then removed devices by name.
func (d *Daemon) devices() []api.Member {
	peers := make(map[string]api.Peer)
	for _, p := range d.peers() {
		peers[p.Device] = p
	}
	out := []api.Member{}
	for _, m := range d.lib.Members() {
		out = append(out, d.memberView(&m, peers))
	}
	slices.SortStableFunc(out, func(a, b api.Member) int {
		switch {
		case a.Self != b.Self:
			if a.Self {
				return -1
			}
			return 1
		case a.Removed != b.Removed:
			if b.Removed {
				return -1
			}
			return 1
		}
		return cmp.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name))
	})
	return out
}

func (d *Daemon) memberView(m *crdt.Member, peers map[string]api.Peer) api.Member {
	out := api.Member{
		ID:      m.ID.String(),
		Name:    d.lib.MemberName(m),
		Self:    m.ID == d.lib.Self(),
		Names:   make([]api.MemberName, 0, len(m.Names)),
		Removed: m.IsRemoved(),
	}
	st := d.lib.Standing(m.ID)
	out.Member, out.MemberNote = st.Member, st.Note
	for _, n := range m.Names {
		out.Names = append(out.Names, api.MemberName{Name: n.Value, Since: rfc3339(n.At.Wall)})
	}
	if !m.Added.IsZero() {
		by, at := m.AddedBy.String(), rfc3339(m.Added.Wall)
		out.AddedBy, out.AddedAt = &by, &at
		out.AddedByName = d.lib.NameAt(crdt.Timestamp{Wall: m.Added.Wall, Logical: m.Added.Logical, Device: m.AddedBy})
	}
	if m.IsRemoved() {
		by, at := m.Removed.Device.String(), rfc3339(m.Removed.Wall)
		out.RemovedBy, out.RemovedAt = &by, &at
		out.RemovedByName = d.lib.NameAt(m.Removed)
	}
	if !out.Self && out.Member {
		c := d.lib.Collection(m.ID)
		out.Collection = &api.MemberCollection{Cursor: c.Cursor, Behind: c.Behind, Summary: c.Summary, Holding: c.Holding}
	}
	if p, ok := peers[out.ID]; ok {
		out.Connected, out.LastSeen, out.Behind, out.InSync = p.Connected, p.LastSeen, p.Behind, p.InSync
		if !out.Self && !out.Removed {
			out.State, out.Via, out.HolePunched, out.Addresses, out.LastError = p.State, p.Via, p.HolePunched, p.Addresses, p.LastError
		}
		out.ClockWarning = p.ClockWarning
		if p.LastSeen != nil {
			off := p.ClockOffsetMs
			out.ClockOffsetMs = &off
		}
	}
	if out.LastSeen == nil && !out.Self {
		// Not met by the current node (a new secret since), but by an
		// earlier one of this daemon.
		out.LastSeen = d.seen.get(m.ID)
	}
	return out
}

// PUT /v1/devices/self/name: a new name for this device.
func (d *Daemon) handleRename(w http.ResponseWriter, r *http.Request) error {
	var req api.RenameRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	if req.Name == nil {
		return errorf(http.StatusBadRequest, api.CodeInvalid, "name is required")
	}
	if err := d.lib.Rename(r.Context(), *req.Name); err != nil {
		if errors.Is(err, crdt.ErrInvalid) {
			return errorf(http.StatusBadRequest, api.CodeInvalid, "%s", strings.TrimPrefix(err.Error(), "invalid: "))
		}
		return err
	}
	return d.writeMember(w, d.lib.Self())
}

// POST /v1/devices/{id}/forget (and DELETE /v1/devices/{id}): remove a
// device, given by id or name, from the library.
func (d *Daemon) handleForget(w http.ResponseWriter, r *http.Request) error {
	m, err := d.lib.Forget(r.Context(), r.PathValue("id"))
	switch {
	case errors.Is(err, library.ErrNoMember):
		return errorf(http.StatusNotFound, api.CodeNotFound, "%v", err)
	case errors.Is(err, library.ErrAmbiguous):
		return errorf(http.StatusConflict, api.CodeAmbiguous, "%v", err)
	case errors.Is(err, library.ErrForgetSelf):
		return errorf(http.StatusBadRequest, api.CodeInvalid, "this is the device itself; forget it from another device of the library")
	case err != nil:
		return err
	}
	return d.writeMember(w, m.ID)
}

// writeMember answers with one member as /v1/devices shows it.
func (d *Daemon) writeMember(w http.ResponseWriter, id crdt.DeviceID) error {
	for _, m := range d.devices() {
		if m.ID == id.String() {
			writeJSON(w, http.StatusOK, m)
			return nil
		}
	}
	return errorf(http.StatusNotFound, api.CodeNotFound, "device %s is not a member", id)
}
