package client

import "net/http"

// NewTransport returns a client that sends its requests through rt instead of
// a unix socket: an app that embeds the daemon passes the daemon's
// in-process RoundTripper, and gets the same typed API.
func NewTransport(rt http.RoundTripper) *Client {
	return &Client{socket: "(in-process)", http: &http.Client{Transport: rt}}
}
