// Package client is the typed client of the danyue daemon's local API, used
// by every CLI command and by tests. It speaks to the daemon over its unix
// socket, or on Windows its named pipe (dial_*.go).
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/danyue/danyue/daemon/api"
)

// ErrNoDaemon means nothing is listening on the socket: the daemon of that
// data dir is not running.
var ErrNoDaemon = errors.New("no daemon is running")

// ErrNotOurDaemon means the local endpoint is served by a process of another
// user, and nothing was sent to it. Only Windows reports it: pipe names are
// machine-wide, and another account could take the daemon's before it
// starts, while a unix socket lives in the user's own 0700 directory.
var ErrNotOurDaemon = errors.New("the daemon's endpoint is served by another user's process")

// APIError is an error answered by the daemon: Code is stable for programs,
// Detail is for people.
type APIError struct {
	Status int
	Code   string `json:"error"`
	Detail string `json:"detail"`
}

func (e *APIError) Error() string {
	if e.Detail == "" {
		return e.Code
	}
	return e.Detail
}

// Client talks to one daemon.
type Client struct {
	socket string
	http   *http.Client
}

// New returns a client for the daemon listening on socket: a unix socket
// path, or on Windows a named pipe (daemon.DefaultSocket gives either).
func New(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dial(ctx, socket)
		},
		MaxIdleConnsPerHost: 64,
	}
	return &Client{socket: socket, http: &http.Client{Transport: tr}}
}

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Do sends one request with an optional JSON body and decodes a JSON answer
// into out (if not nil). Header may be nil.
func (c *Client) Do(ctx context.Context, method, path string, header http.Header, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
		header = header.Clone()
		if header == nil {
			header = http.Header{}
		}
		header.Set("Content-Type", "application/json")
	}
	resp, err := c.send(ctx, method, path, header, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// DoRaw sends body as it is and copies the answer to out: for tests and
// tools that must send what the typed methods would refuse to.
func (c *Client) DoRaw(ctx context.Context, method, path string, header http.Header, body io.Reader, out io.Writer) error {
	resp, err := c.send(ctx, method, path, header, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(out, resp.Body)
	return err
}

func (c *Client) send(ctx context.Context, method, path string, header http.Header, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://danyue"+path, body)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if isNoDaemon(err) {
			return nil, fmt.Errorf("%w (no socket answers at %s)", ErrNoDaemon, c.socket)
		}
		return nil, err
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		apiErr := &APIError{Status: resp.StatusCode}
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(data, apiErr) != nil || apiErr.Code == "" {
			apiErr.Code, apiErr.Detail = "http_"+fmt.Sprint(resp.StatusCode), strings.TrimSpace(string(data))
		}
		return nil, apiErr
	}
	return resp, nil
}

// Event is one message of the daemon's event stream.
type Event struct {
	Type string
	Data json.RawMessage
}

// Events streams /v1/events until ctx ends or the daemon closes the stream.
// fn is called for each event; an error from fn stops the stream and is
// returned.
func (c *Client) Events(ctx context.Context, fn func(Event) error) error {
	resp, err := c.send(ctx, "GET", "/v1/events", nil, nil)
	if err != nil {
		return err
	}
	return readEvents(ctx, resp.Body, fn)
}

// readEvents calls fn for each event of an open stream, and closes it.
func readEvents(ctx context.Context, body io.ReadCloser, fn func(Event) error) error {
	defer body.Close()
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var ev Event
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.Type != "" {
				if err := fn(ev); err != nil {
					return err
				}
			}
			ev = Event{}
		case strings.HasPrefix(line, "event: "):
			ev.Type = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.Data = append(ev.Data, strings.TrimPrefix(line, "data: ")...)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return sc.Err()
}

// Position is the position a book event carried, stamped with the time
// it arrived.
type Position struct {
	Key  string
	Char uint64
	At   time.Time
}

// Positions opens /v1/events and streams the positions of its book events
// until ctx ends or the stream does; the channel is then left open, unread
// events dropped with it. It is for watching a write arrive (tests,
// measuring), so it returns only once the stream is open: the daemon
// subscribes before it answers, and no event published after Positions
// returns is missed for having come too early.
func (c *Client) Positions(ctx context.Context) (<-chan Position, error) {
	resp, err := c.send(ctx, "GET", "/v1/events", nil, nil)
	if err != nil {
		return nil, err
	}
	ch := make(chan Position, 64)
	go func() {
		_ = readEvents(ctx, resp.Body, func(e Event) error {
			at := time.Now()
			var bk api.Book
			if e.Type != "book" || json.Unmarshal(e.Data, &bk) != nil || bk.Position == nil {
				return nil
			}
			select {
			case ch <- Position{Key: bk.Key, Char: bk.Position.Char, At: at}:
			case <-ctx.Done():
			}
			return nil
		})
	}()
	return ch, nil
}

// BookPath returns the API path of a book, escaped.
func BookPath(key string, suffix string) string {
	return "/v1/books/" + url.PathEscape(key) + suffix
}
