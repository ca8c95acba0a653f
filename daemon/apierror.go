package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/danyue/danyue/daemon/api"
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

func writeError(w http.ResponseWriter, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = errorf(http.StatusInternalServerError, api.CodeInternal, "%v", err)
	}
	writeJSON(w, ae.status, ae.body)
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
// no unknown fields, no trailing data, at most maxBody bytes. The errors say
// which rule was broken, so an app developer can fix the request.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		return errorf(http.StatusUnsupportedMediaType, api.CodeUnsupported, "the body must be application/json, not %q", ct)
	}
	body := http.MaxBytesReader(w, r.Body, maxBody)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return jsonError(err)
		}
		return errorf(http.StatusBadRequest, api.CodeBadRequest, "the body must hold exactly one JSON object")
	}
	return nil
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
