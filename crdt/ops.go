package crdt

import "math"

// The local operations. Each returns the change to apply to the local record
// and to ship to other devices (a delta: a record holding only what the
// operation wrote), or an error and no change. None of them can set a total
// or another device's read-time slot.

// SetPosition records that the reader is at char (UTF-16 units into the
// normalized text), percent (in [0, 1]) of the book, as of at. It also raises
// the furthest position if char is beyond it.
func SetPosition(key BookKey, at Timestamp, char uint64, percent float64) (Entry, error) {
	if err := checkWrite(key, at); err != nil {
		return Entry{}, err
	}
	if char > MaxChar {
		return Entry{}, invalidf("offset %d exceeds %d", char, uint64(MaxChar))
	}
	p, err := PercentFromFloat(percent)
	if err != nil {
		return Entry{}, err
	}
	pos := Position{At: at, Char: char, Percent: p}
	return BookEntry(Book{Key: key, Position: pos, Furthest: pos}), nil
}

// PercentFromFloat converts a fraction in [0, 1] to Percent, rounding to the
// nearest millionth.
func PercentFromFloat(f float64) (Percent, error) {
	if math.IsNaN(f) || f < 0 || f > 1 {
		return 0, invalidf("percent %v is outside [0, 1]", f)
	}
	return Percent(math.Round(f * float64(PercentOne))), nil
}

// AddReadTime adds ms milliseconds of reading on device self to the book
// whose current local record is local (nil if the device has none). The
// change raises self's slot only: a device never writes another device's
// slot, and never a total.
func AddReadTime(key BookKey, local *Book, self DeviceID, ms uint64) (Entry, error) {
	if key.IsZero() {
		return Entry{}, invalidf("book without a key")
	}
	if self == 0 {
		return Entry{}, invalidf("read time without a device")
	}
	if local != nil && local.Key != key {
		return Entry{}, invalidf("read time for %s added to the record of %s", key, local.Key)
	}
	var cur uint64
	if local != nil {
		cur = local.ReadTime.Of(self)
	}
	if ms == 0 || ms > MaxSlotMs-cur {
		return Entry{}, invalidf("read time to add must be positive and keep the device's total under %d ms, got %d", uint64(MaxSlotMs), ms)
	}
	return BookEntry(Book{Key: key, ReadTime: ReadTime{{Device: self, Ms: cur + ms}}}), nil
}

// Delete records that the book was removed from the shelf at at. Its read
// time is kept: if the book is read again, it comes back with all of it.
func Delete(key BookKey, at Timestamp) (Entry, error) {
	if err := checkWrite(key, at); err != nil {
		return Entry{}, err
	}
	return BookEntry(Book{Key: key, Deleted: at}), nil
}

// SetTitle records the book's title as of at.
func SetTitle(key BookKey, at Timestamp, title string) (Entry, error) {
	if err := checkWrite(key, at); err != nil {
		return Entry{}, err
	}
	if err := cleanText("title", title, MaxTitleBytes); err != nil {
		return Entry{}, err
	}
	return BookEntry(Book{Key: key, Title: Text{At: at, Value: title}}), nil
}

// RenameDevice records the name of the device at.Device as of at.
func RenameDevice(at Timestamp, name string) (Entry, error) {
	if at.IsZero() {
		return Entry{}, invalidf("write without a timestamp")
	}
	if err := at.validate(); err != nil {
		return Entry{}, err
	}
	if err := cleanText("device name", name, MaxDeviceNameBytes); err != nil {
		return Entry{}, err
	}
	return DeviceEntry(Device{ID: at.Device, Name: Text{At: at, Value: name}}), nil
}

func checkWrite(key BookKey, at Timestamp) error {
	if key.IsZero() {
		return invalidf("book without a key")
	}
	if at.IsZero() {
		return invalidf("write without a timestamp")
	}
	return at.validate()
}
