package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/danyue/danyue/daemon/api"
)

// BooksQuery asks for a page of the shelf. The zero value is the first
// page, most recently read first, of the daemon's default size.
type BooksQuery struct {
	Limit   int    // books per page, 1 to 1000; 0 for the daemon's default (100)
	Sort    string // "recent" (the default), "title" or "key"
	Deleted bool   // include books removed from the shelf
	Cursor  string // the Next of the page before; empty for the first page
	// IfNoneMatch is the ETag of the page as the caller has it: if it is
	// unchanged, BooksPage returns a Page with NotModified set.
	IfNoneMatch string
}

// Page is one page of the shelf.
type Page struct {
	api.Books
	ETag        string
	NotModified bool // the page is as IfNoneMatch says: Books is empty
}

func (q BooksQuery) path() string {
	v := url.Values{}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	} else {
		// A cursor carries its sort and deleted.
		sort := q.Sort
		if sort == "" {
			sort = "recent"
		}
		v.Set("sort", sort)
		if q.Deleted {
			v.Set("deleted", "1")
		}
	}
	return "/v1/books?" + v.Encode()
}

// BooksPage returns one page of the shelf.
func (c *Client) BooksPage(ctx context.Context, q BooksQuery) (Page, error) {
	var p Page
	etag, notModified, err := c.getTagged(ctx, q.path(), q.IfNoneMatch, &p.Books)
	p.ETag, p.NotModified = etag, notModified
	return p, err
}

// EachBook calls fn with every book of the shelf in q's order, a page of
// q.Limit books at a time (q.Cursor and q.IfNoneMatch are ignored). Books
// that change during the walk may come twice or not at all; every other
// book comes once.
func (c *Client) EachBook(ctx context.Context, q BooksQuery, fn func(api.Book) error) error {
	q.Cursor, q.IfNoneMatch = "", ""
	for {
		p, err := c.BooksPage(ctx, q)
		if err != nil {
			return err
		}
		for _, b := range p.Books.Books {
			if err := fn(b); err != nil {
				return err
			}
		}
		if p.Next == "" {
			return nil
		}
		q.Cursor = p.Next
	}
}

// BookTagged returns one book and its ETag; if etag is not empty and the
// book is unchanged, it returns notModified and no book.
func (c *Client) BookTagged(ctx context.Context, key, etag string) (b api.Book, newTag string, notModified bool, err error) {
	newTag, notModified, err = c.getTagged(ctx, BookPath(key, ""), etag, &b)
	return b, newTag, notModified, err
}

// Changes returns the books that changed after since, at most limit (0: the
// daemon's default, 100); with wait > 0 the daemon waits up to that long for
// a change when there is none yet. Ask again from the answer's Last; when its
// Epoch is not the one seen before, start again from 0.
func (c *Client) Changes(ctx context.Context, since uint64, limit int, wait time.Duration) (api.Changes, error) {
	v := url.Values{"since": {strconv.FormatUint(since, 10)}}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	if wait > 0 {
		v.Set("wait", wait.String())
	}
	var ch api.Changes
	return ch, c.Do(ctx, "GET", "/v1/changes?"+v.Encode(), nil, nil, &ch)
}

// getTagged is a GET with If-None-Match.
func (c *Client) getTagged(ctx context.Context, path, ifNoneMatch string, out any) (etag string, notModified bool, err error) {
	var h http.Header
	if ifNoneMatch != "" {
		h = http.Header{"If-None-Match": {ifNoneMatch}}
	}
	resp, err := c.send(ctx, "GET", path, h, nil)
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusNotModified {
		return ifNoneMatch, true, nil
	}
	if err != nil {
		return "", false, err
	}
	defer resp.Body.Close()
	return resp.Header.Get("ETag"), false, decodeAnswer(resp, out)
}

func decodeAnswer(resp *http.Response, out any) error {
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", resp.Request.Method, resp.Request.URL.Path, err)
	}
	return nil
}
