package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/internal/logbuf"
	"github.com/danyue/danyue/store"
)

// Text in a body is taken as sent or refused with a reason: no control
// characters, no invalid UTF-8 or lone surrogates (which encoding/json would
// turn into U+FFFD), no key named twice (where the last would win). Each is
// a 400 with a detail naming the field, and changes nothing.
func TestBodiesAreCleanAtTheDoor(t *testing.T) {
	d := startDaemon(t, nil)
	ctx := ctxT(t)
	mustDo(d.client.SetPosition(ctx, keyA, 10, 0.5, "Kept"))(t)
	before := mustDo(d.client.Book(ctx, keyA))(t)
	seq := d.store.LastSeq()
	pos := "/v1/books/" + keyA + "/position"
	tests := []struct {
		name, method, path, body string
		code, inDetail           string
	}{
		{"ESC in a title (escaped)", "PUT", pos, `{"char":1,"percent":0,"title":"Red\u001b[2JChamber"}`, api.CodeInvalid, "U+001B"},
		{"newline in a title", "PUT", pos, `{"char":1,"percent":0,"title":"Red\nChamber"}`, api.CodeInvalid, "U+000A"},
		{"tab in a title", "PUT", pos, `{"char":1,"percent":0,"title":"Red\tChamber"}`, api.CodeInvalid, "U+0009"},
		{"NUL in a title", "PUT", pos, `{"char":1,"percent":0,"title":"Red\u0000"}`, api.CodeInvalid, "U+0000"},
		{"C1 CSI in a title (raw UTF-8)", "PUT", pos, "{\"char\":1,\"percent\":0,\"title\":\"Red\u009b2J\"}", api.CodeInvalid, "U+009B"},
		{"DEL in a title", "PUT", pos, "{\"char\":1,\"percent\":0,\"title\":\"Red\x7f\"}", api.CodeInvalid, "U+007F"},
		{"invalid UTF-8 in a title", "PUT", pos, "{\"char\":1,\"percent\":0,\"title\":\"Red\xffChamber\"}", api.CodeInvalid, "title is not valid UTF-8"},
		{"lone high surrogate in a title", "PUT", pos, `{"char":1,"percent":0,"title":"\ud800"}`, api.CodeInvalid, `title holds a lone UTF-16 surrogate`},
		{"lone low surrogate in a title", "PUT", pos, `{"char":1,"percent":0,"title":"a\udc00b"}`, api.CodeInvalid, `\udc00`},
		{"duplicate key", "PUT", pos, `{"char":1,"percent":0,"char":2}`, api.CodeBadRequest, `"char" twice`},
		{"duplicate key, escaped", "PUT", pos, `{"char":1,"percent":0,"\u0063har":2}`, api.CodeBadRequest, `"char" twice`},
		{"duplicate addMs", "POST", "/v1/books/" + keyA + "/read-time", `{"addMs":5,"addMs":86400000}`, api.CodeBadRequest, `"addMs" twice`},
		{"control character in a kosync account", "POST", "/v1/kosync/users", `{"name":"al\u001bice","key":"` + strings.Repeat("a", 32) + `"}`, api.CodeInvalid, "U+001B"},
		{"control character in a join code", "POST", "/v1/join", `{"code":"danyue1-\u0007"}`, api.CodeInvalid, "code contains"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, e := rawRequest(t, d.client, tt.method, tt.path, tt.body, nil)
			if status != http.StatusBadRequest || e.Code != tt.code || !strings.Contains(e.Detail, tt.inDetail) {
				t.Fatalf("%s %s = %d %+v, want 400 %s with a detail that says %q", tt.method, tt.body, status, e, tt.code, tt.inDetail)
			}
		})
	}
	after := mustDo(d.client.Book(ctx, keyA))(t)
	if !jsonEqual(before, after) || d.store.LastSeq() != seq {
		t.Fatalf("refused bodies changed state: %+v -> %+v, seq %d -> %d", before, after, seq, d.store.LastSeq())
	}
	// What is clean passes: CJK, an escaped surrogate pair, U+FFFD itself.
	b := mustDo(d.client.SetPosition(ctx, keyA, 1, 0, "红楼梦 \U0001F4D6 \uFFFD"))(t)
	if b.Title != "红楼梦 \U0001F4D6 \uFFFD" {
		t.Fatalf("title = %q", b.Title)
	}
	if status, e := rawRequest(t, d.client, "PUT", pos, `{"char":1,"percent":0,"title":"\ud83d\udcd6"}`, nil); status != 200 {
		t.Fatalf("escaped surrogate pair: %d %+v", status, e)
	}
}

// A device name is text like a title: --name with a control character is
// refused at start, before anything is written with it.
func TestDeviceNameWithControlCharacterIsRefused(t *testing.T) {
	dir := tempDir(t)
	_, err := Start(ctxT(t), Config{DataDir: dir, Name: "laptop\x1b[31m", NoMDNS: true, Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Logger: testLogger(t)})
	if err == nil || !strings.Contains(err.Error(), "U+001B") {
		t.Fatalf("Start with a name holding ESC = %v, want a refusal naming U+001B", err)
	}
}

