//go:build !linux && !darwin && !windows

package peer

import (
	"syscall"
	"time"
)

// setUnackedTimeout does nothing where the system has no per-connection
// retransmission limit (FreeBSD and the other BSDs): a connection lost with
// data in flight is noticed by yamux's keepalive within a minute and a bit.
func setUnackedTimeout(syscall.RawConn, time.Duration) error { return nil }
