package daemon

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/danyue/danyue/internal/poll"
)

// chromium finds a Chromium to drive. Without one the browser test skips,
// except in CI (CI set), where it must run.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium binary on PATH, and CI is set: the browser test must run (.ci/run installs chromium)")
	}
	t.Skip("no chromium binary on PATH; install Debian's chromium to run the browser test")
	return ""
}

// artifacts is where the test keeps its screenshots: DANYUE_ARTIFACTS if
// set (CI keeps them), else a temporary directory.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("DANYUE_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	dir = filepath.Join(dir, "web")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Issue 16: the status page in a real browser. Two daemons in one library;
// the page of the first (书房, with --http) logs in through the one-time
// link, shows both devices and the book, follows writes made elsewhere
// without a reload, and brings a deleted book back on every device.
func TestWebPageInBrowser(t *testing.T) {
	p := newPageTest(t)
	p.login()
	p.shelf()
	p.live()
	p.deleteAndRestore()
	p.search()
	p.stolenCookie()
	p.pairing()
	p.refused()
	p.logout()
}

// pageTest is the browser test's state, phase after phase: two daemons in
// one library and a browser logged in to the first one's page.
type pageTest struct {
	t      *testing.T
	a, b   *testDaemon
	ctx    context.Context // of the API calls
	bctx   context.Context // of the browser
	base   string          // the page's URL, without a path
	shots  string          // where screenshots go
	cookie *http.Cookie    // the page's session, once logged in
	clock  shiftClock      // both daemons' wall clock
}

const pageTitle = "三体 · The Three-Body Problem"

// newPageTest starts the daemons, writes the books and KOReader's
// progress, and starts the browser.
func newPageTest(t *testing.T) *pageTest {
	exe := chromium(t)
	p := &pageTest{t: t, shots: artifacts(t), ctx: ctxT(t)}
	p.a = startDaemon(t, withKosync(func(c *Config) { c.Name = "书房"; c.HTTP = "127.0.0.1:0"; c.clock = p.clock.now }))
	p.b = startDaemon(t, func(c *Config) { c.Name = "phone"; c.clock = p.clock.now })
	joinLibrary(t, p.a, p.b)
	a, b, ctx := p.a, p.b, p.ctx
	mustDo(b.client.SetPosition(ctx, keyA, 1200, 0.12, pageTitle))(t)
	mustDo(a.client.AddReadTime(ctx, keyA, 25*60*1000, ""))(t)
	mustDo(a.client.SetPosition(ctx, keyB, 10, 0.01, "Walden"))(t)
	poll.Until(t, "the book to reach the page's daemon", 10*time.Second, func() bool {
		bk, err := a.client.Book(ctx, keyA)
		return err == nil && bk.Title == pageTitle
	})
	// A Kobo reads the same book through A's kosync listener; the phone
	// keyed the file, which links KOReader's document to the book.
	mustDo(a.client.KosyncAddUser(ctx, "alice", aliceKey))(t)
	pushProgress(t, a, "alice", aliceKey, kobo, "/body/DocFragment[3]", 0.33)
	if err := b.client.KosyncLink(ctx, kobo, keyA, ""); err != nil {
		t.Fatal(err)
	}
	p.base = "http://" + a.HTTPAddr()
	var cancel context.CancelFunc
	p.bctx, cancel = browser(t, exe)
	t.Cleanup(cancel)
	return p
}

