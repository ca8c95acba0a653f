// Package gctrace reads the lines the Go runtime writes to a process's
// stderr under GODEBUG=gctrace=1, one per garbage collection:
//
//	gc 12 @3.456s 1%: 0.018+1.2+0.004 ms clock, ..., 4->5->2 MB, 5 MB goal, 0 MB stacks, 0 MB globals, 2 P
//
// where 4->5->2 MB is the heap when the collection started, when it
// ended, and the heap it marked live. The peak Go heap of a daemon is the
// largest heap at a collection's start (the collector lets the heap grow
// to its goal before it runs); the live heap is what the daemon's data
// needed. The runtime prints whole megabytes, so both are read to 1 MB.
package gctrace

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Cycle is one garbage collection, its heap sizes in MB.
type Cycle struct {
	N                  int // the runtime's count of collections
	Start, End, Marked int64
	Goal               int64
}

// ErrNotTrace is returned by Parse for a line that is not a collection's
// trace (the daemon's own log lines share stderr with the trace).
var ErrNotTrace = errors.New("not a gctrace line")

// Parse reads one line of stderr.
func Parse(line string) (Cycle, error) {
	rest, ok := strings.CutPrefix(line, "gc ")
	if !ok {
		return Cycle{}, ErrNotTrace
	}
	num, rest, ok := strings.Cut(rest, " @")
	if !ok {
		return Cycle{}, ErrNotTrace
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return Cycle{}, ErrNotTrace
	}
	c := Cycle{N: n}
	for part := range strings.SplitSeq(rest, ", ") {
		switch {
		case strings.HasSuffix(part, " MB goal"):
			c.Goal, err = strconv.ParseInt(strings.TrimSuffix(part, " MB goal"), 10, 64)
		case strings.Count(part, "->") == 2 && strings.HasSuffix(part, " MB"):
			f := strings.Split(strings.TrimSuffix(part, " MB"), "->")
			for i, dst := range []*int64{&c.Start, &c.End, &c.Marked} {
				if *dst, err = strconv.ParseInt(f[i], 10, 64); err != nil {
					break
				}
			}
		default:
			continue
		}
		if err != nil {
			return Cycle{}, fmt.Errorf("gc %d: %q: %w", n, part, err)
		}
	}
	if c.Goal == 0 && c.Start == 0 && c.End == 0 {
		return Cycle{}, fmt.Errorf("gc %d: no heap sizes in %q", n, line)
	}
	return c, nil
}
