package web

import (
	"bytes"
	"cmp"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/internal/qrterm"
)

var pageTmpl = template.Must(template.New("").ParseFS(assets, "assets/*.html"))

// Shelf and history sizes: a page, not an archive.
const (
	chartDays  = 30
	maxShelf   = 500
	maxDeleted = 20
)

// view is what the template renders.
type view struct {
	Device  api.Device
	Library string
	Counts  api.Counts
	Peers   []peerRow
	Q       string
	Shelf   []bookRow
	// Hidden counts the books the search or the size cap left out.
	Hidden  int
	Deleted []bookRow
	// Koreader is KOReader's progress in documents that are not a book
	// on the shelf: not linked yet (danyue key links them), or deleted.
	Koreader []koRow
	Chart    chart
	Invite   *invite
	Clock    []api.ClockWarning
	// Pairing names the addresses that spent this device's short codes
	// with failed tries lately: possibly someone trying to pair.
	Pairing []api.PairingWarning
}

type peerRow struct {
	Name, Device string
	Connected    bool
	// Relayed: reached only through a member's relay (peer/away.go).
	Relayed bool
	// Reach says how a connected peer is reached (reachText).
	Reach        string
	InSync       bool
	Behind       uint64 // changes of that device still to merge here
	LastSeen     when
	Clock        string
	ClockWarning string
	// Never: a member this device has no record of having met.
	Never bool
	// Pulling says how a long sync from it goes (pullingText); empty
	// when none runs.
	Pulling string
}

type bookRow struct {
	Key, Title string
	Position   *place
	Furthest   *place
	Read, Here string
	DeletedBy  string
	DeletedAt  when
	// KeptUntil is when the undo window of a deleted book ends (Abs empty
	// when the daemon keeps none): until then it can be brought back.
	KeptUntil when
	// Koreader is KOReader's progress in this book, from linked documents.
	Koreader []koRow
}

// koRow is one KOReader account's place in one document.
type koRow struct {
	Title, Document string
	Percent         float64
	User, Device    string
	At              when
}

type place struct {
	Percent float64 // 0 to 100
	Char    uint64
	Device  string
	At      when
}

// when is a time as the page shows it: relative, with the exact local time
// in a tooltip.
type when struct{ Rel, Abs string }

type invite struct {
	Code string
	QR   template.HTML
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, name, inviteCode string) error {
	ctx := r.Context()
	st, err := s.b.Status(ctx)
	if err != nil {
		return err
	}
	ko, err := s.b.Kosync(ctx)
	if err != nil {
		return err
	}
	c := newShelfCollector(r.URL.Query().Get("q"), ko)
	if err := s.b.Books(ctx, c.add); err != nil {
		return err
	}
	daily, err := s.b.Daily(ctx, chartDays)
	if err != nil {
		return err
	}
	now := s.now()
	v := view{
		Device:  st.Device,
		Library: st.Library.ID,
		Counts:  st.Counts,
		Q:       strings.TrimSpace(r.URL.Query().Get("q")),
		Chart:   makeChart(daily),
		Clock:   st.ClockWarnings,
		Pairing: st.PairingWarnings,
	}
	members, err := s.b.Devices(ctx)
	if err != nil {
		return err
	}
	v.Peers = peerRows(st.Peers, members, now)
	v.Shelf, v.Deleted, v.Hidden = c.rows(now)
	v.Koreader = koreader(v.Shelf, v.Deleted, c.linkedOnShelf, ko, v.Q, now)
	if inviteCode != "" {
		qr, err := qrSVG(inviteCode)
		if err != nil {
			return err
		}
		v.Invite = &invite{Code: inviteCode, QR: qr}
	}
	// Rendered into a buffer: a template error must not leave half a page.
	var buf bytes.Buffer
	if err := pageTmpl.ExecuteTemplate(&buf, name, v); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, err = buf.WriteTo(w)
	return err
}

// shelfCollector keeps, of the books streamed to it, what the page shows:
// the maxShelf most recently read books that match the search, the
// maxDeleted most recently deleted ones, how many matching books it left
// out, and whether each book a KOReader document is linked to is on the
// shelf. Its memory does not grow with the shelf.
type shelfCollector struct {
	q             string
	onShelf, gone []api.Book
	hidden        int
	linkedOnShelf map[string]bool // BookKey -> visible, for linked books
}

func newShelfCollector(q string, ko []api.KosyncProgress) *shelfCollector {
	c := &shelfCollector{q: strings.ToLower(strings.TrimSpace(q)), linkedOnShelf: map[string]bool{}}
	for _, p := range ko {
		if p.BookKey != "" {
			c.linkedOnShelf[p.BookKey] = false
		}
	}
	return c
}

