package client

import (
	"context"
	"net/url"

	"github.com/danyue/danyue/daemon/api"
)

// Devices returns every member of the library, removed ones included.
func (c *Client) Devices(ctx context.Context) ([]api.Member, error) {
	var m api.Members
	return m.Devices, c.Do(ctx, "GET", "/v1/devices", nil, nil, &m)
}

// Rename gives this device a new name.
func (c *Client) Rename(ctx context.Context, name string) (api.Member, error) {
	var m api.Member
	return m, c.Do(ctx, "PUT", "/v1/devices/self/name", nil, api.RenameRequest{Name: &name}, &m)
}

// Forget removes a device, given by id or name, from the library.
func (c *Client) Forget(ctx context.Context, device string) (api.Member, error) {
	var m api.Member
	return m, c.Do(ctx, "POST", "/v1/devices/"+url.PathEscape(device)+"/forget", nil, nil, &m)
}

// Leave removes this device from its library: the others rotate the
// library's secret, and this device starts a library of its own.
func (c *Client) Leave(ctx context.Context) (api.Left, error) {
	var l api.Left
	return l, c.Do(ctx, "POST", "/v1/leave", nil, nil, &l)
}