// Honest answers: a DELETE of a book never seen is a 404 and writes
// nothing; an Idempotency-Key reused for another report is a 422; a report
// on a deleted book says the book stays deleted.
func TestHonestAnswers(t *testing.T) {
	d := startDaemon(t, nil)
	ctx := ctxT(t)
	seq := d.store.LastSeq()
	if status, e := rawRequest(t, d.client, "DELETE", "/v1/books/"+keyB, "", nil); status != 404 || e.Code != api.CodeNotFound || e.Detail == "" {
		t.Fatalf("DELETE of an unknown book = %d %+v, want 404 not_found", status, e)
	}
	if got := d.store.LastSeq(); got != seq {
		t.Fatalf("DELETE of an unknown book wrote %d changes", got-seq)
	}
	if books := mustDo(d.client.Books(ctx, true))(t); len(books) != 0 {
		t.Fatalf("after DELETE of an unknown book, books?deleted=1 = %+v, want none", books)
	}

	rt := "/v1/books/" + keyA + "/read-time"
	idem := map[string]string{"Idempotency-Key": "session-1"}
	steps := []struct {
		name, body string
		status     int
		code       string
		totalMs    uint64
	}{
		{"first report", `{"addMs":5000}`, 200, "", 5000},
		{"retry, same body", `{"addMs":5000}`, 200, "", 5000},
		{"retry, same body spelled otherwise", `{ "addMs" : 5000 }`, 200, "", 5000},
		{"same key, another body", `{"addMs":6000}`, 422, api.CodeIdempotencyMismatch, 5000},
	}
	for _, s := range steps {
		status, e := rawRequest(t, d.client, "POST", rt, s.body, idem)
		if status != s.status || e.Code != s.code || (s.code != "" && e.Detail == "") {
			t.Fatalf("%s: %d %+v, want %d %s", s.name, status, e, s.status, s.code)
		}
		if b := mustDo(d.client.Book(ctx, keyA))(t); b.ReadTime.TotalMs != s.totalMs {
			t.Fatalf("%s: total %d, want %d", s.name, b.ReadTime.TotalMs, s.totalMs)
		}
	}

	if b := mustDo(d.client.AddReadTime(ctx, keyA, 1000, ""))(t); b.Notice != "" {
		t.Fatalf("report on a shelved book has a notice: %q", b.Notice)
	}
	mustDo(d.client.Delete(ctx, keyA))(t)
	b := mustDo(d.client.AddReadTime(ctx, keyA, 1000, ""))(t)
	if !b.Deleted || !strings.Contains(b.Notice, "stays deleted") {
		t.Fatalf("report on a deleted book: deleted=%v notice=%q, want deleted with a notice that says so", b.Deleted, b.Notice)
	}
}

// Who may do what (authorize): the table of callers against one route of
// each permission.
func TestPermissionsAreDistinct(t *testing.T) {
	d := &Daemon{token: strings.Repeat("w", 64), readToken: strings.Repeat("r", 64)}
	ok := func(w http.ResponseWriter, _ *http.Request) error { w.WriteHeader(http.StatusOK); return nil }
	routes := map[perm]http.Handler{
		permRead:  d.guard(route{"GET", "/v1/status", permRead, ok}),
		permWrite: d.guard(route{"PUT", "/v1/books/{key}/position", permWrite, ok}),
		permAdmin: d.guard(route{"POST", "/v1/invite", permAdmin, ok}),
	}
	tcp := connInfo{kind: connTCP, uid: -1}
	tests := []struct {
		name               string
		info               connInfo
		token              string
		read, write, admin int
	}{
		{"unix socket, this user", unixCaller(os.Getuid(), nil), "", 200, 200, 200},
		{"unix socket, credentials unreadable", unixCaller(-1, errors.New("getsockopt failed")), "", 403, 403, 403},
		{"in process", connInfo{kind: connInProcess}, "", 200, 200, 200},
		{"--http, write token", tcp, d.token, 200, 200, 403},
		{"--http, read-only token", tcp, d.readToken, 200, 403, 403},
		{"--http, no token", tcp, "", 401, 401, 401},
		{"--http, a wrong token", tcp, strings.Repeat("x", 64), 401, 401, 401},
		{"--http, empty bearer", tcp, " ", 401, 401, 401},
		{"no connection info", connInfo{}, d.token, 403, 403, 403},
	}
	for _, tt := range tests {
		for need, want := range map[perm]int{permRead: tt.read, permWrite: tt.write, permAdmin: tt.admin} {
			req := httptest.NewRequestWithContext(context.WithValue(context.Background(), connInfoKey{}, tt.info), "GET", "/", nil)
			req.Host = "127.0.0.1:7100"
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			rec := httptest.NewRecorder()
			routes[need].ServeHTTP(rec, req)
			if rec.Code != want {
				t.Errorf("%s, a route needing perm %d: status %d (%s), want %d", tt.name, need, rec.Code, rec.Body, want)
			}
		}
	}
}

