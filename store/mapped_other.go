//go:build !linux

package store

// mappedFileBytes is not told on this OS: there is no cheap, documented
// way to read a process's resident file pages, so the trimmer stops.
func mappedFileBytes() (int64, bool) { return 0, false }

// dropMappedPages does nothing here: without a list of the process's
// mappings (Linux's /proc/self/maps), the tables' ranges are not known.
func dropMappedPages(string, func(uint64, string) (uint64, bool)) error { return nil }
