package mixload

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
)

// fakeDaemon answers the API requests the mix sends, as a daemon would in
// shape, and counts them by kind.
type fakeDaemon struct {
	mu      sync.Mutex
	counts  map[string]int
	written map[string]int // PUT position, by key
	fail    string         // a kind answered 500
}

func (f *fakeDaemon) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	f.ServeHTTP(rec, req)
	return rec.Result(), nil
}

func (f *fakeDaemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	kind := r.Method + " book"
	switch {
	case r.URL.Path == "/v1/books" && r.URL.Query().Has("cursor"):
		kind = "GET page from a cursor"
	case r.URL.Path == "/v1/books":
		kind = "GET first page"
	case strings.HasSuffix(r.URL.Path, "/read-time"):
		kind = "POST read-time"
	case strings.HasSuffix(r.URL.Path, "/position"):
		kind = "PUT position"
	}
	f.mu.Lock()
	f.counts[kind]++
	key := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/books/"), "/position"), "/read-time")
	if kind == "PUT position" {
		f.written[key]++
	}
	fail := f.fail == kind
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case fail:
		w.WriteHeader(500)
		fmt.Fprint(w, `{"error":"internal","detail":"a failure"}`)
	case kind == "GET book" && strings.HasSuffix(key, "7"):
		// Deleted by another app, and collected since.
		w.WriteHeader(404)
		fmt.Fprint(w, `{"error":"not_found","detail":"no such book"}`)
	case strings.HasPrefix(kind, "GET") && r.URL.Path == "/v1/books":
		json.NewEncoder(w).Encode(api.Books{Books: []api.Book{}})
	default:
		json.NewEncoder(w).Encode(api.Book{Key: key})
	}
}

func newFake() *fakeDaemon {
	return &fakeDaemon{counts: map[string]int{}, written: map[string]int{}}
}

func clients(f *fakeDaemon, n int) []*client.Client {
	cs := make([]*client.Client, n)
	for i := range cs {
		cs[i] = client.NewTransport(f)
	}
	return cs
}

// The mix is what the package says: every request answered (a 404 too),
// each kind near its share, pages from cursors among them.
func TestRunMix(t *testing.T) {
	f := newFake()
	const ops = 4000
	r, err := Run(context.Background(), clients(f, 4), 50, ops, []string{"c1", "c2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.All) != ops || r.Elapsed <= 0 {
		t.Fatalf("%d requests answered in %v, want %d", len(r.All), r.Elapsed, ops)
	}
	shares := map[string]float64{"GET book": 0.35, "PUT position": 0.25, "POST read-time": 0.20, "DELETE book": 0.05, "GET first page": 0.07, "GET page from a cursor": 0.08}
	for kind, share := range shares {
		if got := float64(f.counts[kind]) / ops; got < share-0.03 || got > share+0.03 {
			t.Errorf("%s: %.3f of the requests, want %.2f", kind, got, share)
		}
	}
	if want := f.counts["PUT position"] + f.counts["POST read-time"] + f.counts["DELETE book"]; len(r.Writes) != want {
		t.Errorf("%d write latencies, want %d", len(r.Writes), want)
	}
	for i := 1; i < len(r.All); i++ {
		if r.All[i] < r.All[i-1] {
			t.Fatal("latencies not sorted")
		}
	}
}

// A client stops at an error that is not a 404, and Run says so.
func TestRunStopsAtAnError(t *testing.T) {
	f := newFake()
	f.fail = "DELETE book"
	_, err := Run(context.Background(), clients(f, 2), 50, 2000, nil)
	if err == nil || !strings.Contains(err.Error(), "a failure") {
		t.Fatalf("Run = %v, want the daemon's failure", err)
	}
}

// Fill writes every book of the shelf once, with its title.
func TestFill(t *testing.T) {
	f := newFake()
	if err := Fill(context.Background(), client.NewTransport(f), 100); err != nil {
		t.Fatal(err)
	}
	if len(f.written) != 100 {
		t.Fatalf("%d books written, want 100", len(f.written))
	}
	for i := 1; i <= 100; i++ {
		if n := f.written[Key(i)]; n != 1 {
			t.Errorf("%s written %d times", Key(i), n)
		}
	}
}

func TestPercentile(t *testing.T) {
	lat := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	tests := []struct {
		p    float64
		want time.Duration
	}{{0, 1}, {0.5, 6}, {0.99, 10}, {1, 10}}
	for _, tt := range tests {
		if got := Percentile(lat, tt.p); got != tt.want {
			t.Errorf("Percentile(%v) = %v, want %v", tt.p, got, tt.want)
		}
	}
	if got := Percentile(nil, 0.5); got != 0 {
		t.Errorf("Percentile of none = %v", got)
	}
}
