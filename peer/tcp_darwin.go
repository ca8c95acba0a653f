package peer

import (
	"cmp"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// setUnackedTimeout is TCP_RXT_CONNDROPTIME (macOS and iOS), in seconds.
func setUnackedTimeout(c syscall.RawConn, d time.Duration) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_RXT_CONNDROPTIME, int(d/time.Second))
	})
	return cmp.Or(err, serr)
}
