//go:build linux

package main

import (
	"sync"
	"time"

	"github.com/danyue/danyue/bench/internal/gctrace"
	"github.com/danyue/danyue/internal/procstat"
)

// sampleEvery is how often a daemon's memory is read. A peak shorter than
// this can fall between two readings; VmHWM, which the kernel keeps, is
// reported beside the sampled peak and catches it for the whole RSS.
const sampleEvery = 10 * time.Millisecond

// memory is what a daemon held during one window of its life.
type memory struct {
	AnonPeak, FilePeak int64 // kB, the largest sampled
	AnonEnd            int64 // kB, at the window's end
	HWM                int64 // kB, the kernel's peak RSS over the window
	// HeapStart and HeapLive are the largest heap at a collection's start
	// and the largest live heap of the collections that ended in the
	// window, in MB; -1 if none did.
	HeapStart, HeapLive int64
	GCs                 int
	Samples             int
}

// watcher samples a daemon's memory and takes its gctrace lines, from the
// process's start to its end.
type watcher struct {
	pid  int
	quit chan struct{}
	once sync.Once
	done chan struct{}

	mu  sync.Mutex
	win memory
}

func watch(pid int) *watcher {
	w := &watcher{pid: pid, quit: make(chan struct{}), done: make(chan struct{})}
	w.reset()
	go w.loop()
	return w
}

func (w *watcher) loop() {
	defer close(w.done)
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		if !w.sample() {
			return // the process ended
		}
		select {
		case <-w.quit:
			return
		case <-t.C:
		}
	}
}

// sample reads the process's memory once; false if it is gone.
func (w *watcher) sample() bool {
	s, err := procstat.ReadStatus(w.pid)
	if err != nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.win.AnonPeak = max(w.win.AnonPeak, s.Anon)
	w.win.FilePeak = max(w.win.FilePeak, s.File)
	w.win.AnonEnd, w.win.HWM = s.Anon, s.HWM
	w.win.Samples++
	return true
}

func (w *watcher) gc(c gctrace.Cycle) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.win.HeapStart = max(w.win.HeapStart, c.Start)
	w.win.HeapLive = max(w.win.HeapLive, c.Marked)
	w.win.GCs++
}

func (w *watcher) reset() {
	w.mu.Lock()
	w.win = memory{HeapStart: -1, HeapLive: -1}
	w.mu.Unlock()
}

// begin starts a new window: the peaks, the kernel's among them, start
// again from now.
func (w *watcher) begin() {
	_ = procstat.ResetPeak(w.pid) // a kernel that refuses leaves HWM the process's peak
	w.reset()
	w.sample()
}

// end returns the window so far, read once more now.
func (w *watcher) end() memory {
	w.sample()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.win
}

func (w *watcher) stop() {
	w.once.Do(func() { close(w.quit) })
	<-w.done
}
