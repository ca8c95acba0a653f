package web

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/danyue/danyue/daemon/api"
)

type fakeBackend struct {
	mu       sync.Mutex
	books    []api.Book
	restored []string
	changes  chan struct{}
}

func (f *fakeBackend) Status(context.Context) (api.Status, error) {
	seen := "2026-12-01T10:00:00Z"
	return api.Status{
		Device:  api.Device{ID: "00000000000000aa", Name: "书房"},
		Library: api.Library{ID: "lib"},
		Peers:   []api.Peer{{Device: "00000000000000bb", Name: "phone", Connected: true, InSync: true, LastSeen: &seen, ClockOffsetMs: -1500}},
	}, nil
}

func (f *fakeBackend) Books(context.Context) ([]api.Book, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]api.Book(nil), f.books...), nil
}

func (f *fakeBackend) Kosync(context.Context) ([]api.KosyncProgress, error) {
	return []api.KosyncProgress{
		{User: "alice", Document: "0b229176d4e8db7f6d2b5a4952368d7a", Percentage: 0.42, Device: "Kobo Libra 2", At: "2026-12-01T11:00:00Z", BookKey: "md5:old", Title: "围城"},
		{User: "alice", Document: "ffff0000ffff0000ffff0000ffff0000", Percentage: 0.07, Device: "Kindle", At: "2026-12-01T08:00:00Z"},
	}, nil
}

func (f *fakeBackend) Daily(_ context.Context, days int) (api.Daily, error) {
	d := api.Daily{}
	for i := range days {
		d.Days = append(d.Days, api.Day{Day: time.Date(2026, 11, 2+i, 0, 0, 0, 0, time.UTC).Format(time.DateOnly), Ms: uint64(i%3) * 60_000})
		d.TotalMs += uint64(i%3) * 60_000
	}
	return d, nil
}

func (f *fakeBackend) Restore(_ context.Context, key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.restored = append(f.restored, key)
	return nil
}

func (f *fakeBackend) Invite(context.Context) (string, error) { return "danyue1-secret-code", nil }

func (f *fakeBackend) Changes(ctx context.Context) <-chan struct{} { return f.changes }

func pos(pct float64, at string) *api.Position {
	return &api.Position{Percent: pct, At: at, Stamp: at, DeviceName: "phone"}
}

func testServer(t *testing.T) (*Server, *fakeBackend, *time.Time) {
	t.Helper()
	gone, by := "2026-12-01T09:00:00Z", "phone"
	f := &fakeBackend{changes: make(chan struct{}, 1), books: []api.Book{
		{Key: "md5:old", Title: "围城", Position: pos(0.2, "2026-11-01T00:00:00Z")},
		{Key: "md5:new", Title: "三体 <script>alert(1)</script>", Position: pos(0.5, "2026-11-30T00:00:00Z")},
		{Key: "md5:gone", Title: "Gone", Position: pos(0.9, "2026-11-02T00:00:00Z"), Deleted: true, DeletedAt: &gone, DeletedByName: &by},
	}}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := New(Config{Backend: f, Now: func() time.Time { return now }})
	return s, f, &now
}

// login goes through the one-time URL and returns the session cookie and
// the page's form token.
func login(t *testing.T, s *Server) (*http.Cookie, string) {
	t.Helper()
	tok, _, err := s.LoginToken()
	if err != nil {
		t.Fatal(err)
	}
	rec := serve(s, httptest.NewRequest("GET", "/login?token="+tok, nil))
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/" {
		t.Fatalf("login: %d %q", rec.Code, rec.Header().Get("Location"))
	}
	c := rec.Result().Cookies()[0]
	rec = serve(s, withCookie(httptest.NewRequest("GET", "/", nil), c))
	_, rest, _ := strings.Cut(rec.Body.String(), `name="csrf" value="`)
	csrf, _, _ := strings.Cut(rest, `"`)
	return c, csrf
}

func serve(s *Server, r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, r)
	return rec
}

func withCookie(r *http.Request, c *http.Cookie) *http.Request {
	r.AddCookie(c)
	return r
}

func TestLoginTokenWorksOnce(t *testing.T) {
	s, _, _ := testServer(t)
	tok, _, err := s.LoginToken()
	if err != nil {
		t.Fatal(err)
	}
	rec := serve(s, httptest.NewRequest("GET", "/login?token="+tok, nil))
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("first use: %d", rec.Code)
	}
	c := rec.Result().Cookies()[0]
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || len(c.Value) != 64 {
		t.Fatalf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/, 256 random bits", c)
	}
	if rec := serve(s, httptest.NewRequest("GET", "/login?token="+tok, nil)); rec.Code != http.StatusForbidden {
		t.Fatalf("second use: %d, want 403", rec.Code)
	}
}

