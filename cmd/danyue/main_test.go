package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/internal/startproc"
)

// danyueBin is the binary built once for the tests that run the real command.
var danyueBin string

func TestMain(m *testing.M) {
	// Where the tests run with no Go toolchain (another OS's binaries
	// under an emulator: .ci/wine, .ci/android), the runner builds the
	// command for that OS beforehand and names it here.
	if bin := os.Getenv("DANYUE_TEST_BINARY"); bin != "" {
		danyueBin = bin
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "danyue-cmd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	danyueBin = filepath.Join(dir, "danyue")
	if runtime.GOOS == "windows" {
		danyueBin += ".exe"
	}
	// Built as the README installs it, without cgo.
	build := exec.Command("go", "build", "-o", danyueBin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build danyue:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cliResult is what one run of the built binary printed.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runInProcess runs a command line through run, in this process, for what
// the command prints before it reaches a daemon or a disk (help, usage
// errors): the same code as the binary's, without a process to start,
// which under an emulator costs a second or more.
func runInProcess(t *testing.T, args ...string) cliResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := run(ctx, e, args)
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// runCLI runs the built binary with args and the given extra environment.
func runCLI(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	return runCLIWith(t, env, "", args...)
}

// runCLIWith runs the built binary with args, extra environment and stdin.
func runCLIWith(t *testing.T, env []string, stdin string, args ...string) cliResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd, err := startproc.Start(func() *exec.Cmd {
		cmd := exec.CommandContext(context.Background(), danyueBin, args...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdin = strings.NewReader(stdin)
		stdout.Reset()
		stderr.Reset()
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		return cmd
	})
	if err == nil {
		err = cmd.Wait()
	}
	code := 0
	if exitErr, ok := err.(*exec.ExitError); ok {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatalf("run danyue %s: %v", strings.Join(args, " "), err)
	}
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

func TestUnknownCommandIsUsageError(t *testing.T) {
	res := runCLI(t, nil, "frobnicate")
	if res.code != 2 {
		t.Fatalf("exit status = %d, want 2", res.code)
	}
	if !strings.Contains(res.stderr, `unknown command "frobnicate"`) || !strings.Contains(res.stderr, "Try: danyue help") {
		t.Fatalf("stderr = %q, want the unknown command and a hint", res.stderr)
	}
}

func TestParseArgsIntersperses(t *testing.T) {
	tests := []struct {
		args     []string
		wantPos  []string
		wantJSON bool
	}{
		{[]string{"a", "--json", "b"}, []string{"a", "b"}, true},
		{[]string{"--json", "a"}, []string{"a"}, true},
		{[]string{"a", "--", "--json"}, []string{"a", "--json"}, false},
		{nil, nil, false},
	}
	for _, tt := range tests {
		e := &env{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, getenv: func(string) string { return "" }}
		fs := newFlagSet(e, command{name: "x"}, "")
		asJSON := fs.Bool("json", false, "")
		pos, err := parseArgs(fs, tt.args)
		if err != nil {
			t.Fatalf("parseArgs(%q): %v", tt.args, err)
		}
		if strings.Join(pos, "|") != strings.Join(tt.wantPos, "|") || *asJSON != tt.wantJSON {
			t.Errorf("parseArgs(%q) = %q json=%v, want %q json=%v", tt.args, pos, *asJSON, tt.wantPos, tt.wantJSON)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, arg := range []string{"--version", "version"} {
		res := runCLI(t, nil, arg)
		if res.code != 0 || !strings.HasPrefix(res.stdout, "danyue ") || !strings.Contains(res.stdout, runtime.Version()) || strings.Count(res.stdout, "\n") != 1 {
			t.Errorf("danyue %s: exit %d, stdout %q; want one line with the build and %s", arg, res.code, res.stdout, runtime.Version())
		}
	}
}

// Issue 49: --version reports the module version and what version control
// stamped, and says how to get them when the build has neither.
func TestVersionOf(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var out []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			out = append(out, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "danyue (devel: this build carries no version or commit; "},
		{"devel, no vcs", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "danyue (devel: "},
		{"tag", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}}, "danyue v0.4.0"},
		{"checkout", &debug.BuildInfo{
			Main:     debug.Module{Version: "v0.4.1-0.20261205230000-0123456789ab+dirty"},
			Settings: vcs("vcs.revision", "0123456789abcdef0123", "vcs.time", "2026-12-05T23:00:00Z", "vcs.modified", "true"),
		}, "danyue v0.4.1-0.20261205230000-0123456789ab+dirty (commit 0123456789ab, 2026-12-05T23:00:00Z, with uncommitted changes)"},
		{"devel with vcs", &debug.BuildInfo{
			Main:     debug.Module{Version: "(devel)"},
			Settings: vcs("vcs.revision", "0123456789abcdef0123", "vcs.modified", "false"),
		}, "danyue (devel) (commit 0123456789ab)"},
	}
	for _, tc := range tests {
		got := versionOf(tc.bi)
		exact := !strings.HasPrefix(tc.want, "danyue (devel: ")
		if exact && got != tc.want || !exact && !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// Issue 49: backquotes in a flag's usage name its placeholder (the flag
// package's rule), so a quoted command there showed as "-pair-listen
// danyue invite". Every placeholder is one word.
func TestFlagPlaceholdersAreOneWord(t *testing.T) {
	for _, c := range commands() {
		res := runInProcess(t, c.name, "--help")
		for line := range strings.Lines(res.stdout) {
			if !strings.HasPrefix(line, "  -") {
				continue
			}
			if f := strings.Fields(line); len(f) > 2 {
				t.Errorf("danyue %s --help: %q has a placeholder of %d words", c.name, strings.TrimSpace(line), len(f)-1)
			}
		}
	}
}
