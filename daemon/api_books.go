package daemon

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/library"
	"github.com/danyue/danyue/store"
)

// maxAddMs bounds one read-time report: a day. A larger one is a bug in the
// app, and would let one bad request inflate the statistics for good.
const maxAddMs = uint64(24 * time.Hour / time.Millisecond)

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 200

func pathKey(r *http.Request) (crdt.BookKey, error) {
	key, err := crdt.ParseBookKey(r.PathValue("key"))
	if err != nil {
		return crdt.BookKey{}, errorf(http.StatusBadRequest, api.CodeBadKey, "%v", err)
	}
	return key, nil
}

// handleBooks lists the shelf, paged and streamed (api_pages.go).
func (d *Daemon) handleBooks(w http.ResponseWriter, r *http.Request) error {
	return d.listBooks(w, r)
}

func (d *Daemon) handleBook(w http.ResponseWriter, r *http.Request) error {
	key, err := pathKey(r)
	if err != nil {
		return err
	}
	b, err := d.lib.Book(r.Context(), key)
	if err != nil {
		return bookError(err, key)
	}
	return writeTagged(w, r, d.viewer().book(&b))
}

func (d *Daemon) handlePosition(w http.ResponseWriter, r *http.Request) error {
	key, err := pathKey(r)
	if err != nil {
		return err
	}
	var req api.PositionRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	switch {
	case req.Char == nil:
		return errorf(http.StatusBadRequest, api.CodeInvalid, "char is required")
	case *req.Char < 0:
		return errorf(http.StatusBadRequest, api.CodeInvalid, "char must be >= 0, not %d", *req.Char)
	case req.Percent == nil:
		return errorf(http.StatusBadRequest, api.CodeInvalid, "percent is required")
	}
	title := ""
	if req.Title != nil {
		if title = *req.Title; title == "" {
			return errorf(http.StatusBadRequest, api.CodeInvalid, "title must not be empty; leave it out to keep the current one")
		}
	}
	b, err := d.lib.SetPosition(r.Context(), key, uint64(*req.Char), *req.Percent, title)
	if err != nil {
		return bookError(err, key)
	}
	writeJSON(w, http.StatusOK, d.viewer().book(&b))
	return nil
}

func (d *Daemon) handleReadTime(w http.ResponseWriter, r *http.Request) error {
	key, err := pathKey(r)
	if err != nil {
		return err
	}
	var req api.ReadTimeRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	if req.AddMs == nil {
		return errorf(http.StatusBadRequest, api.CodeInvalid, "addMs is required")
	}
	if *req.AddMs <= 0 || uint64(*req.AddMs) > maxAddMs {
		return errorf(http.StatusBadRequest, api.CodeInvalid, "addMs must be in (0, %d] (one day), not %d", maxAddMs, *req.AddMs)
	}
	idem := r.Header.Get("Idempotency-Key")
	if len(idem) > maxIdempotencyKey {
		return errorf(http.StatusBadRequest, api.CodeInvalid, "Idempotency-Key is longer than %d bytes", maxIdempotencyKey)
	}
	dedup, sum := "", []byte(nil)
	if idem != "" {
		dedup = "read-time\x00" + key.String() + "\x00" + idem
		sum = []byte(strconv.FormatInt(*req.AddMs, 10)) // all a report says besides its book
	}
	b, err := d.lib.AddReadTime(r.Context(), key, uint64(*req.AddMs), dedup, sum)
	if errors.Is(err, store.ErrDedupMismatch) {
		return errorf(http.StatusUnprocessableEntity, api.CodeIdempotencyMismatch, "Idempotency-Key %q was used for another report on this book; a retry sends the same addMs, a new report a new key", idem)
	}
	if err != nil {
		return bookError(err, key)
	}
	out := d.viewer().book(&b)
	if out.Deleted {
		out.Notice = deletedReadTimeNotice
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// deletedReadTimeNotice answers a read-time report on a deleted book, which
// an app may have expected to bring the book back.
const deletedReadTimeNotice = "the time was counted, but the book stays deleted: read time alone does not bring a book back; a position (PUT .../position) does"

func (d *Daemon) handleDelete(w http.ResponseWriter, r *http.Request) error {
	key, err := pathKey(r)
	if err != nil {
		return err
	}
	b, err := d.lib.DeleteBook(r.Context(), key)
	if err != nil {
		return bookError(err, key)
	}
	writeJSON(w, http.StatusOK, d.viewer().book(&b))
	return nil
}

// handleRestore brings a deleted book back on every device, as it was
// (library.Restore); a book on the shelf is answered as it is.
func (d *Daemon) handleRestore(w http.ResponseWriter, r *http.Request) error {
	key, err := pathKey(r)
	if err != nil {
		return err
	}
	b, err := d.lib.Restore(r.Context(), key)
	if errors.Is(err, library.ErrNotFound) {
		return errorf(http.StatusNotFound, api.CodeNotFound, "no book %s on this device: never here, or removed for good after its undo window (%s)", key, keepText(d.lib.KeepDeleted()))
	}
	if err != nil {
		return bookError(err, key)
	}
	writeJSON(w, http.StatusOK, d.viewer().book(&b))
	return nil
}

// keepText says how long deleted books are kept, for people.
func keepText(keep time.Duration) string {
	switch {
	case keep < 0:
		return "this device keeps none"
	case keep%(24*time.Hour) == 0:
		return fmt.Sprintf("%d days", keep/(24*time.Hour))
	}
	return keep.String()
}

// bookError maps the errors of book operations to API errors: invalid input
// is the caller's to fix, anything else is ours.
func bookError(err error, key crdt.BookKey) error {
	switch {
	case errors.Is(err, library.ErrNotFound):
		return errorf(http.StatusNotFound, api.CodeNotFound, "no book %s on this device", key)
	case errors.Is(err, crdt.ErrInvalid):
		return errorf(http.StatusBadRequest, api.CodeInvalid, "%s", strings.TrimPrefix(err.Error(), "invalid: "))
	}
	return err
}
