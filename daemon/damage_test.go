package daemon

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
	"github.com/danyue/danyue/internal/poll"
	"github.com/danyue/danyue/internal/testfs"
)

// A device whose store came back short after a crash (its WAL lost its
// tail) says so in its status, names the books, and gets them back from a
// peer: it forgets its cursors, so the peer sends everything again,
// including the device's own writes that the peer had merged. Its next
// writes take sequence numbers after the lost ones, so the peer, whose
// cursor is past them, still gets them.
func TestLossHealsFromPeer(t *testing.T) {
	a := startDaemon(t, func(c *Config) { c.Name = "A" })
	var aAddrs []string
	for _, m := range a.lib.Addrs() {
		aAddrs = append(aAddrs, m.String())
	}
	ctx := ctxT(t)
	bDir := filepath.Join(tempDir(t), "data")
	cfg := Config{DataDir: bDir, Name: "B", NoMDNS: true, Logger: testLogger(t), Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Peers: aAddrs}
	b, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	code := mustDo(a.client.Invite(ctx))(t)
	if err := joinCode(ctx, b, code); err != nil {
		t.Fatal(err)
	}
	const books = 30
	key := func(i int) string { return fmt.Sprintf("md5:%032x", i+1) }
	bc := client.New(b.Socket())
	for i := range books {
		mustDo(bc.SetPosition(ctx, key(i), int64(100+i), 0.5, "B's book"))(t)
	}
	bc.Close()
	waitBook(t, a.client, key(books-1), "A to receive B's books", func(bk api.Book) bool { return bk.Position != nil })

	// What a crash leaves of B, then its newest WAL loses half of it.
	crashed := filepath.Join(tempDir(t), "data")
	testfs.CopyTree(t, bDir, crashed)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	mems, _ := filepath.Glob(filepath.Join(crashed, "store", "db", "*.mem"))
	slices.Sort(mems)
	wal := mems[len(mems)-1]
	data, _ := os.ReadFile(wal)
	if err := os.Truncate(wal, int64(len(bytes.TrimRight(data, "\x00"))/2)); err != nil {
		t.Fatal(err)
	}

	cfg.DataDir = crashed
	b2, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	b2c := client.New(b2.Socket())
	defer b2c.Close()
	st := storeLoss(b2.store)
	if st == nil || st.Changes == 0 || len(st.Records) == 0 {
		t.Fatalf("status after losing acknowledged writes: loss %+v", st)
	}
	t.Logf("loss: %s; %d records, e.g. %s", st.Warning, len(st.Records), st.Records[len(st.Records)-1])
	// B's sequence goes on after what it acknowledged, which A's cursor
	// into B has passed: a new write of B reaches A.
	mustDo(b2c.SetPosition(ctx, keyA, 7, 0.1, "after the loss"))(t)
	waitBook(t, a.client, keyA, "A to receive B's write after the loss", func(bk api.Book) bool { return bk.Position != nil && bk.Position.Char == 7 })
	poll.Until(t, "B to get its lost books back from A", time.Minute, func() bool {
		for i := range books {
			bk, err := b2c.Book(ctx, key(i))
			if err != nil || bk.Position == nil || bk.Position.Char != uint64(100+i) {
				return false
			}
		}
		return true
	})
}
