// Package web is the daemon's status page: the library at a glance in a
// browser, served on the API's loopback TCP listener. It is server-rendered
// (html/template) with embedded CSS and a few lines of JavaScript for live
// updates, so it works offline and needs no build step.
//
// Nothing is served without a session. A session is opened once per login
// token, which the device's owner mints through the API on the unix socket
// (`danyue open`). It has two parts, because cookies ignore the port: any
// other server on this host that the browser visits receives the session
// cookie (HttpOnly, SameSite=Strict). The cookie alone lets a browser read
// the page, which works without JavaScript. Acting (bringing a book back,
// showing an invite code, which carries the library secret, logging out)
// also needs the page key: the login page hands it out once, its script
// keeps it in the origin's localStorage (which, unlike cookies, is kept per
// port), and the page's script puts it in each form it sends. Nothing the
// cookie can fetch contains it, so a leaked cookie cannot act or read the
// secret; the trade-off is that acting needs JavaScript. Every POST also
// passes an Origin and fetch-metadata check.
package web

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/danyue/danyue/daemon/api"
)

// Backend is what the page reads and does; the daemon implements it.
type Backend interface {
	// Status is this device, its library and the other devices.
	Status(ctx context.Context) (api.Status, error)
	// Books calls each with every book this device knows, deleted ones
	// too, one at a time: the page keeps only what it shows, so a shelf of
	// any size costs it the same memory.
	Books(ctx context.Context, each func(api.Book) error) error
	// Devices is the library's member list (GET /v1/devices): the page
	// shows the members no connection has told it of too.
	Devices(ctx context.Context) ([]api.Member, error)
	// Kosync is every KOReader account's place in every document, with
	// the book a document is linked to.
	Kosync(ctx context.Context) ([]api.KosyncProgress, error)
	// Daily is this device's reading time for the last days days.
	Daily(ctx context.Context, days int) (api.Daily, error)
	// Restore brings a deleted book back on every device.
	Restore(ctx context.Context, key string) error
	// Invite returns an invite code for the library (it carries the
	// library secret).
	Invite(ctx context.Context) (string, error)
	// Changes signals, until ctx ends or the channel is closed, whenever
	// what the page shows may have changed.
	Changes(ctx context.Context) <-chan struct{}
}

// Config is what a Server is made with.
type Config struct {
	Backend Backend
	Logger  *slog.Logger     // default slog.Default()
	Now     func() time.Time // default time.Now
}

// Server serves the page. Its zero value is not usable; call New.
type Server struct {
	b        Backend
	log      *slog.Logger
	now      func() time.Time
	sessions *sessions
	mux      *http.ServeMux
	static   http.Handler
}

// maxForm bounds a POST body: the page's forms carry a key and a token.
const maxForm = 4 << 10

// cookieName is the session cookie.
const cookieName = "danyue_session"

//go:embed assets
var assets embed.FS

// New returns the page's server.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	static, _ := fs.Sub(assets, "assets")
	s := &Server{
		b:        cfg.Backend,
		log:      cfg.Logger,
		now:      cfg.Now,
		sessions: newSessions(cfg.Now),
		mux:      http.NewServeMux(),
		static:   http.StripPrefix("/static/", http.FileServerFS(static)),
	}
	s.mux.HandleFunc("GET /login", s.handleLogin)
	s.mux.Handle("GET /{$}", s.authed(s.handlePage))
	s.mux.Handle("GET /fragment", s.authed(s.handleFragment))
	s.mux.Handle("GET /events", s.authed(s.handleEvents))
	s.mux.Handle("GET /static/{file}", s.authed(s.handleStatic))
	s.mux.Handle("POST /restore", s.authed(s.handleRestore))
	s.mux.Handle("POST /invite", s.authed(s.handleInvite))
	s.mux.Handle("POST /logout", s.authed(s.handleLogout))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such page", http.StatusNotFound)
	})
	return s
}

// LoginToken mints a one-time login token: GET /login?token=TOKEN opens a
// session until it expires.
func (s *Server) LoginToken() (string, time.Time, error) {
	return s.sessions.mint()
}

// ServeHTTP serves the page. The caller has checked that the request came to
// the loopback listener and named it in its Host header.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	s.mux.ServeHTTP(w, r)
}

// errCrossSite is a POST that did not come from the page itself.
var errCrossSite = errors.New("the request did not come from this page")

// pageKeyField is the form field that carries the page key. The page's
// script keeps the key in localStorage as "danyue-page-key" (login.js puts
// it there, app.js reads it).
const pageKeyField = "pagekey"

