package peer

import (
	"cmp"
	"syscall"
	"time"

	"golang.org/x/sys/windows"
)

// setUnackedTimeout is TCP_MAXRT (Windows Vista and later), in seconds.
func setUnackedTimeout(c syscall.RawConn, d time.Duration) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = windows.SetsockoptInt(windows.Handle(fd), windows.IPPROTO_TCP, windows.TCP_MAXRT, int(d/time.Second))
	})
	return cmp.Or(err, serr)
}
