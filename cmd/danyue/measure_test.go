package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/danyue/danyue/daemon"
	"github.com/danyue/danyue/daemon/client"
	"github.com/danyue/danyue/internal/procstat"
)

// TestMeasureIdle measures what an idle daemon costs: RSS, CPU and context
// switches over 60 s, with 10,000 books and one connected peer. It is a
// measuring command, not a check (machines are noisy): run it with
//
//	DANYUE_MEASURE_IDLE=1 go test -run TestMeasureIdle -v ./cmd/danyue/
//
// DANYUE_MEASURE_BIN runs another build of danyue, for a before/after
// comparison.
func TestMeasureIdle(t *testing.T) {
	if os.Getenv("DANYUE_MEASURE_IDLE") == "" {
		t.Skip("set DANYUE_MEASURE_IDLE=1 to measure the idle daemon (takes about 2.5 minutes)")
	}
	useMeasureBin(t)
	window, err := procstat.Window()
	if err != nil {
		t.Fatal(err)
	}
	books := 10000
	a := startDaemonProc(t, "idle-a")
	b := startDaemonProc(t, "idle-b")
	ctx := context.Background()
	ca := client.New(daemon.DefaultSocket(a.data))
	defer ca.Close()
	cb := client.New(daemon.DefaultSocket(b.data))
	defer cb.Close()
	code, err := ca.Invite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cb.Join(ctx, code); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	fillShelf(t, ca, books)
	t.Logf("wrote %d books on A in %v", books, time.Since(start))
	for {
		st, err := cb.Status(ctx)
		if err == nil && st.Counts.Books == books {
			break
		}
		if time.Since(start) > 2*time.Minute {
			t.Fatalf("B did not receive the %d books: %+v %v", books, st.Counts, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("B has all %d books %v after the first write", books, time.Since(start))
	// Idle means idle for a while: let the write burst's aftermath
	// (flushes, compaction, GC) finish and the store close its database,
	// which it does after a minute without work.
	time.Sleep(75 * time.Second)

	pid := a.cmd.Process.Pid
	before, err := procstat.Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(window)
	after, err := procstat.Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("idle daemon with %d books and 1 peer, over %v: %s", books, window, procstat.Report(before, after, window))
}
