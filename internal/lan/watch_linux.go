package lan

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// watch listens on a route netlink socket to the groups of link and address
// changes. The socket is non-blocking and read through an *os.File, so the
// read waits in Go's poller and Close ends it.
func watch(ctx context.Context) (<-chan struct{}, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("watch interfaces: netlink socket: %w", err)
	}
	sa := &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_LINK | unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("watch interfaces: netlink bind: %w", err)
	}
	f := os.NewFile(uintptr(fd), "netlink-route")
	out := make(chan struct{}, 1)
	go func() {
		<-ctx.Done()
		f.Close()
	}()
	go func() {
		defer close(out)
		// What a message says is not read: any change is reported, and
		// the caller looks at the interfaces itself.
		buf := make([]byte, 4096) // a longer message is cut, unread anyway
		for {
			if _, err := f.Read(buf); err != nil {
				if ctx.Err() != nil {
					return
				}
				// ENOBUFS: changes came faster than they were read, and
				// some were dropped; that is a change too.
				if !errors.Is(err, unix.ENOBUFS) {
					return
				}
			}
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	return out, nil
}
