package testnet

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// TB is what the harness needs of a test: *testing.T satisfies it, and so
// does the T of Run, which the testnet command uses to run the same
// scenarios outside go test. As with testing, Fatalf and Skipf end the
// calling goroutine, so call them only from the goroutine running the
// scenario.
type TB interface {
	Helper()
	Name() string
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Failed() bool
	Cleanup(func())
}

// T is a TB for running a scenario outside go test.
type T struct {
	name    string
	verbose io.Writer // live log, or nil to keep lines for a failure report

	mu       sync.Mutex
	failed   bool
	skipped  bool
	msgs     []string // errors and the skip reason
	logs     []string // the last maxKeptLogs log lines
	cleanups []func()
}

const maxKeptLogs = 400

// Outcome is how a scenario run by Run ended.
type Outcome struct {
	Name     string
	Failed   bool
	Skipped  bool
	Messages []string // the errors, or the reason of the skip
	Logs     []string // the last log lines, kept for a failed run
	Duration time.Duration
}

// Run runs fn as a scenario named name the way go test runs a test: on its
// own goroutine, ended by Fatalf or Skipf, with its cleanups run afterwards
// in reverse order. If verbose is not nil every log line is written to it as
// it comes.
func Run(name string, verbose io.Writer, fn func(TB)) Outcome {
	t := &T{name: name, verbose: verbose}
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer t.recoverPanic()
		fn(t)
	}()
	<-done
	t.runCleanups()
	t.mu.Lock()
	defer t.mu.Unlock()
	return Outcome{Name: name, Failed: t.failed, Skipped: t.skipped && !t.failed,
		Messages: t.msgs, Logs: t.logs, Duration: time.Since(start)}
}

func (t *T) recoverPanic() {
	if r := recover(); r != nil {
		t.fail(fmt.Sprintf("panic: %v\n%s", r, debug.Stack()))
	}
}

func (t *T) runCleanups() {
	for {
		t.mu.Lock()
		if len(t.cleanups) == 0 {
			t.mu.Unlock()
			return
		}
		f := t.cleanups[len(t.cleanups)-1]
		t.cleanups = t.cleanups[:len(t.cleanups)-1]
		t.mu.Unlock()
		// A cleanup that calls Fatalf ends only itself.
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer t.recoverPanic()
			f()
		}()
		<-done
	}
}

func (t *T) Helper()      {}
func (t *T) Name() string { return t.name }

func (t *T) Logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.verbose != nil {
		fmt.Fprintf(t.verbose, "    %s: %s\n", t.name, strings.ReplaceAll(line, "\n", "\n        "))
		return
	}
	if len(t.logs) == maxKeptLogs {
		t.logs = append(t.logs[:0], t.logs[maxKeptLogs/2:]...)
	}
	t.logs = append(t.logs, line)
}

func (t *T) fail(msg string) {
	t.mu.Lock()
	t.failed = true
	t.msgs = append(t.msgs, msg)
	w := t.verbose
	t.mu.Unlock()
	if w != nil {
		fmt.Fprintf(w, "    %s: FAIL: %s\n", t.name, msg)
	}
}

func (t *T) Errorf(format string, args ...any) { t.fail(fmt.Sprintf(format, args...)) }

func (t *T) Fatalf(format string, args ...any) {
	t.fail(fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (t *T) Skipf(format string, args ...any) {
	t.mu.Lock()
	t.skipped = true
	t.msgs = append(t.msgs, fmt.Sprintf(format, args...))
	t.mu.Unlock()
	runtime.Goexit()
}

func (t *T) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

func (t *T) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}
