package pair

import (
	"crypto/rand"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
)

// A code is a channel number and two words, like Magic Wormhole's
// "7-crossover-clockwork".
//
// Only the words are secret: the channel tells the joiner which inviter to
// talk to and may be announced in the clear. The first word comes from the
// PGP word list's 256 three-syllable ("odd") words and the second from its
// 256 two-syllable ("even") words, so a code carries 16 bits of secret
// entropy (1 in 65,536), and a swapped or misheard word is usually caught as
// a word from the wrong list rather than as a wrong code.
//
// 16 bits is enough because nobody can test guesses offline: CPace gives an
// active attacker exactly one guess per session, an eavesdropper none, and
// the inviter kills a code after one attempt and after a few minutes. An
// attacker racing the real joiner wins with probability 2^-16 per invitation,
// and a failed race shows: the real joiner's attempt then fails too. Magic
// Wormhole defaults to the same two words for the same reasons.
const (
	codeWords = 2
	// MaxChannel bounds the channel number, so codes stay short to read.
	MaxChannel = 99
	// maxCodeLen bounds what ParseCode reads; a real code is under 40 bytes.
	maxCodeLen = 200
)

// Code is a parsed pairing code.
type Code struct {
	Channel int
	Words   [codeWords]string
}

// ErrBadCode is wrapped by every error ParseCode returns.
var ErrBadCode = errors.New("not a pairing code")

//go:embed pgpwords.txt
var pgpWordsText string

// wordTables holds the PGP word list: words[0] is the odd (three-syllable)
// list, words[1] the even list, and index maps a word to its list and byte.
type wordTables struct {
	words [2][256]string
	index map[string]wordPos
}

type wordPos struct {
	list int
	b    byte
}

// pgpWords is read once from the embedded list and never changed.
var pgpWords = mustLoadWords(pgpWordsText)

func mustLoadWords(text string) *wordTables {
	t, err := loadWords(text)
	if err != nil {
		panic("pair: embedded PGP word list: " + err.Error()) // a build defect, caught by the tests
	}
	return t
}

func loadWords(text string) (*wordTables, error) {
	t := &wordTables{index: make(map[string]wordPos, 512)}
	n := 0
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("line %q: want byte, even word, odd word", line)
		}
		b, err := strconv.ParseUint(f[0], 16, 8)
		if err != nil || int(b) != n {
			return nil, fmt.Errorf("line %q: want byte %02x", line, n)
		}
		for list, w := range []string{f[2], f[1]} { // odd list first: it starts a code
			if _, dup := t.index[w]; dup {
				return nil, fmt.Errorf("word %q twice", w)
			}
			t.words[list][b] = w
			t.index[w] = wordPos{list: list, b: byte(b)}
		}
		n++
	}
	if n != 256 {
		return nil, fmt.Errorf("%d rows, want 256", n)
	}
	return t, nil
}

// NewCode returns a fresh random code.
func NewCode() (Code, error) {
	return newCode(rand.Reader)
}

func newCode(r io.Reader) (Code, error) {
	var b [1 + codeWords]byte
	var c Code
	for {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return Code{}, fmt.Errorf("new code: %w", err)
		}
		// Rejection keeps the channel uniform over 1..MaxChannel.
		if int(b[0]) < 256/MaxChannel*MaxChannel {
			break
		}
	}
	c.Channel = 1 + int(b[0])%MaxChannel
	for i := range c.Words {
		c.Words[i] = pgpWords.words[i%2][b[1+i]]
	}
	return c, nil
}

// String returns the canonical form, "7-crossover-clockwork": the form
// printed for people and the password both sides feed to CPace.
func (c Code) String() string {
	return strconv.Itoa(c.Channel) + "-" + strings.Join(c.Words[:], "-")
}

// isSeparator reports the runes a person may type between the parts of a
// code: spaces, hyphens (including the dashes phones substitute), dots,
// underscores and commas.
func isSeparator(r rune) bool {
	switch r {
	case '-', '_', '.', ',', '‐', '‑', '‒', '–', '—', '−':
		return true
	}
	return unicode.IsSpace(r)
}

// ParseCode reads a code as a person typed it: case, surrounding space and
// the separators between parts do not matter. Anything else is refused with
// an error that says what is wrong and wraps ErrBadCode.
func ParseCode(s string) (Code, error) {
	if len(s) > maxCodeLen {
		return Code{}, fmt.Errorf("%w: %d bytes is too long for a code", ErrBadCode, len(s))
	}
	for _, r := range s {
		if !isSeparator(r) && !('0' <= r && r <= '9') && !unicode.IsLetter(r) {
			return Code{}, fmt.Errorf("%w: unexpected character %q", ErrBadCode, r)
		}
	}
	parts := strings.FieldsFunc(strings.ToLower(s), isSeparator)
	if len(parts) != 1+codeWords {
		return Code{}, fmt.Errorf("%w: want a number and %d words, like 7-crossover-clockwork; got %d parts", ErrBadCode, codeWords, len(parts))
	}
	var c Code
	ch, err := strconv.Atoi(parts[0])
	if err != nil || ch < 1 || ch > MaxChannel || len(parts[0]) > 2 {
		return Code{}, fmt.Errorf("%w: %q is not a channel number from 1 to %d", ErrBadCode, parts[0], MaxChannel)
	}
	c.Channel = ch
	for i, w := range parts[1:] {
		pos, ok := pgpWords.index[w]
		switch {
		case !ok:
			return Code{}, fmt.Errorf("%w: %q is not one of the code words", ErrBadCode, w)
		case pos.list != i%2:
			return Code{}, fmt.Errorf("%w: %q cannot be word %d (are two words swapped?)", ErrBadCode, w, i+1)
		}
		c.Words[i] = w
	}
	return c, nil
}
