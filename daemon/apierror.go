package daemon

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/internal/jsoncheck"
	"github.com/danyue/danyue/store"
)

// apiError is what every failed request gets: a stable machine-readable code
// (clients branch on it) and a human explanation (clients show it, never
// parse it).
type apiError struct {
	status int
	body   api.Error
}

func (e *apiError) Error() string { return e.body.Code + ": " + e.body.Detail }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, body: api.Error{Code: code, Detail: fmt.Sprintf(format, args...)}}
}

// writeError answers a failed request. An *apiError is the caller's to fix
// and goes out as it is. Anything else is the daemon's: its cause goes to
// the log under a request id, with the route, and the client gets only that
// id, because an internal error's text names files and internals that are
// no business of a client (a --http token holder is not the device's user).
// A full disk is a failure of its own (507 disk_full): the user can fix it.
func (d *Daemon) writeError(w http.ResponseWriter, r *http.Request, route string, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		id := requestID()
		log := d.log.With("request", id, "method", r.Method, "route", route, "path", r.URL.Path, "err", err)
		switch {
		case r.Context().Err() != nil:
			// The client went away (or the daemon is stopping): no one
			// reads the answer, and nothing failed on our side.
			log.Debug("request ended early")
		case errors.Is(err, store.ErrDiskFull):
			log.Error("request refused: the disk is full")
			ae = errorf(http.StatusInsufficientStorage, api.CodeDiskFull,
				"the disk holding this device's data dir is full (danyue keeps %d MiB free and writes nothing below that); nothing was written: free some space and retry (request %s)",
				store.DefaultMinFreeBytes>>20, id)
		default:
			log.Error("request failed")
		}
		if ae == nil {
			ae = errorf(http.StatusInternalServerError, api.CodeInternal, "the daemon failed to answer; its log has the cause under request %s", id)
		}
	}
	writeJSON(w, ae.status, ae.body)
}

// requestID names one failed request in the log and in its answer.
func requestID() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the client going away is not our error to report
}

// maxBody bounds every request body. The largest legitimate one is a position
// with a maximal title, well under a kilobyte of JSON plus escapes.
const maxBody = 16 << 10

// decodeBody decodes a JSON object from r's body into v strictly: one object,
// no unknown fields, no trailing data, at most maxBody bytes; no key twice,
// and no string that is not valid UTF-8, holds a lone surrogate escape or a
// control character (jsoncheck, crdt.CheckText), which encoding/json would
// take or repair silently. The errors say which rule was broken, so an app
// developer can fix the request.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		return errorf(http.StatusUnsupportedMediaType, api.CodeUnsupported, "the body must be application/json, not %q", ct)
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return jsonError(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errorf(http.StatusBadRequest, api.CodeBadRequest, "the body must hold exactly one JSON object")
	}
	return checkBody(raw)
}

// checkBody refuses what encoding/json let through in a decoded body.
func checkBody(raw []byte) error {
	err := jsoncheck.Check(raw, crdt.CheckText)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jsoncheck.ErrDuplicateKey):
		return errorf(http.StatusBadRequest, api.CodeBadRequest, "the body names %s; a key may appear only once", strings.TrimPrefix(err.Error(), jsoncheck.ErrDuplicateKey.Error()+" ")+" twice")
	case errors.Is(err, crdt.ErrInvalid):
		return errorf(http.StatusBadRequest, api.CodeInvalid, "%s", strings.TrimPrefix(err.Error(), "invalid: "))
	}
	return errorf(http.StatusBadRequest, api.CodeInvalid, "%v; text must be valid Unicode", err)
}

func jsonError(err error) error {
	var (
		mbe    *http.MaxBytesError
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &mbe):
		return errorf(http.StatusRequestEntityTooLarge, api.CodeTooLarge, "the body is larger than %d bytes", mbe.Limit)
	case errors.Is(err, io.EOF):
		return errorf(http.StatusBadRequest, api.CodeBadRequest, "the body is empty; a JSON object is required")
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(http.StatusBadRequest, api.CodeBadRequest, "the body is not valid JSON: %v", err)
	case errors.As(err, &typ):
		if typ.Field != "" {
			return errorf(http.StatusBadRequest, api.CodeInvalid, "%s must be %s, not a JSON %s", typ.Field, jsonKind(typ.Type.Kind().String()), typ.Value)
		}
		return errorf(http.StatusBadRequest, api.CodeBadRequest, "the body must be a JSON object, not a JSON %s", typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return errorf(http.StatusBadRequest, api.CodeUnknownField, "%s is not a field of this request", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return errorf(http.StatusBadRequest, api.CodeBadRequest, "the body is not valid: %v", err)
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int64", "int", "uint64", "int32":
		return "an integer"
	case "float64":
		return "a number"
	case "string":
		return "a string"
	case "ptr":
		return "a value of another type"
	}
	return "a " + goKind
}
