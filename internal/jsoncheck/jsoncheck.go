// Package jsoncheck refuses the JSON that encoding/json quietly accepts:
// duplicate object keys (the last one would win), bytes that are not UTF-8
// and \u escapes of lone UTF-16 surrogates (both would become U+FFFD). A
// request body passes Check before it is decoded, so that what a client sent
// is either taken as it is or refused with a reason, never repaired.
package jsoncheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Sentinel errors, wrapped by Check's errors with where the problem is.
var (
	// ErrSyntax: the data is not one JSON value.
	ErrSyntax = errors.New("not valid JSON")
	// ErrDuplicateKey: an object names a key twice.
	ErrDuplicateKey = errors.New("duplicate key")
	// ErrNotUTF8: a string holds bytes that are not UTF-8.
	ErrNotUTF8 = errors.New("not valid UTF-8")
	// ErrLoneSurrogate: a string holds a \u escape of a UTF-16 surrogate
	// that is not half of a pair.
	ErrLoneSurrogate = errors.New("lone UTF-16 surrogate")
)

// Check walks data, one JSON value, and returns an error for the first
// duplicate key, string that is not UTF-8 or lone surrogate escape. text, if
// not nil, is called with every string value (not keys) and its place in
// the document ("title", "items[2].name"); an error it returns is Check's.
func Check(data []byte, text func(path, s string) error) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers are not looked at; this keeps them cheap
	var stack []*frame
	prev := int64(0)
	for first := true; first || len(stack) > 0; first = false {
		tok, err := dec.Token()
		if err == io.EOF {
			return fmt.Errorf("%w: unexpected end", ErrSyntax)
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrSyntax, err)
		}
		// The raw bytes of this token (with the separators before it):
		// what the decoder made of a string hides what it replaced.
		end := dec.InputOffset()
		raw := data[prev:end]
		prev = end
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				stack = append(stack, &frame{path: top.child(), obj: t == '{', keys: map[string]struct{}{}})
			default:
				stack = stack[:len(stack)-1]
				top = nil
				if len(stack) > 0 {
					top = stack[len(stack)-1]
				}
				top.done()
			}
			continue
		case string:
			if top != nil && top.obj && top.key == nil {
				where := top.join(t)
				if err := rawString(raw, "key "+strconv.Quote(where)); err != nil {
					return err
				}
				if _, dup := top.keys[t]; dup {
					return fmt.Errorf("%w %q", ErrDuplicateKey, where)
				}
				top.keys[t] = struct{}{}
				top.key = &t
				continue
			}
			where := top.child()
			if err := rawString(raw, where); err != nil {
				return err
			}
			if text != nil {
				if err := text(where, t); err != nil {
					return err
				}
			}
		}
		top.done()
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: more than one value", ErrSyntax)
	}
	return nil
}

// frame is an object or array being walked.
type frame struct {
	path string
	obj  bool
	keys map[string]struct{}
	key  *string // the key whose value comes next; nil while a key is due
	idx  int     // in an array, the index of the next element
}

// child is the path of the value that comes next in f (f nil: the top).
func (f *frame) child() string {
	switch {
	case f == nil:
		return "the body"
	case f.obj && f.key != nil:
		return f.join(*f.key)
	case f.obj:
		return f.path
	}
	return fmt.Sprintf("%s[%d]", f.pathOr(), f.idx)
}

func (f *frame) join(key string) string {
	if f.path == "the body" {
		return key
	}
	return f.path + "." + key
}

func (f *frame) pathOr() string {
	if f.path == "the body" {
		return ""
	}
	return f.path
}

// done records that a value of f is complete.
func (f *frame) done() {
	switch {
	case f == nil:
	case f.obj:
		f.key = nil
	default:
		f.idx++
	}
}

// rawString checks the raw bytes of one string token: UTF-8, and every \u
// escape of a surrogate paired. raw is valid JSON (the decoder read it), so
// a backslash is always an escape inside the string.
func rawString(raw []byte, where string) error {
	if !utf8.Valid(raw) {
		return fmt.Errorf("%s is %w", where, ErrNotUTF8)
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		if i+1 >= len(raw) || raw[i+1] != 'u' {
			i++ // a one-letter escape: skip its letter (it may be a backslash)
			continue
		}
		r := hex4(raw, i+2)
		switch {
		case utf16.IsSurrogate(r) && r < 0xdc00:
			// A high surrogate: a low one must follow at once.
			if i+7 < len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
				if lo := hex4(raw, i+8); lo >= 0xdc00 && lo <= 0xdfff {
					i += 11
					continue
				}
			}
			return fmt.Errorf("%s holds a %w (\\u%04x without its pair)", where, ErrLoneSurrogate, r)
		case utf16.IsSurrogate(r):
			return fmt.Errorf("%s holds a %w (\\u%04x without its pair)", where, ErrLoneSurrogate, r)
		}
		i += 5
	}
	return nil
}

// hex4 reads the four hex digits at raw[i:], or returns -1.
func hex4(raw []byte, i int) rune {
	if i+4 > len(raw) {
		return -1
	}
	n, err := strconv.ParseUint(string(raw[i:i+4]), 16, 32)
	if err != nil {
		return -1
	}
	return rune(n)
}
