//go:build unix && !linux && !darwin && !freebsd

package daemon

import "errors"

// peerUID cannot be read on the unixes danyue does not ship for; the 0700
// directory around the socket is then the guard (unixCaller).
func peerUID(uintptr) (int, error) { return -1, errors.ErrUnsupported }
