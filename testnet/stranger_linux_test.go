package testnet

import (
	"fmt"
	"os"
	"runtime"
	"testing"
)

// TestEnterNetnsComesBack: the thread that entered a namespace is back in
// this process's own, and unlocked, once the goroutine has left: it must
// not end with the goroutine (see enterNetns).
func TestEnterNetnsComesBack(t *testing.T) {
	if why := netnsMissing(); why != "" {
		t.Skipf("%s: %s", skipNoNetns, why)
	}
	ns := fmt.Sprintf("%s%d-enter", prefix, os.Getpid()) // swept if this run is killed
	if err := ipRun("", "netns", "add", ns); err != nil {
		t.Fatal(err)
	}
	defer ipRun("", "netns", "del", ns)
	link := func(p string) string {
		s, err := os.Readlink(p)
		if err != nil {
			t.Errorf("%v", err)
		}
		return s
	}
	own := link("/proc/self/ns/net")
	type seen struct{ inside, after string }
	done := make(chan seen)
	go func() {
		// Locked by the test too, so that the thread is the same one
		// before and after; enterNetns's own lock is nested in it.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		leave, err := enterNetns(ns)
		if err != nil {
			t.Errorf("enter %s: %v", ns, err)
			close(done)
			return
		}
		inside := link("/proc/thread-self/ns/net")
		leave()
		done <- seen{inside, link("/proc/thread-self/ns/net")}
	}()
	s, ok := <-done
	if !ok {
		return
	}
	if s.inside == own {
		t.Errorf("inside %s the thread was still in this process's namespace %s", ns, own)
	}
	if s.after != own {
		t.Errorf("after leaving, the thread is in %s, not back in %s", s.after, own)
	}
}