func (c *shelfCollector) add(b api.Book) error {
	if _, ok := c.linkedOnShelf[b.Key]; ok {
		c.linkedOnShelf[b.Key] = !b.Deleted
	}
	switch {
	case b.Deleted:
		c.gone = append(c.gone, b)
		if len(c.gone) >= 2*maxDeleted {
			c.gone = mostRecentDeleted(c.gone)
		}
	case c.q == "" || strings.Contains(strings.ToLower(b.Title), c.q) || strings.Contains(b.Key, c.q):
		c.onShelf = append(c.onShelf, b)
		if len(c.onShelf) >= 2*maxShelf {
			c.onShelf = c.mostRecent(c.onShelf)
		}
	default:
		c.hidden++
	}
	return nil
}

// mostRecent sorts books most recently read first and keeps maxShelf,
// counting the others as hidden.
func (c *shelfCollector) mostRecent(books []api.Book) []api.Book {
	slices.SortStableFunc(books, func(a, b api.Book) int { return cmp.Compare(at(b.Position), at(a.Position)) })
	if len(books) > maxShelf {
		c.hidden += len(books) - maxShelf
		books = books[:maxShelf]
	}
	return books
}

func mostRecentDeleted(books []api.Book) []api.Book {
	slices.SortStableFunc(books, func(a, b api.Book) int { return cmp.Compare(deref(b.DeletedAt), deref(a.DeletedAt)) })
	return books[:min(len(books), maxDeleted)]
}

// rows returns the shelf and the deleted books as the page shows them, and
// how many matching books the shelf leaves out.
func (c *shelfCollector) rows(now time.Time) (shown, deleted []bookRow, hidden int) {
	for _, b := range c.mostRecent(c.onShelf) {
		shown = append(shown, row(b, now))
	}
	for _, b := range mostRecentDeleted(c.gone) {
		deleted = append(deleted, row(b, now))
	}
	return shown, deleted, c.hidden
}

// koreader puts each KOReader place under the shown book it is linked to,
// on the shelf or deleted, and returns those of the other documents (not
// linked, or linked to a book this device does not show) that match q. A
// place in a book the search hides is hidden with it.
func koreader(shown, deleted []bookRow, onShelf map[string]bool, ko []api.KosyncProgress, q string, now time.Time) (others []koRow) {
	byKey := make(map[string]*bookRow, len(shown)+len(deleted))
	for _, rows := range [][]bookRow{shown, deleted} {
		for i := range rows {
			byKey[rows[i].Key] = &rows[i]
		}
	}
	q = strings.ToLower(q)
	for _, p := range ko {
		r := koRow{
			Title: cmp.Or(p.Title, p.Document), Document: p.Document, Percent: p.Percentage * 100,
			User: p.User, Device: cmp.Or(p.Device, p.DeviceID), At: whenOf(&p.At, now),
		}
		switch b := byKey[p.BookKey]; {
		case p.BookKey != "" && b != nil:
			b.Koreader = append(b.Koreader, r)
		case p.BookKey != "" && onShelf[p.BookKey]:
			// on the shelf, hidden by the search
		case q == "" || strings.Contains(strings.ToLower(r.Title), q) || strings.Contains(r.Document, q):
			others = append(others, r)
		}
	}
	return others
}

func row(b api.Book, now time.Time) bookRow {
	r := bookRow{
		Key: b.Key, Title: cmp.Or(b.Title, b.Key),
		Position: placeOf(b.Position, now), Furthest: placeOf(b.Furthest, now),
		Read: duration(b.ReadTime.TotalMs), Here: duration(b.ReadTime.ThisDeviceMs),
	}
	if b.Deleted {
		r.DeletedBy = cmp.Or(deref(b.DeletedByName), deref(b.DeletedBy))
		r.DeletedAt = whenOf(b.DeletedAt, now)
		if b.KeptUntil != nil {
			r.KeptUntil = whenOf(b.KeptUntil, now)
		}
	}
	return r
}

func placeOf(p *api.Position, now time.Time) *place {
	if p == nil {
		return nil
	}
	return &place{Percent: p.Percent * 100, Char: p.Char, Device: cmp.Or(p.DeviceName, p.Device), At: whenOf(&p.At, now)}
}

func at(p *api.Position) string {
	if p == nil {
		return ""
	}
	return p.Stamp
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func whenOf(s *string, now time.Time) when {
	if s == nil || *s == "" {
		return when{Rel: "never"}
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		return when{Rel: *s}
	}
	return when{Rel: ago(now.Sub(t)), Abs: t.Local().Format("2006-01-02 15:04:05 MST")}
}

func ago(d time.Duration) string {
	switch {
	case d < -time.Minute:
		return "later than this device's clock"
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d/time.Hour))
	}
	return fmt.Sprintf("%d days ago", int(d/(24*time.Hour)))
}

// duration writes a reading time for a person: "2 h 05 min", "12 min", "40 s".
func duration(ms uint64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d == 0:
		return "0 min" // a bare 0 says nothing of what it counts
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d/time.Minute))
	}
	return fmt.Sprintf("%d h %02d min", int(d/time.Hour), int(d%time.Hour/time.Minute))
}

