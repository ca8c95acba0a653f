package main

import (
	"bytes"
	"encoding/json"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestLayers enforces the layers of docs/design.md over the whole module:
// dependencies point downward only, and every package has exactly one
// package doc that says what it is for (docs/style.md).
func TestLayers(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the packages with")
	}
	out, err := exec.Command(goTool, "list", "-json", "github.com/danyue/danyue/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/danyue/danyue/"
	// allowed lists, for each package, the project packages its non-test
	// files may import; a package missing here is a new package that must
	// be placed in the layering. The library's domain (library) sits
	// between store and peer and the daemon, which reaches the network only
	// through it: it imports neither daemon nor cmd, and needs no HTTP.
	allowed := map[string][]string{
		"crdt":                     {"internal/keyalgo"},
		"bookkey":                  {"internal/keyalgo"},
		"store":                    {"crdt"},
		"peer":                     {"crdt", "internal/lan", "internal/portmap"},
		"daemon/api":               nil,
		"daemon/client":            {"daemon/api"},
		"daemon/kosync":            {"crdt", "internal/connlimit", "internal/jsoncheck"},
		"daemon/web":               {"daemon/api", "internal/qrterm"},
		"library":                  {"crdt", "store", "peer", "pair", "pair/rendezvous"},
		"daemon":                   {"crdt", "store", "library", "daemon/api", "daemon/kosync", "daemon/web", "internal/connlimit", "internal/jsoncheck", "internal/lan"},
		"cmd/danyue":               {"bookkey", "daemon", "daemon/api", "daemon/client", "daemon/kosync", "crdt", "internal/qrterm"},
		"testnet":                  {"daemon", "daemon/api", "daemon/client", "crdt", "pair", "internal/procstat", "internal/startproc", "internal/testport"},
		"mobile":                   {"daemon", "daemon/api", "daemon/client", "library"},
		"cmd/libdanyue":            {"mobile"},
		"testnet/cmd/testnet":      {"testnet"},
		"testnet/away":             nil,
		"testnet/crossos":          nil,
		"testnet/cmd/attack":       nil,
		"testnet/cmd/kosyncattack": nil,
		"testnet/cmd/punch":        nil,
		"testnet/cmd/pairattack":   {"pair", "pair/rendezvous"},
		"bench/cmd/measure":        {"bench/internal/flood", "bench/internal/gctrace", "internal/procstat", "bench/mixload", "daemon/api", "daemon/client"},
		"bench/internal/flood":     {"peer", "crdt", "daemon/client"},
		"bench/internal/gctrace":   nil,
		"bench/mixload":            {"daemon/client"},
		"internal/connlimit":       nil,
		"internal/testfs":          nil,
		"internal/testport":        nil,
		"internal/startproc":       nil,
		"internal/poll":            nil,
		"internal/leaks":           nil,
		"internal/logbuf":          nil,
		"internal/lan":             nil,
		"internal/portmap":         nil,
		"internal/netnstest":       nil,
		"internal/procstat":        nil,
		"internal/keyalgo":         nil,
		"pair":                     nil,
		"internal/qrterm":          nil,
		"internal/jsoncheck":       nil,
		"pair/rendezvous":          {"pair", "internal/connlimit", "internal/lan"},
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	seen := 0
	for dec.More() {
		var p struct {
			ImportPath string
			Dir        string
			GoFiles    []string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		seen++
		name := strings.TrimPrefix(p.ImportPath, mod)
		ok, known := allowed[name]
		if !known {
			t.Errorf("package %s is not placed in the layering (add it to this test, below what imports it)", name)
			continue
		}
		for _, imp := range p.Imports {
			dep, inProject := strings.CutPrefix(imp, mod)
			if inProject && !slices.Contains(ok, dep) {
				t.Errorf("%s imports %s: dependencies point downward only (docs/design.md, Layers)", name, dep)
			}
		}
		docs := 0
		for _, f := range p.GoFiles {
			file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(p.Dir, f), nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			if file.Doc != nil {
				docs++
			}
		}
		if docs != 1 {
			t.Errorf("package %s has %d package doc comments, want exactly one", name, docs)
		}
	}
	if seen < len(allowed) {
		t.Errorf("go list found %d packages, the layering names %d", seen, len(allowed))
	}
}

// TestCitedDocsExist keeps the code's citations inside the repository
// (docs/style.md, Comments): every document under docs/ that a Go file or
// another document names is there.
func TestCitedDocsExist(t *testing.T) {
	root := filepath.Join("..", "..")
	cite := regexp.MustCompile(`docs/[A-Za-z0-9_-]+\.md`)
	cited := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || (filepath.Ext(path) != ".go" && filepath.Ext(path) != ".md") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, doc := range cite.FindAllString(string(src), -1) {
			cited++
			if _, err := os.Stat(filepath.Join(root, doc)); err != nil {
				t.Errorf("%s cites %s, which the repository does not hold", path, doc)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cited == 0 {
		t.Fatal("found no citation of docs/ at all: the walk missed the module")
	}
}
