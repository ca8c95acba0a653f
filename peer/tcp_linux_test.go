package peer

import (
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/danyue/danyue/internal/poll"
	manet "github.com/multiformats/go-multiaddr/net"
	"golang.org/x/sys/unix"
)

// Both ends of a connection between two nodes, the dialled one and the
// accepted one, carry the keepalive schedule that ends a connection to a
// vanished peer within lostPeerBound; libp2p's own is 30 s idle, then 9
// probes 15 s apart, and data in flight retransmitted for many minutes.
// The kernel's socket options are read back from the process's open
// sockets.
func TestConnectionsUseKeepAliveSchedule(t *testing.T) {
	if bound := tcpKeepAlive.Idle + time.Duration(tcpKeepAlive.Count)*tcpKeepAlive.Interval; bound >= lostPeerBound || unackedTimeout >= lostPeerBound {
		t.Fatalf("a dead connection ends after %v idle, %v with data in flight; want under %v", bound, unackedTimeout, lostPeerBound)
	}
	lib := newLib(t)
	a, b := newDevice(t, "A"), newDevice(t, "B")
	a.start(t, lib, nil)
	b.start(t, lib, a.node.Addrs())
	poll.Until(t, "B to connect to A", 10*time.Second, func() bool { return connectedTo(b.node, a.id) })

	conns := b.node.host.Network().ConnsToPeer(a.id)
	if len(conns) == 0 {
		t.Fatal("B has no connection to A")
	}
	local, err := manet.ToNetAddr(conns[0].LocalMultiaddr())
	if err != nil {
		t.Fatal(err)
	}
	remote, err := manet.ToNetAddr(conns[0].RemoteMultiaddr())
	if err != nil {
		t.Fatal(err)
	}
	ends := map[[2]netip.AddrPort]string{
		{netip.MustParseAddrPort(local.String()), netip.MustParseAddrPort(remote.String())}: "dialled by B",
		{netip.MustParseAddrPort(remote.String()), netip.MustParseAddrPort(local.String())}: "accepted by A",
	}
	want := map[string]int{
		"TCP_KEEPIDLE":  int(tcpKeepAlive.Idle / time.Second),
		"TCP_KEEPINTVL": int(tcpKeepAlive.Interval / time.Second),
		"TCP_KEEPCNT":   tcpKeepAlive.Count,
		// Keepalive probes wait while data is in flight; this bounds that.
		"TCP_USER_TIMEOUT": int(unackedTimeout / time.Millisecond),
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot list open files: %v", err)
	}
	found := 0
	for _, e := range fds {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		end, ok := ends[[2]netip.AddrPort{sockAddr(unix.Getsockname(fd)), sockAddr(unix.Getpeername(fd))}]
		if !ok {
			continue
		}
		found++
		for name, opt := range map[string]int{
			"TCP_KEEPIDLE": unix.TCP_KEEPIDLE, "TCP_KEEPINTVL": unix.TCP_KEEPINTVL, "TCP_KEEPCNT": unix.TCP_KEEPCNT, "TCP_USER_TIMEOUT": unix.TCP_USER_TIMEOUT,
		} {
			got, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, opt)
			if err != nil {
				t.Fatalf("%s: %s: %v", end, name, err)
			}
			if got != want[name] {
				t.Errorf("connection %s: %s = %d, want %d", end, name, got, want[name])
			}
		}
	}
	if found != 2 {
		t.Fatalf("found %d of the connection's 2 sockets", found)
	}
}

func sockAddr(sa unix.Sockaddr, err error) netip.AddrPort {
	if in4, ok := sa.(*unix.SockaddrInet4); ok && err == nil {
		return netip.AddrPortFrom(netip.AddrFrom4(in4.Addr), uint16(in4.Port))
	}
	return netip.AddrPort{}
}
