// Package keyalgo names the hash functions of a BookKey. Package bookkey,
// which computes keys, and package crdt, which stores and sends them, both
// stay free of the rest of the project; they share this one leaf so that an
// algorithm has one number everywhere: the byte that leads a key's binary
// form on disk and on the wire.
package keyalgo

import (
	"fmt"
	"strconv"
	"strings"
)

// Algo is the hash function of a BookKey. The zero value is no algorithm.
type Algo uint8

const (
	MD5    Algo = 1
	SHA256 Algo = 2
)

func (a Algo) String() string {
	switch a {
	case MD5:
		return "md5"
	case SHA256:
		return "sha256"
	}
	return "algo(" + strconv.Itoa(int(a)) + ")"
}

// Size returns the length of a's digest in bytes, 0 if a is not an
// algorithm.
func (a Algo) Size() int {
	switch a {
	case MD5:
		return 16
	case SHA256:
		return 32
	}
	return 0
}

// Parse parses "md5" or "sha256", in any case.
func Parse(s string) (Algo, error) {
	switch strings.ToLower(s) {
	case "md5":
		return MD5, nil
	case "sha256":
		return SHA256, nil
	}
	return 0, fmt.Errorf("unknown hash %q (want md5 or sha256)", s)
}
