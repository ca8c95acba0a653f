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
// so a burst slows down rather than fails.
//
// Between bursts of badger's the live heap of a daemon taking 100,000
// books is 6-7 MB, one memtable arena and little else; a flush holds two
// arenas and a table builder (13 MB), a compaction's builders up to 23 MB.
// Measured on 2 cores, same hour, with limits of 40, 28 and 24 MiB:
//   - at 100,000 books (TestMeasurePhases, two runs each), bulk API writes
//     peaked at 48.4 and 45.9, 38.0 and 38.3, 40.8 and 38.2 MB (anonymous
//     memory 29-30, 18-20 and 17-23 MB; the program's pages and table
//     pages take 15-22 MB whatever the limit) in 17-20, 16-19 and 17-19 s;
//     a device joining peaked at 49.5 (one run), 40.0 and 42.4, 39.2 and
//     38.7 MB in 2.6, 2.9-3.1 and 2.9-3.9 s;
//   - 64 reader apps mixing reads, writes, deletes and pages on a shelf of
//     100,000 books (testnet/cmd/mixed, from another process) got
//     5,000-5,400, 5,200-5,600 and 4,100-4,500 operations a second, with
//     a p99 of 40-42, 47-57 and 76-78 ms;
//   - a member offering a million records (testnet/cmd/flood), where the
//     live heap is above each limit and the collector runs all the time,
//     got 16.4-18.5k, 10.8-12.8k and 10.9-12.5k records a second in
//     (three, two and three runs), with single-book GETs meanwhile at
//     34-43 ms at the 99th percentile and a peak of 83-98 MB with each.
//
// So 28: near the memory of the lowest limit at 100,000 books and the
// speed of the highest for reader apps; a flood, which no app waits on,
// pays.
// GOMEMLIMIT=off removes it.
const daemonMemoryLimit = 28 << 20

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
