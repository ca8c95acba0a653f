package daemon

import (
	"context"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/web"
)

// The status page (package web) is served on the TCP listener, beside the
// API, under every path outside /v1/. The page has its own authentication
// (a session opened by a one-time login token that the device's owner
// mints on the unix socket: a cookie that reads, and a page key, kept in
// the origin's storage, that acts); the API keeps refusing browser
// requests.

func (d *Daemon) newWebPage() *web.Server {
	return web.New(web.Config{Backend: webBackend{d}, Logger: d.log.With("component", "web"), Now: d.now})
}

// serveStatusPage serves the page on the TCP listener to requests that name a
// loopback host (which defeats DNS rebinding, as for the API). Elsewhere, and
// under /v1/, there is nothing but the API's JSON 404.
func (d *Daemon) serveStatusPage(w http.ResponseWriter, r *http.Request) {
	info, _ := r.Context().Value(connInfoKey{}).(connInfo)
	if d.web == nil || info.kind != connTCP || strings.HasPrefix(r.URL.Path, "/v1/") {
		d.writeError(w, r, "", errorf(http.StatusNotFound, api.CodeNotFound, "no endpoint %s; see /v1/openapi.json", r.URL.Path))
		return
	}
	if !loopbackHost(r.Host) {
		d.writeError(w, r, "", errorf(http.StatusForbidden, api.CodeForbidden, "the Host header must name a loopback address, not %q", r.Host))
		return
	}
	d.web.ServeHTTP(w, r)
}

// handleWebLoginToken mints a one-time login URL for the page.
func (d *Daemon) handleWebLoginToken(w http.ResponseWriter, r *http.Request) error {
	addr := d.HTTPAddr()
	if addr == "" || d.web == nil {
		return errorf(http.StatusConflict, api.CodeUnavailable, "the page is served on the --http listener and this daemon has none; start it with --http 127.0.0.1:7100")
	}
	tok, exp, err := d.web.LoginToken()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.WebLogin{URL: "http://" + pageHost(addr) + "/login?token=" + tok, ExpiresAt: exp.UTC().Format(time.RFC3339)})
	return nil
}

// pageHost is the host:port a browser on this machine reaches the listener
// at: a listener on every address is reached on loopback.
func pageHost(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// webBackend is the daemon as the page sees it.
type webBackend struct{ d *Daemon }

func (b webBackend) Status(ctx context.Context) (api.Status, error) { return b.d.status(), nil }

func (b webBackend) Devices(ctx context.Context) ([]api.Member, error) { return b.d.devices(), nil }

func (b webBackend) Books(ctx context.Context, each func(api.Book) error) error {
	v := b.d.viewer()
	return b.d.store.Scan(ctx, crdt.KindBook, func(e crdt.Entry) error { return each(v.book(&e.Book)) })
}

func (b webBackend) Kosync(ctx context.Context) ([]api.KosyncProgress, error) {
	return b.d.kosyncProgress(ctx)
}

func (b webBackend) Daily(ctx context.Context, days int) (api.Daily, error) {
	return b.d.daily(ctx, days)
}

// Restore brings a deleted book back on every device (library.Restore).
func (b webBackend) Restore(ctx context.Context, key string) error {
	k, err := crdt.ParseBookKey(key)
	if err != nil {
		return err
	}
	_, err = b.d.lib.Restore(ctx, k)
	return err
}

func (b webBackend) Invite(ctx context.Context) (string, error) { return b.d.lib.Invite() }

// Changes merges the store's commits (local and remote writes) with the
// event hub (peers connecting and leaving). It ends when ctx does, when the
// daemon closes, or when the hub drops the slow subscriber; the page then
// reconnects.
func (b webBackend) Changes(ctx context.Context) <-chan struct{} {
	d := b.d
	out := make(chan struct{}, 1)
	sub := d.hub.subscribe()
	_, commit := d.store.Watch()
	go func() {
		defer close(out)
		defer d.hub.unsubscribe(sub)
		for {
			select {
			case <-ctx.Done():
				return
			case <-d.closing:
				return
			case <-sub.dropped:
				return
			case <-sub.ch:
			case <-commit:
				_, commit = d.store.Watch()
			}
			select {
			case out <- struct{}{}:
			default: // one signal pending is enough: the page re-reads everything
			}
		}
	}()
	return out
}