func TestLoginTokenAndSessionExpire(t *testing.T) {
	s, _, now := testServer(t)
	tok, _, _ := s.LoginToken()
	*now = now.Add(tokenTTL)
	if rec := serve(s, httptest.NewRequest("GET", "/login?token="+tok, nil)); rec.Code != http.StatusForbidden {
		t.Fatalf("expired token: %d, want 403", rec.Code)
	}
	c, _ := login(t, s)
	*now = now.Add(sessionTTL)
	if rec := serve(s, withCookie(httptest.NewRequest("GET", "/", nil), c)); rec.Code != http.StatusUnauthorized {
		t.Fatalf("expired session: %d, want 401", rec.Code)
	}
}

func TestNothingWithoutSession(t *testing.T) {
	s, _, _ := testServer(t)
	bogus := &http.Cookie{Name: cookieName, Value: strings.Repeat("0", 64)}
	for _, tc := range []struct {
		method, path string
		cookie       *http.Cookie
	}{
		{"GET", "/", nil},
		{"GET", "/?q=x", bogus},
		{"GET", "/fragment", nil},
		{"GET", "/events", nil},
		{"GET", "/static/style.css", nil},
		{"GET", "/static/app.js", bogus},
		{"POST", "/restore", nil},
		{"POST", "/invite", bogus},
		{"GET", "/login", nil},
		{"GET", "/login?token=nope", nil},
	} {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		if tc.cookie != nil {
			r.AddCookie(tc.cookie)
		}
		rec := serve(s, r)
		if rec.Code != http.StatusUnauthorized && rec.Code != http.StatusForbidden {
			t.Errorf("%s %s: %d, want 401 or 403", tc.method, tc.path, rec.Code)
		}
		if body := rec.Body.String(); strings.Contains(body, "三体") || strings.Contains(body, "书房") {
			t.Errorf("%s %s leaked the library: %q", tc.method, tc.path, body)
		}
	}
}

func TestPostsMustComeFromThePage(t *testing.T) {
	s, f, _ := testServer(t)
	c, csrf := login(t, s)
	if csrf == "" {
		t.Fatal("no form token on the page")
	}
	for _, tc := range []struct {
		name    string
		csrf    string
		headers map[string]string
		want    int
	}{
		{"same origin", csrf, map[string]string{"Origin": "http://example.com", "Sec-Fetch-Site": "same-origin"}, http.StatusSeeOther},
		{"null origin, same-origin fetch", csrf, map[string]string{"Origin": "null", "Sec-Fetch-Site": "same-origin"}, http.StatusSeeOther},
		{"other origin", csrf, map[string]string{"Origin": "http://evil.test"}, http.StatusForbidden},
		{"cross-site fetch", csrf, map[string]string{"Origin": "http://example.com", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"null origin alone", csrf, map[string]string{"Origin": "null"}, http.StatusForbidden},
		{"no origin", csrf, nil, http.StatusForbidden},
		{"no form token", "", map[string]string{"Origin": "http://example.com"}, http.StatusForbidden},
		{"wrong form token", strings.Repeat("a", 64), map[string]string{"Origin": "http://example.com"}, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			form := url.Values{"key": {"md5:gone"}, "csrf": {tc.csrf}}
			r := withCookie(httptest.NewRequest("POST", "/restore", strings.NewReader(form.Encode())), c)
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			f.mu.Lock()
			before := len(f.restored)
			f.mu.Unlock()
			rec := serve(s, r)
			f.mu.Lock()
			restored := len(f.restored) > before
			f.mu.Unlock()
			if rec.Code != tc.want || restored != (tc.want == http.StatusSeeOther) {
				t.Fatalf("%d, restored=%v; want %d", rec.Code, restored, tc.want)
			}
		})
	}
}

