package peer

import (
	"time"

	"golang.org/x/sys/unix"
)

// TCP_USER_TIMEOUT (Linux and Android), in milliseconds.
const (
	unackedOpt  = unix.TCP_USER_TIMEOUT
	unackedUnit = time.Millisecond
)
