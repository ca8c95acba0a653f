//go:build linux

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/danyue/danyue/bench/internal/gctrace"
	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
)

// proc is a daemon process under measurement.
type proc struct {
	name    string
	data    string
	cmd     *exec.Cmd
	started time.Time
	c       *client.Client
	mem     *watcher

	exited  chan struct{} // closed when the process has ended
	waitErr error

	mu   sync.Mutex
	tail []string // the last lines of its log, for errors
}

// tailLines is how many of a daemon's last log lines an error shows.
const tailLines = 12

// runtimeEnv are the Go runtime's settings, which a daemon takes from the
// measuring user's environment only through -env: a figure must not depend
// on what the shell happened to export.
var runtimeEnv = []string{"GODEBUG", "GOGC", "GOMEMLIMIT", "GOMAXPROCS"}

// daemonEnv is the environment of a daemon: the measuring process's,
// without the runtime's settings, with -env and GODEBUG=gctrace=1.
func daemonEnv(extra []string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(runtimeEnv, k)
	})
	godebug := "gctrace=1"
	for _, kv := range extra {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			godebug = v + ",gctrace=1"
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GODEBUG="+godebug)
}

// start runs build b as the daemon of data, on loopback without mDNS, and
// returns once the process runs (see waitAPI). Every process started is
// stopped at the end of the run.
func (r *runner) start(b build, data, name string, extra ...string) (*proc, error) {
	args := append([]string{"daemon", "--data", data, "--name", name, "--no-mdns",
		"--listen", "/ip4/127.0.0.1/tcp/0", "--log-level", "warn"}, extra...)
	cmd := exec.Command(b.Path, args...)
	cmd.Env = daemonEnv(r.cfg.env)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	p := &proc{name: name, data: data, cmd: cmd, exited: make(chan struct{})}
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p.mem = watch(cmd.Process.Pid)
	// The socket is DATA/api.sock on Linux (daemon.DefaultSocket), named
	// here so as not to link the daemon into the command.
	p.c = client.New(filepath.Join(data, "api.sock"))
	logs := make(chan struct{})
	go func() {
		defer close(logs)
		p.readLog(stderr, r.verboseLog())
	}()
	go func() {
		<-logs // Wait closes the pipe: the log is read to its end first
		p.waitErr = cmd.Wait()
		p.mem.stop()
		close(p.exited)
	}()
	r.procs = append(r.procs, p)
	return p, nil
}

func (r *runner) verboseLog() io.Writer {
	if r.cfg.verbose {
		return r.log
	}
	return nil
}

// readLog reads the daemon's stderr: the runtime's gctrace lines go to the
// memory watcher, the rest is kept for errors (and printed with -v).
func (p *proc) readLog(stderr io.Reader, verbose io.Writer) {
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if c, err := gctrace.Parse(line); err == nil {
			p.mem.gc(c)
			continue
		}
		if verbose != nil {
			fmt.Fprintf(verbose, "%s: %s\n", p.name, line)
		}
		p.mu.Lock()
		p.tail = append(p.tail, line)
		if len(p.tail) > tailLines {
			p.tail = p.tail[len(p.tail)-tailLines:]
		}
		p.mu.Unlock()
	}
}

// died returns an error saying the daemon ended, with its last log lines,
// or nil while it runs.
func (p *proc) died() error {
	select {
	case <-p.exited:
	default:
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Errorf("daemon %s ended (%v); its last lines:\n\t%s", p.name, p.waitErr, strings.Join(p.tail, "\n\t"))
}

// waitAPI waits until the daemon answers /v1/status and returns the time
// from its start.
func (p *proc) waitAPI(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	err := waitFor(ctx, p.name+"'s API", timeout, 2*time.Millisecond, func() (bool, error) {
		if err := p.died(); err != nil {
			return false, err
		}
		_, err := p.c.Status(ctx)
		return err == nil, nil
	})
	return time.Since(p.started), err
}

// stop ends the daemon with SIGTERM, as a service manager does, and kills
// it if it has not ended within a minute.
func (p *proc) stop() error {
	p.c.Close()
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		var exit *exec.ExitError
		if errors.As(p.waitErr, &exit) {
			return fmt.Errorf("daemon %s: %w after SIGTERM", p.name, p.waitErr)
		}
		return nil
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("daemon %s did not end within a minute of SIGTERM", p.name)
	}
}

// status returns the daemon's status, or why not.
func (p *proc) status(ctx context.Context) (api.Status, error) {
	if err := p.died(); err != nil {
		return api.Status{}, err
	}
	return p.c.Status(ctx)
}

// address is the daemon's first libp2p address, with its peer id: what
// another daemon's --peer takes.
func (p *proc) address(ctx context.Context) (string, error) {
	st, err := p.status(ctx)
	if err != nil {
		return "", err
	}
	if len(st.Addresses) == 0 {
		return "", fmt.Errorf("daemon %s has no address", p.name)
	}
	return st.Addresses[0], nil
}

// waitBooks waits until the daemon's shelf holds at least n books, checking
// every interval.
func (p *proc) waitBooks(ctx context.Context, n int, timeout, every time.Duration) error {
	return waitFor(ctx, fmt.Sprintf("%s to hold %d books", p.name, n), timeout, every, func() (bool, error) {
		st, err := p.status(ctx)
		if derr := p.died(); derr != nil {
			return false, derr
		}
		return err == nil && st.Counts.Books >= n, nil
	})
}

// waitConnected waits until the daemon shows the device named peer as
// connected.
func (p *proc) waitConnected(ctx context.Context, peer string, timeout, every time.Duration) error {
	return waitFor(ctx, fmt.Sprintf("%s to be connected to %s", p.name, peer), timeout, every, func() (bool, error) {
		if err := p.died(); err != nil {
			return false, err
		}
		ps, err := p.c.Peers(ctx)
		return err == nil && slices.ContainsFunc(ps, func(x api.Peer) bool { return x.Name == peer && x.Connected }), nil
	})
}

// waitFor checks cond every interval until it holds, returns an error, ctx
// ends or timeout passes; the one way the command waits for a daemon.
func waitFor(ctx context.Context, what string, timeout, every time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s: not within %v", what, timeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
}
