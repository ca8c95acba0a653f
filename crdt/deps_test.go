package crdt_test

import (
	"go/build"
	"os/exec"
	"strings"
	"testing"
)

// docs/design.md, Layers: crdt is the pure core. It imports no
// package of the project, and nothing that does I/O, networking, storage or
// reads the time; the daemon passes time in and persists what comes out.
func TestDependencyDirection(t *testing.T) {
	// Direct imports of the package's non-test files.
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	forbiddenDirect := []string{"os", "time", "net", "io/fs", "syscall", "math/rand", "math/rand/v2", "crypto/rand", "log", "log/slog", "unsafe", "runtime"}
	for _, imp := range pkg.Imports {
		for _, bad := range forbiddenDirect {
			if imp == bad || strings.HasPrefix(imp, bad+"/") {
				t.Errorf("crdt imports %s: no I/O, clock or randomness in the core (docs/style.md, The core)", imp)
			}
		}
	}

	// Everything linked in, transitively. (os and time come in through fmt
	// and the CBOR library; networking, storage and the project must not.)
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list dependencies with")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	self := strings.TrimSpace(string(mustOutput(t, goTool, "list", ".")))
	module := strings.TrimSuffix(self, "/crdt")
	for _, dep := range strings.Fields(string(out)) {
		switch {
		case dep == self, dep == module+"/internal/keyalgo":
		case strings.HasPrefix(dep, module+"/"):
			t.Errorf("crdt depends on %s: no project package (dependencies point downward only)", dep)
		case dep == "net" || strings.HasPrefix(dep, "net/"),
			strings.Contains(dep, "badger"),
			strings.Contains(dep, "libp2p"),
			dep == "os/exec", dep == "database/sql":
			t.Errorf("crdt depends on %s", dep)
		}
	}
}

func mustOutput(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return out
}
