package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/daemon/client"
)

const (
	keyA = "md5:900150983cd24fb0d6963f7d28e17f72"
	keyB = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
)

func TestPositionRoundTrip(t *testing.T) {
	d := startDaemon(t, nil)
	ctx := ctxT(t)
	b, err := d.client.SetPosition(ctx, keyA, 1234, 0.12, "Three Body")
	if err != nil {
		t.Fatal(err)
	}
	if b.Key != keyA || b.Title != "Three Body" || b.Position == nil || b.Position.Char != 1234 || b.Position.Percent != 0.12 {
		t.Fatalf("book after PUT position = %+v", b)
	}
	if b.Position.Device != d.Device().String() || b.Position.DeviceName == "" || b.Furthest.Char != 1234 || b.Deleted {
		t.Fatalf("book after PUT position = %+v, want written by this device, furthest 1234, not deleted", b)
	}
	// Going back keeps the furthest position.
	if b, err = d.client.SetPosition(ctx, keyA, 100, 0.01, ""); err != nil {
		t.Fatal(err)
	}
	if b.Position.Char != 100 || b.Furthest.Char != 1234 || b.Title != "Three Body" {
		t.Fatalf("after going back: position %d furthest %d title %q, want 100, 1234, kept", b.Position.Char, b.Furthest.Char, b.Title)
	}
	got, err := d.client.Book(ctx, keyA)
	if err != nil {
		t.Fatal(err)
	}
	if got.Position.Char != 100 {
		t.Fatalf("GET after PUT: char %d, want 100", got.Position.Char)
	}
	// Upper-case hex names the same book.
	if got, err = d.client.Book(ctx, strings.ToUpper(keyA[:4])+keyA[4:]); err == nil {
		t.Fatalf("GET with upper-case algorithm answered %+v, want bad_key", got)
	}
	if got, err = d.client.Book(ctx, "md5:"+strings.ToUpper(keyA[4:])); err != nil || got.Key != keyA {
		t.Fatalf("GET with upper-case hex = %+v, %v; want the same book", got, err)
	}
}

