package testnet

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// enterNetns moves the calling goroutine's OS thread into namespace ns for
// good: the thread is locked and never unlocked, so the runtime ends it
// with the goroutine, and no other goroutine ever runs in ns. Sockets made
// on it belong to ns.
func enterNetns(ns string) error {
	runtime.LockOSThread()
	f, err := os.Open(filepath.Join("/run/netns", ns))
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("setns %s: %w", ns, err)
	}
	return nil
}
