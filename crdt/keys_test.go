package crdt_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/danyue/danyue/crdt"
)

// Rule (BookKey; docs/design.md, one record per book): a key is md5:<32 hex> or
// sha256:<64 hex>; hex digits may be given in either case and mean the same
// key, which always prints in lowercase.
func TestParseBookKey(t *testing.T) {
	const md5Hex = "0123456789abcdef0123456789abcdef"
	const sha256Hex = md5Hex + md5Hex
	tests := []struct {
		name string
		in   string
		want string // canonical form; "" means the input must be refused
	}{
		{"md5", "md5:" + md5Hex, "md5:" + md5Hex},
		{"sha256", "sha256:" + sha256Hex, "sha256:" + sha256Hex},
		{"uppercase hex is normalised", "md5:" + strings.ToUpper(md5Hex), "md5:" + md5Hex},
		{"mixed case hex is normalised", "sha256:" + strings.ToUpper(md5Hex) + md5Hex, "sha256:" + sha256Hex},
		{"empty", "", ""},
		{"missing colon", "md5" + md5Hex, ""},
		{"algorithm only", "md5:", ""},
		{"digest only", md5Hex, ""},
		{"unknown algorithm", "sha1:" + md5Hex + "01234567", ""},
		{"uppercase algorithm", "MD5:" + md5Hex, ""},
		{"md5 one digit short", "md5:" + md5Hex[1:], ""},
		{"md5 one digit long", "md5:" + md5Hex + "0", ""},
		{"md5 with a sha256 digest", "md5:" + sha256Hex, ""},
		{"sha256 with an md5 digest", "sha256:" + md5Hex, ""},
		{"non-hex digit", "md5:" + md5Hex[:31] + "g", ""},
		{"odd byte in the middle", "md5:0123456789abcdef-123456789abcdef", ""},
		{"leading space", " md5:" + md5Hex, ""},
		{"trailing newline", "md5:" + md5Hex + "\n", ""},
		{"two colons", "md5::" + md5Hex[1:], ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := crdt.ParseBookKey(tt.in)
			if tt.want == "" {
				if !errors.Is(err, crdt.ErrInvalid) || !k.IsZero() {
					t.Fatalf("ParseBookKey(%q) = %v, %v; want the zero key and ErrInvalid", tt.in, k, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseBookKey(%q): %v", tt.in, err)
			}
			if k.String() != tt.want {
				t.Errorf("ParseBookKey(%q).String() = %q, want %q", tt.in, k, tt.want)
			}
			// The same key whatever the case: it must key a map as one book.
			if canon := crdt.MustParseBookKey(tt.want); k != canon {
				t.Errorf("ParseBookKey(%q) != ParseBookKey(%q)", tt.in, tt.want)
			}
		})
	}
}

// The binary form carried on the wire round-trips and refuses what no key
// can be.
func TestBookKeyBinary(t *testing.T) {
	for _, k := range []crdt.BookKey{keyMD5, keySHA256} {
		b, err := k.AppendBinary([]byte{0xff})
		if err != nil {
			t.Fatal(err)
		}
		back, err := crdt.BookKeyFromBinary(b[1:])
		if err != nil || back != k {
			t.Errorf("%v: BookKeyFromBinary(AppendBinary) = %v, %v", k, back, err)
		}
	}
	if _, err := (crdt.BookKey{}).AppendBinary(nil); !errors.Is(err, crdt.ErrInvalid) {
		t.Errorf("zero key AppendBinary: err = %v, want ErrInvalid", err)
	}
	bad := map[string][]byte{
		"empty":             nil,
		"algorithm only":    {1},
		"unknown algorithm": append([]byte{3}, make([]byte, 16)...),
		"zero algorithm":    append([]byte{0}, make([]byte, 16)...),
		"md5 too short":     append([]byte{1}, make([]byte, 15)...),
		"md5 too long":      append([]byte{1}, make([]byte, 17)...),
		"sha256 too short":  append([]byte{2}, make([]byte, 16)...),
	}
	for name, b := range bad {
		if k, err := crdt.BookKeyFromBinary(b); !errors.Is(err, crdt.ErrInvalid) || !k.IsZero() {
			t.Errorf("%s: BookKeyFromBinary(%x) = %v, %v; want ErrInvalid", name, b, k, err)
		}
	}
}

func TestParseDeviceID(t *testing.T) {
	tests := []struct {
		in   string
		want crdt.DeviceID // 0: refused
	}{
		{"8f3c2a1d9e4b7f60", 0x8f3c2a1d9e4b7f60},
		{"8F3C2A1D9E4B7F60", 0x8f3c2a1d9e4b7f60},
		{"000000000000000a", devA},
		{"ffffffffffffffff", 0xffffffffffffffff},
		{"0000000000000000", 0}, // zero means no device
		{"a", 0},
		{"8f3c2a1d9e4b7f6", 0},
		{"8f3c2a1d9e4b7f600", 0},
		{"8f3c2a1d9e4b7f6g", 0},
		{"+f3c2a1d9e4b7f60", 0},
		{"", 0},
	}
	for _, tt := range tests {
		got, err := crdt.ParseDeviceID(tt.in)
		if tt.want == 0 {
			if !errors.Is(err, crdt.ErrInvalid) || got != 0 {
				t.Errorf("ParseDeviceID(%q) = %v, %v; want ErrInvalid", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseDeviceID(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
		if s := got.String(); !strings.EqualFold(s, tt.in) || strings.ToLower(s) != s {
			t.Errorf("%v.String() = %q, want lowercase %q", got, s, tt.in)
		}
	}
}
