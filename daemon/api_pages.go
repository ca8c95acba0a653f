package daemon

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/store"
)

// GET /v1/books: the shelf a page at a time, in an index order, each page
// streamed from one snapshot of the store, with the cursor of the next page
// in the body. The cursor is the position (sort key and book key) of the
// page's last book, so it stays valid while the library changes.
//
// Without limit, cursor and sort (the form of the first API version), the
// answer is the whole shelf in key order, streamed page by page: the daemon
// holds one page at a time whatever the shelf's size, and since a book
// never moves in key order, each book on the shelf throughout the answer is
// in it exactly once.

const (
	defaultPage = 100
	// wholePage is the page size of the whole-shelf answer: what it holds
	// in memory at once.
	wholePage = 256
	// maxCursor bounds the cursor parameter: a position is at most a
	// 20-byte sort key or a 64-byte title key escaped, and a 33-byte id.
	maxCursor = 512
	// cursorVersion is the first byte of every cursor, so that a later
	// layout can tell an old cursor apart and refuse it clearly.
	cursorVersion = 1
)

// booksQuery is a parsed GET /v1/books.
type booksQuery struct {
	store.PageQuery
	whole bool // no limit, cursor or sort: the whole shelf, unpaged
}

var sorts = map[string]store.Order{"recent": store.OrderRecent, "title": store.OrderTitle, "key": store.OrderKey}

func sortName(o store.Order) string {
	for name, v := range sorts {
		if v == o {
			return name
		}
	}
	return "?"
}

func parseBooksQuery(r *http.Request) (booksQuery, error) {
	qv := r.URL.Query()
	var q booksQuery
	deletedSet := qv.Has("deleted")
	switch v := qv.Get("deleted"); v {
	case "", "0", "false":
	case "1", "true":
		q.Deleted = true
	default:
		return q, errorf(http.StatusBadRequest, api.CodeInvalid, "deleted must be 1 or 0, not %q", v)
	}
	sortSet := qv.Has("sort")
	q.Order = store.OrderRecent
	if sortSet {
		o, ok := sorts[qv.Get("sort")]
		if !ok {
			return q, errorf(http.StatusBadRequest, api.CodeInvalid, "sort must be recent, title or key, not %q", qv.Get("sort"))
		}
		q.Order = o
	}
	q.Limit = defaultPage
	if qv.Has("limit") {
		n, err := strconv.Atoi(qv.Get("limit"))
		if err != nil || n < 1 || n > store.MaxPage {
			return q, errorf(http.StatusBadRequest, api.CodeInvalid, "limit must be an integer in [1, %d], not %q", store.MaxPage, qv.Get("limit"))
		}
		q.Limit = n
	}
	if qv.Has("cursor") {
		c, err := parseCursor(qv.Get("cursor"))
		if err != nil {
			return q, err
		}
		if sortSet && c.Order != q.Order {
			return q, errorf(http.StatusBadRequest, api.CodeInvalid, "the cursor is one of sort=%s, not sort=%s; leave sort out to follow it", sortName(c.Order), sortName(q.Order))
		}
		if deletedSet && c.Deleted != q.Deleted {
			return q, errorf(http.StatusBadRequest, api.CodeInvalid, "the cursor is one of a listing with deleted=%v; leave deleted out to follow it", c.Deleted)
		}
		q.Order, q.Deleted, q.After = c.Order, c.Deleted, c.After
	}
	if !sortSet && !qv.Has("limit") && !qv.Has("cursor") {
		q.whole, q.Order, q.Limit = true, store.OrderKey, wholePage
	}
	return q, nil
}

// A cursor is, in unpadded URL-safe base64: the version, the order, 1 if
// deleted books are listed, and the position of the last book seen.
func makeCursor(q store.PageQuery, pos []byte) string {
	b := []byte{cursorVersion, byte(q.Order), 0}
	if q.Deleted {
		b[2] = 1
	}
	return base64.RawURLEncoding.EncodeToString(append(b, pos...))
}

func parseCursor(s string) (store.PageQuery, error) {
	bad := func(why string) error {
		return errorf(http.StatusBadRequest, api.CodeInvalid, "cursor is not one this daemon made (%s); pass the next of a page as it is", why)
	}
	if len(s) > maxCursor {
		return store.PageQuery{}, bad("too long")
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	switch {
	case err != nil:
		return store.PageQuery{}, bad("not base64url")
	case len(b) < 4 || b[0] != cursorVersion:
		return store.PageQuery{}, bad("unknown version")
	case b[2] > 1:
		return store.PageQuery{}, bad("malformed")
	}
	q := store.PageQuery{Order: store.Order(b[1]), Deleted: b[2] == 1, After: b[3:]}
	if !store.ValidPosition(q.Order, q.After) {
		return store.PageQuery{}, bad("malformed position")
	}
	return q, nil
}

func (d *Daemon) listBooks(w http.ResponseWriter, r *http.Request) error {
	q, err := parseBooksQuery(r)
	if err != nil {
		return err
	}
	if q.whole {
		return d.streamShelf(w, r, q.PageQuery)
	}
	return d.servePage(w, r, q.PageQuery)
}

// servePage answers one page, with an entity tag made from what determines
// it: the store's epoch, the query, each book's id and sequence number
// (which changes with the book), the next cursor and the device names the
// books are shown with.
func (d *Daemon) servePage(w http.ResponseWriter, r *http.Request, q store.PageQuery) error {
	v := d.viewer()
	var st *jsonStream
	err := d.store.Page(r.Context(), q, func(p *store.Page) error {
		tag := []byte{byte(q.Order), 0}
		if q.Deleted {
			tag[1] = 1
		}
		tag = binary.BigEndian.AppendUint64(tag, d.store.Epoch())
		tag = binary.BigEndian.AppendUint64(tag, uint64(q.Limit))
		tag = binary.BigEndian.AppendUint64(tag, d.lib.NamesDigest())
		items := make([]byte, 0, len(p.Items)*42)
		for _, it := range p.Items {
			items = binary.BigEndian.AppendUint64(append(items, byte(len(it.ID))), it.Seq)
			items = append(items, it.ID...)
		}
		if notModified(w, r, etagOf(tag, q.After, items, p.Next)) {
			return nil
		}
		st = newJSONStream(w, `{"books":[`)
		err := p.Each(func(e crdt.Entry) error { return st.item(v.book(&e.Book)) })
		if err != nil {
			return st.fail(err)
		}
		tail := ``
		if p.Next != nil {
			next, _ := json.Marshal(makeCursor(q, p.Next))
			tail = `,"next":` + string(next)
		}
		return st.end(tail)
	})
	if err != nil && st != nil {
		return st.fail(err)
	}
	return err
}

// streamShelf answers the whole shelf, page by page, each page from its own
// snapshot, so that neither memory nor a read transaction grows with the
// shelf.
func (d *Daemon) streamShelf(w http.ResponseWriter, r *http.Request, q store.PageQuery) error {
	v := d.viewer()
	st := newJSONStream(w, `{"books":[`)
	for {
		var next []byte
		err := d.store.Page(r.Context(), q, func(p *store.Page) error {
			next = p.Next
			return p.Each(func(e crdt.Entry) error { return st.item(v.book(&e.Book)) })
		})
		if err != nil {
			return st.fail(err)
		}
		if next == nil {
			return st.end(``)
		}
		q.After = next
	}
}
