package web

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
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
	seen, secondsLeft := "2026-12-01T10:00:00Z", 95.0
	return api.Status{
		Device:  api.Device{ID: "00000000000000aa", Name: "书房"},
		Library: api.Library{ID: "lib"},
		Peers: []api.Peer{
			{Device: "00000000000000bb", Name: "phone", Connected: true, State: "connected", Via: "internet", HolePunched: true, InSync: true, LastSeen: &seen, ClockOffsetMs: -1500},
			{Device: "00000000000000cc", Name: "tablet", Connected: true, State: "connected", Via: "lan", Behind: 12, LastSeen: &seen,
				Pulling: &api.SyncProgress{RecordsToGo: 28500, RecordsIn: 3000, RecordsPerSecond: 300, SecondsLeft: &secondsLeft}},
			{Device: "00000000000000ee", Name: "laptop", State: "relayed", Via: "relayed", LastSeen: &seen},
		},
	}, nil
}

func (f *fakeBackend) Devices(context.Context) ([]api.Member, error) {
	seen := "2026-12-01T10:00:00Z"
	return []api.Member{
		{ID: "00000000000000aa", Name: "书房", Self: true},
		{ID: "00000000000000bb", Name: "phone", Connected: true, LastSeen: &seen},
		{ID: "00000000000000cc", Name: "tablet", Connected: true, LastSeen: &seen},
		{ID: "00000000000000dd", Name: "nas"}, // paired, never met here
		{ID: "00000000000000ee", Name: "laptop", State: "relayed", Via: "relayed", LastSeen: &seen},
		{ID: "00000000000000ee", Name: "old kindle", Removed: true},
	}, nil
}

func (f *fakeBackend) Books(_ context.Context, each func(api.Book) error) error {
	f.mu.Lock()
	books := append([]api.Book(nil), f.books...)
	f.mu.Unlock()
	for _, b := range books {
		if err := each(b); err != nil {
			return err
		}
	}
	return nil
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
	gone, by, kept := "2026-12-01T09:00:00Z", "phone", "2026-12-31T09:00:00Z"
	f := &fakeBackend{changes: make(chan struct{}, 1), books: []api.Book{
		{Key: "md5:old", Title: "围城", Position: pos(0.2, "2026-11-01T00:00:00Z")},
		{Key: "md5:new", Title: "三体 <script>alert(1)</script>", Position: pos(0.5, "2026-11-30T00:00:00Z")},
		{Key: "md5:gone", Title: "Gone", Position: pos(0.9, "2026-11-02T00:00:00Z"), Deleted: true, DeletedAt: &gone, DeletedByName: &by, KeptUntil: &kept},
	}}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := New(Config{Backend: f, Now: func() time.Time { return now }})
	return s, f, &now
}

// login goes through the one-time URL and returns the session cookie and
// the page key, as the login page hands it to its script.
func login(t *testing.T, s *Server) (*http.Cookie, string) {
	t.Helper()
	tok, _, err := s.LoginToken()
	if err != nil {
		t.Fatal(err)
	}
	rec := serve(s, httptest.NewRequest("GET", "/login?token="+tok, nil))
	if rec.Code != http.StatusOK || len(rec.Result().Cookies()) != 1 {
		t.Fatalf("login: %d, cookies %v", rec.Code, rec.Result().Cookies())
	}
	return rec.Result().Cookies()[0], pageKeyOf(t, rec.Body.String())
}

// pageKeyOf returns the page key a login page hands out.
func pageKeyOf(t *testing.T, body string) string {
	t.Helper()
	_, rest, ok := strings.Cut(body, `<meta name="danyue-page-key" content="`)
	key, _, _ := strings.Cut(rest, `"`)
	if !ok || len(key) != 64 {
		t.Fatalf("no page key on the login page: %q", body)
	}
	return key
}

