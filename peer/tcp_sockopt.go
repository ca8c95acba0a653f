//go:build linux || darwin || windows

package peer

import (
	"cmp"
	"syscall"
	"time"
)

// setUnackedTimeout sets the system's limit on how long sent data may stay
// unacknowledged (unackedOpt, in unackedUnit).
func setUnackedTimeout(c syscall.RawConn, d time.Duration) error {
	var serr error
	err := c.Control(func(fd uintptr) { serr = setTCPOption(fd, unackedOpt, int(d/unackedUnit)) })
	return cmp.Or(err, serr)
}
