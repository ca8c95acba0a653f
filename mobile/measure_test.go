package mobile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/danyue/danyue/internal/procstat"
)

// TestMeasureIdleEmbedded measures what an app that embeds an idle node
// costs, as cmd/danyue's TestMeasureIdle does for the daemon: RSS, CPU and
// context switches over 60 s, with 10,000 books and one connected peer. The
// app is this test binary run again as a child process that does nothing
// but hold the node. A measuring command, not a check:
//
//	DANYUE_MEASURE_IDLE=1 go test -run TestMeasureIdleEmbedded -v ./mobile/
func TestMeasureIdleEmbedded(t *testing.T) {
	if os.Getenv("DANYUE_MEASURE_IDLE") == "" {
		t.Skip("set DANYUE_MEASURE_IDLE=1 to measure the idle embedded node (takes about 2.5 minutes)")
	}
	if dir := os.Getenv("DANYUE_EMBED_CHILD"); dir != "" {
		holdEmbeddedNode(t, dir, os.Getenv("DANYUE_EMBED_CODE"))
		return
	}
	window, err := procstat.Window()
	if err != nil {
		t.Fatal(err)
	}
	const books = 10_000
	laptop := startNode(t, "laptop")
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < books; i += 16 {
				if _, err := laptop.SetPosition(fmt.Sprintf("md5:%032x", i+1), int64(i), 0.5, fmt.Sprintf("Book %d", i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("wrote %d books on the laptop in %v", books, time.Since(start))
	code, err := laptop.Invite()
	if err != nil {
		t.Fatal(err)
	}

	dir, err := os.MkdirTemp("", "dyidle")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	child := exec.Command(os.Args[0], "-test.run=^TestMeasureIdleEmbedded$")
	child.Env = append(os.Environ(), "DANYUE_EMBED_CHILD="+filepath.Join(dir, "data"), "DANYUE_EMBED_CODE="+code)
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close() // the child stops its node and exits
		if err := child.Wait(); err != nil {
			t.Errorf("embedding app: %v", err)
		}
	}()
	lines := bufio.NewScanner(stdout)
	for lines.Scan() && lines.Text() != "synced" {
	}
	if lines.Err() != nil {
		t.Fatal(lines.Err())
	}
	go io.Copy(io.Discard, stdout)
	t.Logf("the embedded node has all %d books %v after the first write", books, time.Since(start))
	// As for the daemon: let the burst's aftermath (flushes, compaction,
	// GC) pass and the store close its database after a minute idle.
	time.Sleep(75 * time.Second)
	pid := child.Process.Pid
	before, err := procstat.Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(window)
	after, err := procstat.Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("idle embedded node with %d books and 1 peer, over %v: %s", books, window, procstat.Report(before, after, window))
}

// holdEmbeddedNode is the child's side: an app that starts a node, joins the
// library, says "synced" once it has every book, and idles until its stdin
// closes.
func holdEmbeddedNode(t *testing.T, dataDir, code string) {
	cfg := NewConfig(dataDir)
	cfg.Name = "phone"
	cfg.Listen = "/ip4/127.0.0.1/tcp/0"
	cfg.NoMDNS = true
	cfg.LogLevel = "warn"
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	if _, err := n.Join(code); err != nil {
		t.Fatal(err)
	}
	rep, err := n.SyncOnce(int64(5 * time.Minute / time.Millisecond))
	if err != nil || !rep.CaughtUp {
		t.Fatalf("initial sync: %v %v", rep, err)
	}
	fmt.Println("synced")
	io.Copy(io.Discard, os.Stdin)
}