// authed requires a live session, and for a POST that the request came
// from this page (crossOrigin) with the session's page key.
func (s *Server) authed(h func(w http.ResponseWriter, r *http.Request, sess session) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(cookieName)
		var sess session
		ok := false
		if err == nil {
			sess, ok = s.sessions.get(c.Value)
		}
		if !ok {
			http.Error(w, "Not logged in. Run `danyue open` on this computer for a login link.", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxForm)
			if err := crossOrigin(r); err != nil {
				http.Error(w, err.Error(), http.StatusForbidden)
				return
			}
			switch key := r.PostFormValue(pageKeyField); {
			case key == "":
				http.Error(w, "This needs JavaScript: the page acts only with the key this browser got when it logged in, "+
					"which the page's script keeps and sends. Turn JavaScript on, or run `danyue open` for a new login link.", http.StatusForbidden)
				return
			case !sess.checkPageKey(key):
				http.Error(w, "This browser's key for the page is not this session's (it logged in again, or its storage was cleared): "+
					"run `danyue open` for a new login link.", http.StatusForbidden)
				return
			}
		}
		if err := h(w, r, sess); err != nil {
			s.log.Warn("status page", "path", r.URL.Path, "err", err)
			http.Error(w, "the page could not be made: "+err.Error(), http.StatusInternalServerError)
		}
	})
}

// crossOrigin refuses a POST from another origin. The Origin header must be
// this listener's own origin; a browser sends "null" instead when the page's
// referrer policy is no-referrer (as this page's is), and then the fetch
// metadata must say same-origin. Sec-Fetch-Site, where sent, must say so too.
func crossOrigin(r *http.Request) error {
	site := r.Header.Get("Sec-Fetch-Site")
	if site != "" && site != "same-origin" {
		return fmt.Errorf("%w (Sec-Fetch-Site: %s)", errCrossSite, site)
	}
	switch origin := r.Header.Get("Origin"); origin {
	case "http://" + r.Host:
		return nil
	case "null":
		if site == "same-origin" {
			return nil
		}
		return fmt.Errorf("%w (Origin: null)", errCrossSite)
	case "":
		return fmt.Errorf("%w (no Origin header)", errCrossSite)
	default:
		return fmt.Errorf("%w (Origin: %s)", errCrossSite, origin)
	}
}

// handleLogin opens a session and answers the login page, which hands the
// page key to the page's script and goes on to the page. It is the only
// answer that carries the page key, and it is made once per login token.
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	id, pageKey, ok, err := s.sessions.redeem(r.URL.Query().Get("token"))
	if err != nil {
		http.Error(w, "could not open a session: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if !ok {
		http.Error(w, "This login link was used already or has expired. Run `danyue open` for a new one.", http.StatusForbidden)
		return
	}
	var buf bytes.Buffer
	if err := pageTmpl.ExecuteTemplate(&buf, "login", pageKey); err != nil {
		s.sessions.end(id)
		http.Error(w, "could not open a session: "+err.Error(), http.StatusInternalServerError)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     cookieName,
		Value:    id,
		Path:     "/",
		MaxAge:   int(sessionTTL / time.Second),
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
	})
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = buf.WriteTo(w) // a browser gone away is not ours to report
}

func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request, _ session) error {
	if c, err := r.Cookie(cookieName); err == nil {
		s.sessions.end(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "Logged out. Run `danyue open` to log in again.")
	return nil
}

func (s *Server) handleStatic(w http.ResponseWriter, r *http.Request, _ session) error {
	switch r.PathValue("file") {
	case "style.css", "app.js", "login.js":
		s.static.ServeHTTP(w, r)
	default:
		http.NotFound(w, r)
	}
	return nil
}

func (s *Server) handlePage(w http.ResponseWriter, r *http.Request, _ session) error {
	return s.render(w, r, "page", "")
}

func (s *Server) handleFragment(w http.ResponseWriter, r *http.Request, _ session) error {
	return s.render(w, r, "live", "")
}

func (s *Server) handleInvite(w http.ResponseWriter, r *http.Request, _ session) error {
	code, err := s.b.Invite(r.Context())
	if err != nil {
		return err
	}
	return s.render(w, r, "page", code)
}

func (s *Server) handleRestore(w http.ResponseWriter, r *http.Request, _ session) error {
	key := r.PostFormValue("key")
	if err := s.b.Restore(r.Context(), key); err != nil {
		http.Error(w, "could not restore the book: "+err.Error(), http.StatusBadRequest)
		return nil
	}
	// Post/redirect/get: a reload does not post again.
	http.Redirect(w, r, "/", http.StatusSeeOther)
	return nil
}

// heartbeat keeps an idle event stream from looking dead to proxies and to
// the listener's idle cut.
const heartbeat = 25 * time.Second

// handleEvents tells the page when to fetch its live part again. It carries
// no data: the page re-renders on the server, so nothing is formatted twice.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request, _ session) error {
	flusher, ok := w.(http.Flusher)
	if !ok {
		return errors.New("streaming is not supported on this connection")
	}
	changes := s.b.Changes(r.Context())
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": danyue page events\n\n")
	flusher.Flush()
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		var msg string
		select {
		case <-r.Context().Done():
			return nil
		case _, open := <-changes:
			if !open {
				return nil
			}
			msg = "event: change\ndata: {}\n\n"
		case <-tick.C:
			msg = ": still here\n\n"
		}
		if _, err := fmt.Fprint(w, msg); err != nil {
			return nil
		}
		flusher.Flush()
	}
}
