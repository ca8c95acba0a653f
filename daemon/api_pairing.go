package daemon

import (
	"encoding/hex"
	"errors"
	"net/http"
	"time"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/library"
)

// Pairing and joining (library/pairing.go, library/join.go): POST
// /v1/pairing makes a short-code invitation, GET and DELETE
// /v1/pairing/{id} follow and cancel it; GET /v1/invites lists the open
// ones and DELETE /v1/invites/{id} cancels one, as DELETE /v1/pairing/{id}
// does; POST /v1/join joins the library of a short or a long code; POST
// /v1/leave leaves the library.

func (d *Daemon) handlePairingCreate(w http.ResponseWriter, r *http.Request) error {
	if r.ContentLength != 0 {
		var empty struct{}
		if err := decodeBody(w, r, &empty); err != nil {
			return err
		}
	}
	p, err := d.lib.OpenPairing()
	if err != nil {
		return refusal(err)
	}
	writeJSON(w, http.StatusCreated, pairingView(p))
	return nil
}

// handlePairingGet answers an invitation's state; with ?wait=1 it first
// waits until the invitation has ended (or the client goes away), so a
// client learns the outcome without polling.
func (d *Daemon) handlePairingGet(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	p, done, ok := d.lib.Pairing(id)
	if !ok {
		return noPairing(id)
	}
	switch r.URL.Query().Get("wait") {
	case "", "0", "false":
	case "1", "true":
		select {
		case <-done:
		case <-r.Context().Done():
			return nil
		case <-d.closing:
		}
		p, _, _ = d.lib.Pairing(id)
	default:
		return errorf(http.StatusBadRequest, api.CodeInvalid, "wait must be 1 or 0, not %q", r.URL.Query().Get("wait"))
	}
	writeJSON(w, http.StatusOK, pairingView(p))
	return nil
}

func (d *Daemon) handlePairingDelete(w http.ResponseWriter, r *http.Request) error {
	p, ok := d.lib.CancelPairing(r.PathValue("id"))
	if !ok {
		return noPairing(r.PathValue("id"))
	}
	writeJSON(w, http.StatusOK, pairingView(p))
	return nil
}

func (d *Daemon) handleInvitesList(w http.ResponseWriter, r *http.Request) error {
	out := api.PairingInvites{Invites: []api.Pairing{}}
	for _, p := range d.lib.OpenPairings() {
		out.Invites = append(out.Invites, pairingView(p))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func noPairing(id string) error {
	return errorf(http.StatusNotFound, api.CodeNotFound, "no invitation %q (only the last %d are kept)", id, library.MaxRecentPairings)
}

// pairingView is the API's picture of an invitation.
func pairingView(p library.Pairing) api.Pairing {
	v := api.Pairing{
		ID:         p.ID,
		Code:       p.Code,
		Expires:    p.Expires.UTC().Format(time.RFC3339),
		State:      string(p.State),
		Addresses:  p.Addresses,
		Device:     p.Device,
		DeviceName: p.DeviceName,
		TriedBy:    p.TriedBy,
		Burns:      p.Burns,
		Detail:     p.Detail,
	}
	if !p.TriedAt.IsZero() {
		v.TriedAt = p.TriedAt.UTC().Format(time.RFC3339)
	}
	return v
}

// pairingWarnings renders the library's pairing warnings for GET
// /v1/status and the page.
func (d *Daemon) pairingWarnings() []api.PairingWarning {
	out := []api.PairingWarning{}
	for _, w := range d.lib.PairingWarnings() {
		v := api.PairingWarning{Address: w.Addr, Burns: w.Burns, Last: w.Last.UTC().Format(time.RFC3339), Warning: w.Message()}
		if !w.RefusedUntil.IsZero() {
			v.RefusedUntil = w.RefusedUntil.UTC().Format(time.RFC3339)
		}
		out = append(out, v)
	}
	return out
}

func (d *Daemon) handleJoin(w http.ResponseWriter, r *http.Request) error {
	var req api.JoinRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	if req.Code == nil || *req.Code == "" {
		return errorf(http.StatusBadRequest, api.CodeInvalid, "code is required")
	}
	j, err := d.lib.JoinReport(r.Context(), *req.Code, req.PairAddr)
	if err != nil {
		return refusal(err)
	}
	writeJSON(w, http.StatusOK, api.Joined{Library: api.Library{ID: hex.EncodeToString(j.Library[:])}, Warnings: j.Warnings})
	return nil
}

// POST /v1/leave (danyue leave): this device leaves its library.
func (d *Daemon) handleLeave(w http.ResponseWriter, r *http.Request) error {
	left, err := d.lib.Leave(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.Left{Library: api.Library{ID: hex.EncodeToString(left.Library[:])}, Delivered: left.Delivered})
	return nil
}

// refusals maps the kinds of a library.Refusal to their API status and
// code.
var refusals = []struct {
	kind   error
	status int
	code   string
}{
	{library.ErrBadInvite, http.StatusBadRequest, api.CodeBadInvite},
	{library.ErrBadPairAddr, http.StatusBadRequest, api.CodeInvalid},
	{library.ErrNoInviter, http.StatusNotFound, api.CodeNoInviter},
	{library.ErrWrongCode, http.StatusForbidden, api.CodeWrongCode},
	{library.ErrCodeSpent, http.StatusGone, api.CodeCodeSpent},
	{library.ErrRefusedHere, http.StatusForbidden, api.CodePairingRefused},
	{library.ErrPairingFailed, http.StatusBadGateway, api.CodeUnavailable},
	{library.ErrUnavailable, http.StatusServiceUnavailable, api.CodeUnavailable},
	{library.ErrNotAdmitted, http.StatusForbidden, api.CodeNotAdmitted},
}

// refusal turns a library.Refusal into the API's error, its message as the
// detail; any other error is the daemon's.
func refusal(err error) error {
	var r *library.Refusal
	if !errors.As(err, &r) {
		return err
	}
	for _, m := range refusals {
		if errors.Is(r.Kind, m.kind) {
			return errorf(m.status, m.code, "%s", r.Msg)
		}
	}
	return err
}
