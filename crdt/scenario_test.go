package crdt_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
)

// Scenarios from the seeds, as data (docs/style.md, Tests): testdata/scenarios/*.txt
// are scripts of commands, each followed by "----" and the output it must
// print. -update rewrites the outputs; commit only diffs you understand.
//
//	device NAME OFFSET   a device whose wall clock is OFFSET (a Go duration) off true time
//	at DURATION          true time is now t0 + DURATION
//	pos DEV CHAR         DEV sets the position of the book
//	read DEV DURATION    DEV adds read time
//	delete DEV           DEV deletes the book
//	title DEV TEXT       DEV sets the title
//	sync FROM TO         TO merges FROM's record, after its clock observed it
//	show                 every device's view of the book
//
// Timestamps print as +WALL.LOGICAL@DEVICE, WALL relative to t0.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/scenarios/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { runScenario(t, file) })
	}
}

type scenarioDevice struct {
	name   string
	clock  *crdt.Clock
	offset time.Duration
	book   crdt.Book
}

type scenario struct {
	now     uint64
	devices []*scenarioDevice
}

func runScenario(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := &scenario{now: t0}
	var out strings.Builder
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			out.WriteString(line + "\n")
			continue
		}
		if !sc.Scan() || sc.Text() != "----" {
			t.Fatalf("%s: %q is not followed by ----", file, line)
		}
		var want strings.Builder
		for sc.Scan() && sc.Text() != "" {
			want.WriteString(sc.Text() + "\n")
		}
		got, err := s.run(line)
		if err != nil {
			t.Fatalf("%s: %s: %v", file, line, err)
		}
		if !*update && got != want.String() {
			t.Errorf("%s: %s\n got:\n%s want:\n%s", file, line, got, want.String())
		}
		fmt.Fprintf(&out, "%s\n----\n%s\n", line, got)
	}
	if *update {
		if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func (s *scenario) run(line string) (string, error) {
	args := strings.Fields(line)
	switch args[0] {
	case "device":
		off, err := time.ParseDuration(args[2])
		if err != nil {
			return "", err
		}
		id := crdt.DeviceID(len(s.devices) + 1)
		s.devices = append(s.devices, &scenarioDevice{name: args[1], clock: crdt.NewClock(id, crdt.Timestamp{}), offset: off, book: crdt.Book{Key: keyMD5}})
		return "", nil
	case "at":
		d, err := time.ParseDuration(args[1])
		s.now = t0 + uint64(d.Milliseconds())
		return "", err
	case "show":
		var b strings.Builder
		for _, d := range s.devices {
			b.WriteString(s.describe(d))
		}
		return b.String(), nil
	case "sync":
		from, err := s.device(args, 1)
		if err != nil {
			return "", err
		}
		to, err := s.device(args, 2)
		if err != nil {
			return "", err
		}
		return s.sync(from, to), nil
	}
	d, err := s.device(args, 1)
	if err != nil {
		return "", err
	}
	return s.write(d, args)
}

// device returns the device named by args[i].
func (s *scenario) device(args []string, i int) (*scenarioDevice, error) {
	for _, d := range s.devices {
		if i < len(args) && d.name == args[i] {
			return d, nil
		}
	}
	return nil, fmt.Errorf("no device in %q", strings.Join(args, " "))
}

// sync merges from's book into to's, as a sync would deliver it.
func (s *scenario) sync(from, to *scenarioDevice) string {
	e := crdt.BookEntry(from.book.Clone())
	ahead := to.clock.Observe(e.MaxTimestamp(), s.wall(to))
	msg := fmt.Sprintf("%s unchanged", to.name)
	if to.book.Merge(&e.Book) {
		msg = fmt.Sprintf("%s changed", to.name)
	}
	if ahead > 0 {
		msg += fmt.Sprintf("; %s's record is %v ahead of its clock", from.name, time.Duration(ahead)*time.Millisecond)
	}
	return msg + "\n"
}

// write runs the local operation args on d.
func (s *scenario) write(d *scenarioDevice, args []string) (string, error) {
	// A local write orders after everything in the record it writes, even
	// the stamps the clock did not follow (doc "Time").
	at := func() crdt.Timestamp {
		local := crdt.BookEntry(d.book)
		return d.clock.NowAfter(s.wall(d), local.MaxTimestamp())
	}
	var e crdt.Entry
	var err error
	switch args[0] {
	case "pos":
		char, perr := strconv.ParseUint(args[2], 10, 64)
		if perr != nil {
			return "", perr
		}
		e, err = crdt.SetPosition(keyMD5, at(), char, 0)
	case "read":
		dur, perr := time.ParseDuration(args[2])
		if perr != nil {
			return "", perr
		}
		e, err = crdt.AddReadTime(keyMD5, &d.book, d.clock.Device(), uint64(dur.Milliseconds()))
	case "delete":
		e, err = crdt.Delete(keyMD5, at())
	case "title":
		e, err = crdt.SetTitle(keyMD5, at(), strings.Join(args[2:], " "))
	default:
		return "", fmt.Errorf("unknown command")
	}
	if err != nil {
		return "", err
	}
	d.book.Merge(&e.Book)
	return fmt.Sprintf("%s wrote %s\n", d.name, s.describeDelta(e.Book)), nil
}

func (s *scenario) wall(d *scenarioDevice) uint64 {
	return uint64(int64(s.now) + d.offset.Milliseconds())
}

func (s *scenario) stamp(ts crdt.Timestamp) string {
	name := "?"
	if i := int(ts.Device) - 1; i >= 0 && i < len(s.devices) {
		name = s.devices[i].name
	}
	rel := time.Duration(int64(ts.Wall)-int64(t0)) * time.Millisecond
	sign := "+"
	if rel < 0 {
		sign, rel = "-", -rel
	}
	return fmt.Sprintf("%s%v.%d@%s", sign, rel, ts.Logical, name)
}

func (s *scenario) describeDelta(b crdt.Book) string {
	switch {
	case !b.Position.At.IsZero():
		return fmt.Sprintf("position %d at %s", b.Position.Char, s.stamp(b.Position.At))
	case !b.Deleted.IsZero():
		return "delete at " + s.stamp(b.Deleted)
	case !b.Title.At.IsZero():
		return fmt.Sprintf("title %q at %s", b.Title.Value, s.stamp(b.Title.At))
	}
	return "own read time slot " + s.readTime(b.ReadTime)
}

func (s *scenario) readTime(r crdt.ReadTime) string {
	var parts []string
	for _, d := range s.devices {
		if ms := r.Of(d.clock.Device()); ms > 0 {
			parts = append(parts, fmt.Sprintf("%s=%v", d.name, time.Duration(ms)*time.Millisecond))
		}
	}
	return strings.Join(parts, " ")
}

func (s *scenario) describe(d *scenarioDevice) string {
	b := &d.book
	state := "visible"
	if !b.Visible() {
		state = "deleted at " + s.stamp(b.Deleted)
	}
	var pos string
	if !b.Position.At.IsZero() {
		pos = fmt.Sprintf(", position %d by %s, furthest %d", b.Position.Char, s.stamp(b.Position.At), b.Furthest.Char)
	}
	if b.Title.Value != "" {
		pos += fmt.Sprintf(", title %q", b.Title.Value)
	}
	return fmt.Sprintf("%s: %s%s, read %v (%s)\n", d.name, state, pos, time.Duration(b.ReadTime.Total())*time.Millisecond, s.readTime(b.ReadTime))
}
