package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/danyue/danyue/daemon"
	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
	"github.com/danyue/danyue/internal/mixload"
	"github.com/danyue/danyue/internal/procstat"
)

// TestMeasureListing measures the daemon's peak RSS while it lists a large
// shelf: the whole shelf in one answer (GET /v1/books, the first version's
// form) and, where the daemon has them, pages of 100 and 1,000. Each listing
// runs in a freshly started daemon, so its peak is the listing's. It is a
// measuring command, not a check:
//
//	DANYUE_MEASURE_LIST=100000 go test -run TestMeasureListing -v ./cmd/danyue/
//
// DANYUE_MEASURE_BIN runs another build of danyue (an older one, for a
// before/after comparison); DANYUE_MEASURE_DATA keeps the filled data dir
// there, and reuses it if it is already filled.
func TestMeasureListing(t *testing.T) {
	books, _ := strconv.Atoi(os.Getenv("DANYUE_MEASURE_LIST"))
	if books <= 0 {
		t.Skip("set DANYUE_MEASURE_LIST=<books> to measure listing a shelf")
	}
	useMeasureBin(t)
	data := os.Getenv("DANYUE_MEASURE_DATA")
	if data == "" {
		data = filepath.Join(t.TempDir(), "data")
	}
	ctx := context.Background()

	p := startDaemonProcAt(t, data, "shelf")
	c := client.New(daemon.DefaultSocket(data))
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Counts.Books < books {
		start := time.Now()
		fillShelf(t, c, books)
		t.Logf("wrote %d books in %v", books, time.Since(start))
	}
	c.Close()
	p.stop(t)

	listings := []struct {
		name string
		run  func(*client.Client) (n, bytes int64, err error)
	}{
		{"whole shelf, GET /v1/books", func(c *client.Client) (int64, int64, error) {
			var w countWriter
			err := c.DoRaw(ctx, "GET", "/v1/books", nil, nil, &w)
			return -1, w.n, err
		}},
		{"pages of 100", pageWalk(ctx, 100)},
		{"pages of 1000", pageWalk(ctx, 1000)},
	}
	for _, l := range listings {
		start := time.Now()
		p := startDaemonProcAt(t, data, "shelf")
		up := time.Since(start)
		c := client.New(daemon.DefaultSocket(data))
		before, err := procstat.Read(p.cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		n, size, err := l.run(c)
		took := time.Since(start)
		after, rerr := procstat.Read(p.cmd.Process.Pid)
		c.Close()
		p.stop(t)
		if err != nil {
			t.Logf("%s: %v", l.name, err)
			continue
		}
		if rerr != nil {
			t.Fatal(rerr)
		}
		what := fmt.Sprintf("%d books", n)
		if size >= 0 {
			what = fmt.Sprintf("%.1f MB", float64(size)/1e6)
		}
		t.Logf("%s: %s in %v; up in %v; RSS before %.1f MB, peak before %.1f MB, peak after %.1f MB, RSS after %.1f MB",
			l.name, what, took.Round(time.Millisecond), up.Round(time.Millisecond),
			float64(before.RSSKB)/1024, float64(before.HWMKB)/1024, float64(after.HWMKB)/1024, float64(after.RSSKB)/1024)
	}
}

// fillShelf writes books 1 to n through the API from 16 clients at once.
func fillShelf(t *testing.T, c *client.Client, n int) {
	t.Helper()
	if err := mixload.Fill(context.Background(), c, n); err != nil {
		t.Fatal(err)
	}
}

// pageWalk lists the shelf a page of limit books at a time.
func pageWalk(ctx context.Context, limit int) func(*client.Client) (int64, int64, error) {
	return func(c *client.Client) (int64, int64, error) {
		var n int64
		err := c.EachBook(ctx, client.BooksQuery{Limit: limit}, func(api.Book) error { n++; return nil })
		return n, -1, err
	}
}

type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

var _ io.Writer = (*countWriter)(nil)
