package crdt_test

import (
	"strings"
	"testing"

	"github.com/danyue/danyue/crdt"
)

// kosyncGoldenRecords are pinned in testdata/golden.txt after the book and
// device records (issue 8): an account, a KOReader push as KOReader sends it,
// percentage 0 with CJK strings, and the identity-only forms.
func kosyncGoldenRecords() []struct {
	name  string
	entry crdt.Entry
} {
	auth := "v1:" + strings.Repeat("5a", 16) + ":" + strings.Repeat("c3", 32)
	return []struct {
		name  string
		entry crdt.Entry
	}{
		{"kosync-user", crdt.KosyncUserEntry(crdt.KosyncUser{Name: "alice", Auth: crdt.Text{At: ts(t0, 0, phone), Value: auth}})},
		{"kosync-user-name-only", crdt.KosyncUserEntry(crdt.KosyncUser{Name: "李雷"})},
		{"kosync-progress", crdt.KosyncProgressEntry(crdt.KosyncProgress{
			User: "alice", Document: "0b229176d4e8db7f6d2b5a4952368d7a",
			At:       ts(t0+37*day, 3, nas),
			Progress: "/body/DocFragment[20]/body/p[22]/text().17", Percentage: 0.3242,
			Device: "Kobo Libra 2", DeviceID: "8B2FD53C1F5E4A3E9A4F7C11D2E0B6A1",
		})},
		{"kosync-progress-zero-cjk", crdt.KosyncProgressEntry(crdt.KosyncProgress{
			User: "李雷", Document: "c5a4d1e0b3f2a1908172635445362718",
			At:       ts(t0, 0, laptop),
			Progress: "第三章", Percentage: 0, Device: "文石 Leaf", DeviceID: "",
		})},
		{"kosync-progress-key-only", crdt.KosyncProgressEntry(crdt.KosyncProgress{User: "alice", Document: "d"})},
		{"kosync-link", crdt.KosyncLinkEntry(crdt.KosyncLink{
			Document: "0b229176d4e8db7f6d2b5a4952368d7a", At: ts(t0+2*day, 1, laptop),
			Book: crdt.MustParseBookKey("md5:9cc2ae8a1ba7a93da39b46fc1019c481"), Title: "三体.txt",
		})},
		{"kosync-link-document-only", crdt.KosyncLinkEntry(crdt.KosyncLink{Document: "d"})},
	}
}

// Hostile kosync records, built like the book ones in decode_test.go from
// pieces whose meaning is spelled out.
const (
	hKUser = "00 65 616c696365" // 0: "alice"
	hKDoc  = "01 63 646f63"     // 1: "doc"
	// the register without its percentage: [t0, 0, devA, "42", <percentage>, "K", "1"]
	hKPosHead = "02 87 " + hStamp + " 62 3432"
	hKPosTail = "61 4b 61 31"
	hKHalf    = "f9 3800" // 0.5 as the shortest float
)

func kosyncUserOf(fields ...string) string {
	return "a2 00 01 03 " + mapHead(len(fields)) + " " + strings.Join(fields, " ")
}

func kosyncLinkOf(fields ...string) string {
	return "a2 00 01 05 " + mapHead(len(fields)) + " " + strings.Join(fields, " ")
}

// hLinkKey is an md5 book key in binary: h'01 + 16 bytes'.
const hLinkKey = "51 01 0123456789abcdef0123456789abcdef"

func kosyncProgressOf(fields ...string) string {
	return "a2 00 01 04 " + mapHead(len(fields)) + " " + strings.Join(fields, " ")
}

// mapHead is the header of a map of n < 16 pairs.
func mapHead(n int) string { return "a" + string("0123456789abcdef"[n]) }

func kosyncPos(percentage string) string { return hKPosHead + " " + percentage + " " + hKPosTail }

