//go:build !windows

package testfs

// heldExclusively: only Windows lets one handle keep every other out.
func heldExclusively(error) bool { return false }
