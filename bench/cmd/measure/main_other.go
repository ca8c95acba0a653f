//go:build !linux

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "measure: runs on Linux only: it reads the daemons' memory, CPU time and context switches from /proc")
	os.Exit(2)
}
