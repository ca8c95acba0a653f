package daemon

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Issue 47: cookies ignore the port, so any other HTTP server on this
// machine that the logged-in browser visits receives the page's session
// cookie (TestWebPageInBrowser shows a real browser sending it). Such a
// server replays it here with everything else a request can forge: the
// page's Origin, same-origin fetch metadata, and every hidden field of the
// page the cookie can read. On main that was enough: GET / yielded the form
// token and POST /invite the long invite code. Now every action is refused
// and the code never shown; the page key, which only the login page hands
// out (to the page's script, for the origin's storage), makes the same
// requests pass.
func TestStolenPageCookie(t *testing.T) {
	d := startDaemon(t, func(c *Config) { c.HTTP = "127.0.0.1:0" })
	ctx := ctxT(t)
	mustDo(d.client.SetPosition(ctx, keyA, 10, 0.01, "Walden"))(t)
	mustDo(d.client.Delete(ctx, keyA))(t)
	base := "http://" + d.HTTPAddr()

	// The browser logs in; the other port's server gets its cookie.
	login := mustDo(d.client.WebLogin(ctx))(t)
	req, _ := http.NewRequest("GET", login.URL, nil)
	hc := http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	loginPage := new(strings.Builder)
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		loginPage.Write(buf[:n])
		if err != nil {
			break
		}
	}
	resp.Body.Close()
	var stolen *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "danyue_session" {
			stolen = &http.Cookie{Name: c.Name, Value: c.Value}
		}
	}
	if stolen == nil {
		t.Fatalf("no session cookie from the login link: %d %v", resp.StatusCode, resp.Cookies())
	}

	// Reading is the cookie's: the page works without JavaScript.
	code, page := get(t, base+"/", http.Header{"Cookie": {stolen.String()}})
	if code != http.StatusOK || !strings.Contains(page, "Walden") {
		t.Fatalf("GET / with the cookie: %d", code)
	}
	scraped := url.Values{}
	for _, chunk := range strings.Split(page, `type="hidden" name="`)[1:] {
		name, rest, _ := strings.Cut(chunk, `"`)
		_, rest, _ = strings.Cut(rest, `value="`)
		value, _, _ := strings.Cut(rest, `"`)
		scraped.Set(name, value)
	}
	forged := http.Header{"Origin": {base}, "Sec-Fetch-Site": {"same-origin"}}
	for _, path := range []string{"/invite", "/restore", "/logout"} {
		form := url.Values{"key": {keyA}}
		for k, v := range scraped {
			form[k] = v
		}
		code, body := post(t, base+path, stolen, forged, form)
		if code != http.StatusForbidden || strings.Contains(body, "danyue1") {
			t.Errorf("POST %s with the stolen cookie: %d; want 403 and no invite code; body %.300q", path, code, body)
		}
	}
	if bk := mustDo(d.client.Book(ctx, keyA))(t); !bk.Deleted {
		t.Error("the stolen cookie brought a book back")
	}
	if code, _ := get(t, base+"/", http.Header{"Cookie": {stolen.String()}}); code != http.StatusOK {
		t.Errorf("the stolen cookie logged the session out: %d", code)
	}

	// The page key from the login page is what acting needs.
	_, rest, ok := strings.Cut(loginPage.String(), `<meta name="danyue-page-key" content="`)
	key, _, _ := strings.Cut(rest, `"`)
	if !ok || key == "" {
		t.Fatalf("no page key on the login page: %q", loginPage.String())
	}
	if strings.Contains(page, key) {
		t.Fatal("the page the cookie reads shows the page key")
	}
	code, body := post(t, base+"/invite", stolen, forged, url.Values{"pagekey": {key}})
	if code != http.StatusOK || !strings.Contains(body, "danyue1") {
		t.Errorf("POST /invite with the page key: %d", code)
	}
	if code, _ := post(t, base+"/restore", stolen, forged, url.Values{"pagekey": {key}, "key": {keyA}}); code != http.StatusSeeOther {
		t.Errorf("POST /restore with the page key: %d", code)
	}
	if bk := mustDo(d.client.Book(ctx, keyA))(t); bk.Deleted {
		t.Error("the page key did not bring the book back")
	}
}
