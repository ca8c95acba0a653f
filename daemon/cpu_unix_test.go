//go:build unix

package daemon

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time this process has used, user and system,
// so that a benchmark can report what an operation costs apart from what
// other processes on the machine take meanwhile.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
