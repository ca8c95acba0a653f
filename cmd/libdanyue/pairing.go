package main

/*
#include <stdlib.h>
*/
import "C"

import (
	"errors"

	"github.com/danyue/danyue/mobile"
)

// Pairing and joining for a C caller: the library's admin operations, which
// only the process that embeds the node holds (the HTTP token it may hand
// on cannot invite or join). They call package mobile, and so the library
// package's own methods, in process.

//export danyue_invite
func danyue_invite(handle C.int) *C.char {
	n := node(handle)
	if n == nil {
		return nil
	}
	code, err := n.Invite()
	if err != nil {
		fail(err)
		return nil
	}
	return C.CString(code)
}

//export danyue_pair_open
func danyue_pair_open(handle C.int, code, addrs **C.char) *C.char {
	n := node(handle)
	if n == nil {
		return nil
	}
	p, err := n.OpenPairing()
	if err != nil {
		fail(err)
		return nil
	}
	if code != nil {
		*code = C.CString(p.Code)
	}
	if addrs != nil {
		*addrs = C.CString(p.Addresses)
	}
	return C.CString(p.ID)
}

//export danyue_pair_wait
func danyue_pair_wait(handle C.int, id *C.char, timeoutMs C.longlong, detail **C.char) *C.char {
	n := node(handle)
	if n == nil {
		return nil
	}
	if id == nil {
		fail(errors.New("danyue_pair_wait: id is NULL"))
		return nil
	}
	var p *mobile.Pairing
	var err error
	if timeoutMs == 0 {
		p, err = n.Pairing(C.GoString(id))
	} else {
		// A negative timeout waits until the end, as 0 does for mobile.
		p, err = n.WaitPairing(C.GoString(id), max(int64(timeoutMs), 0))
	}
	if err != nil {
		fail(err)
		return nil
	}
	if detail != nil {
		*detail = C.CString(p.Detail)
	}
	return C.CString(p.State)
}

//export danyue_pair_cancel
func danyue_pair_cancel(handle C.int, id *C.char) C.int {
	n := node(handle)
	if n == nil {
		return -1
	}
	if id == nil {
		return fail(errors.New("danyue_pair_cancel: id is NULL"))
	}
	if _, err := n.CancelPairing(C.GoString(id)); err != nil {
		return fail(err)
	}
	return 0
}

//export danyue_join
func danyue_join(handle C.int, code, pairAddr *C.char) *C.char {
	n := node(handle)
	if n == nil {
		return nil
	}
	if code == nil {
		fail(errors.New("danyue_join: code is NULL"))
		return nil
	}
	lib, err := n.JoinAt(C.GoString(code), goString(pairAddr))
	if err != nil {
		fail(err)
		return nil
	}
	return C.CString(lib)
}

//export danyue_join_cancel
func danyue_join_cancel(handle C.int) C.int {
	n := node(handle)
	if n == nil {
		return -1
	}
	n.CancelJoin()
	return 0
}

//export danyue_last_error_code
func danyue_last_error_code() *C.char {
	mu.Lock()
	defer mu.Unlock()
	if lastCode == "" {
		return nil
	}
	return C.CString(lastCode)
}
