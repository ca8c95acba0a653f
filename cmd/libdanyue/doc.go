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
//	long long danyue_set_memory_limit(long long bytes);
//	char* danyue_api_address(int handle);
//	char* danyue_api_token(int handle);
//	char* danyue_last_error(void);
//	void  danyue_free(char* s);
//
// danyue_start returns a handle > 0, or -1 with the reason in
// danyue_last_error. name may be NULL (the host name); http_addr NULL or ""
// means 127.0.0.1 on a free port. danyue_start_opts also takes the libp2p
// listen multiaddrs and static peers (comma-separated, NULL for the
// defaults) and turns LAN discovery off if no_mdns is not 0. danyue_stop
// returns 0, or -1 for an unknown handle or a failed close.
//
// danyue_set_memory_limit sets the soft limit, in bytes, on the memory of
// the library's Go runtime (runtime/debug.SetMemoryLimit; what
// mobile.Config.MemoryLimit sets for a gomobile app) and returns the one it
// replaced; bytes <= 0 changes nothing and returns the current one. The
// library sets none itself: the process is the app's, and so is the choice
// (the README gives the trade-off and the daemon command's own). It applies
// to the whole library, every node in it, until it is set again.
//
// Every char*
// returned is the caller's, freed with danyue_free; NULL means none (an
// unknown handle, no error). The functions may be called from any thread.
package main