// postForm posts form to path with the cookie, as the page itself would:
// with its Origin and fetch metadata.
func postForm(s *Server, path string, c *http.Cookie, form url.Values) *httptest.ResponseRecorder {
	r := withCookie(httptest.NewRequest("POST", path, strings.NewReader(form.Encode())), c)
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Origin", "http://example.com")
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	return serve(s, r)
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
	if rec.Code != http.StatusOK {
		t.Fatalf("first use: %d", rec.Code)
	}
	c := rec.Result().Cookies()[0]
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || len(c.Value) != 64 {
		t.Fatalf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/, 256 random bits", c)
	}
	body := rec.Body.String()
	if key := pageKeyOf(t, body); key == c.Value || !strings.Contains(body, `<script src="/static/login.js"`) {
		t.Fatalf("login page %q: want a page key apart from the cookie, and login.js", body)
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
	c, key := login(t, s)
	for _, tc := range []struct {
		name    string
		key     string
		headers map[string]string
		want    int
	}{
		{"same origin", key, map[string]string{"Origin": "http://example.com", "Sec-Fetch-Site": "same-origin"}, http.StatusSeeOther},
		{"null origin, same-origin fetch", key, map[string]string{"Origin": "null", "Sec-Fetch-Site": "same-origin"}, http.StatusSeeOther},
		{"other origin", key, map[string]string{"Origin": "http://evil.test"}, http.StatusForbidden},
		{"cross-site fetch", key, map[string]string{"Origin": "http://example.com", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"same-site fetch (another port)", key, map[string]string{"Origin": "http://example.com:8080", "Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"null origin alone", key, map[string]string{"Origin": "null"}, http.StatusForbidden},
		{"no origin", key, nil, http.StatusForbidden},
		{"no page key", "", map[string]string{"Origin": "http://example.com"}, http.StatusForbidden},
		{"wrong page key", strings.Repeat("a", 64), map[string]string{"Origin": "http://example.com"}, http.StatusForbidden},
		{"the cookie as page key", c.Value, map[string]string{"Origin": "http://example.com"}, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			form := url.Values{"key": {"md5:gone"}, pageKeyField: {tc.key}}
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

// Issue 47: cookies ignore the port, so any other server on this host that
// the logged-in browser visits gets the session cookie. With it alone, as
// such a server would replay it (forging Origin and fetch metadata, and
// sending whatever token the page it can read shows), every action is
// refused and the invite code is never shown; the page can still be read.
// The page key, which nothing the cookie fetches contains, makes the same
// requests pass.
func TestCookieAloneCannotAct(t *testing.T) {
	s, f, _ := testServer(t)
	c, key := login(t, s)
	page := serve(s, withCookie(httptest.NewRequest("GET", "/", nil), c))
	if page.Code != http.StatusOK || !strings.Contains(page.Body.String(), "三体") {
		t.Fatalf("reading with the cookie: %d", page.Code)
	}
	// What a thief can scrape: any hidden field's value on the page.
	scraped := url.Values{}
	for _, chunk := range strings.Split(page.Body.String(), `type="hidden" name="`)[1:] {
		name, rest, _ := strings.Cut(chunk, `"`)
		_, rest, _ = strings.Cut(rest, `value="`)
		value, _, _ := strings.Cut(rest, `"`)
		scraped.Set(name, value)
	}
	for _, path := range []string{"/", "/fragment", "/static/app.js"} {
		if body := serve(s, withCookie(httptest.NewRequest("GET", path, nil), c)).Body.String(); strings.Contains(body, key) {
			t.Fatalf("GET %s with the cookie shows the page key", path)
		}
	}
	for _, path := range []string{"/invite", "/restore", "/logout"} {
		form := url.Values{"key": {"md5:gone"}}
		for k, v := range scraped {
			form[k] = v
		}
		rec := postForm(s, path, c, form)
		if rec.Code != http.StatusForbidden || strings.Contains(rec.Body.String(), "danyue1-secret-code") {
			t.Errorf("POST %s with the cookie alone: %d %q; want 403 without the code", path, rec.Code, rec.Body.String())
		}
	}
	f.mu.Lock()
	restored := len(f.restored)
	f.mu.Unlock()
	if restored != 0 {
		t.Error("the cookie alone restored a book")
	}
	if rec := serve(s, withCookie(httptest.NewRequest("GET", "/", nil), c)); rec.Code != http.StatusOK {
		t.Fatalf("the cookie alone logged the session out: %d", rec.Code)
	}
	// With the page key, the same requests pass.
	if rec := postForm(s, "/invite", c, url.Values{pageKeyField: {key}}); !strings.Contains(rec.Body.String(), "danyue1-secret-code") {
		t.Errorf("POST /invite with the page key: %d", rec.Code)
	}
	if rec := postForm(s, "/logout", c, url.Values{pageKeyField: {key}}); rec.Code != http.StatusOK {
		t.Errorf("POST /logout with the page key: %d", rec.Code)
	}
	if rec := serve(s, withCookie(httptest.NewRequest("GET", "/", nil), c)); rec.Code != http.StatusUnauthorized {
		t.Errorf("after logging out, the cookie reads the page: %d", rec.Code)
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
	if !strings.Contains(deleted, "can be brought back until <time>2026-12-31") {
		t.Error("the end of the deleted book's undo window is missing")
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
	for _, want := range []string{"phone", "connected", "in sync", "1.5s behind", "catching up: 12 changes to fetch", "syncing: 28500 records to go, 3000 in · 300 records/s · about 1m35s left", `<meta name="viewport"`, `<rect x=`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// How each is reached.
	for device, want := range map[string]string{
		"00000000000000bb": `<span class="tag">internet, hole punched</span>`,
		"00000000000000cc": `<span class="tag">LAN</span>`,
		"00000000000000ee": "through a member, connecting directly",
	} {
		_, card, _ := strings.Cut(body, `data-device="`+device+`"`)
		if card, _, _ = strings.Cut(card, "</li>"); !strings.Contains(card, want) {
			t.Errorf("the card of %s lacks %q: %q", device, want, card)
		}
	}
	// Issue 49: a member never connected is on the page, a forgotten one
	// is not.
	_, nas, _ := strings.Cut(body, `data-device="00000000000000dd"`)
	nas, _, _ = strings.Cut(nas, "</li>")
	if !strings.Contains(nas, "nas") || !strings.Contains(nas, "not met yet") || !strings.Contains(nas, "last seen <time title=\"\">never</time>") {
		t.Errorf("the member never met: %q", nas)
	}
	if strings.Contains(body, "old kindle") {
		t.Error("a forgotten device is among the devices")
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
	c, key := login(t, s)
	if body := serve(s, withCookie(httptest.NewRequest("GET", "/", nil), c)).Body.String(); strings.Contains(body, "danyue1-secret-code") {
		t.Fatal("the invite is on the page before it was asked for")
	}
	body := postForm(s, "/invite", c, url.Values{pageKeyField: {key}}).Body.String()
	if !strings.Contains(body, "danyue1-secret-code") || !strings.Contains(body, `<svg class="qr"`) {
		t.Fatal("no invite code or QR code after asking")
	}
}

func TestStaticOnlyAssets(t *testing.T) {
	s, _, _ := testServer(t)
	c, _ := login(t, s)
	for path, want := range map[string]int{"/static/style.css": 200, "/static/app.js": 200, "/static/login.js": 200, "/static/page.html": 404, "/static/login.html": 404, "/static/": 404} {
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
		{duration(0), "0 min"}, // issue 49: "read 0" had no unit
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
	if empty := makeChart(api.Daily{Days: []api.Day{{Day: "a"}}}); empty.Bars[0].H != 0 || len(empty.Scale) != 0 {
		t.Error("a day without reading has a bar or a scale")
	}
	// Issue 49: the height has a scale, the busiest day at the top.
	if want := []string{"1 h 00 min", "30 min", "0 min"}; !slices.Equal(c.Scale, want) {
		t.Errorf("scale %q, want %q", c.Scale, want)
	}
}

// The shelf keeps the most recently read books of any number streamed to
// it, in order, and counts the rest; memory holds at most twice a page.
func TestShelfCollectorKeepsTheMostRecent(t *testing.T) {
	c := newShelfCollector("", nil)
	const n = 5*maxShelf + 7
	for i := range n {
		// Stamps in a scrambled order, each unique.
		j := (i * 7919) % n
		stamp := fmt.Sprintf("%08d", j)
		b := api.Book{Key: fmt.Sprintf("md5:%032d", j), Position: &api.Position{Stamp: stamp}}
		if j%10 == 0 {
			b.Deleted, b.DeletedAt = true, &stamp
		}
		if err := c.add(b); err != nil {
			t.Fatal(err)
		}
		if len(c.onShelf) >= 2*maxShelf || len(c.gone) >= 2*maxDeleted {
			t.Fatalf("the collector holds %d and %d books", len(c.onShelf), len(c.gone))
		}
	}
	shown, deleted, hidden := c.rows(time.Now())
	visible := n - (n+9)/10
	if len(shown) != maxShelf || hidden != visible-maxShelf {
		t.Fatalf("shown %d, hidden %d; want %d and %d", len(shown), hidden, maxShelf, visible-maxShelf)
	}
	for i := 1; i < len(shown); i++ {
		if shown[i-1].Key < shown[i].Key {
			t.Fatalf("shelf not most recent first at %d: %s before %s", i, shown[i-1].Key, shown[i].Key)
		}
	}
	if want := fmt.Sprintf("md5:%032d", n-1); shown[0].Key != want { // n-1 is not a multiple of 10: on the shelf
		t.Errorf("the most recent book is %s, want %s", shown[0].Key, want)
	}
	if len(deleted) != maxDeleted {
		t.Errorf("%d deleted books shown, want %d", len(deleted), maxDeleted)
	}
}
