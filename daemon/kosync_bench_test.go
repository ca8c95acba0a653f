package daemon

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkKosyncPut measures authenticated PUT /syncs/progress requests
// over loopback TCP, as KOReader sends them, each checked against the
// account's salted key hash and acknowledged only once it is on disk: one
// client at a time (a device), and 16 at once (a household's devices, or a
// burst of queued pushes).
func BenchmarkKosyncPut(b *testing.B) {
	d := startDaemon(b, withKosync(func(c *Config) { c.Logger = discardLogger() }))
	if _, err := d.client.KosyncAddUser(ctxT(b), "alice", aliceKey); err != nil {
		b.Fatal(err)
	}
	url := "http://" + d.KosyncAddr() + "/syncs/progress"
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	var n atomic.Int64
	put := func() error {
		i := n.Add(1)
		body := fmt.Sprintf(`{"document":"%032x","progress":"/body/DocFragment[%d]/body/p[3]/text().17","percentage":0.5,"device":"Kobo Libra 2","device_id":"8B2FD53C1F5E4A3E9A4F7C11D2E0B6A1"}`, i%64, i)
		req, _ := http.NewRequest("PUT", url, strings.NewReader(body))
		req.Header["accept"] = []string{"application/vnd.koreader.v1+json"}
		req.Header["content-type"] = []string{"application/json"}
		req.Header["x-auth-user"] = []string{"alice"}
		req.Header["x-auth-key"] = []string{aliceKey}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("PUT: %s", resp.Status)
		}
		return nil
	}
	b.Run("serial", func(b *testing.B) {
		start := time.Now()
		for b.Loop() {
			if err := put(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
	})
	b.Run("16clients", func(b *testing.B) {
		b.SetParallelism(8) // 8 x GOMAXPROCS(2)
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := put(); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
	})
}
