package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/danyue/danyue/daemon"
	"github.com/danyue/danyue/daemon/client"
)

// TestMeasurePhases measures the daemon's peak RSS in each phase of a large
// library's life, and what takes it: bulk writes through the API, a
// restart, idling (before and after the store closes its database), listing
// the whole shelf, and a new device joining (its peak and the serving
// device's, then the joiner idling). Each peak is the largest RSS sampled every 20 ms during the
// phase, with its parts at that moment: anonymous memory (the Go heap and
// stacks, badger's memtables), the binary's pages, badger's mapped tables
// and memtable logs, and other files. The binary's share depends on how
// the page cache holds the file as much as on the daemon: a fault on a
// file page maps its neighbours too, as many as the page cache holds in
// one folio. Touching one byte in every 256 KB of the 32 MB binary mapped
// 8 to 23 MB of it from ext4 (kernel 6.18, which caches files in large
// folios, as large as the reads that filled the cache made them), 8 MB
// from tmpfs (64 KB fault-around) and 0.5 MB read page by page into an
// empty cache (MADV_RANDOM); the phases' peaks at 100,000 books held
// 12-19 MB of the binary run from ext4 and 13 MB run from tmpfs
// (DANYUE_MEASURE_BIN=/dev/shm/danyue). The daemon evicts from the page
// cache what its start-up read of the binary, and the kernel evicts only
// pages already written to the disk: TestMain writes the binary it builds
// back, and a DANYUE_MEASURE_BIN should be written back too (sync). It is
// a measuring command, not a check (Linux only, it reads /proc):
//
//	DANYUE_MEASURE_PHASES=100000 go test -run TestMeasurePhases -v -timeout 30m ./cmd/danyue/
//
// DANYUE_MEASURE_BIN runs another build of danyue, for a before/after
// comparison.
func TestMeasurePhases(t *testing.T) {
	books, _ := strconv.Atoi(os.Getenv("DANYUE_MEASURE_PHASES"))
	if books <= 0 {
		t.Skip("set DANYUE_MEASURE_PHASES=<books> to measure each phase's RSS")
	}
	useMeasureBin(t)
	ctx := context.Background()
	dir := t.TempDir()
	dataA, dataB := filepath.Join(dir, "a"), filepath.Join(dir, "b")

	a := startDaemonProcAt(t, dataA, "shelf")
	ca := client.New(daemon.DefaultSocket(dataA))
	phase(t, a, "bulk API writes", func() {
		start := time.Now()
		fillShelf(t, ca, books)
		t.Logf("wrote %d books in %v", books, time.Since(start).Round(time.Millisecond))
	})
	ca.Close()
	a.stop(t)

	a = restart(t, dataA)
	ca = client.New(daemon.DefaultSocket(dataA))
	defer ca.Close()
	phase(t, a, "idle 10 s", func() { time.Sleep(10 * time.Second) })
	phase(t, a, "idle 70 s (database closed)", func() { time.Sleep(60 * time.Second) })
	phase(t, a, "listing the whole shelf", func() {
		var w countWriter
		if err := ca.DoRaw(ctx, "GET", "/v1/books", nil, nil, &w); err != nil {
			t.Error(err)
		}
	})

	b := startDaemonProcAt(t, dataB, "joiner")
	cb := client.New(daemon.DefaultSocket(dataB))
	defer cb.Close()
	code, err := ca.Invite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	served := sample(a)
	phase(t, b, "a device joining (the joiner)", func() {
		start := time.Now()
		if _, err := cb.Join(ctx, code); err != nil {
			t.Fatal(err)
		}
		for {
			st, err := cb.Status(ctx)
			if err == nil && st.Counts.Books >= books {
				t.Logf("the joiner has %d books after %v", st.Counts.Books, time.Since(start).Round(time.Millisecond))
				return
			}
			if time.Since(start) > 10*time.Minute {
				t.Fatalf("the joiner has %d books after 10 minutes (%v)", st.Counts.Books, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	t.Logf("%-32s %s", "a device joining (the server)", served())
	phase(t, b, "joiner idle 10 s", func() { time.Sleep(10 * time.Second) })
	phase(t, b, "joiner idle 30 s", func() { time.Sleep(20 * time.Second) })
	phase(t, b, "joiner idle 70 s (database closed)", func() { time.Sleep(40 * time.Second) })
}

// useMeasureBin runs the build of danyue DANYUE_MEASURE_BIN names, if set,
// instead of this one, for the rest of the test.
func useMeasureBin(t *testing.T) {
	if bin := os.Getenv("DANYUE_MEASURE_BIN"); bin != "" {
		old := danyueBin
		danyueBin = bin
		t.Cleanup(func() { danyueBin = old })
	}
}

// restart starts the daemon of data again and reports its peak while it
// starts and settles (two seconds).
func restart(t *testing.T, data string) *daemonProc {
	start := time.Now()
	p := startDaemonProcAt(t, data, "shelf")
	up := time.Since(start)
	phase(t, p, fmt.Sprintf("restart (up in %v)", up.Round(time.Millisecond)), func() { time.Sleep(2 * time.Second) })
	return p
}

// phase runs fn and logs p's peak RSS during it, with its parts.
func phase(t *testing.T, p *daemonProc, name string, fn func()) {
	t.Helper()
	done := sample(p)
	fn()
	t.Logf("%-32s %s", name, done())
}

// sample samples p's memory until the returned function is called, which
// reports the peak and the RSS at the end.
func sample(p *daemonProc) func() string {
	pid := p.cmd.Process.Pid
	stop := make(chan struct{})
	var (
		mu   sync.Mutex
		peak memParts
		wg   sync.WaitGroup
	)
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if m, err := readParts(pid); err == nil {
				mu.Lock()
				if m.rss > peak.rss {
					peak = m
				}
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	return func() string {
		close(stop)
		wg.Wait()
		end, _ := readParts(pid)
		return fmt.Sprintf("peak %s | end %s", peak, end)
	}
}

// memParts is what a process's resident memory is made of, in kB.
type memParts struct {
	rss, anon, binary, tables, wal, otherFile int64
}

func (m memParts) String() string {
	mb := func(kb int64) string { return fmt.Sprintf("%.1f", float64(kb)/1024) }
	return fmt.Sprintf("%5s MB (anon %s, binary %s, tables %s, memtable logs %s, other files %s)",
		mb(m.rss), mb(m.anon), mb(m.binary), mb(m.tables), mb(m.wal), mb(m.otherFile))
}

// readParts reads /proc/PID/smaps: the resident size of each mapping,
// by what it maps.
func readParts(pid int) (memParts, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return memParts{}, err
	}
	defer f.Close()
	var (
		m    memParts
		path string
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if !strings.HasSuffix(fields[0], ":") { // a mapping's header
			path = ""
			if len(fields) >= 6 {
				path = fields[5]
			}
			continue
		}
		if fields[0] != "Rss:" || len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(fields[1], 10, 64)
		m.rss += kb
		switch {
		case path == "" || strings.HasPrefix(path, "["):
			m.anon += kb
		case strings.HasSuffix(path, "/danyue") || strings.Contains(path, danyueBin):
			m.binary += kb
		case strings.HasSuffix(path, ".sst"):
			m.tables += kb
		case strings.HasSuffix(path, ".mem"):
			m.wal += kb
		default:
			m.otherFile += kb
		}
	}
	return m, sc.Err()
}
