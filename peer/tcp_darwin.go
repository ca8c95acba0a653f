package peer

import (
	"time"

	"golang.org/x/sys/unix"
)

// TCP_RXT_CONNDROPTIME (macOS and iOS), in seconds.
const (
	unackedOpt  = unix.TCP_RXT_CONNDROPTIME
	unackedUnit = time.Second
)
