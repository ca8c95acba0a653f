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
