package daemon

// A reader app that embeds the daemon (package mobile, the C library) talks to
// it through the same route table as every other client, without a socket:
// validation, permissions and JSON shapes cannot drift from the HTTP API's.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/danyue/danyue/library"
)

// ErrClosed is returned for requests made after Close.
var ErrClosed = errors.New("the daemon is closed")

// InProcess returns a RoundTripper that serves each request through the
// daemon's API handler in this process. Its caller is trusted like the
// device's own user on the unix socket, admin routes included: an app that
// embeds the daemon is the device's owner. Responses stream, so the event
// stream works as it does over a socket; closing a response body or ending
// the request's context ends the handler.
func (d *Daemon) InProcess() http.RoundTripper {
	return &inProcess{d: d, h: d.routes()}
}

// Library returns the daemon's library, for an app that embeds the daemon:
// its pairing and join methods (OpenPairing, Pairing, CancelPairing, Join)
// are admin operations, which the app calls in process with typed results
// and errors, and which the HTTP token it may hand to other code (a web
// view) does not grant.
func (d *Daemon) Library() *library.Library { return d.lib }

// APIToken returns the bearer token of the loopback TCP listener, for an
// embedding app that hands the HTTP API to code of its own.
func (d *Daemon) APIToken() string { return d.token }

type inProcess struct {
	d *Daemon
	h http.Handler
}

func (t *inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	select {
	case <-t.d.closing:
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, ErrClosed
	default:
	}
	// The handler's context also ends when the client closes the body, as a
	// server's does when its connection closes.
	ctx, cancel := context.WithCancel(context.WithValue(req.Context(), connInfoKey{}, connInfo{kind: connInProcess, uid: -1}))
	sreq := req.Clone(ctx)
	sreq.RequestURI = req.URL.RequestURI()
	sreq.RemoteAddr = "in-process"
	if sreq.Host == "" {
		sreq.Host = req.URL.Host
	}
	if sreq.Body == nil {
		sreq.Body = http.NoBody
	}

	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, body: pw, ready: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cancel()
		defer sreq.Body.Close()
		defer func() {
			if p := recover(); p != nil {
				w.fail(fmt.Errorf("in-process %s %s: handler panicked: %v", req.Method, req.URL.Path, p))
				return
			}
			w.WriteHeader(http.StatusOK) // a handler that wrote nothing
			pw.Close()
		}()
		t.h.ServeHTTP(w, sreq)
	}()
	// The body is a pipe: a reader that goes away must not leave the handler
	// blocked in a write.
	go func() {
		select {
		case <-req.Context().Done():
			pr.CloseWithError(req.Context().Err())
		case <-done:
		}
	}()

	select {
	case <-w.ready:
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	if w.err != nil {
		return nil, w.err
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          &pipeBody{PipeReader: pr, cancel: cancel},
		ContentLength: -1,
		Request:       req,
	}, nil
}

// pipeBody is a response body whose Close also ends the handler.
type pipeBody struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (b *pipeBody) Close() error {
	b.cancel()
	return b.PipeReader.Close()
}

// pipeWriter is the http.ResponseWriter of one in-process request: the
// status and headers are handed over at the first write, the body streams
// through a pipe that the client reads.
type pipeWriter struct {
	header http.Header
	body   *io.PipeWriter

	once   sync.Once
	ready  chan struct{} // closed once status and sent (or err) are set
	status int
	sent   http.Header
	err    error
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(status int) {
	w.once.Do(func() {
		w.status, w.sent = status, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

// Flush is what the event stream needs: every write already reaches the
// reader, since a pipe has no buffer.
func (w *pipeWriter) Flush() { w.WriteHeader(http.StatusOK) }

// fail ends the request with err: as the RoundTrip's error if nothing was
// sent yet, else as the body's read error.
func (w *pipeWriter) fail(err error) {
	w.once.Do(func() {
		w.err = err
		close(w.ready)
	})
	w.body.CloseWithError(err)
}
