package kosync

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// BenchmarkProtocolPut measures the protocol alone: authenticated PUT
// /syncs/progress over loopback TCP into a library in memory, so the
// figure is parsing, authentication and the answer, without the store.
// Compare daemon's BenchmarkKosyncPut, which adds durable writes.
func BenchmarkProtocolPut(b *testing.B) {
	s := startServer(b, Config{})
	s.lib.addUser(b, "alice", aliceKey)
	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	body := `{"document":"` + docA + `","progress":"/body/DocFragment[20]/body/p[22]/text().17","percentage":0.5,"device":"Kobo Libra 2","device_id":"8B2FD53C1F5E4A3E9A4F7C11D2E0B6A1"}`
	start := time.Now()
	for b.Loop() {
		req, _ := http.NewRequest("PUT", s.url+"/syncs/progress", strings.NewReader(body))
		req.Header["x-auth-user"] = []string{"alice"}
		req.Header["x-auth-key"] = []string{aliceKey}
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatal(fmt.Errorf("PUT: %s", resp.Status))
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}
