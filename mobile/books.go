package mobile

import (
	"errors"
	"math"
	"strings"

	"github.com/danyue/danyue/daemon/api"
)

// Book is a book as this device sees it. A field that does not apply is its
// zero value: a book never opened has no position (PositionAt is ""), a book
// on the shelf has no DeletedAt.
type Book struct {
	// Key identifies the book's text: "md5:HEX" or "sha256:HEX" of the
	// BookKey-normalized text (see `danyue key`).
	Key   string
	Title string
	// Char is the reading position, in UTF-16 code units into the
	// normalized text; Percent the same as a fraction in [0, 1].
	Char    int64
	Percent float64
	// PositionDevice and PositionDeviceName say which device set the
	// position, PositionAt when (RFC 3339).
	PositionDevice     string
	PositionDeviceName string
	PositionAt         string
	// FurthestChar and FurthestPercent are the furthest position reached on
	// any device.
	FurthestChar    int64
	FurthestPercent float64
	// TotalMs is the reading time over every device, ThisDeviceMs this
	// device's share.
	TotalMs      int64
	ThisDeviceMs int64
	// Deleted says the book was removed from the shelf; DeletedAt (RFC
	// 3339), DeletedBy (a device id) and DeletedByName say when and where.
	// Reading it again brings it back on every device.
	Deleted       bool
	DeletedAt     string
	DeletedBy     string
	DeletedByName string
}

// BookList is a list of books: Len of them, Get(0) to Get(Len()-1).
type BookList struct {
	books []*Book
}

// Len returns the number of books.
func (l *BookList) Len() int { return len(l.books) }

// Get returns the i-th book, or nil if i is out of range.
func (l *BookList) Get(i int) *Book {
	if i < 0 || i >= len(l.books) {
		return nil
	}
	return l.books[i]
}

// errNoKey is the facade's own check: an empty key would otherwise become a
// different URL, not a bad key.
var errNoKey = errors.New("the book key is empty")

// SetPosition records where the reader is in a book: char in UTF-16 code
// units into the normalized text, percent in [0, 1]. title may be empty to
// keep the book's current title.
func (n *Node) SetPosition(key string, char int64, percent float64, title string) (*Book, error) {
	return n.bookOp("set position", key, func() (api.Book, error) {
		return n.c.SetPosition(n.ctx, key, char, percent, title)
	})
}

// AddReadTime adds ms milliseconds of reading on this device. A non-empty
// idempotencyKey makes a retried report count once.
func (n *Node) AddReadTime(key string, ms int64, idempotencyKey string) (*Book, error) {
	return n.bookOp("add read time", key, func() (api.Book, error) {
		return n.c.AddReadTime(n.ctx, key, ms, idempotencyKey)
	})
}

// Delete removes a book from the shelf on every device. Nothing is deleted
// from any device's files; reading the book again brings it back.
func (n *Node) Delete(key string) (*Book, error) {
	return n.bookOp("delete", key, func() (api.Book, error) { return n.c.Delete(n.ctx, key) })
}

// Book returns one book.
func (n *Node) Book(key string) (*Book, error) {
	return n.bookOp("book", key, func() (api.Book, error) { return n.c.Book(n.ctx, key) })
}

func (n *Node) bookOp(op, key string, call func() (api.Book, error)) (*Book, error) {
	if err := n.alive(); err != nil {
		return nil, err
	}
	if strings.TrimSpace(key) == "" {
		return nil, n.fail(op, errNoKey)
	}
	b, err := call()
	if err != nil {
		return nil, n.fail(op+" "+key, err)
	}
	return fromAPI(b), nil
}

// Shelf returns the books, most recently read first; with withDeleted, the
// removed ones too.
func (n *Node) Shelf(withDeleted bool) (*BookList, error) {
	if err := n.alive(); err != nil {
		return nil, err
	}
	books, err := n.c.Books(n.ctx, withDeleted)
	if err != nil {
		return nil, n.fail("shelf", err)
	}
	l := &BookList{books: make([]*Book, len(books))}
	for i, b := range books {
		l.books[i] = fromAPI(b)
	}
	return l, nil
}

func fromAPI(b api.Book) *Book {
	out := &Book{
		Key:          b.Key,
		Title:        b.Title,
		TotalMs:      clamp(b.ReadTime.TotalMs),
		ThisDeviceMs: clamp(b.ReadTime.ThisDeviceMs),
		Deleted:      b.Deleted,
	}
	if p := b.Position; p != nil {
		out.Char, out.Percent = clamp(p.Char), p.Percent
		out.PositionDevice, out.PositionDeviceName, out.PositionAt = p.Device, p.DeviceName, p.At
	}
	if p := b.Furthest; p != nil {
		out.FurthestChar, out.FurthestPercent = clamp(p.Char), p.Percent
	}
	out.DeletedAt, out.DeletedBy, out.DeletedByName = deref(b.DeletedAt), deref(b.DeletedBy), deref(b.DeletedByName)
	return out
}

// clamp converts the API's unsigned counts, which gobind cannot bind.
func clamp(v uint64) int64 { return int64(min(v, math.MaxInt64)) }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
