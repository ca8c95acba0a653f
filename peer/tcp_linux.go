package peer

import (
	"cmp"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// setUnackedTimeout is TCP_USER_TIMEOUT (Linux and Android), in
// milliseconds.
func setUnackedTimeout(c syscall.RawConn, d time.Duration) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
	})
	return cmp.Or(err, serr)
}
