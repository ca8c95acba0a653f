//go:build !linux

package testnet

import "errors"

// enterNetns needs Linux's network namespaces.
func enterNetns(string) (leave func(), err error) { return nil, errors.ErrUnsupported }