func TestReadTimeAndIdempotency(t *testing.T) {
	d := startDaemon(t, nil)
	ctx := ctxT(t)
	for i, idem := range []string{"a", "b", "a", "a", ""} {
		if _, err := d.client.AddReadTime(ctx, keyA, 1000, idem); err != nil {
			t.Fatalf("add %d: %v", i, err)
		}
	}
	b, err := d.client.Book(ctx, keyA)
	if err != nil {
		t.Fatal(err)
	}
	// "a" counted once, "b" once, the unkeyed request once.
	if b.ReadTime.TotalMs != 3000 || b.ReadTime.ThisDeviceMs != 3000 || b.ReadTime.ByDevice[d.Device().String()] != 3000 {
		t.Fatalf("read time = %+v, want 3000 ms on this device", b.ReadTime)
	}
	// The same key on another book is another request.
	if b, err = d.client.AddReadTime(ctx, keyB, 500, "a"); err != nil || b.ReadTime.TotalMs != 500 {
		t.Fatalf("keyed add on another book = %+v, %v; want 500", b.ReadTime, err)
	}
	daily, err := d.client.Daily(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(daily.Days) != 7 || daily.Days[6].Ms != 3500 || daily.TotalMs != 3500 {
		t.Fatalf("daily = %+v, want 7 days, today 3500 ms", daily)
	}
}

func TestConcurrentReadTimeLosesNothing(t *testing.T) {
	d := startDaemon(t, nil)
	ctx := ctxT(t)
	const workers, each = 16, 10
	errs := make(chan error, workers)
	for range workers {
		go func() {
			var err error
			for range each {
				if _, e := d.client.AddReadTime(ctx, keyA, 7, ""); e != nil {
					err = e
				}
			}
			errs <- err
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	b, err := d.client.Book(ctx, keyA)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(workers * each * 7); b.ReadTime.TotalMs != want {
		t.Fatalf("total after concurrent adds = %d, want %d", b.ReadTime.TotalMs, want)
	}
}

func TestDeleteAndResurrect(t *testing.T) {
	d := startDaemon(t, nil)
	ctx := ctxT(t)
	mustDo(d.client.SetPosition(ctx, keyA, 10, 0.1, "A"))(t)
	mustDo(d.client.AddReadTime(ctx, keyA, 60000, ""))(t)
	b := mustDo(d.client.Delete(ctx, keyA))(t)
	if !b.Deleted || b.DeletedBy == nil || *b.DeletedBy != d.Device().String() || b.DeletedAt == nil {
		t.Fatalf("after delete: %+v", b)
	}
	shelf, err := d.client.Books(ctx, false)
	if err != nil || len(shelf) != 0 {
		t.Fatalf("shelf after delete = %v, %v; want empty", shelf, err)
	}
	all, err := d.client.Books(ctx, true)
	if err != nil || len(all) != 1 || !all[0].Deleted {
		t.Fatalf("books?deleted=1 = %+v, %v; want the deleted book", all, err)
	}
	// Read time is not a write: the book stays deleted, and keeps counting.
	if b = mustDo(d.client.AddReadTime(ctx, keyA, 1000, ""))(t); !b.Deleted || b.ReadTime.TotalMs != 61000 {
		t.Fatalf("read time on a deleted book: deleted=%v total=%d, want deleted, 61000", b.Deleted, b.ReadTime.TotalMs)
	}
	// Reading again brings it back, with all its time.
	if b = mustDo(d.client.SetPosition(ctx, keyA, 20, 0.2, ""))(t); b.Deleted || b.ReadTime.TotalMs != 61000 || b.DeletedAt != nil {
		t.Fatalf("after reading again: %+v", b)
	}
	st, err := d.client.Status(ctx)
	if err != nil || st.Counts.Books != 1 || st.Counts.Deleted != 0 {
		t.Fatalf("status counts = %+v, %v; want 1 book, 0 deleted", st.Counts, err)
	}
}

// mustDo fails the test on err and returns v: mustDo(c.Book(ctx, k))(t).
func mustDo[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// TestBadInput checks that every class of bad input is refused with the
// right status and code, and changes nothing.
func TestBadInput(t *testing.T) {
	d := startDaemon(t, nil)
	ctx := ctxT(t)
	mustDo(d.client.SetPosition(ctx, keyA, 10, 0.5, "Kept"))(t)
	before := mustDo(d.client.Book(ctx, keyA))(t)
	seqBefore := d.store.LastSeq()

	long := strings.Repeat("x", 1025)
	tests := []struct {
		name, method, path, body string
		header                   map[string]string
		status                   int
		code                     string
	}{
		{"malformed key", "PUT", "/v1/books/md5:xyz/position", `{"char":1,"percent":0}`, nil, 400, api.CodeBadKey},
		{"unknown algorithm", "GET", "/v1/books/sha1:" + strings.Repeat("0", 40), "", nil, 400, api.CodeBadKey},
		{"negative char", "PUT", "/v1/books/" + keyA + "/position", `{"char":-1,"percent":0}`, nil, 400, api.CodeInvalid},
		{"fractional char", "PUT", "/v1/books/" + keyA + "/position", `{"char":1.5,"percent":0}`, nil, 400, api.CodeInvalid},
		{"char as string", "PUT", "/v1/books/" + keyA + "/position", `{"char":"1","percent":0}`, nil, 400, api.CodeInvalid},
		{"missing char", "PUT", "/v1/books/" + keyA + "/position", `{"percent":0}`, nil, 400, api.CodeInvalid},
		{"missing percent", "PUT", "/v1/books/" + keyA + "/position", `{"char":1}`, nil, 400, api.CodeInvalid},
		{"percent above 1", "PUT", "/v1/books/" + keyA + "/position", `{"char":1,"percent":1.01}`, nil, 400, api.CodeInvalid},
		{"negative percent", "PUT", "/v1/books/" + keyA + "/position", `{"char":1,"percent":-0.1}`, nil, 400, api.CodeInvalid},
		{"huge char", "PUT", "/v1/books/" + keyA + "/position", `{"char":9007199254740993,"percent":0}`, nil, 400, api.CodeInvalid},
		{"over-long title", "PUT", "/v1/books/" + keyA + "/position", `{"char":1,"percent":0,"title":"` + long + `"}`, nil, 400, api.CodeInvalid},
		{"empty title", "PUT", "/v1/books/" + keyA + "/position", `{"char":1,"percent":0,"title":""}`, nil, 400, api.CodeInvalid},
		{"unknown field", "PUT", "/v1/books/" + keyA + "/position", `{"char":1,"percent":0,"chapter":3}`, nil, 400, api.CodeUnknownField},
		{"two objects", "PUT", "/v1/books/" + keyA + "/position", `{"char":1,"percent":0}{}`, nil, 400, api.CodeBadRequest},
		{"not JSON", "PUT", "/v1/books/" + keyA + "/position", `char=1`, nil, 400, api.CodeBadRequest},
		{"empty body", "PUT", "/v1/books/" + keyA + "/position", ``, nil, 400, api.CodeBadRequest},
		{"array body", "PUT", "/v1/books/" + keyA + "/position", `[1,2]`, nil, 400, api.CodeBadRequest},
		{"body too large", "PUT", "/v1/books/" + keyA + "/position", `{"char":1,"percent":0,"title":"` + strings.Repeat("y", 20000) + `"}`, nil, 413, api.CodeTooLarge},
		{"wrong content type", "PUT", "/v1/books/" + keyA + "/position", `{"char":1,"percent":0}`, map[string]string{"Content-Type": "text/plain"}, 415, api.CodeUnsupported},
		{"zero addMs", "POST", "/v1/books/" + keyA + "/read-time", `{"addMs":0}`, nil, 400, api.CodeInvalid},
		{"negative addMs", "POST", "/v1/books/" + keyA + "/read-time", `{"addMs":-5}`, nil, 400, api.CodeInvalid},
		{"addMs over a day", "POST", "/v1/books/" + keyA + "/read-time", `{"addMs":86400001}`, nil, 400, api.CodeInvalid},
		{"missing addMs", "POST", "/v1/books/" + keyA + "/read-time", `{}`, nil, 400, api.CodeInvalid},
		{"total instead of delta", "POST", "/v1/books/" + keyA + "/read-time", `{"totalMs":5}`, nil, 400, api.CodeUnknownField},
		{"long idempotency key", "POST", "/v1/books/" + keyA + "/read-time", `{"addMs":5}`, map[string]string{"Idempotency-Key": strings.Repeat("k", 201)}, 400, api.CodeInvalid},
		{"unknown book", "GET", "/v1/books/" + keyB, "", nil, 404, api.CodeNotFound},
		{"unknown path", "GET", "/v1/nothing", "", nil, 404, api.CodeNotFound},
		{"wrong method", "PATCH", "/v1/books/" + keyA, "", nil, 405, api.CodeMethod},
		{"bad deleted flag", "GET", "/v1/books?deleted=maybe", "", nil, 400, api.CodeInvalid},
		{"bad days", "GET", "/v1/stats/daily?days=0", "", nil, 400, api.CodeInvalid},
		{"too many days", "GET", "/v1/stats/daily?days=10000", "", nil, 400, api.CodeInvalid},
		{"browser origin", "PUT", "/v1/books/" + keyA + "/position", `{"char":2,"percent":0}`, map[string]string{"Origin": "https://evil.example"}, 403, api.CodeForbidden},
		{"browser referer", "GET", "/v1/books", "", map[string]string{"Referer": "https://evil.example/"}, 403, api.CodeForbidden},
		{"join without code", "POST", "/v1/join", `{}`, nil, 400, api.CodeInvalid},
		{"join with garbage", "POST", "/v1/join", `{"code":"hello"}`, nil, 400, api.CodeBadInvite},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, e := rawRequest(t, d.client, tt.method, tt.path, tt.body, tt.header)
			if status != tt.status || e.Code != tt.code || e.Detail == "" {
				t.Fatalf("%s %s = %d %+v, want %d %s with a detail", tt.method, tt.path, status, e, tt.status, tt.code)
			}
		})
	}
	after := mustDo(d.client.Book(ctx, keyA))(t)
	if !jsonEqual(before, after) || d.store.LastSeq() != seqBefore {
		t.Fatalf("bad requests changed state:\nbefore %+v\nafter  %+v\nseq %d -> %d", before, after, seqBefore, d.store.LastSeq())
	}
}

// rawRequest sends a request as an app would, bypassing the typed client's
// checks, and returns the status and error body.
func rawRequest(t *testing.T, c *client.Client, method, path, body string, header map[string]string) (int, api.Error) {
	t.Helper()
	h := http.Header{}
	if body != "" {
		h.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		h.Set(k, v)
	}
	err := c.DoRaw(ctxT(t), method, path, h, strings.NewReader(body), io.Discard)
	if err == nil {
		return 200, api.Error{}
	}
	var ae *client.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return ae.Status, api.Error{Code: ae.Code, Detail: ae.Detail}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
