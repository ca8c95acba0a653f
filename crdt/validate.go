package crdt

import (
	"unicode"
	"unicode/utf8"
)

// Limits on what a record may hold. They bound the work and memory a peer can
// cause with one record, and they are part of the data model: a record
// outside them is refused everywhere.
const (
	// MaxChar is the largest UTF-16 offset: a text of 2^40 code units is a
	// two-terabyte book.
	MaxChar = 1 << 40
	// MaxTitleBytes bounds a title, in UTF-8 bytes.
	MaxTitleBytes = 1024
	// MaxDeviceNameBytes bounds a device name, in UTF-8 bytes.
	MaxDeviceNameBytes = 128
	// MaxDevices bounds the read-time slots of one book.
	MaxDevices = 1024
	// MaxSlotMs bounds one device's read time of one book (about 1,000
	// years), so that the total over MaxDevices slots cannot overflow.
	MaxSlotMs = 1000 * 366 * 24 * 3600 * 1000
)

func (p Position) validate(what string) error {
	if err := p.At.validate(); err != nil {
		return err
	}
	if p.At.IsZero() {
		if p.Char != 0 || p.Percent != 0 {
			return invalidf("%s has an offset but no timestamp", what)
		}
		return nil
	}
	if p.Char > MaxChar {
		return invalidf("%s offset %d exceeds %d", what, p.Char, uint64(MaxChar))
	}
	if p.Percent > PercentOne {
		return invalidf("%s percent %d millionths exceeds 1", what, p.Percent)
	}
	return nil
}

func (t Text) validate(what string, maxBytes int) error {
	if err := t.At.validate(); err != nil {
		return err
	}
	if t.At.IsZero() {
		if t.Value != "" {
			return invalidf("%s has a value but no timestamp", what)
		}
		return nil
	}
	return validText(what, t.Value, maxBytes)
}

func validText(what, s string, maxBytes int) error {
	switch {
	case s == "":
		return invalidf("%s is empty", what)
	case len(s) > maxBytes:
		return invalidf("%s is %d bytes, longer than %d", what, len(s), maxBytes)
	case !utf8.ValidString(s):
		return invalidf("%s is not valid UTF-8", what)
	}
	return nil
}

// CheckText refuses text that a device must not write: invalid UTF-8 and
// control characters (C0 with newlines and tabs, DEL, C1), which a terminal
// or a log could take as commands. Every local write of text goes through it
// (the operations in ops.go and kosync.go, and the daemon's API for every
// string of a request body). Records from peers and from disk are not held to
// it: a device of an older version may have written such a record, and
// refusing it would stop sync with that device for good and leave a store
// unreadable; whoever prints them escapes what is not printable instead.
func CheckText(what, s string) error {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !isRuneErrorChar(s[i:]):
			return invalidf("%s is not valid UTF-8 (at byte %d)", what, i)
		case unicode.IsControl(r):
			return invalidf("%s contains the control character U+%04X at byte %d; text may hold no control characters (newlines and tabs included)", what, r, i)
		}
	}
	return nil
}

// isRuneErrorChar reports whether s starts with an encoded U+FFFD, which is
// valid text, rather than with a byte that does not decode.
func isRuneErrorChar(s string) bool {
	_, size := utf8.DecodeRuneInString(s)
	return size == 3
}

// cleanText is validText for a local write: also CheckText.
func cleanText(what, s string, maxBytes int) error {
	if err := validText(what, s, maxBytes); err != nil {
		return err
	}
	return CheckText(what, s)
}

func (r ReadTime) validate() error {
	if len(r) > MaxDevices {
		return invalidf("read time has %d devices, more than %d", len(r), MaxDevices)
	}
	for i, s := range r {
		if s.Device == 0 {
			return invalidf("read time slot without a device")
		}
		if i > 0 && s.Device <= r[i-1].Device {
			return invalidf("read time slots are not sorted by device")
		}
		if s.Ms == 0 || s.Ms > MaxSlotMs {
			return invalidf("read time of device %s is %d ms, outside (0, %d]", s.Device, s.Ms, uint64(MaxSlotMs))
		}
	}
	return nil
}

func (b *Book) validate() error {
	if b.Key.IsZero() {
		return invalidf("book without a key")
	}
	if err := b.Position.validate("position"); err != nil {
		return err
	}
	if err := b.Furthest.validate("furthest position"); err != nil {
		return err
	}
	// Every position write also raises the furthest position, so a record in
	// which furthest lags the position was not made by a correct device.
	if !b.Position.At.IsZero() && (b.Furthest.At.IsZero() || b.Furthest.Char < b.Position.Char) {
		return invalidf("furthest position is behind the position")
	}
	if b.Position.At.IsZero() && !b.Furthest.At.IsZero() {
		return invalidf("furthest position without a position")
	}
	if err := b.ReadTime.validate(); err != nil {
		return err
	}
	if err := b.Deleted.validate(); err != nil {
		return err
	}
	return b.Title.validate("title", MaxTitleBytes)
}

func (d *Device) validate() error {
	if d.ID == 0 {
		return invalidf("device record without an id")
	}
	return d.Name.validate("device name", MaxDeviceNameBytes)
}
