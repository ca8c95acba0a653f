package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
	"github.com/danyue/danyue/store"
)

func testKey(i int) string { return fmt.Sprintf("md5:%032x", i) }

// shelve writes n books straight to the store, book i at wall time
// 1_700_000_000_000+i with title shelfTitle(i) (so title order is neither
// key nor recent order), and deletes every seventh.
func shelve(t testing.TB, d *testDaemon, n int) {
	t.Helper()
	var entries []crdt.Entry
	flush := func() {
		if _, err := d.store.Apply(context.Background(), store.Batch{Entries: entries}); err != nil {
			t.Fatal(err)
		}
		entries = nil
	}
	for i := range n {
		k := crdt.MustParseBookKey(testKey(i))
		at := crdt.Timestamp{Wall: 1_700_000_000_000 + uint64(i), Device: d.Device()}
		e, err := crdt.SetPosition(k, at, uint64(i), 0.5)
		if err != nil {
			t.Fatal(err)
		}
		title, err := crdt.SetTitle(k, at, shelfTitle(i))
		if err != nil {
			t.Fatal(err)
		}
		e.Book.Merge(&title.Book)
		if i%7 == 3 {
			del, _ := crdt.Delete(k, crdt.Timestamp{Wall: at.Wall + 1, Device: d.Device()})
			e.Book.Merge(&del.Book)
		}
		entries = append(entries, e)
		if len(entries) == store.MaxBatchEntries {
			flush()
		}
	}
	flush()
}

func shelfTitle(i int) string { return fmt.Sprintf("Book %05d", (i*37)%1009) }

func keysOf(books []api.Book) []string {
	keys := make([]string, len(books))
	for i, b := range books {
		keys[i] = b.Key
	}
	return keys
}

func TestBookPages(t *testing.T) {
	d := startStillDaemon(t)
	ctx := ctxT(t)
	const n = 250
	shelve(t, d, n)
	var all, visible []string
	for i := range n {
		all = append(all, testKey(i))
		if i%7 != 3 {
			visible = append(visible, testKey(i))
		}
	}
	recent := slices.Clone(visible)
	slices.Reverse(recent) // book i was read at time i
	byTitle := slices.Clone(visible)
	slices.SortFunc(byTitle, func(a, b string) int {
		var i, j int
		fmt.Sscanf(a, "md5:%x", &i)
		fmt.Sscanf(b, "md5:%x", &j)
		return strings.Compare(shelfTitle(i), shelfTitle(j))
	})

	cases := []struct {
		q    client.BooksQuery
		want []string
	}{
		{client.BooksQuery{}, recent},
		{client.BooksQuery{Limit: 7, Sort: "recent"}, recent},
		{client.BooksQuery{Limit: 1000, Sort: "title"}, byTitle},
		{client.BooksQuery{Limit: 33, Sort: "key"}, visible},
		{client.BooksQuery{Limit: 33, Sort: "key", Deleted: true}, all},
	}
	for _, c := range cases {
		var got []string
		err := d.client.EachBook(ctx, c.q, func(b api.Book) error { got = append(got, b.Key); return nil })
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%+v: %d books %v..., want %d %v...", c.q, len(got), got[:min(3, len(got))], len(c.want), c.want[:3])
		}
	}

	// The first version's form: the whole shelf, in key order; the
	// client's Books sorts it as the first version did.
	var whole api.Books
	if err := d.client.Do(ctx, "GET", "/v1/books", nil, nil, &whole); err != nil {
		t.Fatal(err)
	}
	if got := keysOf(whole.Books); !slices.Equal(got, visible) || whole.Next != "" {
		t.Errorf("GET /v1/books: %d books, next %q; want the %d visible in key order", len(got), whole.Next, len(visible))
	}
	books, err := d.client.Books(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := keysOf(books); !slices.Equal(got, recent) {
		t.Errorf("client Books: %d books, want the %d visible, last read first", len(got), len(recent))
	}
	if books, err = d.client.Books(ctx, true); err != nil || len(books) != n {
		t.Errorf("GET /v1/books?deleted=1: %d books, %v; want %d", len(books), err, n)
	}

	// A page's cursor is opaque, and carries its sort.
	p, err := d.client.BooksPage(ctx, client.BooksQuery{Limit: 10, Sort: "title"})
	if err != nil || p.Next == "" || len(p.Books.Books) != 10 {
		t.Fatalf("first page: %d books, next %q, %v", len(p.Books.Books), p.Next, err)
	}
	p2, err := d.client.BooksPage(ctx, client.BooksQuery{Limit: 10, Cursor: p.Next})
	if err != nil || len(p2.Books.Books) != 10 || p2.Books.Books[0].Key != byTitle[10] {
		t.Fatalf("second page by cursor alone: %v, %v", keysOf(p2.Books.Books), err)
	}
}

