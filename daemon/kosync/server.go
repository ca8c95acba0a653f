package kosync

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// The listener is reachable from the LAN by design (KOReader devices are
// other machines), so the server is set up for clients that are slow, broken
// or hostile: every phase of a request has a deadline, headers are bounded
// (the handler bounds bodies), and so is the number of connections.

// Limits of the kosync server.
const (
	MaxConns          = 64
	maxHeaderBytes    = 8 << 10
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 15 * time.Second
	writeTimeout      = 15 * time.Second
	idleTimeout       = 60 * time.Second
)

// NewServer returns an http.Server for h with those limits. Serve it on
// LimitListener(ln, MaxConns).
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

// LimitListener returns a listener that holds at most n connections open:
// Accept waits while n are, so a flood of connections queues in the kernel
// instead of costing goroutines and memory.
func LimitListener(ln net.Listener, n int) net.Listener {
	return &limitListener{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
