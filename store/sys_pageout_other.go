//go:build !linux

package store

// pageOutMapped does nothing where the kernel offers no way to reclaim the
// pages of a mapping without unmapping it (Linux's MADV_PAGEOUT); there the
// tables' pages stay resident until the system needs the memory.
func pageOutMapped(dir, suffix string) error { return nil }
