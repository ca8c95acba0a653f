package main

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Process-wide settings of the Go runtime that the daemon chooses because
// it owns its process; a program embedding the daemon package (an app on
// a phone) chooses its own. The environment (GOMEMLIMIT, GOMAXPROCS)
// overrides each.

// daemonMemoryLimit is the soft limit on the Go runtime's memory that the
// daemon runs under (runtime/debug.SetMemoryLimit). The Go collector
// otherwise lets the heap grow to twice what is live before it collects,
// and during a burst of writes (a flood from a member, a device joining a
// large library) most of what badger allocates is short-lived: table
// builders, a 3 MB index buffer for every table a compaction writes,
// memtable arenas. With the limit the collector runs as the heap nears it
// instead, so the process's anonymous memory stays near the limit rather
// than near twice the peak of the live heap. It is soft: when more is live
// the runtime lets the heap grow (and caps the collector at half the CPU),
// so a burst slows down rather than fails. Measured at 100,000 books
// (TestMeasureScale, 2 cores, two runs each), with limits of 48, 40 and 32
// MiB: bulk API writes peaked at 63.5-65.9, 56.5-58.1 and 50.4-53.0 MB
// and took 14.0-14.9, 13.6-14.4 and 17.9-19.1 s; a device joining peaked
// at 66.2-67.0, 59.1-60.9 and 56.5-59.5 MB and took 2.1-2.4, 2.1-2.3 and
// 3.8-4.5 s. Below 40 the collector runs so often that the work slows
// down for little less memory (at 24 a join took 4.5 s and peaked at 53
// MB). A million-record flood peaks at about 108 MB whatever the limit:
// its live heap is above any of them.
// GOMEMLIMIT=off removes it.
const daemonMemoryLimit = 40 << 20

// minProcs is the fewest Ps (GOMAXPROCS) the daemon runs with. During a
// burst, compactions and the collector keep a dozen goroutines runnable,
// and with one P per core a request that becomes runnable waits in Go's
// run queue behind them, 10 ms a time slice: on 2 cores single-book GETs
// during a flood took 51-67 ms at the 99th percentile. With more Ps than
// cores the kernel time-slices the threads instead, in much shorter
// slices: the same GETs took 34-41 ms with 4 Ps and 27-35 ms with 8. 8
// Ps let more compaction goroutines run at once, which raised the flood's
// peak RSS by about 10 MB over 4. It costs nothing while idle (an idle P's thread
// sleeps). What the slowest GETs still wait for, in a runtime trace of 8
// s of a flood with 4 Ps: of the time of those over 10 ms, 44% for a P
// and 45% for the collector (waiting for a collection to start or to
// finish marking, both of which stop the world, or parked in an assist),
// which runs about 30 times a second during a flood: the flood allocates
// 17-18 KB a record, over a third of it badger's index buffers
// (store/options.go).
const minProcs = 4

// The daemon turns the runtime's heap profiling off (MemProfileRate 0)
// unless GODEBUG sets memprofilerate: it serves no profiles, and the
// record the runtime keeps of every distinct stack it sampled (one
// allocation in 512 KB) is memory the process never gives back: 1.4 MB of
// a device that has just joined 100,000 books, 5% of its idle RSS.

// setDaemonProcess applies daemonMemoryLimit, minProcs and the profiling
// rate where the environment does not set them, and returns a function
// that restores what was there before.
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
