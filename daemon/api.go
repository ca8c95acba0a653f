package daemon

import (
	"crypto/subtle"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/danyue/danyue/daemon/api"
)

// perm is what a route requires of its caller.
type perm int

const (
	// permRead may see the library.
	permRead perm = iota + 1
	// permWrite may change it (positions, read time, deletes).
	permWrite
	// permAdmin may read the library secret (invite), change the library
	// (join) or make kosync accounts: only the device's own user, on the
	// unix socket or in process.
	permAdmin
)

// route is one endpoint of the API. The table in routes is the single list of
// endpoints: the OpenAPI test checks openapi.json against it.
type route struct {
	method  string
	path    string // net/http pattern path
	perm    perm
	handler func(w http.ResponseWriter, r *http.Request) error
}

func (d *Daemon) routeTable() []route {
	return []route{
		{"GET", "/v1/status", permRead, d.handleStatus},
		{"GET", "/v1/peers", permRead, d.handlePeers},
		{"GET", "/v1/devices", permRead, d.handleDevices},
		{"PUT", "/v1/devices/self/name", permAdmin, d.handleRename},
		{"POST", "/v1/devices/{id}/forget", permAdmin, d.handleForget},
		{"DELETE", "/v1/devices/{id}", permAdmin, d.handleForget},
		{"POST", "/v1/leave", permAdmin, d.handleLeave},
		{"GET", "/v1/books", permRead, d.handleBooks},
		{"GET", "/v1/books/{key}", permRead, d.handleBook},
		{"PUT", "/v1/books/{key}/position", permWrite, d.handlePosition},
		{"POST", "/v1/books/{key}/read-time", permWrite, d.handleReadTime},
		{"DELETE", "/v1/books/{key}", permWrite, d.handleDelete},
		{"POST", "/v1/books/{key}/restore", permWrite, d.handleRestore},
		{"GET", "/v1/events", permRead, d.handleEvents},
		{"GET", "/v1/changes", permRead, d.handleChanges},
		{"GET", "/v1/stats/daily", permRead, d.handleDaily},
		{"POST", "/v1/invite", permAdmin, d.handleInvite},
		{"POST", "/v1/join", permAdmin, d.handleJoin},
		{"POST", "/v1/pairing", permAdmin, d.handlePairingCreate},
		{"GET", "/v1/pairing/{id}", permAdmin, d.handlePairingGet},
		{"DELETE", "/v1/pairing/{id}", permAdmin, d.handlePairingDelete},
		{"GET", "/v1/invites", permAdmin, d.handleInvitesList},
		{"DELETE", "/v1/invites/{id}", permAdmin, d.handlePairingDelete},
		{"POST", "/v1/kosync/users", permAdmin, d.handleKosyncAddUser},
		{"PUT", "/v1/kosync/users/{name}", permAdmin, d.handleKosyncPasswd},
		{"DELETE", "/v1/kosync/users/{name}", permAdmin, d.handleKosyncDelUser},
		{"GET", "/v1/kosync/progress", permRead, d.handleKosyncProgress},
		{"PUT", "/v1/kosync/links/{document}", permWrite, d.handleKosyncLink},
		{"GET", "/v1/openapi.json", permRead, handleOpenAPI},
		{"POST", "/v1/web/login-token", permAdmin, d.handleWebLoginToken},
	}
}

func (d *Daemon) routes() http.Handler {
	mux := http.NewServeMux()
	paths := map[string][]string{}
	for _, rt := range d.routeTable() {
		mux.Handle(rt.method+" "+rt.path, d.guard(rt))
		paths[rt.path] = append(paths[rt.path], rt.method)
	}
	// Without these the mux would answer wrong methods and unknown paths in
	// plain text; the API answers everything in JSON.
	for path, methods := range paths {
		allow := strings.Join(methods, ", ")
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			d.writeError(w, r, "", errorf(http.StatusMethodNotAllowed, api.CodeMethod, "%s %s is not supported; use %s", r.Method, r.URL.Path, allow))
		})
	}
	// Everything else is the status page, on the TCP listener (web.go).
	mux.HandleFunc("/", d.serveStatusPage)
	return mux
}

