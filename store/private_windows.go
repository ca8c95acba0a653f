package store

import (
	"errors"
	"fmt"
	"io/fs"
	"unsafe"

	"golang.org/x/sys/windows"
)

// On Windows a file mode is a fiction (Go reports every directory as 0777
// and chmod only flips the read-only flag), so "private" is the DACL: a
// protected one, inheriting nothing from the parent, that grants full
// control to this user, SYSTEM and Administrators. That is what Windows
// gives a user's own profile folder: SYSTEM runs the backup, indexing and
// antivirus services that must read the files, and Administrators can take
// ownership of any file anyway, so leaving them out would protect nothing
// and only lock out recovery tools run elevated. Other users get nothing.
// A directory's entries carry the same inheritable grants (OICI), so the
// files the store and badger create in it are private from the start, and
// setting the DACL propagates it to the entries already there.

// private sets the private DACL on path if any other account may reach it,
// or if path was just created (it then holds whatever its parent grants).
func private(path string, fi fs.FileInfo, fresh bool) (tightened bool, err error) {
	tu, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return false, fmt.Errorf("who am I: %w", err)
	}
	me := tu.User.Sid
	open, err := openToOthers(path, me)
	if err != nil {
		return false, err
	}
	if !open && !fresh {
		return false, nil
	}
	inherit := ""
	if fi.IsDir() {
		inherit = "OICI"
	}
	sd, err := windows.SecurityDescriptorFromString(fmt.Sprintf("D:P(A;%[1]s;FA;;;%[2]s)(A;%[1]s;FA;;;SY)(A;%[1]s;FA;;;BA)", inherit, me))
	if err != nil {
		return false, err
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return false, err
	}
	err = windows.SetNamedSecurityInfo(path, windows.SE_FILE_OBJECT,
		windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION, nil, nil, dacl, nil)
	if err != nil {
		return false, fmt.Errorf("set the DACL of %s: %w", path, err)
	}
	return open && !fresh, nil
}

// openToOthers reports whether path's DACL grants anything to an account
// other than me, SYSTEM and Administrators. It errs on the side of "open":
// a missing (null) DACL grants everyone everything, and an allow entry of a
// kind this does not read is counted as open, which only makes private
// rewrite the DACL.
func openToOthers(path string, me *windows.SID) (bool, error) {
	sd, err := windows.GetNamedSecurityInfo(path, windows.SE_FILE_OBJECT, windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		return false, fmt.Errorf("read the DACL of %s: %w", path, err)
	}
	dacl, _, err := sd.DACL()
	if errors.Is(err, windows.ERROR_OBJECT_NOT_FOUND) || (err == nil && dacl == nil) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("read the DACL of %s: %w", path, err)
	}
	for i := range uint32(dacl.AceCount) {
		var ace *windows.ACCESS_ALLOWED_ACE
		if err := windows.GetAce(dacl, i, &ace); err != nil {
			return false, fmt.Errorf("read the DACL of %s: %w", path, err)
		}
		switch ace.Header.AceType {
		case windows.ACCESS_DENIED_ACE_TYPE:
			continue
		case windows.ACCESS_ALLOWED_ACE_TYPE:
			// The SID starts at SidStart, as in the Windows ACCESS_ALLOWED_ACE.
			sid := (*windows.SID)(unsafe.Pointer(&ace.SidStart))
			if sid.Equals(me) || sid.IsWellKnown(windows.WinLocalSystemSid) || sid.IsWellKnown(windows.WinBuiltinAdministratorsSid) {
				continue
			}
		}
		return true, nil
	}
	return false, nil
}
