package testnet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
)

// What every node must agree on, and what it must equal: the oracle computes
// a library from the full log of acknowledged operations, naively, by the
// rules of package crdt's doc, from the hybrid-clock stamps the API returned
// with each write (strings whose order is the timestamps' order).

// OpKind is the kind of an operation on a book.
type OpKind string

const (
	OpPosition OpKind = "position"
	OpReadTime OpKind = "read-time"
	OpDelete   OpKind = "delete"
)

// Op is one acknowledged operation.
type Op struct {
	Node  string // the node's name, for messages
	Kind  OpKind
	Key   string
	Title string // position: the title it set, if any
	// Write is the acknowledged position write (with its stamp), for
	// OpPosition.
	Write *api.Position
	// Device and AddMs are the reading device and what it added, for
	// OpReadTime.
	Device string
	AddMs  uint64
	// Delete is the book as the delete returned it (DeletedStamp, DeletedAt,
	// DeletedBy, DeletedByName), for OpDelete.
	Delete *api.Book
}

// Oracle returns the books the operations must leave on every device, as
// GET /v1/books?deleted=1 shows them (in key order):
//   - position: the position write with the largest stamp;
//   - furthest: the write with the largest char, then the largest stamp;
//   - read time: per device, the sum of that device's adds;
//   - deleted stamp: the largest delete stamp; the book is deleted unless
//     its position stamp is larger (a book never deleted is on the shelf);
//   - title: that of the largest-stamp write that set one.
func Oracle(ops []Op) []api.Book {
	books := map[string]*api.Book{}
	titleStamp := map[string]string{}
	get := func(key string) *api.Book {
		b := books[key]
		if b == nil {
			b = &api.Book{Key: key, ReadTime: api.ReadTime{ByDevice: map[string]uint64{}}}
			books[key] = b
		}
		return b
	}
	for _, op := range ops {
		b := get(op.Key)
		switch op.Kind {
		case OpPosition:
			w := op.Write
			if b.Position == nil || w.Stamp > b.Position.Stamp {
				b.Position = w
			}
			if f := b.Furthest; f == nil || w.Char > f.Char || (w.Char == f.Char && w.Stamp > f.Stamp) {
				b.Furthest = w
			}
			if op.Title != "" && w.Stamp > titleStamp[op.Key] {
				b.Title, titleStamp[op.Key] = op.Title, w.Stamp
			}
		case OpReadTime:
			b.ReadTime.ByDevice[op.Device] += op.AddMs
			b.ReadTime.TotalMs += op.AddMs
		case OpDelete:
			d := op.Delete
			if b.DeletedStamp == nil || *d.DeletedStamp > *b.DeletedStamp {
				b.DeletedStamp, b.DeletedAt, b.DeletedBy, b.DeletedByName = d.DeletedStamp, d.DeletedAt, d.DeletedBy, d.DeletedByName
			}
		}
	}
	out := make([]api.Book, 0, len(books))
	for _, b := range books {
		b.Deleted = b.DeletedStamp != nil && (b.Position == nil || b.Position.Stamp <= *b.DeletedStamp)
		if !b.Deleted {
			b.DeletedAt, b.DeletedBy, b.DeletedByName = nil, nil, nil
		}
		out = append(out, *b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Canonical returns books as canonical JSON: sorted by key, object keys
// sorted, numbers as written, without readTime.thisDeviceMs (which differs
// between devices by design). Equal libraries give equal bytes.
func Canonical(books []api.Book) ([]byte, error) {
	raw, err := json.Marshal(api.Books{Books: books})
	if err != nil {
		return nil, err
	}
	return canonicalJSON(raw)
}

// Uncollected drops from books (an oracle's) the deleted ones that the
// nodes' canonical answer got (Canonical's form) no longer lists: tombstone collection purges
// a deleted book once every member holds its delete, so a node may list it
// or not; a visible book, or a deleted one still listed, must match.
func Uncollected(books []api.Book, got []byte) ([]api.Book, error) {
	listed := map[string]bool{}
	for line := range bytes.Lines(got) {
		var b struct {
			Key string `json:"key"`
		}
		if err := json.Unmarshal(line, &b); err != nil {
			return nil, fmt.Errorf("books: %w", err)
		}
		listed[b.Key] = true
	}
	var out []api.Book
	for _, b := range books {
		if !b.Deleted || listed[b.Key] {
			out = append(out, b)
		}
	}
	return out, nil
}

// CanonicalBooks fetches GET /v1/books?deleted=1 from c as bytes and
// returns it as Canonical does.
func CanonicalBooks(ctx context.Context, c *client.Client) ([]byte, error) {
	var buf bytes.Buffer
	if err := c.DoRaw(ctx, "GET", "/v1/books?deleted=1", nil, nil, &buf); err != nil {
		return nil, err
	}
	return canonicalJSON(buf.Bytes())
}

func canonicalJSON(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc struct {
		Books []map[string]any `json:"books"`
	}
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("books: %w", err)
	}
	for _, b := range doc.Books {
		if rt, ok := b["readTime"].(map[string]any); ok {
			delete(rt, "thisDeviceMs")
		}
	}
	sort.Slice(doc.Books, func(i, j int) bool {
		ki, _ := doc.Books[i]["key"].(string)
		kj, _ := doc.Books[j]["key"].(string)
		return ki < kj
	})
	var out bytes.Buffer
	for _, b := range doc.Books {
		line, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	return out.Bytes(), nil
}

// DiffCanonical describes the first difference between two canonical
// libraries (one book per line), or returns "" if they are equal.
func DiffCanonical(aName string, a []byte, bName string, b []byte) string {
	if bytes.Equal(a, b) {
		return ""
	}
	al, bl := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	if len(al) != len(bl) {
		return fmt.Sprintf("%s has %d books, %s has %d; first difference:\n%s", aName, len(al)-1, bName, len(bl)-1, firstDiff(aName, al, bName, bl))
	}
	return firstDiff(aName, al, bName, bl)
}

func firstDiff(aName string, al [][]byte, bName string, bl [][]byte) string {
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y []byte
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if !bytes.Equal(x, y) {
			return fmt.Sprintf("  %s: %s\n  %s: %s", aName, x, bName, y)
		}
	}
	return ""
}
