//go:build unix && !linux

package testnet

import "syscall"

// procAttr gives a daemon its own process group. These systems have no
// parent-death signal: a daemon outlives a test that dies without its
// cleanup (the multi-host scenarios need Linux anyway).
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
