package crdt_test

import (
	"math"

	"github.com/danyue/danyue/crdt"
	"pgregory.net/rapid"
)

// The kosync records in the simulation (sim_test.go) and in the oracle
// (oracle_test.go): small pools, so that devices write the same account and
// document concurrently and equal contents happen.

var (
	simKosyncUsers     = []string{"alice", "李雷"}
	simKosyncDocs      = []string{"0b229176d4e8db7f6d2b5a4952368d7a", "c5a4d1e0b3f2a1908172635445362718"}
	simKosyncProgress  = []string{"/body/DocFragment[20]/body/p[22]/text().17", "42", "第三章 · 12", ""}
	simKosyncPercents  = []float64{0, 0.3242, 0.5, 1, math.SmallestNonzeroFloat64}
	simKosyncReaders   = []string{"Kobo Libra 2", "文石 Leaf", ""}
	simKosyncReaderIDs = []string{"8b2fd53c1f5e4a3e9a4f7c11d2e0b6a1", "x"}
	simKosyncAuths     = []string{"v1:00112233:aa", "v1:44556677:bb", crdt.KosyncRemoved}
)

// drawKosync draws a random kosync write into op, for the oracle and for
// the write itself.
func drawKosync(t *rapid.T, op *loggedOp) {
	op.kosync.User = rapid.SampledFrom(simKosyncUsers).Draw(t, "kosync user")
	if op.kind == opKosyncUser {
		op.text = rapid.SampledFrom(simKosyncAuths).Draw(t, "auth")
		return
	}
	op.kosync.Document = rapid.SampledFrom(simKosyncDocs).Draw(t, "document")
	op.kosync.Progress = rapid.SampledFrom(simKosyncProgress).Draw(t, "progress")
	op.kosync.Percentage = rapid.SampledFrom(simKosyncPercents).Draw(t, "percentage")
	op.kosync.Device = rapid.SampledFrom(simKosyncReaders).Draw(t, "reader")
	op.kosync.DeviceID = rapid.SampledFrom(simKosyncReaderIDs).Draw(t, "reader id")
}

// oracleKosync is the record e should be after the given operations, if e is
// a kosync record:
//   - an account: the key hash of the latest write of that name;
//   - a progress: the latest write of that (user, document), whole;
//   - a link: the latest link of that document, whole.
func oracleKosync(e crdt.Entry, log []loggedOp) (crdt.Entry, bool) {
	switch e.Kind {
	case crdt.KindKosyncUser:
		u := crdt.KosyncUser{Name: e.KosyncUser.Name}
		for _, op := range log {
			if op.kind == opKosyncUser && op.kosync.User == u.Name && later(op.at, u.Auth.At) {
				u.Auth = crdt.Text{At: op.at, Value: op.text}
			}
		}
		return crdt.KosyncUserEntry(u), true
	case crdt.KindKosyncProgress:
		user, doc := e.KosyncProgress.User, e.KosyncProgress.Document
		p := crdt.KosyncProgress{User: user, Document: doc}
		for _, op := range log {
			if op.kind == opKosyncProgress && op.kosync.User == user && op.kosync.Document == doc && later(op.at, p.At) {
				p = op.kosync
				p.At = op.at
			}
		}
		return crdt.KosyncProgressEntry(p), true
	case crdt.KindKosyncLink:
		l := crdt.KosyncLink{Document: e.KosyncLink.Document}
		for _, op := range log {
			if op.kind == opKosyncLink && op.kosync.Document == l.Document && later(op.at, l.At) {
				l.At, l.Book, l.Title = op.at, op.key, op.text
			}
		}
		return crdt.KosyncLinkEntry(l), true
	}
	return crdt.Entry{}, false
}

// emptyOf returns the record of e's identity that holds nothing yet: what a
// replica merges the first copy of a record into.
func emptyOf(e crdt.Entry) crdt.Entry {
	switch e.Kind {
	case crdt.KindBook:
		return crdt.BookEntry(crdt.Book{Key: e.Book.Key})
	case crdt.KindKosyncUser:
		return crdt.KosyncUserEntry(crdt.KosyncUser{Name: e.KosyncUser.Name})
	case crdt.KindKosyncProgress:
		return crdt.KosyncProgressEntry(crdt.KosyncProgress{User: e.KosyncProgress.User, Document: e.KosyncProgress.Document})
	case crdt.KindKosyncLink:
		return crdt.KosyncLinkEntry(crdt.KosyncLink{Document: e.KosyncLink.Document})
	case crdt.KindMember:
		return crdt.MemberEntry(crdt.Member{Library: e.Member.Library, ID: e.Member.ID})
	}
	return crdt.DeviceEntry(crdt.Device{ID: e.Device.ID})
}
