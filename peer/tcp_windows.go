package peer

import (
	"time"

	"golang.org/x/sys/windows"
)

// TCP_MAXRT (Windows Vista and later), in seconds.
const (
	unackedOpt  = windows.TCP_MAXRT
	unackedUnit = time.Second
)

func setTCPOption(fd uintptr, opt, value int) error {
	return windows.SetsockoptInt(windows.Handle(fd), windows.IPPROTO_TCP, opt, value)
}
