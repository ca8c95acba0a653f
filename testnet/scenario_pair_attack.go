package testnet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/danyue/danyue/daemon/api"
)

// PairAttack: short-code pairing with an attacker on the LAN, over real
// multicast. Five devices, each in a library of its own: the inviter, two
// joiners, and two attackers running pairattack (testnet/cmd/pairattack)
// in their namespaces, beside their daemons.
//
//  1. Burn, then join: the attacker spends the inviter's code with one
//     wrong guess as soon as it is announced. The inviter is told that
//     someone at the attacker's address tried a wrong code; the joiner,
//     typing the right code, is told the code was spent by a failed try
//     from that address, not that nobody offers it.
//  2. Repeated burns: the attacker spends the next code too; the inviter
//     reports two codes burned by its address, and its status lists it. On
//     the third code the attacker is refused without a guess, and the
//     joiner pairs, found by mDNS.
//  3. A fake inviter announces the channel of the inviter's next code and
//     answers as the inviter would; the second joiner pairs with the real
//     inviter all the same.
func PairAttack(t TB, p Params, r *Report) {
	nt := New(t, 5, NoJoin())
	inviter, joiner, attacker, faker, joiner2 := nt.Node(1), nt.Node(2), nt.Node(3), nt.Node(4), nt.Node(5)
	bin := toolBinary(t, "pairattack")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// 1. Burn, then join.
	first := inviter.pair(ctx)
	burned := attackOnce(t, ctx, attacker, bin, "burn", "-count", "1")
	if burned.Result != "wrong_code" {
		t.Fatalf("the attacker's guess at the first code: %+v, want a wrong code", burned)
	}
	got := inviter.pairingOutcome(ctx, first.ID)
	if got.State != api.PairingWrongCode || got.TriedBy != attacker.IP() || !strings.Contains(got.Detail, "someone at "+attacker.IP()+" tried a wrong code") {
		t.Fatalf("the inviter after the burn: %+v, want the attacker %s named", got, attacker.IP())
	}
	r.Note(t, "burn: the inviter was told: %s", got.Detail)
	res, err := joiner.CLI(ctx, "join", first.Code)
	if err != nil || res.Code == 0 || !strings.Contains(res.Stderr, "spent by a failed try from another device at "+attacker.IP()) {
		t.Fatalf("joiner: danyue join %s after the burn: %v, exit %d: %s%s", first.Code, err, res.Code, res.Stdout, res.Stderr)
	}
	r.Note(t, "burn: the joiner with the right code was told: %s", strings.TrimSpace(res.Stderr))

	// 2. Repeated burns: named as an attack, then refused.
	second := inviter.pair(ctx)
	if b := attackOnce(t, ctx, attacker, bin, "burn", "-count", "1"); b.Result != "wrong_code" {
		t.Fatalf("the attacker's guess at the second code: %+v", b)
	}
	got = inviter.pairingOutcome(ctx, second.ID)
	if want := "2 codes burned by " + attacker.IP(); got.Burns != 2 || !strings.Contains(got.Detail, want) {
		t.Fatalf("the inviter after the second burn: %+v, want %q", got, want)
	}
	r.Note(t, "repeated burns: the inviter was told: %s", got.Detail)
	if ws := inviter.Status().PairingWarnings; len(ws) != 1 || ws[0].Address != attacker.IP() || ws[0].RefusedUntil == "" {
		t.Fatalf("the inviter's status lists %+v, want the attacker refused", ws)
	}
	if res, err := inviter.CLI(ctx, "status"); err != nil || !strings.Contains(res.Stdout, "warning: pairing: 2 pairing codes burned by "+attacker.IP()) {
		t.Fatalf("inviter: danyue status does not name the attacker: %v: %s%s", err, res.Stdout, res.Stderr)
	}
	third := inviter.pair(ctx)
	if b := attackOnce(t, ctx, attacker, bin, "burn", "-count", "1"); b.Result != "refused" || b.Reason != "blocked" {
		t.Fatalf("the attacker's try at the third code: %+v, want refused as blocked", b)
	}
	start := time.Now()
	res, err = joiner.CLI(ctx, "join", third.Code)
	if err != nil || res.Code != 0 {
		t.Fatalf("joiner: danyue join %s with the attacker refused: %v, exit %d: %s%s", third.Code, err, res.Code, res.Stdout, res.Stderr)
	}
	r.Healed(t, "paired over mDNS with the burning attacker refused", time.Since(start), 0)
	if got := inviter.pairingOutcome(ctx, third.ID); got.State != api.PairingPaired || got.Device != joiner.Device() {
		t.Fatalf("the inviter's third code: %+v, want paired with the joiner", got)
	}

	// 3. A fake inviter on the channel of the next code.
	fourth := inviter.pair(ctx)
	fake := startAttack(t, ctx, faker, bin, "fake", "-follow", "-sessions", "1")
	if a := fake.next(t, 30*time.Second); a.Event != "announce" {
		t.Fatalf("the fake inviter: %+v, want its announcement", a)
	}
	start = time.Now()
	res, err = joiner2.CLI(ctx, "join", fourth.Code)
	if err != nil || res.Code != 0 {
		t.Fatalf("second joiner: danyue join %s with a fake inviter on its channel: %v, exit %d: %s%s", fourth.Code, err, res.Code, res.Stdout, res.Stderr)
	}
	r.Healed(t, "paired over mDNS with a fake inviter on the channel", time.Since(start), 0)
	if got := inviter.pairingOutcome(ctx, fourth.ID); got.State != api.PairingPaired || got.Device != joiner2.Device() {
		t.Fatalf("the inviter's fourth code: %+v, want paired with the second joiner", got)
	}
	fake.stop()
	tried := "the joiner reached the real inviter first"
	if s, ok := fake.last("session"); ok {
		if want := "warning: another device that answered on channel"; !strings.Contains(res.Stderr, want) || !strings.Contains(res.Stderr, faker.IP()) {
			t.Errorf("the second joiner tried the fake first and was not warned of it: %q", res.Stderr)
		}
		tried = fmt.Sprintf("the joiner tried the fake first (%s), then paired with the real inviter, and said: %s", s.Result, strings.TrimSpace(res.Stderr))
	}
	r.Note(t, "fake inviter: %s", tried)
	r.Moved(t, 5, nt.Traffic())
}

