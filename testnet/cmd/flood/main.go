// Command flood is a library member that offers a daemon N junk books as
// fast as the sync protocol takes them, and meanwhile measures what that
// costs the daemon: its RSS (from /proc, given its pid) and the latency of
// single-book GETs on its unix socket. It is how the bound on a flooding
// member's cost is measured; it asserts nothing.
//
//	danyue daemon --data /tmp/t --no-mdns --listen /ip4/127.0.0.1/tcp/0 &
//	go run ./testnet/cmd/flood -invite "$(danyue invite --data /tmp/t)" \
//	    -n 1000000 -socket /tmp/t/api.sock -pid $!
//
// The tool joins with the invite code (a fresh identity, so a new device of
// the library), serves its synthetic store to the daemon's pull, and
// generates each record when the protocol asks for it: it holds no more
// than one batch. Each line of output is one second: records sent,
// records the daemon has stored (its book count, less the count at start),
// its RSS, and the GETs' p50/p99/max over that second; the last lines sum up
// the whole flood, with the peak RSS and the GETs' p50/p99 over all of it,
// and how the machine's CPU time went meanwhile: the target's share, and
// what a hypervisor gave to other guests (steal). On a shared virtual
// machine the same build floods at 6,000 records a second in one hour and
// 15,000 in another, and the GETs' tail follows; the last line says
// whether a slow run was short of CPU.
//
// The GETs are timed by a child process (this command with -meter), so
// that the CPU this process spends making and encrypting records cannot
// delay the timing goroutine: the latencies are the target's, not this
// tool's scheduling. With -control it also times, after each book, a GET
// that reads nothing from the store (/v1/openapi.json): what the target's
// process as a whole adds (CPU, the collector, the kernel), apart from its
// reads.
package main

import (
	"bufio"
	"context"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/daemon/client"
	"github.com/danyue/danyue/internal/procstat"
	"github.com/danyue/danyue/peer"
)

func main() {
	invite := flag.String("invite", "", "invite code of the target's library (danyue invite)")
	n := flag.Uint64("n", 1_000_000, "records to offer")
	socket := flag.String("socket", "", "the target's API socket, to time single-book GETs on (optional)")
	pid := flag.Int("pid", 0, "the target's pid, to sample its RSS (optional, Linux)")
	every := flag.Duration("every", 10*time.Millisecond, "interval between GETs")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after this long")
	verbose := flag.Bool("v", false, "log the peer layer")
	control := flag.Bool("control", false, "also time a GET that reads nothing from the store (/v1/openapi.json) after each book: a second request every interval, which adds load of its own")
	meterMode := flag.Bool("meter", false, "internal: time GETs on -socket for a parent flood (books stored read from stdin, one latency a line on stdout)")
	flag.Parse()
	if *meterMode {
		if err := meterChild(*socket, *every, *control); err != nil {
			fmt.Fprintln(os.Stderr, "flood -meter:", err)
			os.Exit(1)
		}
		return
	}
	if *invite == "" || *n == 0 {
		fmt.Fprintln(os.Stderr, "flood: -invite is required and -n must be positive")
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := run(ctx, *invite, *n, *socket, *pid, *every, *control, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "flood:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, code string, n uint64, socket string, pid int, every time.Duration, control, verbose bool) error {
	inv, err := peer.DecodeInvite(code)
	if err != nil {
		return err
	}
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		return err
	}
	logger := slog.New(slog.DiscardHandler)
	if verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	src := newSource(n)
	var cl *client.Client
	baseline := 0
	if socket != "" {
		cl = client.New(socket)
		defer cl.Close()
		st, err := cl.Status(ctx)
		if err != nil {
			return fmt.Errorf("target status: %w", err)
		}
		baseline = st.Counts.Books
	}
	node, err := peer.New(ctx, peer.Config{Identity: key, Library: inv.Library, Name: "flood", Store: src, Logger: logger})
	if err != nil {
		return err
	}
	defer node.Close()
	src.self = node.Device()
	if err := node.Connect(ctx, inv.PeerAddrs()); err != nil {
		return err
	}
	fmt.Printf("flooding %s with %d records (device %s)\n", inv.Peer, n, node.Device())

	m := &meter{}
	if cl != nil {
		stopMeter, err := m.start(socket, every, control)
		if err != nil {
			return err
		}
		defer stopMeter()
	}

	start := time.Now()
	cpu := startCPU(pid)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var prevSent uint64
	var peak int64
	applied := uint64(0)
	for {
		select {
		case <-ctx.Done():
			fmt.Println("stopped before the target stored everything:", ctx.Err())
			return m.summary(start, node.Stats().RecordsSent, applied, peak, cpu)
		case <-tick.C:
		}
		sent := node.Stats().RecordsSent
		line := fmt.Sprintf("%4.0fs sent %8d (%6d/s)", time.Since(start).Seconds(), sent, sent-prevSent)
		prevSent = sent
		if cl != nil {
			if st, err := cl.Status(ctx); err == nil {
				applied = uint64(max(st.Counts.Books-baseline, 0))
				m.setApplied(applied)
				line += fmt.Sprintf("  stored %8d", applied)
			} else {
				line += "  status: " + err.Error()
			}
			w := m.window()
			line += fmt.Sprintf("  GET n=%d p50 %v p99 %v max %v errors %d", len(w.lat), w.pct(50), w.pct(99), w.max(), w.errs)
		}
		if pid > 0 {
			if s, err := procstat.Read(pid); err == nil {
				peak = max(peak, s.HWMKB)
				line += fmt.Sprintf("  RSS %.0f MB (peak %.0f MB)", float64(s.RSSKB)/1024, float64(s.HWMKB)/1024)
			}
		}
		fmt.Println(line)
		if applied >= n || (cl == nil && sent >= n) {
			return m.summary(start, sent, applied, peak, cpu)
		}
	}
}

// source is the flooding member's store: n records generated on demand,
// each a new book with a position and a title, stamped now.
type source struct {
	n     uint64
	epoch uint64
	self  crdt.DeviceID
}

func newSource(n uint64) *source { return &source{n: n, epoch: rand.Uint64() | 1} }

func (s *source) Epoch() uint64 { return s.epoch }

func (s *source) Since(ctx context.Context, after uint64, limit int, fn func(uint64, []byte) error) error {
	for seq := after + 1; seq <= s.n && seq <= after+uint64(limit); seq++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		data, err := s.record(seq)
		if err != nil {
			return err
		}
		if err := fn(seq, data); err != nil {
			return err
		}
	}
	return nil
}

