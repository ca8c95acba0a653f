package main

/*
#include <stdint.h>
#include <stdlib.h>

typedef void (*danyue_log_fn)(int level, const char* line, void* ctx);
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"unsafe"

	"github.com/danyue/danyue/mobile"
)

// The C ABI hands out integers, not Go pointers, so the nodes live in a
// table; it is the library's one piece of process-wide state, as the C
// caller owns nothing else to keep it in.
var (
	mu       sync.Mutex
	nodes    = map[C.int]*mobile.Node{}
	next     C.int
	lastErr  string
	lastCode string
	// logLevel and logSink are what danyue_set_log chose for the nodes
	// started after it.
	logLevel = "info"
	logSink  mobile.LogSink
)

func main() {} // required by -buildmode=c-shared; never runs

//export danyue_start
func danyue_start(dataDir, name, httpAddr *C.char) C.int {
	return danyue_start_opts(dataDir, name, httpAddr, nil, nil, 0)
}

//export danyue_start_opts
func danyue_start_opts(dataDir, name, httpAddr, listen, peers *C.char, noMDNS C.int) C.int {
	if dataDir == nil {
		return fail(errors.New("danyue_start: data_dir is NULL"))
	}
	cfg := mobile.NewConfig(C.GoString(dataDir))
	cfg.Name, cfg.HTTP = goString(name), goString(httpAddr)
	cfg.Listen, cfg.Peers = goString(listen), goString(peers)
	cfg.NoMDNS = noMDNS != 0
	mu.Lock()
	cfg.LogLevel, cfg.LogSink = logLevel, logSink
	mu.Unlock()
	if cfg.HTTP == "" {
		// The HTTP API is how a C caller talks to the node.
		cfg.HTTP = "127.0.0.1:0"
	}
	n, err := mobile.Start(cfg)
	if err != nil {
		return fail(err)
	}
	mu.Lock()
	defer mu.Unlock()
	next++
	nodes[next] = n
	return next
}

// goString is C.GoString with NULL as "".
func goString(s *C.char) string {
	if s == nil {
		return ""
	}
	return C.GoString(s)
}

// danyue_set_memory_limit is mobile.Config.MemoryLimit for a C caller, who
// owns the process and so its policy: process-wide, it stays until changed.
//
//export danyue_set_memory_limit
func danyue_set_memory_limit(bytes C.longlong) C.longlong {
	if bytes <= 0 {
		return C.longlong(debug.SetMemoryLimit(-1)) // -1 reads it
	}
	return C.longlong(debug.SetMemoryLimit(int64(bytes)))
}

// danyue_set_log sets the log level ("debug", "info", "warn", "error",
// "off"; NULL leaves it) and the function that receives each log line (NULL:
// stderr) of the nodes started after it.
//
//export danyue_set_log
func danyue_set_log(level *C.char, fn C.danyue_log_fn, ctx unsafe.Pointer) C.int {
	l := goString(level)
	if l != "" {
		// A bad level is refused here, not at the next start.
		if err := mobile.CheckLogLevel(l); err != nil {
			return fail(fmt.Errorf("danyue_set_log: %w", err))
		}
	}
	var sink mobile.LogSink
	if fn != nil {
		sink = &cSink{fn: fn, ctx: C.uintptr_t(uintptr(ctx))}
	}
	mu.Lock()
	defer mu.Unlock()
	if l != "" {
		logLevel = l
	}
	logSink = sink
	return 0
}

//export danyue_stop
func danyue_stop(handle C.int) C.int {
	mu.Lock()
	n, ok := nodes[handle]
	delete(nodes, handle)
	mu.Unlock()
	if !ok {
		return fail(fmt.Errorf("danyue_stop: no node %d", handle))
	}
	if err := n.Stop(); err != nil {
		return fail(err)
	}
	return 0
}

//export danyue_api_address
func danyue_api_address(handle C.int) *C.char {
	n := node(handle)
	if n == nil {
		return nil
	}
	return C.CString(n.APIAddress())
}

//export danyue_api_token
func danyue_api_token(handle C.int) *C.char {
	n := node(handle)
	if n == nil {
		return nil
	}
	return C.CString(n.APIToken())
}

//export danyue_last_error
func danyue_last_error() *C.char {
	mu.Lock()
	defer mu.Unlock()
	if lastErr == "" {
		return nil
	}
	return C.CString(lastErr)
}

//export danyue_free
func danyue_free(s *C.char) {
	C.free(unsafe.Pointer(s))
}

func node(handle C.int) *mobile.Node {
	mu.Lock()
	defer mu.Unlock()
	n := nodes[handle]
	if n == nil {
		lastErr, lastCode = fmt.Sprintf("no node %d", handle), ""
	}
	return n
}

// fail records err for danyue_last_error and returns -1.
func fail(err error) C.int {
	mu.Lock()
	defer mu.Unlock()
	lastErr, lastCode = err.Error(), mobile.ErrorCode(err)
	return -1
}
