// Package connlimit bounds what the connections of one HTTP listener can
// hold: how many are open at once, in all and per remote address, and how
// long a request body or a stalled response write may take.
//
// A plain limit listener (netutil.LimitListener) stops accepting when it is
// full, so whoever holds the slots first keeps everyone else out: a handful
// of idle keep-alive connections lock a LAN service for all its clients.
// This one always accepts, and when a new connection would pass a cap it
// closes the connection that is least likely to be doing useful work, as
// OpenSSH's MaxStartups drops unauthenticated connections early: first an
// idle keep-alive connection, then one that has not finished sending its
// request headers, then one still trickling a request body, oldest first in
// each kind. A connection whose handler is running (a request being answered,
// an event stream) is never closed to make room; if nothing else can go, the
// new connection is refused. Connections that are refused or closed cost
// the daemon nothing after that, and the slots, and so the file descriptors,
// stay bounded whatever the other ends do.
package connlimit

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Limits are the caps of one listener. A zero field is no cap.
type Limits struct {
	// Max is how many connections the listener holds open at once.
	Max int
	// PerAddr is how many of them one remote address may hold: an IPv4
	// address, or an IPv6 /64 (what one machine on a LAN usually has).
	PerAddr int
	// WriteStall is how long one write of a response may block: a client
	// that stops reading is cut, while a long stream that the client
	// reads keeps going.
	WriteStall time.Duration
	// Full, if set, is called after a new connection met a cap (and
	// something was closed, it or another): the owner's hint to log.
	Full func()
}

// phase is what a connection is doing, as far as eviction cares.
type phase uint8

const (
	phaseGone  phase = iota // closed, slot released
	phaseIdle               // between requests (keep-alive)
	phaseFresh              // accepted, first request headers not read yet
	phaseBody               // a handler is waiting for the request body
	phaseBusy               // a handler is running: never evicted
)

// evictOrder is the order in which the phases give up a connection.
var evictOrder = [...]phase{phaseIdle, phaseFresh, phaseBody}

// Listener is a net.Listener with Limits. Serve it with an http.Server
// whose ConnState is the listener's ConnState and whose ConnContext
// includes ConnContext, and wrap the handler with Handler.
type Listener struct {
	net.Listener
	lim Limits

	mu     sync.Mutex
	open   int
	byAddr map[string]map[*Conn]struct{}
	lists  [phaseBusy]list // by phase; oldest first

	refused, evicted atomic.Int64
}

// New returns ln with the limits lim.
func New(ln net.Listener, lim Limits) *Listener {
	return &Listener{Listener: ln, lim: lim, byAddr: make(map[string]map[*Conn]struct{})}
}

// Stats are counters of a listener since it started.
type Stats struct {
	Open    int   // connections held now
	Refused int64 // new connections closed at once: nothing could make room
	Evicted int64 // connections closed to make room for new ones
}

// Stats returns the listener's counters.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	open := l.open
	l.mu.Unlock()
	return Stats{Open: open, Refused: l.refused.Load(), Evicted: l.evicted.Load()}
}

// Accept returns the next connection that fits the limits, making room by
// closing a less useful connection when one passes a cap.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c, full := l.admit(nc)
		if c == nil {
			nc.Close()
			l.refused.Add(1)
		}
		if full && l.lim.Full != nil {
			l.lim.Full()
		}
		if c != nil {
			return c, nil
		}
	}
}

// admit registers nc, evicting what must go; nil if nc cannot stay. full
// says whether a cap was met.
func (l *Listener) admit(nc net.Conn) (_ *Conn, full bool) {
	c := &Conn{Conn: nc, l: l, stall: l.lim.WriteStall}
	if l.lim.PerAddr > 0 {
		c.addr = MachineKey(nc.RemoteAddr().String())
	}
	var victims []*Conn
	l.mu.Lock()
	if l.lim.PerAddr > 0 && len(l.byAddr[c.addr]) >= l.lim.PerAddr {
		v := l.victimOf(l.byAddr[c.addr])
		if v == nil {
			l.mu.Unlock()
			return nil, true
		}
		l.releaseLocked(v)
		victims = append(victims, v)
	}
	if l.lim.Max > 0 && l.open >= l.lim.Max {
		v := l.victim()
		if v == nil {
			l.mu.Unlock()
			l.closeAll(victims)
			return nil, true
		}
		l.releaseLocked(v)
		victims = append(victims, v)
	}
	l.open++
	if l.lim.PerAddr > 0 {
		set := l.byAddr[c.addr]
		if set == nil {
			set = make(map[*Conn]struct{})
			l.byAddr[c.addr] = set
		}
		set[c] = struct{}{}
	}
	l.setPhaseLocked(c, phaseFresh)
	l.mu.Unlock()
	l.closeAll(victims)
	return c, len(victims) > 0
}

