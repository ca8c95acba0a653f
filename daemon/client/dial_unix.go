//go:build !windows

package client

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
)

// dial connects to the daemon's unix socket.
func dial(ctx context.Context, socket string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", socket)
}

// isNoDaemon reports whether a dial error means nothing serves the socket:
// it does not exist, or a daemon that crashed left it behind.
func isNoDaemon(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, os.ErrNotExist)
}
