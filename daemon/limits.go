package daemon

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/danyue/danyue/internal/connlimit"
)

// Every listener (the local endpoint, the TCP API, kosync) bounds what its
// connections can hold: a header read timeout, a body read timeout, an idle
// timeout, a write stall timeout, and a cap on connections in all and per
// remote address (connlimit). The caps come out of one file descriptor
// budget, so that whatever the TCP listeners suffer, the store, the peer
// network and the local endpoint still have descriptors to work with.

// listenerLimits are the limits of one listener.
type listenerLimits struct {
	conns      connlimit.Limits
	readHeader time.Duration // request headers, from the first byte
	body       time.Duration // a request body, from the handler asking for it
	idle       time.Duration // a keep-alive connection between requests
}

// limits are the limits of all listeners.
type limits struct {
	nofile uint64 // the open files limit they were made for; 0: unknown
	local  listenerLimits
	tcp    listenerLimits
	kosync listenerLimits
}

// defaultNofile is the budget where the system does not say (Windows,
// whose handles are limited by memory only).
const defaultNofile = 8192

// budget divides the open files limit nofile among the listeners. The TCP
// listeners together get at most a quarter of it: libp2p's resource manager
// takes up to half for the peer network, and the store, the local endpoint
// and the rest keep the remaining quarter. Within that, each cap is what
// its clients can use: reader apps on this machine for the TCP API, a
// few KOReader devices for kosync. Conns beyond a cap cost nothing: they
// are refused, or make room by closing idle and stalled ones.
func budget(nofile uint64) limits {
	n := nofile
	if n == 0 {
		n = defaultNofile
	}
	n = min(n, 1<<20)
	tcpShare := int(n / 4)
	api := clamp(tcpShare/2, 16, 1024)
	kos := clamp(tcpShare/2, 16, 256)
	local := clamp(int(n/16), 16, 512)
	return limits{
		nofile: nofile,
		local: listenerLimits{
			// Every client of the local endpoint is this user: one
			// cap, no addresses to tell apart.
			conns:      connlimit.Limits{Max: local, WriteStall: 30 * time.Second},
			readHeader: 5 * time.Second,
			body:       10 * time.Second,
			idle:       2 * time.Minute,
		},
		tcp: listenerLimits{
			// Loopback only unless --http-allow-remote: every local
			// process shares 127.0.0.1, so the per-address cap matters
			// when the port is reachable from elsewhere.
			conns:      connlimit.Limits{Max: api, PerAddr: max(api/4, 8), WriteStall: 30 * time.Second},
			readHeader: 5 * time.Second,
			body:       10 * time.Second,
			idle:       time.Minute,
		},
		kosync: listenerLimits{
			conns:      connlimit.Limits{Max: kos, PerAddr: min(kos, 32), WriteStall: 15 * time.Second},
			readHeader: 5 * time.Second,
			body:       10 * time.Second,
			idle:       30 * time.Second,
		},
	}
}

func clamp(v, lo, hi int) int { return max(lo, min(v, hi)) }

// listenLimits returns the limits of this daemon's listeners.
func (d *Daemon) listenLimits() limits {
	if d.cfg.limits != nil {
		return *d.cfg.limits
	}
	return budget(fileLimit())
}

// serveLimited serves h on ln with the limits lim, and info for what the
// handlers know of each connection. name says which listener it is in logs.
func (d *Daemon) serveLimited(name string, ln net.Listener, srv *http.Server, lim listenerLimits, info func(net.Conn) connInfo) *connlimit.Listener {
	var cl *connlimit.Listener
	var lastWarn atomic.Int64
	lim.conns.Full = func() {
		// At most a line a minute, whatever the flood: the counters say
		// how much it was.
		now, last := time.Now().UnixNano(), lastWarn.Load()
		if now-last < int64(time.Minute) || !lastWarn.CompareAndSwap(last, now) {
			return
		}
		st := cl.Stats()
		d.log.Warn(name+" listener is full: closing idle and slow connections to make room",
			"addr", ln.Addr(), "cap", lim.conns.Max, "per_addr", lim.conns.PerAddr, "open", st.Open, "closed", st.Evicted, "refused", st.Refused)
	}
	cl = connlimit.New(ln, lim.conns)
	srv.Handler = cl.Handler(srv.Handler, lim.body)
	srv.ReadHeaderTimeout = lim.readHeader
	srv.IdleTimeout = lim.idle
	srv.ConnState = cl.ConnState
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		ctx = connlimit.ConnContext(ctx, c)
		if info != nil {
			if lc, ok := c.(*connlimit.Conn); ok {
				c = lc.Conn
			}
			ctx = context.WithValue(ctx, connInfoKey{}, info(c))
		}
		return ctx
	}
	d.servers = append(d.servers, srv)
	d.wg.Go(func() {
		if err := srv.Serve(cl); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error(name+" listener failed", "addr", ln.Addr(), "err", err)
			select {
			case d.serveErr <- err:
			default:
			}
		}
	})
	return cl
}