func (s *source) record(seq uint64) ([]byte, error) {
	key, err := crdt.ParseBookKey(keyOf(seq))
	if err != nil {
		return nil, err
	}
	at := crdt.Timestamp{Wall: uint64(time.Now().UnixMilli()), Device: s.self}
	e, err := crdt.SetPosition(key, at, seq, 0.5)
	if err != nil {
		return nil, err
	}
	t, err := crdt.SetTitle(key, at, fmt.Sprintf("junk book %d", seq))
	if err != nil {
		return nil, err
	}
	e.Book.Merge(&t.Book)
	return e.Encode()
}

// keyOf is the book key of record seq: the MD5 of its number.
func keyOf(seq uint64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seq)
	sum := md5.Sum(b[:])
	return "md5:" + hex.EncodeToString(sum[:])
}

// Watch says everything is there at once and nothing ever changes.
func (s *source) Watch() (uint64, <-chan struct{}) { return s.n, nil }

func (s *source) Cursor(context.Context, crdt.DeviceID) (uint64, uint64, error) { return 0, 0, nil }

// SkipPast and the delivered mark have nothing to do: the source never
// goes back.
func (s *source) SkipPast(context.Context, uint64) error                        { return nil }
func (s *source) Delivered(crdt.DeviceID) uint64                                { return s.n }
func (s *source) MarkDelivered(context.Context, uint64, ...crdt.DeviceID) error { return nil }

// ApplyRemote drops what the target sends: the flood only takes.
func (s *source) ApplyRemote(context.Context, crdt.DeviceID, uint64, uint64, []crdt.Entry) error {
	return nil
}

// meter times GETs of books the target has stored.
type meter struct {
	child io.Writer // the -meter process's stdin
	mu    sync.Mutex
	cur   sample // since the last window
	all   sample
}

type sample struct {
	lat     []time.Duration
	errs    int
	control []time.Duration // -control
}

// setApplied tells the meter how many books the target has stored.
func (m *meter) setApplied(a uint64) {
	if m.child != nil {
		fmt.Fprintln(m.child, a)
	}
}

// start runs the GETs in a child process (this command with -meter) and
// collects what it times; stop ends it.
func (m *meter) start(socket string, every time.Duration, control bool) (stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-meter", "-socket", socket, "-every", every.String(), fmt.Sprintf("-control=%v", control))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the GET meter: %w", err)
	}
	m.child = in
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			us, ctl := int64(0), int64(-1)
			var failed int
			if _, err := fmt.Sscan(sc.Text(), &us, &failed, &ctl); err != nil {
				continue
			}
			m.add(time.Duration(us)*time.Microsecond, failed != 0, time.Duration(ctl)*time.Microsecond)
		}
	}()
	return func() {
		in.Close() // the child ends at EOF
		<-done
		cmd.Wait()
	}, nil
}

