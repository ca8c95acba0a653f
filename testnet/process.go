package testnet

import (
	"bytes"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/danyue/danyue/internal/startproc"
)

// proc is one running daemon process.
type proc struct {
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{} // closed once the process exited and its output is read
	err     error         // what cmd.Wait returned; set before done closes
}

// startProc starts argv with env, in a process group of its own where the
// OS has them (procAttr). Each line of its stdout and stderr goes to emit.
func startProc(argv, env []string, emit func(string)) (*proc, error) {
	lw := &lineWriter{emit: emit}
	started := time.Now()
	cmd, err := startproc.Start(func() *exec.Cmd {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = env
		// One writer for both: exec then copies both streams through a
		// single pipe, in the order the process wrote them.
		cmd.Stdout, cmd.Stderr = lw, lw
		cmd.SysProcAttr = procAttr()
		return cmd
	})
	if err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, started: started, done: make(chan struct{})}
	go func() {
		// Wait returns once the process exited and its output is copied.
		p.err = cmd.Wait()
		lw.flush()
		status := "exit status 0"
		if p.err != nil {
			status = p.err.Error()
		}
		emit("[testnet] process exited: " + status)
		close(p.done)
	}()
	return p, nil
}

// signal sends sig to the process's group.
func (p *proc) signal(sig syscall.Signal) {
	_ = signalGroup(p.cmd.Process.Pid, sig)
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits up to timeout for the process to exit and reports whether it
// did.
func (p *proc) wait(timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// lineWriter calls emit with each complete line written to it.
type lineWriter struct {
	mu   sync.Mutex
	buf  []byte
	emit func(string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.emit(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

// flush emits a last line that had no newline.
func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit(string(w.buf))
		w.buf = nil
	}
}
