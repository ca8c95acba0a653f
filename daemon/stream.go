package daemon

// Answers that are lists are written as they are read, one item at a time,
// so that what the daemon holds for a request does not grow with the
// library; and validators (ETag) let a client that already has an answer
// skip it.

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"strings"
)

// jsonStream writes a JSON object holding one array, item by item: head
// (which opens the object and names the array, as `{"books":[`), the items,
// then tail (which closes the array, adds the members known only at the end
// and closes the object). Nothing is written until the first item or the
// tail, so a handler can still answer with an error before that.
type jsonStream struct {
	w       http.ResponseWriter
	head    string
	enc     *json.Encoder
	n       int
	started bool
}

func newJSONStream(w http.ResponseWriter, head string) *jsonStream {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &jsonStream{w: w, head: head, enc: enc}
}

func (s *jsonStream) start() error {
	if s.started {
		return nil
	}
	s.started = true
	s.w.Header().Set("Content-Type", "application/json")
	s.w.Header().Set("X-Content-Type-Options", "nosniff")
	s.w.WriteHeader(http.StatusOK)
	_, err := s.w.Write([]byte(s.head))
	return err
}

// item writes one element of the array.
func (s *jsonStream) item(v any) error {
	if err := s.start(); err != nil {
		return err
	}
	if s.n > 0 {
		if _, err := s.w.Write([]byte{','}); err != nil {
			return err
		}
	}
	s.n++
	return s.enc.Encode(v) // its newline is JSON whitespace
}

// end closes the array and writes tail, the rest of the object, which
// starts after the array's "]".
func (s *jsonStream) end(tail string) error {
	if err := s.start(); err != nil {
		return err
	}
	_, err := s.w.Write([]byte("]" + tail + "}\n"))
	return err
}

// fail ends an answer that failed after it started: the status is sent and
// the body cannot say so, so the connection is cut before the body is
// complete, which every client sees as an error rather than as a short
// list. net/http documents panicking with ErrAbortHandler for exactly this;
// the in-process transport turns it into a read error too.
func (s *jsonStream) fail(err error) error {
	if !s.started {
		return err
	}
	panic(http.ErrAbortHandler)
}

// etagOf returns a strong entity tag for the parts, which must determine
// the answer's body.
func etagOf(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(p))))
		h.Write(p)
	}
	return `"` + base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:18]) + `"`
}

// notModified reports whether the request's If-None-Match names etag (or
// is "*"), comparing weakly as RFC 9110 asks for GET; if so it answers 304.
// Either way the answer carries the tag.
func notModified(w http.ResponseWriter, r *http.Request, etag string) bool {
	w.Header().Set("ETag", etag)
	w.Header().Set("Cache-Control", "no-cache")
	inm := r.Header.Values("If-None-Match")
	for _, line := range inm {
		for _, t := range strings.Split(line, ",") {
			t = strings.TrimSpace(t)
			if t == "*" || strings.TrimPrefix(t, "W/") == etag {
				w.WriteHeader(http.StatusNotModified)
				return true
			}
		}
	}
	return false
}

// writeTagged writes v as JSON with an entity tag of its bytes, or 304 if
// the client has them.
func writeTagged(w http.ResponseWriter, r *http.Request, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	if notModified(w, r, etagOf(buf.Bytes())) {
		return nil
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes()) // the client going away is not our error to report
	return nil
}