func TestBookPagesRefuseBadInput(t *testing.T) {
	d := startStillDaemon(t)
	shelve(t, d, 3)
	p, err := d.client.BooksPage(ctxT(t), client.BooksQuery{Limit: 1, Sort: "title"})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"limit=0", "limit=1001", "limit=x", "sort=size", "deleted=2",
		"cursor=" + strings.Repeat("A", 600), "cursor=!!", "cursor=AQ", "cursor=AXIAAAA",
		"cursor=" + p.Next + "&sort=key", "cursor=" + p.Next + "&deleted=1",
	} {
		var out bytes.Buffer
		err := d.client.DoRaw(ctxT(t), "GET", "/v1/books?"+q, nil, nil, &out)
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Code != api.CodeInvalid {
			t.Errorf("GET /v1/books?%s: %v, want 400 invalid", q, err)
		}
	}
}

func TestETags(t *testing.T) {
	d := startStillDaemon(t)
	ctx := ctxT(t)
	shelve(t, d, 20)

	b, tag, nm, err := d.client.BookTagged(ctx, testKey(1), "")
	if err != nil || tag == "" || nm || b.Key != testKey(1) {
		t.Fatalf("GET book: %v %q %v %v", b.Key, tag, nm, err)
	}
	if _, tag2, nm, err := d.client.BookTagged(ctx, testKey(1), tag); err != nil || !nm || tag2 != tag {
		t.Fatalf("GET book with its ETag: not modified %v, %v; want 304", nm, err)
	}
	if _, _, nm, err := d.client.BookTagged(ctx, testKey(1), `W/`+tag+`, "x"`); err != nil || !nm {
		t.Fatalf("GET book with a list holding its weak ETag: not modified %v, %v; want 304", nm, err)
	}
	if _, err := d.client.SetPosition(ctx, testKey(1), 5, 0.1, ""); err != nil {
		t.Fatal(err)
	}
	if _, tag2, nm, err := d.client.BookTagged(ctx, testKey(1), tag); err != nil || nm || tag2 == tag {
		t.Fatalf("GET changed book with its old ETag: not modified %v, same tag %v, %v; want 200 and a new tag", nm, tag2 == tag, err)
	}

	q := client.BooksQuery{Limit: 5, Sort: "key"}
	p, err := d.client.BooksPage(ctx, q)
	if err != nil || p.ETag == "" {
		t.Fatalf("page: %q, %v", p.ETag, err)
	}
	q.IfNoneMatch = p.ETag
	if p2, err := d.client.BooksPage(ctx, q); err != nil || !p2.NotModified {
		t.Fatalf("unchanged page with its ETag: %+v, %v; want not modified", p2, err)
	}
	// A change outside the page leaves it alone; one inside changes it.
	if _, err := d.client.SetPosition(ctx, testKey(15), 5, 0.1, ""); err != nil {
		t.Fatal(err)
	}
	if p2, err := d.client.BooksPage(ctx, q); err != nil || !p2.NotModified {
		t.Fatalf("page after a change elsewhere: not modified %v, %v; want 304", p2.NotModified, err)
	}
	if _, err := d.client.AddReadTime(ctx, testKey(2), 1000, ""); err != nil {
		t.Fatal(err)
	}
	if p2, err := d.client.BooksPage(ctx, q); err != nil || p2.NotModified || p2.ETag == p.ETag {
		t.Fatalf("page after a change of its book: not modified %v, %v; want a new page", p2.NotModified, err)
	}
}

