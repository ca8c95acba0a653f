package jsoncheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzCheck compares Check with a naive model: the data is one JSON value
// (json.Valid), valid UTF-8, no object names a key twice (found by decoding
// each object into raw messages, recursively), and no decoded string holds
// U+FFFD that the raw text did not spell (a replaced surrogate). Check must
// accept exactly what the model accepts, and never panic. The seed corpus
// is in testdata/fuzz/FuzzCheck.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":1,"a":2}`, `{"t":"\ud800"}`, `{"t":"\ud83d\udcd6"}`, "{\"t\":\"\xff\"}", `[{"k":[{"k":1}]}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := Check(data, nil)
		want := model(data)
		if (err == nil) != want {
			t.Fatalf("Check(%q) = %v; the model says accepted=%v", data, err, want)
		}
		if err != nil && !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrDuplicateKey) && !errors.Is(err, ErrNotUTF8) && !errors.Is(err, ErrLoneSurrogate) {
			t.Fatalf("Check(%q) = %v, which wraps no sentinel", data, err)
		}
	})
}

func model(data []byte) bool {
	if !json.Valid(data) || !utf8.Valid(data) {
		return false
	}
	return clean(json.RawMessage(bytes.TrimSpace(data)))
}

// clean reports whether one valid JSON value has no duplicate keys and no
// string whose decoding invented a U+FFFD.
func clean(raw json.RawMessage) bool {
	switch raw[0] {
	case '{':
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		dec.Token() // {
		seen := map[string]bool{}
		for dec.More() {
			tok, _ := dec.Token()
			key := tok.(string)
			if seen[key] {
				return false
			}
			seen[key] = true
			var v json.RawMessage
			if dec.Decode(&v) != nil || !clean(v) {
				return false
			}
		}
		return noReplacedRunes(raw)
	case '[':
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return false
		}
		for _, it := range items {
			if !clean(it) {
				return false
			}
		}
		return noReplacedRunes(raw)
	case '"':
		return noReplacedRunes(raw)
	}
	return true
}

// noReplacedRunes reports whether every string in raw decodes to as many
// U+FFFD as it spells, either literally or as \ufffd: decoding makes one for
// each lone surrogate escape.
func noReplacedRunes(raw json.RawMessage) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	prev := int64(0)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return true
		}
		if err != nil {
			return false
		}
		end := dec.InputOffset()
		span := string(raw[prev:end])
		prev = end
		s, ok := tok.(string)
		if !ok {
			continue
		}
		spelled := strings.Count(span, "\uFFFD") + strings.Count(strings.ToLower(span), `\ufffd`)
		if strings.Count(s, "\uFFFD") != spelled {
			return false
		}
	}
}
