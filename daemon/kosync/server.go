package kosync

import (
	"log/slog"
	"net/http"
	"time"
)

// The listener is reachable from the LAN by design (KOReader devices are
// other machines), so the server is set up for clients that are slow, broken
// or hostile: every phase of a request has a deadline, headers are bounded
// (the handler bounds bodies). The daemon serves it on a listener that caps
// connections in all and per address, and sets shorter header, body and
// idle timeouts of its own.

// Limits of the kosync server.
const (
	maxHeaderBytes    = 8 << 10
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 15 * time.Second
	writeTimeout      = 15 * time.Second
	idleTimeout       = 30 * time.Second
)

// NewServer returns an http.Server for h with those limits.
func NewServer(h http.Handler, log *slog.Logger) *http.Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		// Broken clients are routine on a LAN; their TLS probes and
		// malformed requests are not worth more than a debug line.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
}
