package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// danyueBin is the binary built once for the tests that run the real command.
var danyueBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "danyue-cmd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	danyueBin = filepath.Join(dir, "danyue")
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

// runCLI runs the built binary with args and the given extra environment.
func runCLI(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	return runCLIWith(t, env, "", args...)
}

// runCLIWith runs the built binary with args, extra environment and stdin.
func runCLIWith(t *testing.T, env []string, stdin string, args ...string) cliResult {
	t.Helper()
	cmd := exec.CommandContext(context.Background(), danyueBin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
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
