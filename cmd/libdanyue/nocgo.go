//go:build !cgo

package main

import (
	"fmt"
	"os"
)

// Without cgo there is no C library to build (a cross build has cgo off
// unless a C cross compiler is set up); this keeps `go build ./...` working
// on every target and says what to do instead.
func main() {
	fmt.Fprintln(os.Stderr, "libdanyue is a C library: build it with cgo, go build -buildmode=c-shared -o libdanyue.so ./cmd/libdanyue")
	os.Exit(2)
}
