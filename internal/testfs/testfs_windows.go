package testfs

import (
	"errors"

	"golang.org/x/sys/windows"
)

// heldExclusively reports whether err says that another handle holds the
// file open without sharing it.
func heldExclusively(err error) bool { return errors.Is(err, windows.ERROR_SHARING_VIOLATION) }
