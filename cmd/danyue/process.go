package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"time"
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

// releaseCheck is how often the daemon looks whether a burst of work is
// over, to hand the memory it left back to the OS (releaseAfterBursts).
// Shorter gives the memory back sooner and wakes the idle process more
// often.
const releaseCheck = 10 * time.Second

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

// releasingAfterBursts runs releaseAfterBursts until the function it
// returns is called, which waits for it to end.
func releasingAfterBursts() (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		releaseAfterBursts(quit)
	}()
	return func() {
		close(quit)
		<-done
	}
}

// releaseAfterBursts hands the heap's free memory back to the OS
// (debug.FreeOSMemory) once a burst of work is over, until stop is closed.
// At the end of a burst most of the heap is garbage (the store closes the
// database it held, memtables and builders with it), but the collector
// runs only as the heap grows again, or every two minutes, so the process
// would keep that memory for as long. A burst runs the collector, so a
// check that finds collections since the one before and none since the
// last (burstOver) releases once: a full collection of what is left.
func releaseAfterBursts(stop <-chan struct{}) {
	sample := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	cycles := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	var w burstOver
	w.step(cycles())
	tick := time.NewTicker(releaseCheck)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if w.step(cycles()) {
			debug.FreeOSMemory()
			w.released(cycles())
		}
	}
}

// burstOver tells from the collector's cycle count, read at each check,
// when a burst of work is over.
type burstOver struct {
	last uint64
	busy bool // collections ran between the last two checks
}

// step takes the cycle count of a check and reports whether a burst ended
// since the check before: collections ran before that check and none since.
func (w *burstOver) step(cycles uint64) (over bool) {
	ran := cycles != w.last
	w.last = cycles
	over = w.busy && !ran
	w.busy = ran
	return over
}

// released takes the cycle count after a release: its own collection is
// no burst.
func (w *burstOver) released(cycles uint64) {
	w.last, w.busy = cycles, false
}
