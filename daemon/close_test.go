package daemon

import (
	"sync"
	"testing"
)

// Close may be called more than once, from several goroutines (an app's
// Stop racing its shutdown hook): each call returns the first one's result.
func TestCloseTwice(t *testing.T) {
	d := startDaemon(t, nil) // its cleanup closes it once more
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = d.Close() })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Close #%d: %v", i, err)
		}
	}
	if _, err := d.SyncOnce(ctxT(t)); err == nil {
		t.Error("SyncOnce on a closed daemon did not fail")
	}
}
