package testnet

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// enterNetns moves the calling goroutine's OS thread into namespace ns
// until leave is called, which moves it back and unlocks it; sockets made
// on it meanwhile belong to ns. The thread must come back rather than end
// with its goroutine, as the runtime ends a locked one: a daemon this
// process started from that thread would get its parent-death signal
// (proc_linux.go) and die mid-scenario. Where the way back fails, the
// thread stays locked and ends with the goroutine, which is the lesser
// harm than another goroutine running in ns.
func enterNetns(ns string) (leave func(), err error) {
	runtime.LockOSThread()
	home, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join("/run/netns", ns))
	if err != nil {
		home.Close()
		return nil, err
	}
	defer f.Close()
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		home.Close()
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("setns %s: %w", ns, err)
	}
	return func() {
		defer home.Close()
		if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
	}, nil
}