func (l *Listener) closeAll(victims []*Conn) {
	for _, v := range victims {
		v.Conn.Close()
		l.evicted.Add(1)
	}
}

// victim is the connection of the listener to close first, or nil.
func (l *Listener) victim() *Conn {
	for _, p := range evictOrder {
		if c := l.lists[p].head; c != nil {
			return c
		}
	}
	return nil
}

// victimOf is the connection of one address to close first, or nil.
func (l *Listener) victimOf(set map[*Conn]struct{}) *Conn {
	var best *Conn
	rank := func(p phase) int {
		for i, q := range evictOrder {
			if p == q {
				return i
			}
		}
		return len(evictOrder)
	}
	for c := range set {
		r := rank(c.phase)
		if r == len(evictOrder) {
			continue
		}
		if best == nil || r < rank(best.phase) || r == rank(best.phase) && c.since.Before(best.since) {
			best = c
		}
	}
	return best
}

// setPhaseLocked moves c to phase p, at the young end of p's list.
func (l *Listener) setPhaseLocked(c *Conn, p phase) {
	if c.phase == phaseGone && p != phaseFresh {
		return // evicted or closed meanwhile
	}
	if c.phase < phaseBusy && c.phase != phaseGone {
		l.lists[c.phase].remove(c)
	}
	c.phase = p
	c.since = time.Now()
	if p < phaseBusy {
		l.lists[p].push(c)
	}
}

func (l *Listener) setPhase(c *Conn, p phase) {
	l.mu.Lock()
	l.setPhaseLocked(c, p)
	l.mu.Unlock()
}

// releaseLocked frees c's slot; false if it was already free.
func (l *Listener) releaseLocked(c *Conn) bool {
	if c.phase == phaseGone {
		return false
	}
	if c.phase < phaseBusy {
		l.lists[c.phase].remove(c)
	}
	c.phase = phaseGone
	l.open--
	if l.lim.PerAddr > 0 {
		set := l.byAddr[c.addr]
		delete(set, c)
		if len(set) == 0 {
			delete(l.byAddr, c.addr)
		}
	}
	return true
}

// ConnState is the http.Server's ConnState hook: it tells the listener
// which connections are idle and which are serving a request.
func (l *Listener) ConnState(nc net.Conn, s http.ConnState) {
	c, ok := nc.(*Conn)
	if !ok || c.l != l {
		return
	}
	switch s {
	case http.StateActive:
		l.setPhase(c, phaseBusy)
	case http.StateIdle:
		l.setPhase(c, phaseIdle)
	case http.StateHijacked, http.StateClosed:
		l.mu.Lock()
		l.releaseLocked(c)
		l.mu.Unlock()
	}
}

type connKey struct{}

// ConnContext is for the http.Server's ConnContext: it lets Handler find
// the connection of a request.
func ConnContext(ctx context.Context, nc net.Conn) context.Context {
	if c, ok := nc.(*Conn); ok {
		return context.WithValue(ctx, connKey{}, c)
	}
	return ctx
}

// Conn is a connection accepted by a Listener.
type Conn struct {
	net.Conn
	l     *Listener
	addr  string
	stall time.Duration

	// guarded by l.mu
	phase      phase
	since      time.Time
	prev, next *Conn
}

// Write bounds how long each write may block.
func (c *Conn) Write(b []byte) (int, error) {
	if c.stall > 0 {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(c.stall))
	}
	return c.Conn.Write(b)
}

// Close closes the connection and frees its slot.
func (c *Conn) Close() error {
	c.l.mu.Lock()
	c.l.releaseLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// MachineKey is what counts as one remote machine for a per-address limit,
// given its address as "host:port": the host, or for a global IPv6 address
// its /64, which one machine can fill with addresses of its own. Link-local
// and loopback IPv6 addresses stay whole: every device of a LAN has one in
// fe80::/64.
func MachineKey(hostport string) string {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() && !ip.IsLinkLocalUnicast() && !ip.IsLoopback() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// list is an intrusive doubly linked list of connections, oldest first.
type list struct{ head, tail *Conn }

func (q *list) push(c *Conn) {
	c.prev, c.next = q.tail, nil
	if q.tail != nil {
		q.tail.next = c
	} else {
		q.head = c
	}
	q.tail = c
}

func (q *list) remove(c *Conn) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		q.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		q.tail = c.prev
	}
	c.prev, c.next = nil, nil
}
