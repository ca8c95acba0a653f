package daemon

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkPutPosition measures acknowledged, durable PUT position requests
// through the unix socket, from 16 concurrent clients (several reader apps,
// or one app's retries and a sync burst): every answer means the write is on
// disk.
func BenchmarkPutPosition(b *testing.B) {
	d := startDaemon(b, func(c *Config) { c.Logger = discardLogger() })
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = fmt.Sprintf("md5:%032x", i+1)
	}
	var n atomic.Int64
	b.SetParallelism(8) // 8 x GOMAXPROCS(2) = 16 clients
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			i := n.Add(1)
			if _, err := d.client.SetPosition(ctx, keys[i%int64(len(keys))], i, 0.5, ""); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}
