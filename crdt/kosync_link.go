package crdt

import "cmp"

// KosyncLink ties a KOReader document to a book: KOReader names a document
// by a "partial MD5" of its file, danyue by the BookKey of its text, and a
// device that keys the file (danyue key, or an app through the API) knows
// both. As a record of the library the link lets every device show
// KOReader's progress under the book's title.
//
// It is one last-writer-wins register keyed by the document id. Keying the
// same file always gives the same pair, so concurrent links agree; a later
// link (the file keyed with another algorithm, or renamed) replaces an
// earlier one.
type KosyncLink struct {
	Document string // KOReader's document id

	At    Timestamp // zero if never written
	Book  BookKey
	Title string // what the keying device called the file, for a book not on the shelf; may be empty
}

// KosyncLinkEntry wraps a link record.
func KosyncLinkEntry(l KosyncLink) Entry { return Entry{Kind: KindKosyncLink, KosyncLink: l} }

// LinkKosyncDocument records, as of at, that KOReader's document is the
// book with the given key.
func LinkKosyncDocument(at Timestamp, document string, book BookKey, title string) (Entry, error) {
	if err := checkStamp(at); err != nil {
		return Entry{}, err
	}
	l := KosyncLink{Document: document, At: at, Book: book, Title: title}
	if err := l.validate(); err != nil {
		return Entry{}, err
	}
	return KosyncLinkEntry(l), nil
}

// compare orders two writes of the register: by timestamp, then by content,
// so that equal timestamps (which only a broken peer makes) merge alike
// everywhere.
func (l *KosyncLink) compare(o *KosyncLink) int {
	if c := l.At.Compare(o.At); c != 0 {
		return c
	}
	if c := cmp.Compare(l.Book.String(), o.Book.String()); c != 0 {
		return c
	}
	return cmp.Compare(l.Title, o.Title)
}

// Merge folds o, a link of the same document, into l and reports whether l
// changed.
func (l *KosyncLink) Merge(o *KosyncLink) bool {
	if o.compare(l) <= 0 {
		return false
	}
	l.At, l.Book, l.Title = o.At, o.Book, o.Title
	return true
}

func (l *KosyncLink) validate() error {
	if err := validKosyncID("kosync document", l.Document, MaxKosyncDocumentBytes); err != nil {
		return err
	}
	if err := l.At.validate(); err != nil {
		return err
	}
	if l.At.IsZero() {
		if !l.Book.IsZero() || l.Title != "" {
			return invalidf("kosync link has content but no timestamp")
		}
		return nil
	}
	if l.Book.IsZero() {
		return invalidf("kosync link of %q names no book", l.Document)
	}
	return validKosyncValue("kosync link title", l.Title, MaxTitleBytes)
}
