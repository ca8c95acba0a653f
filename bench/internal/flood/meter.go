package flood

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/danyue/danyue/daemon/client"
)

// MeterConfig says how to start the meter's child process: a program, its
// arguments and what it adds to the environment, which runs Meter (the
// measuring command runs itself, told so by its environment).
type MeterConfig struct {
	Command []string
	Env     []string
}

// meter is the parent's side of the meter: it tells the child how many
// books the target has stored and collects the latencies the child times.
type meter struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	done chan struct{}

	mu   sync.Mutex
	lat  []time.Duration
	errs int
}

func startMeter(cfg MeterConfig) (*meter, error) {
	if len(cfg.Command) == 0 {
		return nil, errors.New("the meter has no command")
	}
	cmd := exec.Command(cfg.Command[0], cfg.Command[1:]...)
	cmd.Env = append(os.Environ(), cfg.Env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the GET meter: %w", err)
	}
	m := &meter{cmd: cmd, in: in, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var us int64
			var failed int
			if _, err := fmt.Sscan(sc.Text(), &us, &failed); err != nil {
				continue
			}
			m.mu.Lock()
			m.lat = append(m.lat, time.Duration(us)*time.Microsecond)
			m.errs += failed
			m.mu.Unlock()
		}
	}()
	return m, nil
}

func (m *meter) setStored(n uint64) { fmt.Fprintln(m.in, n) }

// stop ends the child (at EOF on its stdin) and returns what it timed.
func (m *meter) stop() ([]time.Duration, int) {
	m.in.Close()
	<-m.done
	m.cmd.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lat, m.errs
}

// Meter is the meter's child process: every interval it asks the daemon
// behind socket for one book it has already stored (the parent writes how
// many to in, one number a line), else, before the first is stored, one
// that does not exist, and writes the latency in microseconds and whether
// the request failed ("1234 0") to out. It returns at EOF on in.
func Meter(socket string, every time.Duration, in io.Reader, out io.Writer) error {
	if socket == "" {
		return errors.New("the meter needs the target's socket")
	}
	cl := client.New(socket)
	defer cl.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stored atomic.Uint64
	go func() {
		defer cancel() // the parent closed our stdin: done
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			if n, err := strconv.ParseUint(sc.Text(), 10, 64); err == nil {
				stored.Store(n)
			}
		}
	}()
	w := bufio.NewWriter(out)
	defer w.Flush()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		n := stored.Load()
		start := time.Now()
		_, err := cl.Book(ctx, KeyOf(1+rand.Uint64N(max(n, 1))))
		d := time.Since(start)
		if ctx.Err() != nil {
			return nil
		}
		var apiErr *client.APIError
		failed := 0
		if err != nil && !(n == 0 && errors.As(err, &apiErr) && apiErr.Status == 404) {
			failed = 1
		}
		fmt.Fprintf(w, "%d %d\n", d.Microseconds(), failed)
		if err := w.Flush(); err != nil {
			return err
		}
	}
}
