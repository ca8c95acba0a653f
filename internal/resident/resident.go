// Package resident drops pages from this process's resident set that the
// process can read back from their files, and reads the kernel's list of
// the process's mappings that it needs for that.
//
// A Go executable is mapped, not loaded: the pages of its code and
// read-only data count in the process's RSS once touched, and the kernel
// maps up to 64 KB of cached neighbours around each page it faults in. So
// the start-up of the daemon, which runs the init functions of every
// package it links, leaves about 18 MB of the 23 MB of code and read-only
// data in its executable resident until the process ends, three quarters
// of an idle daemon's RSS, though serving a request touches a fraction of
// it. Dropping those pages when the work that touched them is over costs
// a minor fault (no disk read: the pages stay in the page cache) for each
// page used again. Evicting them from the page cache as well, once the
// start-up is over, keeps that fault from mapping the neighbours the
// start-up read along with it.
package resident

import (
	"os"
	"strconv"
	"strings"
)

// Executable is this process's executable's mappings of its code and
// read-only data (OpenExecutable), whose resident pages it counts and
// drops. Its methods may be called concurrently, but not with Close.
type Executable struct {
	path    string
	maps    []Mapping
	pagemap *os.File // of this process
}

// Mapping is one line of /proc/PID/maps.
type Mapping struct {
	Start, End uint64 // addresses, End exclusive
	Perms      string // "r-xp": read, write, execute, private or shared
	Offset     uint64 // in the file, of Start
	Path       string // "" for anonymous memory; "[stack]" and the like for the kernel's
}

// ParseMapsLine reads "start-end perms offset dev inode path" from a line of
// /proc/PID/maps; the path is the rest of the line, spaces and all. A
// deleted file's path ends in " (deleted)". A line without a path (an
// anonymous mapping) is not ok: no caller wants one.
func ParseMapsLine(line string) (m Mapping, ok bool) {
	var f [5]string
	rest := line
	for i := range f {
		rest = strings.TrimLeft(rest, " ")
		f[i], rest, ok = strings.Cut(rest, " ")
		if !ok {
			return Mapping{}, false
		}
	}
	lo, hi, found := strings.Cut(f[0], "-")
	if !found {
		return Mapping{}, false
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	off, err3 := strconv.ParseUint(f[2], 16, 64)
	if err1 != nil || err2 != nil || err3 != nil || end <= start || len(f[1]) != 4 {
		return Mapping{}, false
	}
	m = Mapping{Start: start, End: end, Perms: f[1], Offset: off, Path: strings.TrimLeft(rest, " ")}
	return m, m.Path != ""
}
