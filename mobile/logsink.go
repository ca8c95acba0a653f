package mobile

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"sync"
)

// LogSink receives the node's logs in place of stderr: an app sends them to
// its own log (Android's Log, os_log, a file it rotates).
type LogSink interface {
	// Log is given one record: its level as log/slog numbers them (-4
	// debug, 0 info, 4 warn, 8 error) and its line in logfmt, as
	// `time=... level=INFO msg="..." key=value`, without a newline. It is
	// called from the node's goroutines, one call at a time; it must
	// return soon and must not call the node.
	Log(level int, line string)
}

// newLogger returns the node's logger: to sink, or to stderr if sink is nil.
func newLogger(sink LogSink, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if sink == nil {
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
	s := &sinkState{sink: sink}
	return slog.New(&sinkHandler{s: s, h: slog.NewTextHandler(&s.buf, opts)})
}

// sinkState is what every logger derived from one sink shares: the sink and
// the buffer a record is formatted into, guarded by mu, which also keeps
// the sink's calls one at a time.
type sinkState struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	sink LogSink
}

// sinkHandler formats a record with slog's text handler into the shared
// buffer and hands the line to the sink.
type sinkHandler struct {
	s *sinkState
	h slog.Handler
}

func (h *sinkHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.h.Enabled(ctx, level)
}

func (h *sinkHandler) Handle(ctx context.Context, r slog.Record) error {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	h.s.buf.Reset()
	if err := h.h.Handle(ctx, r); err != nil {
		return err
	}
	h.s.sink.Log(int(r.Level), string(bytes.TrimSuffix(h.s.buf.Bytes(), []byte("\n"))))
	return nil
}

func (h *sinkHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &sinkHandler{s: h.s, h: h.h.WithAttrs(attrs)}
}

func (h *sinkHandler) WithGroup(name string) slog.Handler {
	return &sinkHandler{s: h.s, h: h.h.WithGroup(name)}
}