func offsetText(ms int64) string {
	d := (time.Duration(ms) * time.Millisecond).Round(time.Millisecond)
	switch {
	case d == 0:
		return "same"
	case d > 0:
		return d.String() + " ahead"
	}
	return (-d).String() + " behind"
}

// chart is the reading-per-day bar chart, drawn in a viewBox of
// len(Bars)*barStep by chartHeight units.
type chart struct {
	Bars          []bar
	Width, Height int
	Total, Max    string
	First, Last   string
	// Scale labels the height: the busiest day's time at the top, half of
	// it midway, zero at the bottom; empty when no day had any reading.
	Scale []string
}

type bar struct {
	X, Y, W, H int
	Label      string
}

const (
	barStep     = 10
	chartHeight = 100
)

func makeChart(d api.Daily) chart {
	c := chart{Width: len(d.Days) * barStep, Height: chartHeight, Total: duration(d.TotalMs)}
	var most uint64
	for _, day := range d.Days {
		most = max(most, day.Ms)
	}
	c.Max = duration(most)
	if most > 0 {
		c.Scale = []string{duration(most), duration(most / 2), duration(0)}
	}
	if len(d.Days) > 0 {
		c.First, c.Last = d.Days[0].Day, d.Days[len(d.Days)-1].Day
	}
	for i, day := range d.Days {
		h := 0
		if most > 0 {
			h = int(day.Ms * chartHeight / most)
			if day.Ms > 0 {
				h = max(h, 1) // a day with any reading shows
			}
		}
		c.Bars = append(c.Bars, bar{X: i*barStep + 1, Y: chartHeight - h, W: barStep - 2, H: h, Label: day.Day + ": " + duration(day.Ms)})
	}
	return c
}

// pullingText says how a sync from a peer goes, for people; "" for none.
func pullingText(s *api.SyncProgress) string {
	if s == nil {
		return ""
	}
	out := fmt.Sprintf("syncing: %d records to go, %d in", s.RecordsToGo, s.RecordsIn)
	if s.SecondsLeft == nil {
		return out
	}
	left := (time.Duration(*s.SecondsLeft) * time.Second).Round(time.Second)
	return out + fmt.Sprintf(" · %.0f records/s · about %v left", s.RecordsPerSecond, left)
}

// peerRows are the other devices: those the network knows of, then the
// members it has not met since it started (never connected, or not since
// a restart or a new library secret), which the member list knows of.
func peerRows(peers []api.Peer, members []api.Member, now time.Time) []peerRow {
	var rows []peerRow
	shown := make(map[string]bool, len(peers))
	for _, p := range peers {
		shown[p.Device] = true
		rows = append(rows, peerRow{
			Name: cmp.Or(p.Name, "(unnamed)"), Device: p.Device,
			Connected: p.Connected, Relayed: p.State == "relayed", Reach: reachText(p),
			InSync: p.InSync, Behind: p.Behind,
			LastSeen: whenOf(p.LastSeen, now), Clock: offsetText(p.ClockOffsetMs),
			ClockWarning: p.ClockWarning, Pulling: pullingText(p.Pulling),
		})
	}
	for _, m := range members {
		if m.Self || m.Removed || shown[m.ID] {
			continue
		}
		row := peerRow{Name: cmp.Or(m.Name, "(unnamed)"), Device: m.ID, LastSeen: whenOf(m.LastSeen, now), Clock: "not known", Never: m.LastSeen == nil}
		if m.ClockOffsetMs != nil {
			row.Clock = offsetText(*m.ClockOffsetMs)
		}
		rows = append(rows, row)
	}
	return rows
}

// reachText says how a connected peer is reached, for its card.
func reachText(p api.Peer) string {
	switch {
	case !p.Connected:
		return ""
	case p.Via == "lan":
		return "LAN"
	case p.HolePunched:
		return "internet, hole punched"
	}
	return p.Via
}

// qrSVG draws code as an inline SVG QR code: one path of unit squares. It
// is inline (not an image URL) so the page's CSP needs no data: source.
func qrSVG(code string) (template.HTML, error) {
	bits, err := qrterm.Matrix(code)
	if err != nil {
		return "", fmt.Errorf("QR code of the invite: %w", err)
	}
	var path strings.Builder
	for y, line := range bits {
		for x, dark := range line {
			if dark {
				fmt.Fprintf(&path, "M%d %dh1v1h-1z", x, y)
			}
		}
	}
	n := len(bits)
	// Only numbers and the fixed markup go in: nothing here needs escaping.
	return template.HTML(fmt.Sprintf(`<svg class="qr" viewBox="0 0 %d %d" role="img" aria-label="QR code of the invite"><rect width="%d" height="%d" fill="#fff"/><path d="%s" fill="#000"/></svg>`,
		n, n, n, n, path.String())), nil
}
