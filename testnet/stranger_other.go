//go:build !linux

package testnet

import "errors"

// enterNetns needs Linux's network namespaces.
func enterNetns(string) error { return errors.ErrUnsupported }
