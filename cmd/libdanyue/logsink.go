package main

/*
#include <stdint.h>
#include <stdlib.h>

typedef void (*danyue_log_fn)(int level, const char* line, void* ctx);

// danyue_call_log calls fn: Go cannot call a C function pointer itself.
static void danyue_call_log(danyue_log_fn fn, int level, const char* line, uintptr_t ctx) {
	fn(level, line, (void*)ctx);
}
*/
import "C"

import (
	"unsafe"
)

// cSink is the C caller's log function as a mobile.LogSink. ctx is the
// caller's pointer, opaque to Go, kept as an integer so that the collector
// never looks at it.
type cSink struct {
	fn  C.danyue_log_fn
	ctx C.uintptr_t
}

func (s *cSink) Log(level int, line string) {
	cs := C.CString(line)
	defer C.free(unsafe.Pointer(cs))
	C.danyue_call_log(s.fn, C.int(level), cs, s.ctx)
}