// guard authenticates the request for its connection and checks the route's
// permission before calling the handler.
func (d *Daemon) guard(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route := rt.method + " " + rt.path
		if err := d.authorize(r, rt.perm); err != nil {
			d.writeError(w, r, route, err)
			return
		}
		if err := rt.handler(w, r); err != nil {
			d.writeError(w, r, route, err)
		}
	})
}

// authorize checks that the caller of r may do what the route needs. Who
// may do what:
//
//   - the local endpoint (the unix socket or named pipe): admin, once the
//     OS vouched that the caller is this user (or root); this is the
//     device's owner, who may also read the library secret;
//   - the in-process caller (an app embedding the daemon): admin, for the
//     same reason;
//   - --http with the token of DATA/api-token: write (read and change the
//     library, not invite or join);
//   - --http with the token of DATA/api-token-read: read only, for what
//     only shows the library (a widget, a status bar, a monitor).
//
// Anything else is refused.
func (d *Daemon) authorize(r *http.Request, need perm) error {
	// A browser page must never drive the API, whichever listener it
	// reaches: browsers send Origin (and Referer) on cross-site requests,
	// reader apps and scripts do not.
	if r.Header.Get("Origin") != "" || r.Header.Get("Referer") != "" {
		return errorf(http.StatusForbidden, api.CodeForbidden, "requests from web pages are refused")
	}
	has, err := d.callerPerm(r)
	if err != nil {
		return err
	}
	switch {
	case need <= has:
		return nil
	case need == permAdmin:
		return errorf(http.StatusForbidden, api.CodeForbidden, "this endpoint is only available on the unix socket")
	}
	return errorf(http.StatusForbidden, api.CodeForbidden, "the read-only token (api-token-read) cannot change the library; use the token in api-token")
}

// callerPerm is what the caller of r may do (see authorize), or why it may
// do nothing.
func (d *Daemon) callerPerm(r *http.Request) (perm, error) {
	info, _ := r.Context().Value(connInfoKey{}).(connInfo)
	switch info.kind {
	case connUnix:
		if !info.vouched {
			return 0, errorf(http.StatusForbidden, api.CodeForbidden, "the system could not tell which user is calling, so the request is refused")
		}
		if info.uid >= 0 && info.uid != os.Getuid() && info.uid != 0 {
			return 0, errorf(http.StatusForbidden, api.CodeForbidden, "the socket belongs to another user")
		}
		return permAdmin, nil
	case connTCP:
		if !loopbackHost(r.Host) {
			return 0, errorf(http.StatusForbidden, api.CodeForbidden, "the Host header must name a loopback address, not %q", r.Host)
		}
		if p := d.tokenPerm(r.Header.Get("Authorization")); p != 0 {
			return p, nil
		}
		return 0, errorf(http.StatusUnauthorized, api.CodeUnauthorized, "a valid Authorization: Bearer token is required (it is in the data dir's api-token file)")
	case connInProcess:
		return permAdmin, nil
	}
	return 0, errorf(http.StatusForbidden, api.CodeForbidden, "unknown connection")
}

// tokenPerm is what the bearer token in an Authorization header grants: 0
// for none. Both tokens are compared in constant time, whichever matches.
func (d *Daemon) tokenPerm(header string) perm {
	auth, ok := strings.CutPrefix(header, "Bearer ")
	tok := []byte(strings.TrimSpace(auth))
	if !ok || len(tok) == 0 {
		return 0
	}
	write := subtle.ConstantTimeCompare(tok, []byte(d.token)) == 1 && d.token != ""
	read := subtle.ConstantTimeCompare(tok, []byte(d.readToken)) == 1 && d.readToken != ""
	switch {
	case write:
		return permWrite
	case read:
		return permRead
	}
	return 0
}

// loopbackHost reports whether a Host header names this machine's loopback,
// which is what defeats DNS rebinding: a hostile page's requests carry its
// own host name.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
