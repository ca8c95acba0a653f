package store

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/danyue/danyue/crdt"
)

// What syncWAL relies on: every write goes to the memtable WALs, none to
// the value log, and a rotation to a new WAL is seen and the old one synced.
func TestWALRotationAndEmptyValueLog(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	first, err := s.memFiles()
	if err != nil || len(first) == 0 {
		t.Fatalf("memFiles: %v, %v", first, err)
	}
	// Concurrent writers of large records until badger has rotated its
	// memtable twice.
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				s.walMu.Lock()
				last := s.lastMem
				s.walMu.Unlock()
				if last != "" && fid(last) >= fid(first[len(first)-1])+2 {
					return
				}
				e := book(t, g*1_000_000+i, 10)
				e.Book.ReadTime = nil
				for d := range 200 {
					e.Book.ReadTime = append(e.Book.ReadTime, crdt.Slot{Device: crdt.DeviceID(d + 1), Ms: 1})
				}
				if _, err := s.Apply(context.Background(), Batch{Entries: []crdt.Entry{e}}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("wrote %d records, WAL %v -> %s", s.LastSeq(), first, s.lastMem)

	vlogs, _ := filepath.Glob(filepath.Join(s.dbDir, "*.vlog"))
	if len(vlogs) == 0 {
		t.Fatal("no value log file")
	}
	for _, v := range vlogs {
		data, err := os.ReadFile(v)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 20 && bytes.ContainsFunc(data[20:], func(r rune) bool { return r != 0 }) {
			t.Errorf("value log %s holds data: syncing the WALs alone would not be enough", v)
		}
	}
}

func fid(mem string) int {
	n := 0
	for _, c := range mem {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}