// attackLine is a line of pairattack's output.
type attackLine struct {
	Event, Result, Reason, From, Detail string
	Channel                             int
}

// attackOnce runs pairattack in node's namespace to the end and returns
// its last line.
func attackOnce(t TB, ctx context.Context, node *Node, bin string, args ...string) attackLine {
	t.Helper()
	a := startAttack(t, ctx, node, bin, args...)
	a.wait(t, time.Minute)
	l, ok := a.last("")
	if !ok {
		t.Fatalf("pairattack %s in %s printed nothing: %s", strings.Join(args, " "), node.Name(), a.stderr.String())
	}
	return l
}

// attack is a running pairattack.
type attack struct {
	cmd    *exec.Cmd
	lines  chan attackLine
	seen   []attackLine
	stderr bytes.Buffer
	done   chan struct{}
}

// startAttack starts pairattack in node's namespace; it is killed when
// the test ends, if it has not ended by then.
func startAttack(t TB, ctx context.Context, node *Node, bin string, args ...string) *attack {
	t.Helper()
	argv := append([]string{"netns", "exec", node.Namespace(), bin}, args...)
	a := &attack{cmd: exec.CommandContext(ctx, "ip", argv...), lines: make(chan attackLine, 16), done: make(chan struct{})}
	a.cmd.Stderr = &a.stderr
	out, err := a.cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("pairattack: %v", err)
	}
	if err := a.cmd.Start(); err != nil {
		t.Fatalf("pairattack in %s: %v", node.Name(), err)
	}
	t.Cleanup(a.stop)
	go func() {
		defer close(a.done)
		defer close(a.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var l attackLine
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				t.Logf("%s pairattack: %s", node.Name(), sc.Text())
				a.lines <- l
			}
		}
		a.cmd.Wait()
	}()
	return a
}

// next returns the next line, failing the test after timeout.
func (a *attack) next(t TB, timeout time.Duration) attackLine {
	t.Helper()
	select {
	case l, ok := <-a.lines:
		if !ok {
			t.Fatalf("pairattack ended: %s", a.stderr.String())
		}
		a.seen = append(a.seen, l)
		return l
	case <-time.After(timeout):
		t.Fatalf("pairattack printed nothing in %v", timeout)
	}
	return attackLine{}
}

// wait waits for the process to end, reading all its lines.
func (a *attack) wait(t TB, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-a.lines:
			if !ok {
				<-a.done
				return
			}
			a.seen = append(a.seen, l)
		case <-deadline:
			a.stop()
			t.Fatalf("pairattack did not end in %v: %s", timeout, a.stderr.String())
		}
	}
}

// stop kills the process if it still runs and reads what it printed.
func (a *attack) stop() {
	if a.cmd.Process != nil {
		a.cmd.Process.Kill()
	}
	for l := range a.lines {
		a.seen = append(a.seen, l)
	}
	<-a.done
}

// last returns the last line of event (any event if empty).
func (a *attack) last(event string) (attackLine, bool) {
	for i := len(a.seen) - 1; i >= 0; i-- {
		if event == "" || a.seen[i].Event == event {
			return a.seen[i], true
		}
	}
	return attackLine{}, false
}

// toolBinary builds the command testnet/cmd/NAME for a scenario.
func toolBinary(t TB, name string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("find the module dir (go list -m): %v", err)
	}
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-%s-", prefix, os.Getpid(), name))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", bin, "./testnet/cmd/"+name)
	cmd.Dir = strings.TrimSpace(string(out))
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./testnet/cmd/%s: %v\n%s", name, err, b)
	}
	return bin
}
