// Package leaks is the one list of goroutines a test binary may end with
// that are not leaks: the process-wide workers the project's dependencies
// start on first use and never end. Every package whose tests check for
// leaked goroutines (goleak) ignores exactly these, so a worker that
// appears in one package's tests is not a leak in another's.
package leaks

import "go.uber.org/goleak"

// Ignore returns the goleak options that ignore the dependencies'
// process-wide workers.
func Ignore() []goleak.Option {
	return []goleak.Option{
		// libp2p and its dependencies.
		goleak.IgnoreAnyFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine"),
		goleak.IgnoreTopFunction("github.com/libp2p/go-libp2p/p2p/transport/tcpreuse.(*ConnMgr).run"),
		goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
		// On Windows go-winio serves every named pipe of the process from
		// one I/O completion goroutine.
		goleak.IgnoreAnyFunction("github.com/Microsoft/go-winio.ioCompletionProcessor"),
	}
}
