package crossos

import (
	"context"
	"fmt"
	"github.com/danyue/danyue/internal/testport"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/danyue/danyue/daemon"
	"github.com/danyue/danyue/daemon/client"
	"github.com/danyue/danyue/internal/poll"
)

// CmdEnv names the other OS's danyue command, with what runs it: a path,
// or words separated by spaces ("/usr/lib/wine/wine64 /tmp/danyue.exe").
const CmdEnv = "DANYUE_CROSSOS_CMD"

// wait bounds every wait of the scenario: the other daemon runs under an
// emulator, many times slower than natively, on a loaded machine.
const wait = 3 * time.Minute

// foreign is the other OS's daemon, run as a process.
type foreign struct {
	t    *testing.T
	argv []string
	data string
	http string // its API's loopback address
	// listen is its libp2p address, the same across restarts, as a
	// device's is on a LAN: with mDNS off, the Linux daemon redials the
	// address it knows.
	listen string
	cmd    *exec.Cmd
	done   chan error
	c      *client.Client
	// running says whether cmd was started and not yet waited for.
	running bool
	logMu   sync.Mutex
	ended   bool
}

func (f *foreign) Write(p []byte) (int, error) {
	f.logMu.Lock()
	defer f.logMu.Unlock()
	if !f.ended {
		for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
			f.t.Logf("foreign: %s", l)
		}
	}
	return len(p), nil
}

// run runs the other OS's command with args and returns its output.
func (f *foreign) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, f.argv[0], append(f.argv[1:], args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// start starts the daemon and waits until its HTTP API answers.
func (f *foreign) start() {
	t := f.t
	t.Helper()
	args := append(f.argv[1:], "daemon", "--data", f.data, "--name", "foreign", "--no-mdns",
		"--listen", f.listen, "--http", f.http, "--log-level", "info")
	f.cmd = exec.Command(f.argv[0], args...)
	f.cmd.Stdout, f.cmd.Stderr = f, f
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.running = true
	f.done = make(chan error, 1)
	go func(cmd *exec.Cmd, done chan<- error) { done <- cmd.Wait() }(f.cmd, f.done)
	poll.Until(t, "the other OS's daemon to answer", wait, func() bool {
		token, err := os.ReadFile(filepath.Join(f.data, "api-token"))
		if err != nil {
			return false
		}
		f.c = client.NewTransport(&bearer{addr: f.http, token: strings.TrimSpace(string(token))})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = f.c.Status(ctx)
		return err == nil
	})
}

// kill kills the daemon as a power cut would: no clean shutdown.
func (f *foreign) kill() {
	_ = f.cmd.Process.Kill()
	<-f.done
	f.running = false
}

// bearer sends requests to the API at addr with its token.
type bearer struct {
	addr, token string
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.URL.Scheme, r.URL.Host, r.Host = "http", b.addr, b.addr
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func freeAddr(t *testing.T) string {
	return fmt.Sprintf("127.0.0.1:%d", testport.Loopback(t))
}

// key is the BookKey of book i of the scenario.
func key(i int) string { return fmt.Sprintf("md5:%032x", 0xc0ffee00+i) }

// has says whether c has book k at char.
func has(c *client.Client, k string, char uint64) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := c.Book(ctx, k)
	return err == nil && b.Position != nil && b.Position.Char == char && !b.Deleted
}

// TestCrossOS: the other OS's daemon joins the Linux daemon's library on
// loopback; a write on each reaches the other; then the other one writes
// and is killed (no clean shutdown) right after its writes were
// acknowledged, the Linux one writes while it is down, and after a restart
// both have everything.
func TestCrossOS(t *testing.T) {
	argv := strings.Fields(os.Getenv(CmdEnv))
	if len(argv) == 0 {
		t.Skipf("%s is not set: .ci/wine and .ci/android set it to the other OS's danyue command", CmdEnv)
	}
	ctx := context.Background()
	dir := t.TempDir()
	linux, err := daemon.Start(ctx, daemon.Config{
		DataDir: filepath.Join(dir, "linux"), Name: "linux", NoMDNS: true, NoSocket: true,
		Listen: []string{"/ip4/127.0.0.1/tcp/0"},
		Logger: slog.New(slog.NewTextHandler(tlog{t}, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", "linux"),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer linux.Close()
	lc := client.NewTransport(linux.InProcess())

	f := &foreign{t: t, argv: argv, data: filepath.Join(dir, "foreign"), http: freeAddr(t)}
	_, port, _ := net.SplitHostPort(freeAddr(t))
	f.listen = "/ip4/127.0.0.1/tcp/" + port
	t.Cleanup(func() {
		if f.running {
			f.kill()
		}
		f.logMu.Lock()
		f.ended = true
		f.logMu.Unlock()
	})
	f.start()

	// Pair: the Linux daemon's long code, joined by the other OS's command.
	code, err := linux.Library().Invite()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	jctx, cancel := context.WithTimeout(ctx, wait)
	out, err := f.run(jctx, "join", code, "--data", f.data)
	cancel()
	if err != nil {
		t.Fatalf("join on the other OS: %v\n%s", err, out)
	}
	poll.Until(t, "the two daemons to be connected", wait, func() bool {
		peers, err := lc.Peers(ctx)
		return err == nil && len(peers) == 1 && peers[0].Connected
	})
	t.Logf("paired and connected in %v", time.Since(start).Round(time.Millisecond))

	// A write on each reaches the other.
	start = time.Now()
	if _, err := lc.SetPosition(ctx, key(0), 100, 0.1, "From Linux"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.SetPosition(ctx, key(1), 200, 0.2, "From the other OS"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "both writes on both daemons", wait, func() bool {
		return has(lc, key(0), 100) && has(lc, key(1), 200) && has(f.c, key(0), 100) && has(f.c, key(1), 200)
	})
	t.Logf("converged in %v", time.Since(start).Round(time.Millisecond))

	// Writes the other daemon acknowledged, then a kill.
	const n = 10
	for i := range n {
		if _, err := f.c.SetPosition(ctx, key(10+i), int64(1000+i), 0.5, ""); err != nil {
			t.Fatalf("write %d on the other OS: %v", i, err)
		}
	}
	f.kill()
	// The Linux daemon writes while the other is down.
	if _, err := lc.SetPosition(ctx, key(2), 300, 0.3, "While it was down"); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	f.start()
	poll.Until(t, "every acknowledged write on both daemons after the restart", wait, func() bool {
		for i := range n {
			if !has(f.c, key(10+i), uint64(1000+i)) || !has(lc, key(10+i), uint64(1000+i)) {
				return false
			}
		}
		return has(f.c, key(2), 300)
	})
	t.Logf("after the kill, restarted and converged in %v", time.Since(start).Round(time.Millisecond))
}

// tlog sends the Linux daemon's log lines to t.Log.
type tlog struct{ t *testing.T }

func (w tlog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