// shot saves a screenshot of the page as name.
func (p *pageTest) shot(name string) {
	p.t.Helper()
	png := value(p.t, p.bctx, chromedp.FullScreenshot(100))
	path := filepath.Join(p.shots, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot %s (%d bytes)", path, len(png))
}

// text is what the page shows in sel; "" while the page is loading.
func (p *pageTest) text(sel string) string {
	s, _ := chromedp.Run(p.bctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {}).innerText || ""`, sel)))
	return s
}

// waitText waits until the page shows want in sel.
func (p *pageTest) waitText(what, sel, want string) {
	p.t.Helper()
	poll.Until(p.t, what, 15*time.Second, func() bool { return strings.Contains(p.text(sel), want) })
}

// pageBook is the selector of a book on the shelf, pageGone of a deleted
// one.
func pageBook(key string) string { return `#shelf li[data-key="` + key + `"]` }
func pageGone(key string) string { return `#deleted li[data-key="` + key + `"]` }

// login opens the page through the one-time link, which works once;
// without the session nothing is served.
func (p *pageTest) login() {
	t := p.t
	login := mustDo(p.a.client.WebLogin(p.ctx))(t)
	if !strings.HasPrefix(login.URL, p.base+"/login?token=") {
		t.Fatalf("login URL %q is not on the listener %s", login.URL, p.base)
	}
	for _, path := range []string{"/", "/fragment", "/events", "/static/style.css"} {
		if code, body := get(t, p.base+path, nil); code != http.StatusUnauthorized || strings.Contains(body, "三体") {
			t.Fatalf("GET %s without a session: %d %q", path, code, body)
		}
	}
	run(t, p.bctx, chromedp.Navigate(login.URL), chromedp.WaitVisible(chromedp.CSS(`#shelf`)))
	if loc := value(t, p.bctx, chromedp.Location()); loc != p.base+"/" {
		t.Fatalf("after login the browser is at %q, want %s/", loc, p.base)
	}
	if code, _ := get(t, login.URL, nil); code != http.StatusForbidden {
		t.Fatalf("the login link worked twice: %d", code)
	}
	p.cookie = sessionCookie(t, p.bctx)
	// The page key is in the origin's storage, and is not the cookie.
	if key := p.pageKey(); len(key) != 64 || key == p.cookie.Value {
		t.Fatalf("page key in the browser's storage: %q", key)
	}
}

// pageKey is what the page's origin keeps in localStorage.
func (p *pageTest) pageKey() string {
	p.t.Helper()
	return value(p.t, p.bctx, chromedp.Evaluate[string](`localStorage.getItem('danyue-page-key') || ""`))
}

// stolenCookie: issue 47. Another HTTP server on this machine, on another
// port, that the logged-in browser visits receives the page's session
// cookie, since cookies ignore the port; replayed with forged headers, it
// reads the page but acts on nothing and never gets the invite code. That
// server's own page cannot read the page key: storage is per origin.
func (p *pageTest) stolenCookie() {
	t := p.t
	got := make(chan string, 8)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Cookie")
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<p id="other">another service on this machine</p>`)
	}))
	defer other.Close()
	run(t, p.bctx, chromedp.Navigate(other.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#other`)))
	var cookie string
	select {
	case cookie = <-got:
	default:
		t.Fatal("the other server saw no request")
	}
	if !strings.Contains(cookie, "danyue_session="+p.cookie.Value) {
		t.Fatalf("the other port's server got cookies %q; the browser no longer leaks the session cookie across ports, and this test should say so", cookie)
	}
	if key := p.pageKey(); key != "" {
		t.Fatalf("a page on another port reads the page key: %q", key)
	}
	stolen := &http.Cookie{Name: "danyue_session", Value: p.cookie.Value}
	forged := http.Header{"Origin": {p.base}, "Sec-Fetch-Site": {"same-origin"}}
	if code, body := post(t, p.base+"/invite", stolen, forged, url.Values{"pagekey": {""}}); code != http.StatusForbidden || strings.Contains(body, "danyue1") {
		t.Fatalf("POST /invite with the cookie the other server got: %d", code)
	}
	run(t, p.bctx, chromedp.Navigate(p.base+"/"), chromedp.WaitVisible(chromedp.CSS(`#shelf`)))
}

// logout: the page's button ends the session and forgets the page key.
func (p *pageTest) logout() {
	t := p.t
	run(t, p.bctx, chromedp.Navigate(p.base+"/"), chromedp.WaitVisible(chromedp.CSS(`#shelf`)))
	load(t, p.bctx, chromedp.Click(chromedp.CSS(`footer button`), chromedp.NodeVisible))
	if got := p.text("body"); !strings.Contains(got, "Logged out") {
		t.Fatalf("after Log out the page says %q", got)
	}
	if key := p.pageKey(); key != "" {
		t.Errorf("the page key outlived the session: %q", key)
	}
	if code, _ := get(t, p.base+"/", http.Header{"Cookie": {p.cookie.String()}}); code != http.StatusUnauthorized {
		t.Errorf("the session outlived Log out: %d", code)
	}
}