// add records a book GET, and a control GET if ctl is not negative.
func (m *meter) add(d time.Duration, failed bool, ctl time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range []*sample{&m.cur, &m.all} {
		s.lat = append(s.lat, d)
		if failed {
			s.errs++
		}
		if ctl >= 0 {
			s.control = append(s.control, ctl)
		}
	}
}

// meterChild is the -meter process: it requests one book every interval,
// a book the target has already stored (the parent writes how many to
// stdin), else (before the first is stored) one that does not exist, and
// writes each latency in microseconds, whether it failed, and the control
// GET's latency (-1 without control) to stdout.
func meterChild(socket string, every time.Duration, control bool) error {
	if socket == "" {
		return errors.New("-socket is required")
	}
	cl := client.New(socket)
	defer cl.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var applied atomic.Uint64
	go func() {
		defer cancel() // the parent closed stdin: done
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if n, err := strconv.ParseUint(sc.Text(), 10, 64); err == nil {
				applied.Store(n)
			}
		}
	}()
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		n := applied.Load()
		key := keyOf(1 + rand.Uint64N(max(n, 1)))
		start := time.Now()
		_, err := cl.Book(ctx, key)
		d := time.Since(start)
		if ctx.Err() != nil {
			return nil
		}
		var apiErr *client.APIError
		failed := err != nil && !(n == 0 && errors.As(err, &apiErr) && apiErr.Status == 404)
		f := 0
		if failed {
			f = 1
		}
		ctl := int64(-1)
		if control {
			start := time.Now()
			if err := cl.DoRaw(ctx, "GET", "/v1/openapi.json", nil, nil, io.Discard); err == nil {
				ctl = time.Since(start).Microseconds()
			}
		}
		fmt.Fprintf(w, "%d %d %d\n", d.Microseconds(), f, ctl)
		if err := w.Flush(); err != nil {
			return err
		}
	}
}

// window returns the GETs since the last call and starts a new window.
func (m *meter) window() sample {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := m.cur
	m.cur = sample{}
	return w
}

func (s sample) pct(p int) time.Duration { return pct(s.lat, p) }

func pct(lat []time.Duration, p int) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	l := slices.Clone(lat)
	slices.Sort(l)
	return l[min(len(l)-1, len(l)*p/100)].Round(10 * time.Microsecond)
}

func (s sample) max() time.Duration {
	if len(s.lat) == 0 {
		return 0
	}
	return slices.Max(s.lat).Round(10 * time.Microsecond)
}

func (m *meter) summary(start time.Time, sent, applied uint64, peakKB int64, cpu cpuAtStart) error {
	el := time.Since(start)
	m.mu.Lock()
	all := m.all
	m.mu.Unlock()
	fmt.Printf("sent %d records in %v (%.0f/s); target stored %d (%.0f/s)\n",
		sent, el.Round(time.Millisecond), float64(sent)/el.Seconds(), applied, float64(applied)/el.Seconds())
	if len(all.lat) > 0 {
		fmt.Printf("single-book GETs: n=%d p50 %v p99 %v max %v errors %d\n", len(all.lat), all.pct(50), all.pct(99), all.max(), all.errs)
	}
	if len(all.control) > 0 {
		fmt.Printf("control GETs (no store read): n=%d p50 %v p99 %v max %v\n", len(all.control), pct(all.control, 50), pct(all.control, 99), slices.Max(all.control).Round(10*time.Microsecond))
	}
	if peakKB > 0 {
		fmt.Printf("target peak RSS %.0f MB\n", float64(peakKB)/1024)
	}
	cpu.report(el)
	return nil
}

// cpuAtStart is the CPU time of the target and of the machine when the
// flood began: the records a second, and the GETs' tail, depend on how
// much CPU the machine gave, which on a shared virtual machine varies by
// the hour.
type cpuAtStart struct {
	pid     int
	target  time.Duration
	machine procstat.Machine
	ok      bool
}

func startCPU(pid int) cpuAtStart {
	c := cpuAtStart{pid: pid}
	m, err := procstat.ReadMachine()
	if err != nil {
		return c // not Linux: nothing to report
	}
	c.machine, c.ok = m, true
	if pid > 0 {
		if s, err := procstat.Read(pid); err == nil {
			c.target = s.CPU
		}
	}
	return c
}

// report prints what the target and the machine spent since the start.
func (c cpuAtStart) report(el time.Duration) {
	if !c.ok {
		return
	}
	m, err := procstat.ReadMachine()
	if err != nil {
		return
	}
	line := "machine CPU during the flood: " + m.Shares(c.machine)
	if c.pid > 0 {
		if s, err := procstat.Read(c.pid); err == nil {
			line += fmt.Sprintf("; the target used %.2f cores", (s.CPU-c.target).Seconds()/el.Seconds())
		}
	}
	fmt.Println(line)
}
