package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
	"github.com/danyue/danyue/internal/poll"
)

// TestInProcessSameAnswers checks that a request through InProcess gets the
// answer the unix socket gives, byte for byte, errors included.
func TestInProcessSameAnswers(t *testing.T) {
	d := startDaemon(t, nil)
	ctx := ctxT(t)
	in := client.NewTransport(d.InProcess())
	defer in.Close()
	if _, err := in.SetPosition(ctx, keyA, 77, 0.5, "In Process"); err != nil {
		t.Fatalf("PUT position in process: %v", err)
	}
	for _, path := range []string{"/v1/books/" + keyA, "/v1/books?deleted=1", "/v1/openapi.json", "/v1/stats/daily?days=3"} {
		var viaSocket, viaProc bytes.Buffer
		if err := d.client.DoRaw(ctx, "GET", path, nil, nil, &viaSocket); err != nil {
			t.Fatalf("GET %s on the socket: %v", path, err)
		}
		if err := in.DoRaw(ctx, "GET", path, nil, nil, &viaProc); err != nil {
			t.Fatalf("GET %s in process: %v", path, err)
		}
		if !bytes.Equal(viaSocket.Bytes(), viaProc.Bytes()) {
			t.Errorf("GET %s:\nsocket:     %s\nin process: %s", path, viaSocket.Bytes(), viaProc.Bytes())
		}
	}

	errCases := []struct {
		name       string
		method     string
		path       string
		body       any
		wantStatus int
		wantCode   string
	}{
		{"malformed key", "PUT", "/v1/books/md5:nothex/position", api.PositionRequest{}, http.StatusBadRequest, api.CodeBadKey},
		{"missing field", "PUT", "/v1/books/" + keyA + "/position", map[string]any{"char": 1}, http.StatusBadRequest, api.CodeInvalid},
		{"unknown book", "GET", "/v1/books/" + keyB, nil, http.StatusNotFound, api.CodeNotFound},
		{"unknown path", "GET", "/v1/nothing", nil, http.StatusNotFound, api.CodeNotFound},
		{"wrong method", "PATCH", "/v1/status", nil, http.StatusMethodNotAllowed, api.CodeMethod},
		{"bad invite", "POST", "/v1/join", map[string]string{"code": "not-a-code"}, http.StatusBadRequest, api.CodeBadInvite},
	}
	for _, tc := range errCases {
		t.Run(tc.name, func(t *testing.T) {
			var socketErr, procErr *client.APIError
			if err := d.client.Do(ctx, tc.method, tc.path, nil, tc.body, nil); !errors.As(err, &socketErr) {
				t.Fatalf("socket: err = %v, want an API error", err)
			}
			if err := in.Do(ctx, tc.method, tc.path, nil, tc.body, nil); !errors.As(err, &procErr) {
				t.Fatalf("in process: err = %v, want an API error", err)
			}
			if socketErr.Status != tc.wantStatus || socketErr.Code != tc.wantCode {
				t.Errorf("socket: %d %s, want %d %s", socketErr.Status, socketErr.Code, tc.wantStatus, tc.wantCode)
			}
			if *procErr != *socketErr {
				t.Errorf("in process: %+v, socket: %+v", procErr, socketErr)
			}
		})
	}
	// The failed writes changed nothing.
	if b := mustDo(in.Book(ctx, keyA))(t); b.Position.Char != 77 || b.Title != "In Process" {
		t.Fatalf("after bad requests the book is %+v, want char 77 as written", b)
	}
}

// TestInProcessAdmin checks that the embedding app may use the admin routes,
// which the TCP listener refuses.
func TestInProcessAdmin(t *testing.T) {
	d := startDaemon(t, func(c *Config) { c.HTTP = "127.0.0.1:0" })
	ctx := ctxT(t)
	in := client.NewTransport(d.InProcess())
	defer in.Close()
	code, err := in.Invite(ctx)
	if err != nil || code == "" {
		t.Fatalf("invite in process = %q, %v", code, err)
	}
	// The same route over TCP, with the token, is refused.
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+d.HTTPAddr()+"/v1/invite", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.APIToken())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("invite over TCP: %d, want 403", resp.StatusCode)
	}
	// A web page's request is refused in process too.
	var ae *client.APIError
	if err := in.Do(ctx, "GET", "/v1/status", http.Header{"Origin": {"https://evil.example"}}, nil, nil); !errors.As(err, &ae) || ae.Code != api.CodeForbidden {
		t.Fatalf("request with Origin in process: %v, want forbidden", err)
	}
}

// TestPositionsOpenOnReturn: client.Positions returns only once the daemon
// holds the subscription, so a write timed right after it is never missed.
func TestPositionsOpenOnReturn(t *testing.T) {
	d := startDaemon(t, nil)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	ch, err := d.client.Positions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := d.hub.count(); n != 1 {
		t.Fatalf("subscribers when Positions returned = %d, want 1", n)
	}
	d.hub.publish(Event{Type: "book", Data: api.Book{Key: keyA, Position: &api.Position{Char: 7}}})
	select {
	case p := <-ch:
		if p.Key != keyA || p.Char != 7 {
			t.Fatalf("position = %+v, want %s at 7", p, keyA)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no position within 10s")
	}
}

// TestInProcessEvents checks that the event stream works over the in-process
// transport and that ending it, by context or by closing the body, ends the
// handler.
func TestInProcessEvents(t *testing.T) {
	d := startDaemon(t, nil)
	in := client.NewTransport(d.InProcess())
	defer in.Close()

	ctx, cancel := context.WithCancel(ctxT(t))
	got := make(chan client.Event, 16)
	streamDone := make(chan error, 1)
	go func() {
		streamDone <- in.Events(ctx, func(e client.Event) error {
			got <- e
			return nil
		})
	}()
	poll.Until(t, "the in-process stream to open", 5*time.Second, func() bool { return d.hub.count() == 1 })
	// Book events come from other devices' changes; publish one as the
	// sync path does.
	d.hub.publish(Event{Type: "book", Data: api.Book{Key: keyA, Title: "Evented"}})
	select {
	case e := <-got:
		var b api.Book
		if e.Type != "book" || json.Unmarshal(e.Data, &b) != nil || b.Key != keyA || b.Title != "Evented" {
			t.Fatalf("event = %s %s, want the published book", e.Type, e.Data)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	cancel()
	if err := <-streamDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("Events after cancel = %v, want context.Canceled", err)
	}
	poll.Until(t, "the handler to unsubscribe", 5*time.Second, func() bool { return d.hub.count() == 0 })

	// Closing the body without cancelling ends the handler too.
	req, err := http.NewRequestWithContext(ctxT(t), "GET", "http://danyue/v1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := d.InProcess().RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("events: %d %q", resp.StatusCode, ct)
	}
	poll.Until(t, "the stream to open", 5*time.Second, func() bool { return d.hub.count() == 1 })
	resp.Body.Close()
	poll.Until(t, "the handler to end on close", 5*time.Second, func() bool { return d.hub.count() == 0 })
}

// TestInProcessAfterClose checks that a closed daemon answers with ErrClosed
// rather than touching its closed store.
func TestInProcessAfterClose(t *testing.T) {
	dir := tempDir(t)
	d, err := Start(ctxT(t), Config{DataDir: filepath.Join(dir, "data"), Name: "closing", Listen: []string{"/ip4/127.0.0.1/tcp/0"}, NoMDNS: true, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	in := client.NewTransport(d.InProcess())
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Status(ctxT(t)); !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("status after Close = %v, want ErrClosed", err)
	}
}
