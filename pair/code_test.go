package pair

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestWordList(t *testing.T) {
	if _, err := loadWords(pgpWordsText); err != nil {
		t.Fatal(err)
	}
	// Spot checks against the published list: byte 0x3b is clockwork
	// (even) and councilman (odd), 0x3c cobra and crossover.
	for _, tc := range []struct {
		list int
		b    byte
		word string
	}{{1, 0x3b, "clockwork"}, {0, 0x3b, "councilman"}, {1, 0x3c, "cobra"}, {0, 0x3c, "crossover"}, {0, 0x00, "adroitness"}, {1, 0xff, "zulu"}} {
		if got := pgpWords.words[tc.list][tc.b]; got != tc.word {
			t.Errorf("list %d byte %#x = %q, want %q", tc.list, tc.b, got, tc.word)
		}
	}
	bad := []string{
		"00 a b\n",                      // too few rows
		strings.Repeat("00 a b\n", 256), // bytes out of order
		"zz a b\n",
		"00 a\n",
	}
	for _, text := range bad {
		if _, err := loadWords(text); err == nil {
			t.Errorf("loadWords accepted %.20q", text)
		}
	}
}

func TestNewCode(t *testing.T) {
	for range 50 {
		c, err := NewCode()
		if err != nil {
			t.Fatal(err)
		}
		if c.Channel < 1 || c.Channel > MaxChannel {
			t.Fatalf("channel %d out of range", c.Channel)
		}
		back, err := ParseCode(c.String())
		if err != nil || back != c {
			t.Fatalf("ParseCode(%q) = %v, %v", c, back, err)
		}
	}
	// The channel draw rejects bytes past the last whole multiple of 99.
	c, err := newCode(bytes.NewReader([]byte{250, 1, 2, 98, 0x3c, 0x3b}))
	if err != nil || c.String() != "99-crossover-clockwork" {
		t.Errorf("newCode = %q, %v; want 99-crossover-clockwork", c, err)
	}
	if _, err := newCode(bytes.NewReader(nil)); err == nil {
		t.Error("newCode without randomness succeeded")
	}
}

func TestParseCode(t *testing.T) {
	want := "7-crossover-clockwork"
	good := []string{
		"7-crossover-clockwork",
		"  7 Crossover CLOCKWORK \n",
		"07-crossover-clockwork",
		"7 – crossover — clockwork",
		"7.crossover_clockwork",
		"7--crossover,,clockwork",
	}
	for _, s := range good {
		c, err := ParseCode(s)
		if err != nil || c.String() != want {
			t.Errorf("ParseCode(%q) = %q, %v; want %q", s, c, err, want)
		}
	}
	bad := map[string]string{
		"":                            "number and 2 words",
		"7-crossover":                 "number and 2 words",
		"7-crossover-clockwork-cobra": "number and 2 words",
		"0-crossover-clockwork":       "channel number",
		"100-crossover-clockwork":     "channel number",
		"007-crossover-clockwork":     "channel number",
		"x-crossover-clockwork":       "channel number",
		"7-clockwork-crossover":       "swapped",
		"7-crossover-crossover":       "swapped",
		"7-crossover-clockwerk":       "not one of the code words",
		"7-crossover-clockwork!":      "unexpected character",
		"7/crossover/clockwork":       "unexpected character",
		strings.Repeat("7-", 200):     "too long",
		"7-crossover-clock\x00work":   "unexpected character",
	}
	for s, msg := range bad {
		_, err := ParseCode(s)
		if !errors.Is(err, ErrBadCode) || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseCode(%.40q) = %v; want ErrBadCode saying %q", s, err, msg)
		}
	}
}

// FuzzParseCode: ParseCode never panics, and what it accepts prints as a
// canonical code that parses back to itself.
func FuzzParseCode(f *testing.F) {
	for _, s := range []string{"7-crossover-clockwork", " 12 Adroitness Zulu", "0-a-b", "7–x—y", "99-yucatan-zulu"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCode(s)
		if err != nil {
			if c != (Code{}) {
				t.Fatalf("error %v came with a partial code %v", err, c)
			}
			return
		}
		back, err := ParseCode(c.String())
		if err != nil || back != c {
			t.Fatalf("ParseCode(%q) = %v, but its String %q parses to %v, %v", s, c, c.String(), back, err)
		}
	})
}
