// Package kosync serves KOReader's progress-sync protocol ("kosync"), the one
// KOReader's "custom sync server" setting speaks, as an http.Handler over a
// library it does not own. The daemon mounts it on a listener of its own,
// reachable from the LAN, and keeps accounts and progress in the library, so
// that they sync between daemons like books.
//
// The protocol, as KOReader clients use it:
//
//	POST /users/create          {"username","password"} -> 201 {"username"}
//	                            (only with registration open; a taken name is 402)
//	GET  /users/auth            -> 200 {"authorized":"OK"}
//	PUT  /syncs/progress        {"document","progress","percentage","device","device_id"}
//	                            -> 200 {"document","timestamp"}
//	GET  /syncs/progress/{doc}  -> 200 {"document","percentage","progress","device",
//	                            "device_id","timestamp"}, or 200 {} if there is none
//
// Every request but POST /users/create carries x-auth-user and x-auth-key;
// a missing, empty or wrong pair is 401 and changes nothing, and a request
// refused by the guess limits is 429 with Retry-After, whatever its pair. The "password"
// and the key are the same thing: the lowercase hex MD5 of the user's
// password, which KOReader computes. The library keeps only a slow, salted
// verifier of it (HashKey), and wrong guesses are limited (signin.go).
// Answers are Content-Type application/json exactly (builds of KOReader fail
// on a charset parameter), errors {"code": n, "message": "..."} with the
// reference server's codes.
package kosync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// Progress is one account's place in one document.
type Progress struct {
	Document   string
	Progress   string  // opaque: an XPointer or a page number, kept byte for byte
	Percentage float64 // in [0, 1]
	Device     string  // the reader device's name
	DeviceID   string  // the reader device's id
	// Time is when the write was taken; the library sets it.
	Time time.Time
}

// Library is what the protocol needs of the daemon's library.
type Library interface {
	// UserAuth returns the key hash (made by HashKey) of the account name,
	// and false if there is no such account.
	UserAuth(ctx context.Context, name string) (hash string, ok bool, err error)
	// ReplaceAuth replaces the account's key hash old with new, unless it
	// is no longer old, and reports whether it did.
	ReplaceAuth(ctx context.Context, name, old, new string) (bool, error)
	// CreateUser creates the account name with the key hash, or returns an
	// error wrapping ErrUserExists if the name is taken.
	CreateUser(ctx context.Context, name, hash string) error
	// Progress returns user's place in document, and false if there is none.
	Progress(ctx context.Context, user, document string) (Progress, bool, error)
	// SetProgress records p as user's place in p.Document and returns it as
	// recorded, with its Time.
	SetProgress(ctx context.Context, user string, p Progress) (Progress, error)
}

// ErrUserExists is wrapped by Library.CreateUser's error for a taken name.
var ErrUserExists = errors.New("kosync user exists")

// ErrNoUser is wrapped by the error of a change to an account that does not
// exist (or was removed).
var ErrNoUser = errors.New("no such kosync user")

// Config is what New needs.
type Config struct {
	Library Library
	// Registration opens POST /users/create to anyone who reaches the
	// listener. Off, accounts are made with `danyue kosync adduser`.
	Registration bool
	// Prefix serves the protocol under a path ("/kosync"), for a server
	// shared with other things behind a reverse proxy; empty serves it at
	// the root.
	Prefix string
	Logger *slog.Logger

	// For tests: the clock of the guess limits, the limits themselves,
	// and hooks called at each slow key verification and each lookup of
	// the cache of keys that passed.
	now           func() time.Time
	limits        *limits
	onVerify      func()
	onCacheLookup func()
}

// Error codes of the reference server (koreader-sync-server), which clients
// and their users have seen before.
const (
	codeInternal             = 2000
	codeUnauthorized         = 2001
	codeUserExists           = 2002
	codeInvalid              = 2003
	codeDocument             = 2004
	codeRegistrationDisabled = 2005
	// codeLocked is danyue's: the reference server has no guess limits.
	// Like the other codes danyue adds (404, 405), it is the status.
	codeLocked = http.StatusTooManyRequests
)

type handler struct {
	lib          Library
	registration bool
	log          *slog.Logger
	signin       *signin
}

// New returns the protocol as an http.Handler. Every path outside the
// protocol is a JSON 404: nothing else of the daemon is served here.
func New(cfg Config) (http.Handler, error) {
	if cfg.Library == nil {
		return nil, errors.New("kosync: no library")
	}
	prefix, err := CleanPrefix(cfg.Prefix)
	if err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	si, err := newSignin(cfg, cfg.Logger)
	if err != nil {
		return nil, err
	}
	h := &handler{lib: cfg.Library, registration: cfg.Registration, log: cfg.Logger, signin: si}
	routes := []struct {
		method, path string
		fn           func(http.ResponseWriter, *http.Request) error
	}{
		{"POST", "/users/create", h.createUser},
		{"GET", "/users/auth", h.authUser},
		{"PUT", "/syncs/progress", h.putProgress},
		{"GET", "/syncs/progress/{document}", h.getProgress},
		{"GET", "/healthcheck", healthcheck},
	}
	mux := http.NewServeMux()
	for _, rt := range routes {
		mux.HandleFunc(rt.method+" "+prefix+rt.path, h.serve(rt.fn))
		// Without this the mux answers a wrong method in plain text.
		allow := rt.method
		mux.HandleFunc(prefix+rt.path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s is not supported; use %s", r.Method, r.URL.Path, allow))
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, http.StatusNotFound, "Not found: this server speaks KOReader's progress sync only")
	})
	return mux, nil
}

// CleanPrefix checks a path prefix and returns it without a trailing slash
// ("" for none). Only plain path characters are allowed: the prefix becomes
// part of the routes' patterns.
func CleanPrefix(p string) (string, error) {
	p = strings.TrimRight(p, "/")
	if p == "" {
		return "", nil
	}
	bad := !strings.HasPrefix(p, "/") || strings.Contains(p, "//") || len(p) > 200
	for _, seg := range strings.Split(p[1:], "/") {
		bad = bad || seg == "." || seg == ".."
	}
	for _, c := range p {
		ok := c == '/' || c == '-' || c == '_' || c == '.' || c == '~' ||
			(c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		bad = bad || !ok
	}
	if bad {
		return "", fmt.Errorf("kosync prefix %q must be a plain path such as /kosync", p)
	}
	return p, nil
}

// writeJSON answers v with Content-Type application/json exactly: KOReader
// builds of 2025 fail to parse an answer whose type carries a charset.
func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // a client gone away is not ours to report
}

type errorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status, code int, message string) {
	writeJSON(w, status, errorBody{Code: code, Message: message})
}