// An internal error is logged with its cause, route and a request id; the
// client gets the id and a generic detail, never the cause. A full disk is
// disk_full (507), which the user can act on.
func TestInternalErrorsAreLoggedNotSent(t *testing.T) {
	cause := errors.New("open /home/someone/.local/share/danyue/store/db/000042.sst: input/output error")
	tests := []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"internal", fmt.Errorf("read book: %w", cause), 500, api.CodeInternal},
		{"disk full", fmt.Errorf("apply: %w: 12 MiB free: %w", store.ErrDiskFull, cause), 507, api.CodeDiskFull},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs logbuf.Buffer
			d := &Daemon{log: slog.New(slog.NewTextHandler(&logs, nil))}
			h := d.guard(route{"GET", "/v1/books/{key}", permRead, func(http.ResponseWriter, *http.Request) error { return tt.err }})
			req := httptest.NewRequestWithContext(context.WithValue(context.Background(), connInfoKey{}, connInfo{kind: connInProcess}), "GET", "/v1/books/"+keyA, nil)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			body := rec.Body.String()
			if rec.Code != tt.status || !strings.Contains(body, `"error":"`+tt.code+`"`) || strings.Contains(body, "/home/someone") || strings.Contains(body, "input/output") {
				t.Fatalf("answer %d %s, want %d %s without the cause", rec.Code, body, tt.status, tt.code)
			}
			id := regexp.MustCompile(`request ([0-9a-f]{12})`).FindStringSubmatch(body)
			if id == nil {
				t.Fatalf("answer %s names no request id", body)
			}
			log := logs.String()
			for _, want := range []string{"level=ERROR", "request=" + id[1], `route="GET /v1/books/{key}"`, "input/output error"} {
				if !strings.Contains(log, want) {
					t.Errorf("log %q lacks %q", log, want)
				}
			}
		})
	}
}

// --socket in a shared directory (mode 1777, as /tmp) leaves that
// directory's mode alone; the socket itself is 0600. A directory that does
// not exist is made private. A file that is not a socket is not removed.
func TestSocketInSharedDirectory(t *testing.T) {
	if os.PathSeparator == '\\' {
		t.Skip("a named pipe on Windows")
	}
	base := tempDir(t)
	shared := base + "/shared"
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, func(c *Config) { c.Socket = shared + "/dy.sock" })
	if _, err := d.client.Status(ctxT(t)); err != nil {
		t.Fatalf("status on a socket in a shared dir: %v", err)
	}
	fi, err := os.Stat(shared)
	if err != nil || fi.Mode()&(os.ModePerm|os.ModeSticky) != 0o777|os.ModeSticky {
		t.Fatalf("shared dir mode after start = %v, %v; want it untouched (drwxrwxrwt)", fi.Mode(), err)
	}
	if fi, err := os.Lstat(shared + "/dy.sock"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode = %v, %v; want 0600", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(shared)
	if len(entries) != 1 {
		t.Fatalf("shared dir holds %d entries, want only the socket", len(entries))
	}

	fresh := base + "/new/sub"
	startDaemon(t, func(c *Config) { c.Socket = fresh + "/dy.sock" })
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("socket dir danyue made: %v, %v; want 0700", fi.Mode(), err)
	}

	inTheWay := base + "/notes.txt"
	if err := os.WriteFile(inTheWay, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Start(ctxT(t), Config{DataDir: base + "/data3", Socket: inTheWay, NoMDNS: true, Listen: []string{"/ip4/127.0.0.1/tcp/0"}, Logger: testLogger(t)})
	if err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("Start with --socket on a regular file = %v, want a refusal", err)
	}
	if b, _ := os.ReadFile(inTheWay); string(b) != "mine" {
		t.Fatalf("the file in the way was changed")
	}
}

// A token file readable by others is made private, with a warning, as the
// secrets file is.
func TestLooseTokenIsTightened(t *testing.T) {
	if os.PathSeparator == '\\' {
		t.Skip("modes mean nothing on Windows")
	}
	dir := tempDir(t) + "/data"
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	tok := strings.Repeat("ab", 32) + "\n"
	for _, name := range []string{"api-token", "api-token-read"} {
		if err := os.WriteFile(dir+"/"+name, []byte(tok), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var logs logbuf.Buffer
	startDaemon(t, func(c *Config) {
		c.DataDir = dir
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	for _, name := range []string{"api-token", "api-token-read"} {
		if fi, err := os.Stat(dir + "/" + name); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode after start = %v, %v; want 0600", name, fi.Mode(), err)
		}
		if !strings.Contains(logs.String(), "level=WARN msg=\"API token file was readable by other users") || !strings.Contains(logs.String(), name) {
			t.Errorf("no warning about the loose %s in %q", name, logs.String())
		}
	}
}

// Every Close is idempotent: the daemon's, its store's, its client's.
func TestEveryCloseTwice(t *testing.T) {
	d := startDaemon(t, nil)
	for i := range 2 {
		d.client.Close()
		if err := d.Close(); err != nil {
			t.Fatalf("Daemon.Close #%d: %v", i, err)
		}
		if err := d.store.Close(); err != nil {
			t.Fatalf("store.Close after Daemon.Close #%d: %v", i, err)
		}
	}
}
