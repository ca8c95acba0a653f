//go:build !linux

package resident

// DropExecutable drops nothing where the OS does not list a process's
// mappings and their pages as Linux does.
func DropExecutable() (int64, error) { return 0, nil }

// Executable reports nothing resident where the OS does not say.
func Executable() (int64, error) { return 0, nil }

// EvictExecutable evicts nothing where the OS does not list a process's
// mappings as Linux does.
func EvictExecutable() (int64, error) { return 0, nil }
