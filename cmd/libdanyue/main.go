// Command libdanyue is the danyue node as a C library, for reader apps in
// stacks gomobile does not reach (Flutter through dart:ffi, .NET through
// P/Invoke, Electron through a native addon or ffi):
//
//	go build -buildmode=c-shared -o libdanyue.so ./cmd/libdanyue
//
// writes libdanyue.so (.dylib, .dll) and libdanyue.h. The library runs the
// same node as package mobile, and so the same daemon as `danyue daemon`;
// the app talks to it over the loopback HTTP API, with the address and token
// the library returns.
//
//	int   danyue_start(const char* data_dir, const char* name, const char* http_addr);
//	int   danyue_start_opts(const char* data_dir, const char* name, const char* http_addr,
//	                        const char* listen, const char* peers, int no_mdns);
//	int   danyue_stop(int handle);
//	char* danyue_api_address(int handle);
//	char* danyue_api_token(int handle);
//	char* danyue_last_error(void);
//	void  danyue_free(char* s);
//
// danyue_start returns a handle > 0, or -1 with the reason in
// danyue_last_error. name may be NULL (the host name); http_addr NULL or ""
// means 127.0.0.1 on a free port. danyue_start_opts also takes the libp2p
// listen multiaddrs and static peers (comma-separated, NULL for the
// defaults) and turns LAN discovery off if no_mdns is not 0. Every char* returned is the caller's, freed with
// danyue_free; NULL means none (an unknown handle, no error).
package main

/*
#include <stdlib.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/danyue/danyue/mobile"
)

// The C ABI hands out integers, not Go pointers, so the nodes live in a
// table; it is the library's one piece of process-wide state, as the C
// caller owns nothing else to keep it in.
var (
	mu      sync.Mutex
	nodes   = map[C.int]*mobile.Node{}
	next    C.int
	lastErr string
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
		lastErr = fmt.Sprintf("no node %d", handle)
	}
	return n
}

// fail records err for danyue_last_error and returns -1.
func fail(err error) C.int {
	mu.Lock()
	defer mu.Unlock()
	lastErr = err.Error()
	return -1
}