// TestChangesUnderWrites follows /v1/changes while writers change books:
// every change is answered (the follower's copy ends equal to the shelf),
// and no change is answered twice (sequence numbers only grow).
func TestChangesUnderWrites(t *testing.T) {
	d := startStillDaemon(t)
	ctx := ctxT(t)
	shelve(t, d, 50)
	done := randomWrites(t, d, 4, 60, 80)
	mirror, answers, since := followChanges(t, d, done)
	// The copy is the shelf.
	shelf := map[string]bool{}
	err := d.client.EachBook(ctx, client.BooksQuery{Limit: 1000, Sort: "key", Deleted: true}, func(b api.Book) error {
		shelf[b.Key] = true
		c, ok := mirror[b.Key]
		switch {
		case !ok:
			t.Errorf("book %s never came in /v1/changes", b.Key)
		case c.Book.Deleted != b.Deleted || fmt.Sprint(c.Book.Position) != fmt.Sprint(b.Position) || c.Book.ReadTime.TotalMs != b.ReadTime.TotalMs:
			t.Errorf("book %s: the copy has %+v, the shelf %+v", b.Key, c.Book, b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A deleted book the copy holds may be gone from the shelf: collected
	// (this device is the library's only member, so every delete is
	// collected as soon as a collection round runs).
	for k, c := range mirror {
		if !shelf[k] && !c.Book.Deleted {
			t.Errorf("book %s is in the copy and not on the shelf", k)
		}
	}
	t.Logf("%d answers, %d books followed to seq %d", answers, len(mirror), since)
}

// randomWrites has writers clients each make writes random writes
// (deletes, read time, positions) to books books of d, and returns a
// channel closed once they are done.
func randomWrites(t *testing.T, d *testDaemon, writers, writes, books int) <-chan struct{} {
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for range writes {
				k := testKey(r.IntN(books))
				var err error
				switch r.IntN(4) {
				case 0:
					_, err = d.client.Delete(ctxT(t), k)
				case 1:
					_, err = d.client.AddReadTime(ctxT(t), k, 1000, "")
				default:
					_, err = d.client.SetPosition(ctxT(t), k, int64(r.IntN(10000)), 0.5, "")
				}
				var ae *client.APIError
				if err != nil && !(errors.As(err, &ae) && ae.Code == api.CodeNotFound) {
					t.Error(err)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done
}

// followChanges follows /v1/changes of d in small pages until done is
// closed and it has answered every change, checking that no change is
// answered twice; it returns the follower's copy, how many answers it
// took and the last sequence number answered.
func followChanges(t *testing.T, d *testDaemon, done <-chan struct{}) (mirror map[string]api.Change, answers int, since uint64) {
	mirror = map[string]api.Change{}
	var epoch string
	const limit = 7
	for finished := false; ; {
		select {
		case <-done:
			finished = true
		default:
		}
		ch, err := d.client.Changes(ctxT(t), since, limit, 20*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		answers++
		if epoch != "" && ch.Epoch != epoch {
			t.Fatalf("epoch changed from %s to %s", epoch, ch.Epoch)
		}
		epoch = ch.Epoch
		if len(ch.Changes) > limit || ch.Last < since {
			t.Fatalf("answer of %d changes for limit %d, last %d after since %d", len(ch.Changes), limit, ch.Last, since)
		}
		for _, c := range ch.Changes {
			if c.Seq <= since || c.Seq > ch.Last {
				t.Fatalf("change of %s at seq %d answered for since %d, last %d: a repeat or out of range", c.Book.Key, c.Seq, since, ch.Last)
			}
			if old, ok := mirror[c.Book.Key]; ok && old.Seq >= c.Seq {
				t.Fatalf("book %s answered at seq %d after seq %d", c.Book.Key, c.Seq, old.Seq)
			}
			mirror[c.Book.Key] = c
		}
		since = ch.Last
		if finished && !ch.More && since == d.store.LastSeq() {
			return mirror, answers, since
		}
	}
}

func TestChangesLongPoll(t *testing.T) {
	d := startStillDaemon(t)
	ctx := ctxT(t)
	shelve(t, d, 3)
	ch, err := d.client.Changes(ctx, 0, 0, 0)
	if err != nil || len(ch.Changes) != 3 || ch.More {
		t.Fatalf("from 0: %d changes, more %v, %v; want 3", len(ch.Changes), ch.More, err)
	}
	// Nothing new: a short wait answers nothing, at the same place.
	if again, err := d.client.Changes(ctx, ch.Last, 0, 10*time.Millisecond); err != nil || len(again.Changes) != 0 || again.Last != ch.Last {
		t.Fatalf("nothing new: %+v, %v", again, err)
	}
	// A long wait answers as soon as a book changes.
	got := make(chan api.Changes, 1)
	go func() {
		c, err := d.client.Changes(ctx, ch.Last, 0, time.Minute)
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	if _, err := d.client.SetPosition(ctx, keyA, 1, 0.1, ""); err != nil {
		t.Fatal(err)
	}
	c := <-got
	if len(c.Changes) != 1 || c.Changes[0].Book.Key != keyA {
		t.Fatalf("long poll answered %+v, want the change of %s", c, keyA)
	}
	for _, q := range []string{"since=x", "since=-1", "limit=0", "limit=1001", "wait=forever", "wait=1h", "since=99999"} {
		var out bytes.Buffer
		err := d.client.DoRaw(ctx, "GET", "/v1/changes?"+q, nil, nil, &out)
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
			t.Errorf("GET /v1/changes?%s: %v, want 400", q, err)
		}
	}
}