func TestPageShowsLibraryEscaped(t *testing.T) {
	s, _, _ := testServer(t)
	c, _ := login(t, s)
	rec := serve(s, withCookie(httptest.NewRequest("GET", "/", nil), c))
	body := rec.Body.String()
	for h, want := range map[string]string{
		"Content-Type":            "text/html; charset=utf-8",
		"Content-Security-Policy": "default-src 'self'",
		"X-Frame-Options":         "DENY",
		"Referrer-Policy":         "no-referrer",
	} {
		if got := rec.Header().Get(h); !strings.HasPrefix(got, want) {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	if strings.Contains(body, "<script>alert") || !strings.Contains(body, "三体 &lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the title was not escaped")
	}
	// Most recently read first; the deleted book only under "deleted",
	// with who deleted it.
	iNew, iOld := strings.Index(body, "三体"), strings.Index(body, "围城")
	if iNew < 0 || iOld < 0 || iNew > iOld {
		t.Errorf("shelf order: 三体 at %d, 围城 at %d; want the recent one first", iNew, iOld)
	}
	_, deleted, _ := strings.Cut(body, `id="deleted"`)
	if !strings.Contains(deleted, "Gone") || !strings.Contains(deleted, "deleted by phone") {
		t.Error("the deleted book or who deleted it is missing")
	}
	// KOReader's progress under the linked book; the unlinked document by
	// its id, apart.
	_, old, _ := strings.Cut(body, `data-key="md5:old"`)
	old, _, _ = strings.Cut(old, "</li>")
	if !strings.Contains(old, "KOReader 42.0% · alice on Kobo Libra 2") {
		t.Errorf("no KOReader progress under the linked book: %q", old)
	}
	_, others, _ := strings.Cut(body, `id="koreader"`)
	if !strings.Contains(others, "ffff0000ffff0000ffff0000ffff0000") || strings.Contains(others, "Kobo Libra 2") {
		t.Errorf("other KOReader documents: %q", others)
	}
	for _, want := range []string{"phone", "connected", "in sync", "1.5s behind", `<meta name="viewport"`, `<rect x=`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func TestSearch(t *testing.T) {
	s, _, _ := testServer(t)
	c, _ := login(t, s)
	for _, tc := range []struct {
		q          string
		want, miss []string
	}{
		{"围", []string{"围城"}, []string{"三体"}},
		{"SCRIPT", []string{"三体"}, []string{"围城"}},
		{"md5:old", []string{"围城"}, []string{"三体"}},
		{"nothing", []string{"No book matches"}, []string{"围城", "三体"}},
	} {
		rec := serve(s, withCookie(httptest.NewRequest("GET", "/fragment?q="+url.QueryEscape(tc.q), nil), c))
		shelf, _, _ := strings.Cut(rec.Body.String(), `id="deleted"`)
		for _, w := range tc.want {
			if !strings.Contains(shelf, w) {
				t.Errorf("q=%q: %q missing", tc.q, w)
			}
		}
		for _, m := range tc.miss {
			if strings.Contains(shelf, m) {
				t.Errorf("q=%q: %q shown", tc.q, m)
			}
		}
	}
}

func TestInviteOnlyWhenAsked(t *testing.T) {
	s, _, _ := testServer(t)
	c, csrf := login(t, s)
	if body := serve(s, withCookie(httptest.NewRequest("GET", "/", nil), c)).Body.String(); strings.Contains(body, "danyue1-secret-code") {
		t.Fatal("the invite is on the page before it was asked for")
	}
	r := withCookie(httptest.NewRequest("POST", "/invite", strings.NewReader("csrf="+csrf)), c)
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Origin", "http://example.com")
	body := serve(s, r).Body.String()
	if !strings.Contains(body, "danyue1-secret-code") || !strings.Contains(body, `<svg class="qr"`) {
		t.Fatal("no invite code or QR code after asking")
	}
}

func TestStaticOnlyAssets(t *testing.T) {
	s, _, _ := testServer(t)
	c, _ := login(t, s)
	for path, want := range map[string]int{"/static/style.css": 200, "/static/app.js": 200, "/static/page.html": 404, "/static/": 404} {
		if rec := serve(s, withCookie(httptest.NewRequest("GET", path, nil), c)); rec.Code != want {
			t.Errorf("%s: %d, want %d", path, rec.Code, want)
		}
	}
}

func TestEventsSignalChanges(t *testing.T) {
	s, f, _ := testServer(t)
	c, _ := login(t, s)
	srv := httptest.NewServer(s)
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/events", nil)
	req.AddCookie(c)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	f.changes <- struct{}{}
	buf := make([]byte, 0, 256)
	for !strings.Contains(string(buf), "event: change") {
		chunk := make([]byte, 256)
		n, err := resp.Body.Read(chunk)
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if n == 0 && err == io.EOF {
			t.Fatalf("stream ended after %q", buf)
		}
		buf = append(buf, chunk[:n]...)
	}
	close(f.changes)
}

func TestSessionsBounded(t *testing.T) {
	s := newSessions(time.Now)
	for range maxTokens * 3 {
		if _, _, err := s.mint(); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.tokens) > maxTokens {
		t.Fatalf("%d tokens kept, limit %d", len(s.tokens), maxTokens)
	}
}

func TestFormats(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{duration(0), "0"},
		{duration(40_000), "40 s"},
		{duration(12 * 60_000), "12 min"},
		{duration(125 * 60_000), "2 h 05 min"},
		{offsetText(0), "same"},
		{offsetText(1500), "1.5s ahead"},
		{offsetText(-90_000), "1m30s behind"},
		{ago(30 * time.Second), "just now"},
		{ago(5 * time.Minute), "5 min ago"},
		{ago(3 * time.Hour), "3 h ago"},
		{ago(72 * time.Hour), "3 days ago"},
		{ago(-time.Hour), "later than this device's clock"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestChartScalesToTheBusiestDay(t *testing.T) {
	c := makeChart(api.Daily{Days: []api.Day{{Day: "a", Ms: 0}, {Day: "b", Ms: 1}, {Day: "c", Ms: 3_600_000}}, TotalMs: 3_600_001})
	if len(c.Bars) != 3 || c.Width != 3*barStep {
		t.Fatalf("bars %d, width %d", len(c.Bars), c.Width)
	}
	for i, want := range []int{0, 1, chartHeight} {
		if b := c.Bars[i]; b.H != want || b.Y+b.H != chartHeight {
			t.Errorf("bar %d: height %d at y %d, want height %d on the baseline", i, b.H, b.Y, want)
		}
	}
	if empty := makeChart(api.Daily{Days: []api.Day{{Day: "a"}}}); empty.Bars[0].H != 0 {
		t.Error("a day without reading has a bar")
	}
}
