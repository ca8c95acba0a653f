package kosync

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// memLibrary is a Library in memory, for testing the protocol alone.
type memLibrary struct {
	mu       sync.Mutex
	users    map[string]string // name -> key hash
	progress map[[2]string]Progress
	now      time.Time
	writes   int
	// authReads counts UserAuth calls: what a refusal must not make.
	authReads atomic.Int64
}

func newMemLibrary() *memLibrary {
	return &memLibrary{users: map[string]string{}, progress: map[[2]string]Progress{}, now: time.Unix(1_767_225_600, 0)}
}

func (m *memLibrary) UserAuth(_ context.Context, name string) (string, bool, error) {
	m.authReads.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.users[name]
	return h, ok, nil
}

func (m *memLibrary) ReplaceAuth(_ context.Context, name, old, new string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h, ok := m.users[name]; !ok || h != old {
		return false, nil
	}
	m.users[name] = new
	m.writes++
	return true, nil
}

func (m *memLibrary) CreateUser(_ context.Context, name, hash string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.users[name]; ok {
		return ErrUserExists
	}
	m.users[name] = hash
	m.writes++
	return nil
}

func (m *memLibrary) Progress(_ context.Context, user, doc string) (Progress, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.progress[[2]string{user, doc}]
	return p, ok, nil
}

func (m *memLibrary) SetProgress(_ context.Context, user string, p Progress) (Progress, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = m.now.Add(time.Second)
	p.Time = m.now
	m.progress[[2]string{user, p.Document}] = p
	m.writes++
	return p, nil
}

func (m *memLibrary) writeCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writes
}

// addUser creates an account directly, as `danyue kosync adduser` does.
func (m *memLibrary) addUser(t testing.TB, name, key string) {
	t.Helper()
	h, err := HashKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CreateUser(context.Background(), name, h); err != nil {
		t.Fatal(err)
	}
}

// noLimits keeps the guess limits out of the way of a test about something
// else.
var noLimits = limits{free: 1 << 30, base: time.Second, maxLock: time.Second, forgetAfter: time.Hour, maxKeys: 64}

// testServer serves the protocol over loopback TCP.
type testServer struct {
	lib *memLibrary
	url string
}

func startServer(t testing.TB, cfg Config) *testServer {
	t.Helper()
	lib := newMemLibrary()
	if cfg.Library == nil {
		cfg.Library = lib
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &testServer{lib: lib, url: srv.URL + cfg.Prefix}
}

// Keys as KOReader computes them: the lowercase hex MD5 of the password.
const (
	aliceKey = "5f4dcc3b5aa765d61d8327deb882cf99" // md5("password")
	bobKey   = "e10adc3949ba59abbe56e057f20f883e" // md5("123456")
)

// answer is a response, read whole.
type answer struct {
	status int
	ctype  []string // every Content-Type value, to check there is exactly one
	body   []byte
}

// json decodes the body into a generic map.
func (a answer) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("answer %d is not a JSON object: %q", a.status, a.body)
	}
	return m
}

// koreader sends a request the way KOReader's kosync plugin does: header
// names in lower case as it writes them, its Accept type, a JSON body.
// user or key "" leaves that header out.
func koreader(t testing.TB, method, url, user, key, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	// Direct map writes keep the names' case on the wire.
	req.Header["accept"] = []string{"application/vnd.koreader.v1+json"}
	if body != "" {
		req.Header["content-type"] = []string{"application/json"}
	}
	if user != "" {
		req.Header["x-auth-user"] = []string{user}
	}
	if key != "" {
		req.Header["x-auth-key"] = []string{key}
	}
	return do(t, req)
}

func do(t testing.TB, req *http.Request) answer {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, ctype: resp.Header.Values("Content-Type"), body: b}
}

// checkJSON fails unless the answer has the status, exactly one
// Content-Type, exactly "application/json", and a JSON body.
func checkJSON(t testing.TB, what string, a answer, status int) {
	t.Helper()
	if a.status != status {
		t.Errorf("%s: status %d, want %d; body %s", what, a.status, status, a.body)
	}
	if len(a.ctype) != 1 || a.ctype[0] != "application/json" {
		t.Errorf("%s: Content-Type %q, want exactly [application/json]", what, a.ctype)
	}
	if !json.Valid(bytes.TrimSpace(a.body)) {
		t.Errorf("%s: body is not JSON: %q", what, a.body)
	}
}

// checkError checks an error answer: the status, and {"code": n, "message"}.
func checkError(t testing.TB, what string, a answer, status, code int) {
	t.Helper()
	checkJSON(t, what, a, status)
	var e struct {
		Code    *int    `json:"code"`
		Message *string `json:"message"`
	}
	if err := json.Unmarshal(a.body, &e); err != nil || e.Code == nil || e.Message == nil || *e.Message == "" {
		t.Errorf("%s: error body %q is not {\"code\": n, \"message\": \"...\"}", what, a.body)
		return
	}
	if code != 0 && *e.Code != code {
		t.Errorf("%s: code %d, want %d (%s)", what, *e.Code, code, *e.Message)
	}
}

// serveOnLoopback serves h as the daemon does (NewServer) on a loopback
// port until the test ends, and returns its URL.
func serveOnLoopback(t testing.TB, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(h, nil)
	// No test here is about the server's timeouts, and on a loaded
	// machine under -race a request queued behind the slow hashes of
	// others may outlast the write timeout: the client would read EOF.
	srv.ReadTimeout, srv.WriteTimeout = 0, 0
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}
