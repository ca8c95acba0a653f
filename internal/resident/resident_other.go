//go:build !linux

package resident

// OpenExecutable returns an Executable that drops nothing, where the OS
// does not list a process's mappings and their pages as Linux does.
func OpenExecutable() (*Executable, error) { return &Executable{}, nil }

// Close does nothing.
func (e *Executable) Close() error { return nil }

// Drop drops nothing.
func (e *Executable) Drop() (int64, error) { return 0, nil }

// Resident reports nothing resident where the OS does not say.
func (e *Executable) Resident() (int64, error) { return 0, nil }

// EvictExecutable evicts nothing where the OS does not list a process's
// mappings as Linux does.
func EvictExecutable() (int64, error) { return 0, nil }
