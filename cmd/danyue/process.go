package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync/atomic"
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

// releaseQuiet is how long the collector must have been quiet before the
// daemon hands the memory a burst of work left back to the OS
// (releaseAfterBursts). Shorter gives the memory back sooner, and more
// often in the middle of a burst that pauses.
const releaseQuiet = 10 * time.Second

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
// would keep that memory for as long. A burst runs the collector, so the
// release comes releaseQuiet after a collection with none since: a full
// collection of what is left. It follows the collections as they happen
// (collections) rather than looking on a ticker, so that an idle daemon
// is not woken for it: on a phone every wakeup costs battery.
func releaseAfterBursts(stop <-chan struct{}) {
	gcs := make(chan struct{}, 1)
	defer collections(gcs)()
	quiet := time.NewTimer(releaseQuiet)
	quiet.Stop()
	defer quiet.Stop()
	var w burstOver
	for {
		select {
		case <-stop:
			return
		case <-gcs:
			if w.collected(gcCycles()) {
				quiet.Reset(releaseQuiet)
			}
		case <-quiet.C:
			debug.FreeOSMemory()
			w.released(gcCycles())
		}
	}
}

// gcCycles is the number of collections the runtime has completed.
func gcCycles() uint64 {
	sample := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(sample)
	return sample[0].Value.Uint64()
}

// burstOver tells, from the collector's cycle count, which collections
// belong to a burst of work: all but the release's own.
type burstOver struct {
	releasedAt uint64 // the cycle count after the last release
}

// collected takes the cycle count after a collection was seen and reports
// whether it was a collection of the daemon's work, after which a release
// is due once the collector has been quiet for releaseQuiet.
func (w *burstOver) collected(cycles uint64) bool { return cycles > w.releasedAt }

// released takes the cycle count after a release: its own collection is
// no burst.
func (w *burstOver) released(cycles uint64) { w.releasedAt = cycles }

// collections sends on c, without waiting, after each garbage collection,
// until the function it returns is called. A collection is seen when an
// object of its own, unreachable from the start, is cleaned up; each
// notice sets up the next object before it is sent, so that a collection
// the receiver starts at once is seen too. The object holds a pointer so
// that it is not batched with live objects in the runtime's tiny
// allocator, where it could outlive its collection.
func collections(c chan<- struct{}) (stop func()) {
	var stopped atomic.Bool
	var watch func()
	watch = func() {
		if stopped.Load() {
			return
		}
		runtime.AddCleanup(new(gcSentinel), func(struct{}) {
			watch()
			select {
			case c <- struct{}{}:
			default:
			}
		}, struct{}{})
	}
	watch()
	return func() { stopped.Store(true) }
}

// gcSentinel is the object collections watches.
type gcSentinel struct{ _ *byte }
