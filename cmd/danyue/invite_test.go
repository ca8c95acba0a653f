package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/internal/startproc"
)

// TestCLIPairShortCode pairs two daemon processes as a person would:
// `danyue invite --short` waits with a code, `danyue join CODE --pair-addr`
// on the other device, and both say what happened; a wrong code fails on
// both sides.
func TestCLIPairShortCode(t *testing.T) {
	a := startDaemonProc(t, "desk", "--pair-listen", "127.0.0.1:0")
	b := startDaemonProc(t, "pocket")

	// A wrong code: the joiner is told, the inviter's code is spent.
	inv := startInvite(t, a)
	wrong := strings.Replace(inv.code, "-", " ", -1) // typed with spaces
	wrong = wrong[:strings.LastIndex(wrong, " ")] + " " + map[bool]string{true: "absurd", false: "aardvark"}[strings.HasSuffix(inv.code, "-aardvark")]
	res := runCLI(t, nil, append(append([]string{"join"}, strings.Fields(wrong)...), "--pair-addr", inv.addr, "--data", b.data)...)
	if res.code != 1 || !strings.Contains(res.stderr, "wrong code") {
		t.Fatalf("join with a wrong code: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	if code, out := inv.wait(t); code != 1 || !strings.Contains(out, "wrong code") {
		t.Fatalf("invite after a wrong code: exit %d, output %q", code, out)
	}

	// The right code, on a new invitation.
	inv = startInvite(t, a)
	res = b.cli(t, "join", inv.code, "--pair-addr", inv.addr)
	if res.code != 0 || !strings.Contains(res.stdout, "Joined library") {
		t.Fatalf("join: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	if code, out := inv.wait(t); code != 0 || !strings.Contains(out, "Paired: pocket joined the library.") {
		t.Fatalf("invite: exit %d, output %q", code, out)
	}
	// Scripts still get the long code, which still works.
	if res := a.cli(t, "invite", "--long"); res.code != 0 || !strings.HasPrefix(res.stdout, "danyue1-") {
		t.Fatalf("invite --long: exit %d, stdout %q", res.code, res.stdout)
	}
	// Ctrl-C on the inviter kills its code.
	inv = startInvite(t, a)
	if err := interrupt(inv.cmd); noConsole(err) {
		_ = inv.cmd.Process.Kill()
		t.Skipf("no console to send Ctrl-Break with (%v): a test binary under wine runs without one", err)
	} else if err != nil {
		t.Fatal(err)
	}
	if code, out := inv.wait(t); code != 1 || !strings.Contains(out, "interrupted: the code no longer works") {
		t.Fatalf("interrupted invite: exit %d, output %q", code, out)
	}
	res = b.cli(t, "join", inv.code, "--pair-addr", inv.addr)
	if res.code != 1 || !strings.Contains(res.stderr, "cannot reach the inviter") {
		t.Fatalf("join after Ctrl-C: exit %d, stderr %q", res.code, res.stderr)
	}
	if res := a.cli(t, "invite", "--short", "--long"); res.code != 2 {
		t.Fatalf("invite --short --long: exit %d, want a usage error", res.code)
	}
}

// With --pair-listen pinned to one port, a second `danyue invite` replaces
// the first on that port: the first says so, the second listens there.
func TestCLIInvitePinnedPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pinned := ln.Addr().String()
	ln.Close()
	a := startDaemonProc(t, "desk", "--pair-listen", pinned)
	first := startInvite(t, a)
	second := startInvite(t, a)
	if code, out := first.wait(t); code != 1 || !strings.Contains(out, "replaced by a newer one") {
		t.Fatalf("the first invite: exit %d, output %q", code, out)
	}
	if first.addr != pinned || second.addr != pinned {
		t.Fatalf("invites on %s and %s, want both on %s", first.addr, second.addr, pinned)
	}
	if err := interrupt(second.cmd); noConsole(err) {
		_ = second.cmd.Process.Kill()
		t.Skipf("no console to send Ctrl-Break with (%v): a test binary under wine runs without one", err)
	} else if err != nil {
		t.Fatal(err)
	}
	if code, out := second.wait(t); code != 1 || !strings.Contains(out, "interrupted") {
		t.Fatalf("the second invite: exit %d, output %q", code, out)
	}
}

type runningInvite struct {
	cmd        *exec.Cmd
	code, addr string
	out        *bytes.Buffer
	done       chan error
}

var pairAddrRE = regexp.MustCompile(`--pair-addr (\S+)`)

// startInvite runs `danyue invite --short` and returns once it has printed
// its code and address.
func startInvite(t *testing.T, p *daemonProc) *runningInvite {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	var (
		stdout io.ReadCloser
		stderr bytes.Buffer
		perr   error
	)
	cmd, err := startproc.Start(func() *exec.Cmd {
		cmd := exec.CommandContext(ctx, danyueBin, "invite", "--short", "--data", p.data)
		stdout, perr = cmd.StdoutPipe()
		stderr.Reset()
		cmd.Stderr = &stderr
		interruptible(cmd)
		return cmd
	})
	if err = errors.Join(perr, err); err != nil {
		t.Fatal(err)
	}
	ri := &runningInvite{cmd: cmd, out: &bytes.Buffer{}, done: make(chan error, 1)}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		ri.out.WriteString(line + "\n")
		if c, ok := strings.CutPrefix(line, "Pairing code: "); ok {
			ri.code = c
		}
		if m := pairAddrRE.FindStringSubmatch(line); m != nil {
			ri.addr = m[1]
		}
		if strings.HasPrefix(line, "Waiting") {
			break
		}
	}
	if ri.code == "" || ri.addr == "" {
		t.Fatalf("invite --short printed %q, stderr %q", ri.out, stderr.String())
	}
	go func() {
		for sc.Scan() {
			ri.out.WriteString(sc.Text() + "\n")
		}
		err := cmd.Wait()
		ri.out.WriteString(stderr.String())
		ri.done <- err
	}()
	return ri
}

// wait returns the invite's exit code and all it printed.
func (ri *runningInvite) wait(t *testing.T) (int, string) {
	t.Helper()
	err := <-ri.done
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, ri.out.String()
}