// shelf checks the devices, the book and its KOReader progress.
func (p *pageTest) shelf() {
	t := p.t
	p.waitText("both devices", "#devices", "phone")
	if devs := p.text("#devices"); !strings.Contains(devs, "书房") || !strings.Contains(devs, "this device") || !strings.Contains(devs, "connected") {
		t.Fatalf("devices section: %q", devs)
	}
	if got := p.text(pageBook(keyA)); !strings.Contains(got, pageTitle) || !strings.Contains(got, "12.0%") || !strings.Contains(got, "read 25 min") {
		t.Fatalf("the book on the shelf: %q", got)
	}
	p.waitText("KOReader's progress under the book's title", pageBook(keyA), "KOReader 33.0% · alice on")
	p.waitText("the live stream to open", "#live-state", "live")
	p.shot("1-shelf.png")
}

// live: a position written on the phone, then one written through this
// daemon's own API, each appear without a reload.
func (p *pageTest) live() {
	t := p.t
	run(t, p.bctx, chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
	mustDo(p.b.client.SetPosition(p.ctx, keyA, 50000, 0.5, ""))(t)
	p.waitText("the phone's position on the page", pageBook(keyA), "50.0%")
	mustDo(p.a.client.SetPosition(p.ctx, keyA, 61000, 0.61, ""))(t)
	p.waitText("this device's position on the page", pageBook(keyA), "61.0%")
	if !value(t, p.bctx, chromedp.Evaluate[bool](`window.notReloaded === true`)) {
		t.Fatal("the page was reloaded; it should have updated in place")
	}
	p.shot("2-live-update.png")
}

// deleteAndRestore: deleted on the phone, the page says who, and brings it
// back on every device 10 minutes later, when both devices have long held
// the delete (issue 49: the undo window, not stability, decides).
func (p *pageTest) deleteAndRestore() {
	t := p.t
	mustDo(p.b.client.Delete(p.ctx, keyA))(t)
	p.waitText("the deleted book", pageGone(keyA), "deleted by phone")
	p.tenMinutesLater()
	load(t, p.bctx, chromedp.Reload())
	p.waitText("the deleted book, 10 minutes on", pageGone(keyA), "can be brought back until")
	if got := p.text(pageGone(keyA)); !strings.Contains(got, "KOReader 33.0%") {
		t.Fatalf("the deleted book lost its KOReader progress: %q", got)
	}
	if p.text(pageBook(keyA)) != "" {
		t.Fatal("the deleted book is still on the shelf")
	}
	p.shot("3-deleted.png")
	load(t, p.bctx, chromedp.Click(chromedp.CSS(pageGone(keyA)+` button`), chromedp.NodeVisible))
	p.waitText("the restored book on the shelf", pageBook(keyA), "61.0%")
	poll.Until(t, "the phone to have the book back", 10*time.Second, func() bool {
		bk, err := p.b.client.Book(p.ctx, keyA)
		return err == nil && !bk.Deleted && bk.Position != nil && bk.Position.Char == 61000
	})
	p.shot("4-restored.png")
}

// tenMinutesLater waits until each daemon knows the other holds all its
// changes, moves both clocks 10 minutes on, and waits for rounds of the
// page's daemon's collection loop after that.
func (p *pageTest) tenMinutesLater() {
	t := p.t
	poll.Until(t, "each daemon to know the other holds the delete", 20*time.Second, func() bool {
		return holdsAllOf(t, p.a, p.b) && holdsAllOf(t, p.b, p.a)
	})
	p.clock.add(10 * time.Minute)
	from := p.a.lib.CollectionStats().Rounds
	poll.Until(t, "rounds of collection 10 minutes on", 20*time.Second, func() bool {
		mustDo(p.a.client.SetPosition(p.ctx, keyB, 10, 0.01, "Walden"))(t) // wakes the loop
		return p.a.lib.CollectionStats().Rounds >= from+2
	})
}

// search is a plain GET form.
func (p *pageTest) search() {
	run(p.t, p.bctx, chromedp.SetValue(chromedp.CSS(`input[name=q]`), "walden"))
	load(p.t, p.bctx, chromedp.Submit(chromedp.CSS(`form.search`)))
	poll.Until(p.t, "the search result", 10*time.Second, func() bool {
		return strings.Contains(p.text("#shelf"), "Walden") && !strings.Contains(p.text("#shelf"), "三体")
	})
}

// pairing: the invite is minted only on the button, with its QR code.
func (p *pageTest) pairing() {
	t := p.t
	if strings.Contains(p.text("#pairing"), "danyue1") {
		t.Fatal("the invite was shown before it was asked for")
	}
	load(t, p.bctx, chromedp.Click(chromedp.CSS(`#pairing button`), chromedp.NodeVisible))
	run(t, p.bctx, chromedp.WaitVisible(chromedp.CSS(`#pairing svg.qr`)))
	code := value(t, p.bctx, chromedp.Value(chromedp.CSS(`#pairing textarea`)))
	if !strings.HasPrefix(code, "danyue") {
		t.Fatalf("invite code on the page: %q", code)
	}
	p.shot("5-invite.png")
	run(t, p.bctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(p.base+"/"), chromedp.WaitVisible(chromedp.CSS(`#shelf`)))
	p.shot("6-desktop.png")
}

// refused: with the session but from another site, or without the form
// token, a POST changes nothing; the API still refuses browsers, session
// or not.
func (p *pageTest) refused() {
	t, a, base := p.t, p.a, p.base
	mustDo(p.b.client.Delete(p.ctx, keyB))(t)
	poll.Until(t, "the page's daemon to have the delete", 10*time.Second, func() bool {
		bk, err := a.client.Book(p.ctx, keyB)
		return err == nil && bk.Deleted
	})
	for name, hdr := range map[string]http.Header{
		"other origin":  {"Origin": {"http://evil.test"}},
		"no form token": {"Origin": {base}},
	} {
		form := url.Values{"key": {keyB}}
		if name == "other origin" {
			form.Set("csrf", "whatever")
		}
		code, _ := post(t, base+"/restore", p.cookie, hdr, form)
		if code != http.StatusForbidden {
			t.Errorf("%s: POST /restore answered %d, want 403", name, code)
		}
	}
	if bk := mustDo(a.client.Book(p.ctx, keyB))(t); !bk.Deleted {
		t.Fatal("a refused POST restored the book")
	}
	if code, _ := get(t, base+"/v1/status", http.Header{"Authorization": {"Bearer " + a.APIToken()}, "Origin": {base}, "Cookie": {p.cookie.String()}}); code != http.StatusForbidden {
		t.Fatalf("the API answered a request with Origin: %d", code)
	}
}

// browser starts a headless Chromium with a phone-sized window.
func browser(t *testing.T, exe string) (context.Context, context.CancelFunc) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // CI runs as root
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(412, 915),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	tctx, cancelT := context.WithTimeout(bctx, 2*time.Minute)
	return tctx, func() { cancelT(); cancelCtx(); cancelAlloc() }
}

