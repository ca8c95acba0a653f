package connlimit

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// Handler wraps h so that a request body must arrive within bodyTimeout of
// the handler asking for it, and a connection waiting for a body can be
// closed to make room. The deadline is per request, not the server's
// ReadTimeout, because that one also ends long-lived responses such as
// event streams; requests without a body get no read deadline at all.
//
// A response written before the body was read closes the connection: the
// server would otherwise read, and wait for, the rest of a body nobody
// wants (up to 256 KiB) before sending the answer, so a refused request
// with a large Content-Length would hold its connection as long as the
// client liked.
func (l *Listener) Handler(h http.Handler, bodyTimeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		c, _ := r.Context().Value(connKey{}).(*Conn)
		rc := http.NewResponseController(w)
		if bodyTimeout > 0 {
			_ = rc.SetReadDeadline(time.Now().Add(bodyTimeout))
		}
		if c != nil && c.l == l {
			l.setPhase(c, phaseBody)
		}
		b := &body{ReadCloser: r.Body}
		b.done = func() {
			if c != nil && c.l == l {
				l.mu.Lock()
				if c.phase == phaseBody {
					l.setPhaseLocked(c, phaseBusy)
				}
				l.mu.Unlock()
			}
			// The body is in: what the handler does next (a join that
			// dials another device) is not bounded by the body's time.
			// Otherwise the deadline stays, and bounds the server's
			// reading of what is left.
			if b.sawEOF() {
				_ = rc.SetReadDeadline(time.Time{})
			}
		}
		r.Body = b
		cw := &closingWriter{ResponseWriter: w, body: b}
		h.ServeHTTP(cw, r)
		if !cw.wrote {
			// The server would write this header itself, after
			// reading what is left of the body.
			cw.WriteHeader(http.StatusOK)
		}
		if !b.sawEOF() {
			// The answer said Connection: close; the server would still
			// read what is left (up to 256 KiB) before closing, at the
			// client's pace. There is nothing left to wait for.
			_ = rc.SetReadDeadline(time.Now())
		}
		b.finish()
	})
}

// body is a request body that tells when it has been read or dropped.
type body struct {
	io.ReadCloser
	once sync.Once
	done func()

	mu  sync.Mutex
	eof bool
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		if err == io.EOF {
			b.mu.Lock()
			b.eof = true
			b.mu.Unlock()
		}
		b.finish()
	}
	return n, err
}

func (b *body) Close() error {
	b.finish()
	return b.ReadCloser.Close()
}

func (b *body) finish() { b.once.Do(b.done) }

func (b *body) sawEOF() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.eof
}

// closingWriter answers with Connection: close while the body is unread.
type closingWriter struct {
	http.ResponseWriter
	body  *body
	wrote bool
}

func (w *closingWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		if !w.body.sawEOF() {
			w.Header().Set("Connection", "close")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *closingWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Flush keeps streaming handlers working through the wrapper.
func (w *closingWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *closingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
