package daemon

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/kosync"
	"github.com/danyue/danyue/library"
)

// The local API's side of KOReader's progress sync: creating accounts (what
// `danyue kosync adduser` calls, on the unix socket only) and listing every
// account's documents (what `danyue books` shows).

func (d *Daemon) handleKosyncAddUser(w http.ResponseWriter, r *http.Request) error {
	var req api.KosyncUserRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	switch {
	case req.Name == nil:
		return errorf(http.StatusBadRequest, api.CodeInvalid, "name is required")
	case req.Key == nil:
		return errorf(http.StatusBadRequest, api.CodeInvalid, "key is required")
	}
	if err := kosync.ValidUserName(*req.Name); err != nil {
		return errorf(http.StatusBadRequest, api.CodeInvalid, "%v", err)
	}
	// The API takes only what KOReader would send, so that a password sent
	// by mistake in place of its MD5 is refused, not kept as a key that no
	// device will ever send.
	if !isLowerHexMD5(*req.Key) {
		return errorf(http.StatusBadRequest, api.CodeInvalid, "key must be the lowercase hex MD5 of the password (32 digits), as KOReader sends it")
	}
	hash, err := kosync.HashKey(*req.Key)
	if err != nil {
		return err
	}
	switch err := d.lib.CreateKosyncUser(r.Context(), *req.Name, hash); {
	case errors.Is(err, library.ErrKosyncUserExists):
		return errorf(http.StatusConflict, api.CodeNameTaken, "the KOReader account %q exists already in this library", *req.Name)
	case errors.Is(err, crdt.ErrInvalid):
		return errorf(http.StatusBadRequest, api.CodeInvalid, "%s", strings.TrimPrefix(err.Error(), "invalid: "))
	case err != nil:
		return err
	}
	d.log.Info("kosync account created", "user", *req.Name)
	writeJSON(w, http.StatusCreated, api.KosyncUser{Name: *req.Name})
	return nil
}

// handleKosyncPasswd gives an existing account a new key. Every daemon of
// the library takes it as it syncs; KOReader devices logged in with the old
// password are refused from then on.
func (d *Daemon) handleKosyncPasswd(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	var req api.KosyncPasswdRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	if req.Key == nil {
		return errorf(http.StatusBadRequest, api.CodeInvalid, "key is required")
	}
	if !isLowerHexMD5(*req.Key) {
		return errorf(http.StatusBadRequest, api.CodeInvalid, "key must be the lowercase hex MD5 of the password (32 digits), as KOReader sends it")
	}
	hash, err := kosync.HashKey(*req.Key)
	if err != nil {
		return err
	}
	if err := d.lib.SetKosyncKey(r.Context(), name, hash); err != nil {
		return kosyncUserError(name, err)
	}
	d.log.Info("kosync account key changed", "user", name)
	writeJSON(w, http.StatusOK, api.KosyncUser{Name: name})
	return nil
}

// handleKosyncDelUser removes an account from the library. Its progress
// records stay (they are the library's history) but no key opens them.
func (d *Daemon) handleKosyncDelUser(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := d.lib.RemoveKosyncUser(r.Context(), name); err != nil {
		return kosyncUserError(name, err)
	}
	d.log.Info("kosync account removed", "user", name)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// kosyncUserError maps the errors of an account change to API errors.
func kosyncUserError(name string, err error) error {
	switch {
	case errors.Is(err, library.ErrNoKosyncUser):
		return errorf(http.StatusNotFound, api.CodeNotFound, "this library has no KOReader account %q", name)
	case errors.Is(err, crdt.ErrInvalid):
		return errorf(http.StatusBadRequest, api.CodeInvalid, "%s", strings.TrimPrefix(err.Error(), "invalid: "))
	}
	return err
}

func isLowerHexMD5(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func (d *Daemon) handleKosyncProgress(w http.ResponseWriter, r *http.Request) error {
	list, err := d.kosyncProgress(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.KosyncProgressList{Progress: list})
	return nil
}

// kosyncProgress is every KOReader account's place in every document, named
// by the linked book, most recent first: for the API and the page.
func (d *Daemon) kosyncProgress(ctx context.Context) ([]api.KosyncProgress, error) {
	v := d.viewer()
	list := []api.KosyncProgress{}
	err := d.store.Scan(ctx, crdt.KindKosyncProgress, func(e crdt.Entry) error {
		if p := &e.KosyncProgress; !p.At.IsZero() {
			list = append(list, api.KosyncProgress{
				User: p.User, Document: p.Document, Progress: p.Progress, Percentage: p.Percentage,
				Device: p.Device, DeviceID: p.DeviceID, At: rfc3339(p.At.Wall), Stamp: stamp(p.At),
				Daemon: p.At.Device.String(), DaemonName: v.name(p.At),
			})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// The books the documents are, looked up once per document.
	books := map[string][2]string{}
	for i := range list {
		doc := list[i].Document
		b, ok := books[doc]
		if !ok {
			if b[0], b[1], err = d.lib.KosyncBook(ctx, doc); err != nil {
				return nil, err
			}
			books[doc] = b
		}
		list[i].BookKey, list[i].Title = b[0], b[1]
	}
	// Most recent first, like the shelf.
	slices.SortStableFunc(list, func(a, b api.KosyncProgress) int { return strings.Compare(b.Stamp, a.Stamp) })
	return list, nil
}

// handleKosyncLink records which book a KOReader document is: what keying
// its file told (danyue key sends it for every file it keys). The link is
// a record of the library, so every device shows KOReader's progress under
// the book's title.
func (d *Daemon) handleKosyncLink(w http.ResponseWriter, r *http.Request) error {
	doc := r.PathValue("document")
	var req api.KosyncLinkRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	if req.Key == nil {
		return errorf(http.StatusBadRequest, api.CodeInvalid, "key is required: the BookKey of the document's text")
	}
	key, err := crdt.ParseBookKey(*req.Key)
	if err != nil {
		return errorf(http.StatusBadRequest, api.CodeBadKey, "%s", strings.TrimPrefix(err.Error(), "invalid: "))
	}
	changed, err := d.lib.LinkKosyncDocument(r.Context(), doc, key, req.Title)
	if errors.Is(err, crdt.ErrInvalid) {
		return errorf(http.StatusBadRequest, api.CodeInvalid, "%s", strings.TrimPrefix(err.Error(), "invalid: "))
	}
	if err != nil {
		return err
	}
	if changed {
		d.log.Debug("kosync document linked", "document", doc, "book", key)
	}
	writeJSON(w, http.StatusOK, api.KosyncLink{Document: doc, Key: key.String(), Title: req.Title})
	return nil
}