func run(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

func value[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// load runs an action that makes the page navigate and waits for the new
// page's load event.
func load(t *testing.T, ctx context.Context, a chromedp.Action[chromedp.Void]) {
	t.Helper()
	value(t, ctx, chromedp.WaitEvent(page.LoadEventFired, nil, a))
}

// sessionCookie returns the page's session cookie from the browser, and
// checks how it was set.
func sessionCookie(t *testing.T, ctx context.Context) *http.Cookie {
	t.Helper()
	got, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range got.Cookies {
		if c.Name == "danyue_session" {
			if !c.HTTPOnly || c.SameSite != network.CookieSameSiteStrict || c.Path != "/" || len(c.Value) != 64 {
				t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/, 256 bits", c)
			}
			return &http.Cookie{Name: c.Name, Value: c.Value}
		}
	}
	t.Fatalf("no session cookie in the browser: %+v", got.Cookies)
	return nil
}

func get(t *testing.T, u string, h http.Header) (int, string) {
	t.Helper()
	return do(t, "GET", u, h, "")
}

func post(t *testing.T, u string, c *http.Cookie, h http.Header, form url.Values) (int, string) {
	t.Helper()
	h = h.Clone()
	h.Set("Cookie", c.String())
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	return do(t, "POST", u, h, form.Encode())
}

func do(t *testing.T, method, u string, h http.Header, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	// Redirects are answers here, not something to follow.
	c := http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil || sb.Len() > 1<<20 {
			break
		}
	}
	return resp.StatusCode, sb.String()
}
