package kosync

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/jsoncheck"
)

// maxBody bounds a request body. KOReader's largest, a progress push with
// metadata, is well under a kilobyte.
const maxBody = 16 << 10

// requestError is a refusal of what the client sent, with the status and
// code to answer it with.
type requestError struct {
	status, code int
	message      string
	retryAfter   time.Duration // answered as Retry-After, if not 0
}

func (e *requestError) Error() string { return e.message }

// invalid refuses a field, with the reference server's status for it: 403
// and the code says which (2003 a field, 2004 the document).
func invalid(code int, format string, args ...any) *requestError {
	return &requestError{status: http.StatusForbidden, code: code, message: fmt.Sprintf(format, args...)}
}

// malformed refuses a body that is not one JSON object at all, before any
// field could be looked at.
func malformed(format string, args ...any) *requestError {
	return &requestError{status: http.StatusBadRequest, code: codeInvalid, message: fmt.Sprintf(format, args...)}
}

var errUnauthorized = &requestError{status: http.StatusUnauthorized, code: codeUnauthorized, message: "Unauthorized"}

// serve adapts a handler that returns its error.
func (h *handler) serve(fn func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := fn(w, r); err != nil {
			h.fail(w, r, err)
		}
	}
}

// fail answers an error: a requestError as it says, anything else as ours.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var re *requestError
	switch {
	case errors.As(err, &re):
		h.log.Debug("kosync request refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "status", re.status, "why", re.message)
		if re.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int((re.retryAfter+time.Second-1)/time.Second)))
		}
		writeError(w, re.status, re.code, re.message)
	case errors.Is(err, crdt.ErrInvalid):
		// The library refused a value the checks here let through.
		writeError(w, http.StatusForbidden, codeInvalid, strings.TrimPrefix(err.Error(), "invalid: "))
	default:
		h.log.Error("kosync request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, codeInternal, "Unknown server error.")
	}
}

// decode reads one JSON object of at most maxBody bytes into v. Unknown
// fields are accepted: clients add fields over time ("metadata",
// "identifiers"), and refusing them would break sync on an update. A key
// named twice, invalid UTF-8 and lone surrogate escapes are refused
// (jsoncheck); control characters in what is kept are refused by the
// library's write (crdt.CheckText).
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(raw))
		if err = dec.Decode(v); err == nil {
			// One object and nothing after it.
			if _, err := dec.Token(); err != io.EOF {
				return malformed("Invalid request: the body must hold exactly one JSON object")
			}
			if err := jsoncheck.Check(raw, nil); err != nil {
				return malformed("Invalid request: %v", err)
			}
			return nil
		}
	}
	var mbe *http.MaxBytesError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &mbe):
		return &requestError{status: http.StatusRequestEntityTooLarge, code: codeInvalid, message: fmt.Sprintf("Invalid request: the body is larger than %d bytes", maxBody)}
	case errors.As(err, &typ) && typ.Field != "":
		return invalid(codeInvalid, "Invalid request: %s must not be a JSON %s", typ.Field, typ.Value)
	}
	return malformed("Invalid request: the body is not a JSON object: %v", err)
}

type createRequest struct {
	Username *string `json:"username"`
	Password *string `json:"password"`
}

func (h *handler) createUser(w http.ResponseWriter, r *http.Request) error {
	if !h.registration {
		// 402, not 403: KOReader shows the message of a 402 answer to
		// registration, and only a generic error for other codes.
		return &requestError{status: http.StatusPaymentRequired, code: codeRegistrationDisabled,
			message: "Registration is closed on this server; its owner can add you with `danyue kosync adduser NAME`."}
	}
	var req createRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if req.Username == nil || req.Password == nil {
		return invalid(codeInvalid, "Invalid request: username and password are required")
	}
	for _, err := range []error{ValidUserName(*req.Username), ValidKey(*req.Password)} {
		if err != nil {
			return invalid(codeInvalid, "Invalid request: %v", err)
		}
	}
	hash, err := h.signin.hashKey(r.Context(), *req.Password)
	if err != nil {
		return err
	}
	if err := h.lib.CreateUser(r.Context(), *req.Username, hash); errors.Is(err, ErrUserExists) {
		return &requestError{status: http.StatusPaymentRequired, code: codeUserExists, message: "Username is already registered."}
	} else if err != nil {
		return err
	}
	h.log.Info("kosync account created", "user", *req.Username, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusCreated, map[string]string{"username": *req.Username})
	return nil
}

func (h *handler) authUser(w http.ResponseWriter, r *http.Request) error {
	if _, err := h.mustAuth(r); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"authorized": "OK"})
	return nil
}

