package main

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// The daemon's process policy: settings of the Go runtime that are the
// process owner's to choose, so the daemon command chooses them and the
// packages it runs (daemon, store) never do; an app embedding the node
// chooses its own (package mobile's Config.MemoryLimit). The environment
// (GOMEMLIMIT, GOMAXPROCS, GODEBUG=memprofilerate) overrides each.

// daemonMemoryLimit is the soft limit on the Go runtime's memory
// (runtime/debug.SetMemoryLimit). Most of what a burst of writes allocates
// is short-lived (memtable arenas, table builders and their index buffers),
// and without a limit the collector lets that garbage grow to the size of
// the live heap before it runs. A lower limit keeps the anonymous memory of
// a burst lower and costs CPU in collections, down to the point where the
// live heap of a large burst is above it and the collector runs all the
// time (it then takes up to half the CPU and the burst slows down, never
// fails: the limit is soft). It sits above what a burst of a large library
// holds live, so that only floods pay.
const daemonMemoryLimit = 28 << 20

// minProcs is the fewest Ps (GOMAXPROCS) the daemon runs with. During a
// burst the compactors and the collector keep many goroutines runnable;
// with one P per core an API request waits in Go's run queue behind them,
// while with more Ps than cores the kernel time-slices the threads, in
// shorter slices. More Ps also let more compactions run at once, each
// holding its builders. An idle P costs nothing.
const minProcs = 4

// setDaemonProcess applies daemonMemoryLimit and minProcs where the
// environment does not set them, and turns heap profiling off (the daemon
// serves no profiles, and the runtime never frees the record of each
// sampled stack); it returns a function that restores what was there.
func setDaemonProcess(e *env) (restore func()) {
	var undo []func()
	if e.getenv("GOMEMLIMIT") == "" {
		prev := debug.SetMemoryLimit(daemonMemoryLimit)
		undo = append(undo, func() { debug.SetMemoryLimit(prev) })
	}
	if e.getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) < minProcs {
		prev := runtime.GOMAXPROCS(minProcs)
		undo = append(undo, func() { runtime.GOMAXPROCS(prev) })
	}
	if !strings.Contains(e.getenv("GODEBUG"), "memprofilerate=") {
		prev := runtime.MemProfileRate
		runtime.MemProfileRate = 0
		undo = append(undo, func() { runtime.MemProfileRate = prev })
	}
	return func() {
		for _, f := range undo {
			f()
		}
	}
}
