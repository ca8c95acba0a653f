package library

import (
	"context"
	"errors"
	"fmt"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/store"
)

// KOReader's progress sync, as library records: accounts, each account's
// place in each document, and which book a document is. They are written
// through the crdt operations and the store like books, so every device of
// the library serves the same accounts and converges on the newest place.

// ErrKosyncUserExists is wrapped by the error of CreateKosyncUser for a
// name the library has.
var ErrKosyncUserExists = errors.New("kosync user exists")

// ErrNoKosyncUser is wrapped by the error of a change to an account that
// does not exist (or was removed).
var ErrNoKosyncUser = errors.New("no such kosync user")

// CreateKosyncUser adds the account name with the key hash, unless this
// device already knows the name (ErrKosyncUserExists). Two devices cut off
// from each other can both create a name; the later account wins everywhere
// once they meet.
func (l *Library) CreateKosyncUser(ctx context.Context, name, hash string) error {
	e, err := crdt.SetKosyncUser(l.stamp(), name, hash)
	if err != nil {
		return err
	}
	id := e.AppendID(nil)
	// The check runs inside the store's write, so two requests for one
	// name cannot both succeed.
	_, err = l.apply(ctx, store.Batch{Build: func(get func([]byte) (crdt.Entry, bool, error)) ([]crdt.Entry, error) {
		cur, ok, err := get(id)
		if err != nil {
			return nil, err
		}
		if ok && cur.KosyncUser.Exists() {
			return nil, fmt.Errorf("kosync user %q: %w", name, ErrKosyncUserExists)
		}
		return []crdt.Entry{e}, nil
	}})
	return err
}

// SetKosyncKey gives the existing account name a new key hash. Every device
// of the library takes it as it syncs; KOReader devices logged in with the
// old password are refused from then on.
func (l *Library) SetKosyncKey(ctx context.Context, name, hash string) error {
	e, err := crdt.SetKosyncUser(l.stamp(), name, hash)
	if err != nil {
		return err
	}
	return l.changeKosyncUser(ctx, e)
}

// RemoveKosyncUser removes the account name from the library. Its progress
// records stay (they are the library's history) but no key opens them.
func (l *Library) RemoveKosyncUser(ctx context.Context, name string) error {
	e, err := crdt.RemoveKosyncUser(l.stamp(), name)
	if err != nil {
		return err
	}
	return l.changeKosyncUser(ctx, e)
}

// changeKosyncUser writes e, a new key or a removal of the account, if the
// account exists, checked inside the store's write; ErrNoKosyncUser if not.
func (l *Library) changeKosyncUser(ctx context.Context, e crdt.Entry) error {
	id := e.AppendID(nil)
	_, err := l.apply(ctx, store.Batch{Build: func(get func([]byte) (crdt.Entry, bool, error)) ([]crdt.Entry, error) {
		cur, ok, err := get(id)
		if err != nil {
			return nil, err
		}
		if !ok || !cur.KosyncUser.Exists() {
			return nil, fmt.Errorf("kosync user %q: %w", e.KosyncUser.Name, ErrNoKosyncUser)
		}
		return []crdt.Entry{e}, nil
	}})
	return err
}

// KosyncAuth returns the key hash of the account name, and false if there
// is no such account.
func (l *Library) KosyncAuth(ctx context.Context, name string) (string, bool, error) {
	key := crdt.KosyncUserEntry(crdt.KosyncUser{Name: name})
	e, ok, err := l.store.Get(ctx, key.AppendID(nil))
	if err != nil || !ok || !e.KosyncUser.Exists() {
		return "", false, err
	}
	return e.KosyncUser.Auth.Value, true, nil
}

// ReplaceKosyncAuth rewrites the account with a new key hash (an upgrade of
// its form) if its hash is still old, checked inside the store's write so
// that a key changed meanwhile, here or synced from another device, is
// kept; it reports whether it did. The rewrite is a write like any other:
// it reaches every device of the library.
func (l *Library) ReplaceKosyncAuth(ctx context.Context, name, old, new string) (bool, error) {
	e, err := crdt.SetKosyncUser(l.stamp(), name, new)
	if err != nil {
		return false, err
	}
	id := e.AppendID(nil)
	replaced := false
	_, err = l.apply(ctx, store.Batch{Build: func(get func([]byte) (crdt.Entry, bool, error)) ([]crdt.Entry, error) {
		cur, ok, err := get(id)
		if err != nil || !ok || !cur.KosyncUser.Exists() || cur.KosyncUser.Auth.Value != old {
			return nil, err
		}
		replaced = true
		return []crdt.Entry{e}, nil
	}})
	return replaced && err == nil, err
}

// KosyncProgress returns user's place in document, and false if there is
// none.
func (l *Library) KosyncProgress(ctx context.Context, user, document string) (crdt.KosyncProgress, bool, error) {
	key := crdt.KosyncProgressEntry(crdt.KosyncProgress{User: user, Document: document})
	e, ok, err := l.store.Get(ctx, key.AppendID(nil))
	if err != nil || !ok || e.KosyncProgress.At.IsZero() {
		return crdt.KosyncProgress{}, false, err
	}
	return e.KosyncProgress, true, nil
}

// SetKosyncProgress records p.User's place in p.Document (its stamp is
// made here) and returns the record as stored. The write is stamped on the
// hybrid clock, after everything this device has seen of the record
// (Library.write): here it always wins, and elsewhere it wins over every
// write made before it, whenever they arrive.
func (l *Library) SetKosyncProgress(ctx context.Context, p crdt.KosyncProgress) (crdt.KosyncProgress, error) {
	p.At = crdt.Timestamp{}
	res, err := l.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) { return crdt.SetKosyncProgress(at, p) })
	if err != nil {
		return crdt.KosyncProgress{}, err
	}
	stored := p
	for _, c := range res.Changed {
		if c.Entry.Kind == crdt.KindKosyncProgress && c.Entry.KosyncProgress.User == p.User && c.Entry.KosyncProgress.Document == p.Document {
			stored = c.Entry.KosyncProgress
		}
	}
	return stored, nil
}

// LinkKosyncDocument records that KOReader's document is the book key,
// titled title: what keying its file told. The link is a record of the
// library, so every device shows KOReader's progress under the book's
// title. It reports whether the link changed.
func (l *Library) LinkKosyncDocument(ctx context.Context, document string, key crdt.BookKey, title string) (bool, error) {
	res, err := l.write(ctx, func(at crdt.Timestamp) (crdt.Entry, error) {
		return crdt.LinkKosyncDocument(at, document, key, title)
	})
	return len(res.Changed) > 0, err
}

// KosyncBook returns the key and title of the book a KOReader document is
// linked to: the title on the shelf if the book has one, else the link's.
// Both are empty for a document no device has keyed.
func (l *Library) KosyncBook(ctx context.Context, document string) (key, title string, err error) {
	le := crdt.KosyncLinkEntry(crdt.KosyncLink{Document: document})
	e, ok, err := l.store.Get(ctx, le.AppendID(nil))
	if err != nil || !ok || e.KosyncLink.At.IsZero() {
		return "", "", err
	}
	link := e.KosyncLink
	title = link.Title
	if b, ok, err := l.store.Get(ctx, bookID(link.Book)); err != nil {
		return "", "", err
	} else if ok && b.Book.Title.Value != "" {
		title = b.Book.Title.Value
	}
	return link.Book.String(), title, nil
}
