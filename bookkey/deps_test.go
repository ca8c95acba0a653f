package bookkey

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports keeps bookkey a leaf: no project package but keyalgo, no network,
// nothing outside the standard library but golang.org/x/text; and one package doc.
func TestImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	docs := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if f.Doc != nil {
			docs++
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			switch {
			case strings.HasPrefix(path, "golang.org/x/text/"), path == "github.com/danyue/danyue/internal/keyalgo":
			case strings.Contains(first, "."):
				t.Errorf("%s imports %s: only the standard library and golang.org/x/text", name, path)
			case first == "net" || path == "os/exec" || path == "log" || path == "log/slog":
				t.Errorf("%s imports %s: bookkey does no network, processes or logging", name, path)
			}
		}
	}
	if docs != 1 {
		t.Errorf("%d files have a package doc, want 1 (doc.go)", docs)
	}
}