func kosyncHostileInputs() []hostile {
	inv := crdt.ErrInvalid
	long := cborText
	return []hostile{
		{"kosync: NaN percentage", hx(kosyncProgressOf(hKUser, hKDoc, kosyncPos("f9 7e00"))), inv},
		{"kosync: percentage over 1", hx(kosyncProgressOf(hKUser, hKDoc, kosyncPos("f9 3e00"))), inv},
		{"kosync: negative percentage", hx(kosyncProgressOf(hKUser, hKDoc, kosyncPos("f9 b800"))), inv},
		{"kosync: negative zero percentage", hx(kosyncProgressOf(hKUser, hKDoc, kosyncPos("f9 8000"))), inv},
		{"kosync: infinite percentage", hx(kosyncProgressOf(hKUser, hKDoc, kosyncPos("f9 7c00"))), inv},
		{"kosync: percentage as a longer float (non-canonical)", hx(kosyncProgressOf(hKUser, hKDoc, kosyncPos("fb 3fe0000000000000"))), inv},
		{"kosync: percentage as an integer", hx(kosyncProgressOf(hKUser, hKDoc, kosyncPos("00"))), inv},
		{"kosync: percentage as text", hx(kosyncProgressOf(hKUser, hKDoc, kosyncPos("63 302e35"))), inv},
		{"kosync: user with NUL", hx(kosyncProgressOf("00 63 610062", hKDoc, kosyncPos(hKHalf))), inv},
		{"kosync: empty user", hx(kosyncProgressOf("00 60", hKDoc)), inv},
		{"kosync: no document", hx(kosyncProgressOf(hKUser)), inv},
		{"kosync: user name as bytes", hx(kosyncUserOf("00 45 616c696365")), inv},
		{"kosync: user name too long", hx(kosyncUserOf("00 " + long(crdt.MaxKosyncUserBytes+1))), inv},
		{"kosync: document too long", hx(kosyncProgressOf(hKUser, "01 "+long(crdt.MaxKosyncDocumentBytes+1))), inv},
		{"kosync: progress too long", hx(kosyncProgressOf(hKUser, hKDoc, "02 87 "+hStamp+" "+long(crdt.MaxKosyncProgressBytes+1)+" "+hKHalf+" "+hKPosTail)), inv},
		{"kosync: progress not UTF-8", hx(kosyncProgressOf(hKUser, hKDoc, "02 87 "+hStamp+" 62 fffe "+hKHalf+" "+hKPosTail)), inv},
		{"kosync: content without a timestamp", hx(kosyncProgressOf(hKUser, hKDoc, "02 87 00 00 00 62 3432 "+hKHalf+" "+hKPosTail)), inv},
		{"kosync: explicit empty register (non-canonical)", hx(kosyncProgressOf(hKUser, hKDoc, "02 87 00 00 00 60 f9 0000 60 60")), inv},
		{"kosync: register of 6 elements", hx(kosyncProgressOf(hKUser, hKDoc, "02 86 "+hStamp+" 62 3432 "+hKHalf+" 61 4b")), inv},
		{"kosync: unsorted keys (non-canonical)", hx(kosyncProgressOf(hKDoc, hKUser)), inv},
		{"kosync: unknown account field", hx(kosyncUserOf(hKUser, "02 00")), inv},
		{"kosync: empty key hash", hx(kosyncUserOf(hKUser, "01 84 "+hStamp+" 60")), inv},
		{"kosync: key hash without a timestamp", hx(kosyncUserOf(hKUser, "01 84 00 00 00 61 68")), inv},
		{"kosync: book and kosync user in one entry", hx("a3 00 01 01 a1 " + hKey + " 03 a1 " + hKUser), inv},
		{"kosync link: no book", hx(kosyncLinkOf("00 63 646f63", "01 85 "+hStamp+" 40 60")), inv},
		{"kosync link: book key of a bad length", hx(kosyncLinkOf("00 63 646f63", "01 85 "+hStamp+" 43 010203 60")), inv},
		{"kosync link: book key of an unknown algorithm", hx(kosyncLinkOf("00 63 646f63", "01 85 "+hStamp+" 51 09 0123456789abcdef0123456789abcdef 60")), inv},
		{"kosync link: title too long", hx(kosyncLinkOf("00 63 646f63", "01 85 "+hStamp+" "+hLinkKey+" "+long(crdt.MaxTitleBytes+1))), inv},
		{"kosync link: title not UTF-8", hx(kosyncLinkOf("00 63 646f63", "01 85 "+hStamp+" "+hLinkKey+" 62 fffe")), inv},
		{"kosync link: content without a timestamp", hx(kosyncLinkOf("00 63 646f63", "01 85 00 00 00 "+hLinkKey+" 60")), inv},
		{"kosync link: empty document", hx(kosyncLinkOf("00 60")), inv},
		{"kosync link: document with NUL", hx(kosyncLinkOf("00 63 610062")), inv},
		{"kosync link: register of 4 elements", hx(kosyncLinkOf("00 63 646f63", "01 84 "+hStamp+" "+hLinkKey)), inv},
		{"kosync: link and progress in one entry", hx("a3 00 01 04 a2 " + hKUser + " " + hKDoc + " 05 a1 00 63 646f63"), inv},
		{"kosync: user and progress in one entry", hx("a3 00 01 03 a1 " + hKUser + " 04 a2 " + hKUser + " " + hKDoc), inv},
	}
}

func hexU16(n int) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[n>>12&15], digits[n>>8&15], digits[n>>4&15], digits[n&15]})
}

// The hostile kosync table is only meaningful if its pieces are right:
// assembled without the fault, they decode.
func TestKosyncHostilePiecesAreValid(t *testing.T) {
	for _, in := range []string{
		kosyncUserOf(hKUser),
		kosyncUserOf(hKUser, "01 84 "+hStamp+" 61 68"),
		kosyncProgressOf(hKUser, hKDoc),
		kosyncProgressOf(hKUser, hKDoc, kosyncPos(hKHalf)),
		kosyncProgressOf(hKUser, hKDoc, kosyncPos("f9 0000")),
		kosyncProgressOf(hKUser, hKDoc, kosyncPos("f9 3c00")),
		kosyncProgressOf(hKUser, "01 "+cborText(crdt.MaxKosyncDocumentBytes)),
	} {
		if _, err := crdt.Decode(hx(in)); err != nil {
			t.Errorf("Decode(%.60s...): %v", in, err)
		}
	}
}

// cborText is a text string of n "x" with a two-byte length.
func cborText(n int) string { return "79 " + hexU16(n) + " " + strings.Repeat("78", n) }
