package lan

import "context"

// Watch reports changes of this machine's network interfaces and their
// addresses (a new network, an interface up or down) on the channel it
// returns, as they happen, until ctx ends; a burst of changes may come as
// one report. Where the system cannot tell (no such notification, or it is
// refused, as to apps on recent Android), it returns an error, and the
// caller polls instead: a notification costs nothing while nothing
// changes, a poll wakes the device every time.
func Watch(ctx context.Context) (<-chan struct{}, error) { return watch(ctx) }