// mustAuth returns the account the request authenticates as, or the
// refusal to answer: 401 for a wrong pair, 429 while a limit locks it out.
func (h *handler) mustAuth(r *http.Request) (string, error) {
	return h.signin.authenticate(r.Context(), r)
}

type putRequest struct {
	Document   *string  `json:"document"`
	Progress   *string  `json:"progress"`
	Percentage *float64 `json:"percentage"`
	Device     *string  `json:"device"`
	DeviceID   *string  `json:"device_id"`
	// metadata and identifiers are accepted and not kept.
}

func (h *handler) putProgress(w http.ResponseWriter, r *http.Request) error {
	// Authentication first: a stranger learns nothing from the body checks.
	user, err := h.mustAuth(r)
	if err != nil {
		return err
	}
	var req putRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	p, err := req.progress()
	if err != nil {
		return err
	}
	if p, err = h.lib.SetProgress(r.Context(), user, p); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"document": p.Document, "timestamp": p.Time.Unix()})
	return nil
}

func (q *putRequest) progress() (Progress, error) {
	switch {
	case q.Document == nil:
		return Progress{}, invalid(codeDocument, "Field 'document' not provided.")
	case q.Progress == nil || q.Percentage == nil || q.Device == nil:
		return Progress{}, invalid(codeInvalid, "Invalid request: progress, percentage and device are required")
	}
	deviceID := "" // optional, as on the reference server
	if q.DeviceID != nil {
		deviceID = *q.DeviceID
	}
	if err := validDocument(*q.Document); err != nil {
		return Progress{}, err
	}
	if f := *q.Percentage; math.IsNaN(f) || f < 0 || f > 1 {
		return Progress{}, invalid(codeInvalid, "Invalid request: percentage must be in [0, 1], not %v", f)
	}
	for _, f := range []struct {
		name, value string
		max         int
	}{{"progress", *q.Progress, crdt.MaxKosyncProgressBytes}, {"device", *q.Device, crdt.MaxKosyncDeviceBytes}, {"device_id", deviceID, crdt.MaxKosyncDeviceBytes}} {
		if len(f.value) > f.max {
			return Progress{}, invalid(codeInvalid, "Invalid request: %s is longer than %d bytes", f.name, f.max)
		}
		if err := crdt.CheckText(f.name, f.value); err != nil {
			return Progress{}, invalid(codeInvalid, "Invalid request: %s", strings.TrimPrefix(err.Error(), "invalid: "))
		}
	}
	pct := *q.Percentage
	if pct == 0 {
		pct = 0 // -0 reads as 0 and is kept as 0: one value, one encoding
	}
	return Progress{Document: *q.Document, Progress: *q.Progress, Percentage: pct, Device: *q.Device, DeviceID: deviceID}, nil
}

// validDocument checks a document id as the record key it becomes.
func validDocument(doc string) error {
	switch {
	case doc == "":
		return invalid(codeDocument, "Field 'document' not provided.")
	case len(doc) > crdt.MaxKosyncDocumentBytes:
		return invalid(codeDocument, "Invalid request: document is longer than %d bytes", crdt.MaxKosyncDocumentBytes)
	case strings.IndexByte(doc, 0) >= 0 || !utf8.ValidString(doc):
		return invalid(codeDocument, "Invalid request: document holds NUL or invalid UTF-8")
	case crdt.CheckText("document", doc) != nil:
		return invalid(codeDocument, "Invalid request: document holds control characters")
	}
	return nil
}

func (h *handler) getProgress(w http.ResponseWriter, r *http.Request) error {
	user, err := h.mustAuth(r)
	if err != nil {
		return err
	}
	doc := r.PathValue("document")
	if err := validDocument(doc); err != nil {
		return err
	}
	p, ok, err := h.lib.Progress(r.Context(), user, doc)
	if err != nil {
		return err
	}
	if !ok {
		// {} and 200, not 404: KOReader shows a 404 as a sync error.
		writeJSON(w, http.StatusOK, struct{}{})
		return nil
	}
	writeJSON(w, http.StatusOK, progressBody{
		Document: p.Document, Percentage: p.Percentage, Progress: p.Progress,
		Device: p.Device, DeviceID: p.DeviceID, Timestamp: p.Time.Unix(),
	})
	return nil
}

type progressBody struct {
	Document   string  `json:"document"`
	Percentage float64 `json:"percentage"`
	Progress   string  `json:"progress"`
	Device     string  `json:"device"`
	// DeviceID is left out when the push had none, as the reference
	// server does (it stores only the fields it was given); a push of ""
	// is then left out too, which no client tells apart.
	DeviceID  string `json:"device_id,omitempty"`
	Timestamp int64  `json:"timestamp"`
}

// healthcheck answers as the reference server does, for monitors and its
// healthcheck script: the listener is up. It needs no account.
func healthcheck(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"state": "OK"})
	return nil
}
