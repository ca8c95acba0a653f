package client

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/danyue/danyue/daemon/api"
)

// Status returns the daemon's status.
func (c *Client) Status(ctx context.Context) (api.Status, error) {
	var s api.Status
	return s, c.Do(ctx, "GET", "/v1/status", nil, nil, &s)
}

// Peers returns the devices this daemon knows.
func (c *Client) Peers(ctx context.Context) ([]api.Peer, error) {
	var p api.Peers
	return p.Peers, c.Do(ctx, "GET", "/v1/peers", nil, nil, &p)
}

// Books returns the whole shelf, most recently read first, with deleted
// books if withDeleted: one consistent answer, held in memory. For a large
// shelf, EachBook or BooksPage read it a page at a time.
func (c *Client) Books(ctx context.Context, withDeleted bool) ([]api.Book, error) {
	path := "/v1/books"
	if withDeleted {
		path += "?deleted=1"
	}
	var b api.Books
	if err := c.Do(ctx, "GET", path, nil, nil, &b); err != nil {
		return nil, err
	}
	// The daemon streams the whole shelf in key order; the stamps sort as
	// the writes do.
	slices.SortStableFunc(b.Books, func(x, y api.Book) int { return strings.Compare(stampOf(y), stampOf(x)) })
	return b.Books, nil
}

func stampOf(b api.Book) string {
	if b.Position == nil {
		return ""
	}
	return b.Position.Stamp
}

// Book returns one book.
func (c *Client) Book(ctx context.Context, key string) (api.Book, error) {
	var b api.Book
	return b, c.Do(ctx, "GET", BookPath(key, ""), nil, nil, &b)
}

// SetPosition records where the reader is in a book; title may be empty.
func (c *Client) SetPosition(ctx context.Context, key string, char int64, percent float64, title string) (api.Book, error) {
	req := api.PositionRequest{Char: &char, Percent: &percent}
	if title != "" {
		req.Title = &title
	}
	var b api.Book
	return b, c.Do(ctx, "PUT", BookPath(key, "/position"), nil, req, &b)
}

// AddReadTime adds ms of reading on this device. A non-empty idempotencyKey
// makes retries of the same report count once.
func (c *Client) AddReadTime(ctx context.Context, key string, ms int64, idempotencyKey string) (api.Book, error) {
	var h http.Header
	if idempotencyKey != "" {
		h = http.Header{"Idempotency-Key": {idempotencyKey}}
	}
	var b api.Book
	return b, c.Do(ctx, "POST", BookPath(key, "/read-time"), h, api.ReadTimeRequest{AddMs: &ms}, &b)
}

// Delete removes a book from the shelf on every device.
func (c *Client) Delete(ctx context.Context, key string) (api.Book, error) {
	var b api.Book
	return b, c.Do(ctx, "DELETE", BookPath(key, ""), nil, nil, &b)
}

// Restore brings the deleted book key back on every device, with the
// position, title and read time it had; a book on the shelf is returned as
// it is.
func (c *Client) Restore(ctx context.Context, key string) (api.Book, error) {
	var b api.Book
	return b, c.Do(ctx, "POST", BookPath(key, "/restore"), nil, nil, &b)
}

// Daily returns this device's reading time per day for the last days days.
func (c *Client) Daily(ctx context.Context, days int) (api.Daily, error) {
	var d api.Daily
	return d, c.Do(ctx, "GET", "/v1/stats/daily?days="+strconv.Itoa(days), nil, nil, &d)
}

// Invite returns an invite code for this device's library.
func (c *Client) Invite(ctx context.Context) (string, error) {
	var inv api.Invite
	return inv.Code, c.Do(ctx, "POST", "/v1/invite", nil, nil, &inv)
}

// KosyncAddUser creates a KOReader progress-sync account in the library;
// key is the lowercase hex MD5 of the password, as KOReader sends it. A taken
// name is an *APIError with Code api.CodeNameTaken.
func (c *Client) KosyncAddUser(ctx context.Context, name, key string) (api.KosyncUser, error) {
	var u api.KosyncUser
	return u, c.Do(ctx, "POST", "/v1/kosync/users", nil, api.KosyncUserRequest{Name: &name, Key: &key}, &u)
}

// KosyncPasswd gives the KOReader account name a new key (the lowercase hex
// MD5 of the new password, as KOReader sends it).
func (c *Client) KosyncPasswd(ctx context.Context, name, key string) error {
	return c.Do(ctx, "PUT", "/v1/kosync/users/"+url.PathEscape(name), nil, api.KosyncPasswdRequest{Key: &key}, nil)
}

// KosyncDelUser removes the KOReader account name from the library.
func (c *Client) KosyncDelUser(ctx context.Context, name string) error {
	return c.Do(ctx, "DELETE", "/v1/kosync/users/"+url.PathEscape(name), nil, nil, nil)
}

// KosyncLink records that KOReader's document is the book with key
// (title names it where it is not on the shelf).
func (c *Client) KosyncLink(ctx context.Context, document, key, title string) error {
	return c.Do(ctx, "PUT", "/v1/kosync/links/"+url.PathEscape(document), nil, api.KosyncLinkRequest{Key: &key, Title: title}, nil)
}

// KosyncProgress returns every KOReader account's place in every document.
func (c *Client) KosyncProgress(ctx context.Context) ([]api.KosyncProgress, error) {
	var l api.KosyncProgressList
	return l.Progress, c.Do(ctx, "GET", "/v1/kosync/progress", nil, nil, &l)
}

// Join moves this device into the library of an invite code, short or
// long.
func (c *Client) Join(ctx context.Context, code string) (api.Joined, error) {
	return c.JoinAt(ctx, code, "")
}

// JoinAt is Join with a short code whose inviter is at pairAddr (host:port),
// for networks without multicast; empty pairAddr finds it by mDNS.
func (c *Client) JoinAt(ctx context.Context, code, pairAddr string) (api.Joined, error) {
	var j api.Joined
	return j, c.Do(ctx, "POST", "/v1/join", nil, api.JoinRequest{Code: &code, PairAddr: pairAddr}, &j)
}

// Pair opens a short-code invitation for this device's library: one use, a
// few minutes.
func (c *Client) Pair(ctx context.Context) (api.Pairing, error) {
	var p api.Pairing
	return p, c.Do(ctx, "POST", "/v1/pairing", nil, nil, &p)
}

// Pairing returns the state of invitation id; with wait, once it has ended.
func (c *Client) Pairing(ctx context.Context, id string, wait bool) (api.Pairing, error) {
	path := "/v1/pairing/" + url.PathEscape(id)
	if wait {
		path += "?wait=1"
	}
	var p api.Pairing
	return p, c.Do(ctx, "GET", path, nil, nil, &p)
}

// PairingInvites lists the short-code invitations whose codes still work.
func (c *Client) PairingInvites(ctx context.Context) (api.PairingInvites, error) {
	var l api.PairingInvites
	return l, c.Do(ctx, "GET", "/v1/invites", nil, nil, &l)
}

// CancelPairingInvite ends invitation id through DELETE /v1/invites/{id}:
// its code stops working.
func (c *Client) CancelPairingInvite(ctx context.Context, id string) (api.Pairing, error) {
	var p api.Pairing
	return p, c.Do(ctx, "DELETE", "/v1/invites/"+url.PathEscape(id), nil, nil, &p)
}

// CancelPairing ends invitation id: its code stops working.
func (c *Client) CancelPairing(ctx context.Context, id string) (api.Pairing, error) {
	var p api.Pairing
	return p, c.Do(ctx, "DELETE", "/v1/pairing/"+url.PathEscape(id), nil, nil, &p)
}
