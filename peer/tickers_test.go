package peer

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A go:linkname to a symbol that does not exist links anyway and quietly
// defines a new variable, so a libp2p upgrade that renamed or dropped the
// ticker interval would bring back its 5-second wakeups without a word.
// This reads the libp2p source this module builds with and fails unless
// the variable tickers.go patches is still a package-level variable of the
// basic host that still sets its address ticker.
func TestHostAddrsTickStillPatchesLibp2p(t *testing.T) {
	// The target as tickers.go names it.
	src, err := os.ReadFile("tickers.go")
	if err != nil {
		t.Fatal(err)
	}
	_, target, ok := strings.Cut(string(src), "//go:linkname hostAddrsTick ")
	if !ok {
		t.Fatal("tickers.go has no go:linkname for hostAddrsTick")
	}
	target, _, _ = strings.Cut(target, "\n")
	dot := strings.LastIndex(target, ".")
	pkg, name := target[:dot], target[dot+1:]
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to find the libp2p source with")
	}
	out, err := exec.Command(goTool, "list", "-f", "{{.Dir}}\n{{range .GoFiles}}{{.}}\n{{end}}", pkg).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	lines := strings.Fields(string(out))
	dir, files := lines[0], lines[1:]
	declared, ticks := false, false
	for _, f := range files {
		file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, f), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			if gd, ok := decl.(*ast.GenDecl); ok && gd.Tok == token.VAR {
				for _, spec := range gd.Specs {
					for _, id := range spec.(*ast.ValueSpec).Names {
						declared = declared || id.Name == name
					}
				}
			}
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 1 {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "NewTicker" {
				if arg, ok := call.Args[0].(*ast.Ident); ok && arg.Name == name {
					ticks = true
				}
			}
			return true
		})
	}
	if !declared || !ticks {
		t.Fatalf("%s.%s is gone or no longer sets the address ticker (declared %v, passed to time.NewTicker %v): "+
			"peer/tickers.go now patches nothing and the host wakes up every 5 s again; find the new knob", pkg, name, declared, ticks)
	}
	if hostAddrsTick.Minutes() != 1 {
		t.Fatalf("hostAddrsTick = %v, want a minute", hostAddrsTick)
	}
}
