// Command libdanyue is the danyue node as a C library, for reader apps in
// stacks gomobile does not reach (Flutter through dart:ffi, .NET through
// P/Invoke, Electron through a native addon or ffi):
//
//	go build -buildmode=c-shared -o libdanyue.so ./cmd/libdanyue
//
// writes libdanyue.so (.dylib, .dll) and libdanyue.h. The library runs the
// same node as package mobile, and so the same daemon as `danyue daemon`;
// the app reads and writes books over the loopback HTTP API, with the
// address and token the library returns, and pairs devices through the
// functions below, which only the process holds: the token, which an app
// may hand to a web view, cannot invite or join.
//
//	int   danyue_start(const char* data_dir, const char* name, const char* http_addr);
//	int   danyue_start_opts(const char* data_dir, const char* name, const char* http_addr,
//	                        const char* listen, const char* peers, int no_mdns);
//	int   danyue_stop(int handle);
//	long long danyue_set_memory_limit(long long bytes);
//	char* danyue_api_address(int handle);
//	char* danyue_api_token(int handle);
//	char* danyue_last_error(void);
//	char* danyue_last_error_code(void);
//	void  danyue_free(char* s);
//	int   danyue_set_log(const char* level, danyue_log_fn fn, void* ctx);
//	typedef void (*danyue_log_fn)(int level, const char* line, void* ctx);
//
//	char* danyue_invite(int handle);
//	char* danyue_pair_open(int handle, char** code, char** addrs);
//	char* danyue_pair_wait(int handle, const char* id, long long timeout_ms, char** detail);
//	int   danyue_pair_cancel(int handle, const char* id);
//	char* danyue_join(int handle, const char* code, const char* pair_addr);
//	int   danyue_join_cancel(int handle);
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
// danyue_set_log sets the log level ("debug", "info", "warn", "error" or
// "off"; NULL keeps it) and the function that receives the log lines (NULL:
// stderr) of the nodes started after it; it returns 0, or -1 for a bad
// level. fn gets the level as log/slog numbers it (-4 debug, 0 info, 4
// warn, 8 error), one logfmt line without a newline, and ctx; it is called
// from the library's threads, one call at a time, must return soon and must
// not call the library.
//
// Pairing: danyue_invite returns the long invite code (it carries the
// library's secret and works any number of times). danyue_pair_open opens a
// short-code invitation (it replaces the one before) and returns its id,
// with the code to show ("7-crossover-clockwork", one use, a few minutes)
// in *code and the HOST:PORT list where it waits in *addrs, each pointer
// may be NULL. danyue_pair_wait returns the invitation's state ("open",
// "paired", "wrong_code", "expired", "cancelled", "failed") and in *detail
// what to tell the user; with timeout_ms 0 at once, < 0 once it has ended,
// > 0 once it has ended or that time passed. danyue_pair_cancel ends it.
// danyue_join joins the library of a short or a long code and returns the
// library's id; it blocks (call it off the UI thread) until joined,
// refused, or ended by danyue_join_cancel from another thread. pair_addr
// is one of the inviter's addrs where multicast does not reach, else NULL.
// On failure a function returns NULL (or -1): danyue_last_error says why
// to a person, danyue_last_error_code names the kind ("bad_invite",
// "no_inviter", "wrong_code", "code_spent", "pairing_failed",
// "unavailable", "cancelled", "stopped", or NULL for another).
//
// Every char*
// returned is the caller's, freed with danyue_free; NULL means none (an
// unknown handle, no error). The functions may be called from any thread.
package main
