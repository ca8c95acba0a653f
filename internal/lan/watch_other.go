//go:build !linux

package lan

import (
	"context"
	"errors"
)

// watch has no notification to listen to here; the caller polls.
func watch(context.Context) (<-chan struct{}, error) { return nil, errors.ErrUnsupported }
