package client

import (
	"context"

	"github.com/danyue/danyue/daemon/api"
)

// WebLogin returns a one-time login URL of the daemon's status page. Only
// the device's owner may ask (the unix socket); a daemon without an --http
// listener refuses with api.CodeUnavailable.
func (c *Client) WebLogin(ctx context.Context) (api.WebLogin, error) {
	var l api.WebLogin
	return l, c.Do(ctx, "POST", "/v1/web/login-token", nil, nil, &l)
}
