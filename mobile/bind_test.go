package mobile

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestBind proves the package is bindable: gobind (the tool dependency in
// go.mod) generates the Java and Objective-C bindings with nothing skipped
// as unsupported, every exported name of the package is in them, and the
// generated Java compiles with javac together with a small app that uses
// the API. The Objective-C can only be generated here: compiling it needs
// Apple's SDK.
func TestBind(t *testing.T) {
	if testing.Short() {
		t.Skip("gobind builds for about a minute; skipped with -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to run gobind with")
	}
	out := t.TempDir()
	cmd := exec.Command(goTool, "tool", "gobind", "-lang=java,objc", "-outdir", out, "github.com/danyue/danyue/mobile")
	msg, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gobind: %v\n%s", err, msg)
	}
	if strings.Contains(strings.ToLower(string(msg)), "unsupported") {
		t.Fatalf("gobind reported unsupported declarations:\n%s", msg)
	}
	javaDir := filepath.Join(out, "java")
	objcHeader := readFile(t, filepath.Join(out, "src", "gobind", "Mobile.objc.h"))
	var java strings.Builder
	for _, f := range must(filepath.Glob(filepath.Join(javaDir, "mobile", "*.java")))(t) {
		java.WriteString(readFile(t, f))
	}
	// gobind drops what it cannot bind with a comment, not an error.
	for name, text := range map[string]string{"Java": java.String(), "Objective-C": objcHeader} {
		for line := range strings.Lines(text) {
			if strings.Contains(strings.ToLower(line), "skipped") {
				t.Errorf("the %s binding: %s", name, strings.TrimSpace(line))
			}
		}
	}

	funcs, methods, fields := exported(t)
	for _, f := range funcs {
		if !declared(java.String(), `public static native [\w.]+ `+f+`\(`) {
			t.Errorf("Java: no static method for func %s", f)
		}
		if !strings.Contains(objcHeader, "Mobile"+f+"(") {
			t.Errorf("Objective-C: no function Mobile%s", f)
		}
	}
	for _, m := range methods {
		typ, name, _ := strings.Cut(m, ".")
		if !declared(readFile(t, filepath.Join(javaDir, "mobile", typ+".java")), `public (native )?[\w.]+ `+name+`\(`) {
			t.Errorf("Java: no method %s", m)
		}
	}
	for _, f := range fields {
		typ, name, _ := strings.Cut(f, ".")
		if !declared(readFile(t, filepath.Join(javaDir, "mobile", typ+".java")), `native [\w.]+ get`+name+`\(`) {
			t.Errorf("Java: no getter for field %s", f)
		}
	}
	t.Logf("gobind: %d functions, %d methods, %d fields bound for Java and Objective-C", len(funcs), len(methods), len(fields))

	javac, err := exec.LookPath("javac")
	if err != nil {
		t.Skip("javac not found: install Debian's default-jdk-headless to compile the generated Java (CI does)")
	}
	// gobind's go.Seq takes an android.content.Context, which only the
	// Android SDK has; a stub stands in for it, and the app below is what
	// a reader app would write against the binding.
	srcs := []string{
		writeFile(t, filepath.Join(out, "stub", "android", "content", "Context.java"), "package android.content;\npublic class Context {}\n"),
		writeFile(t, filepath.Join(out, "app", "ReaderApp.java"), readerApp),
	}
	srcs = append(srcs, must(filepath.Glob(filepath.Join(javaDir, "go", "*.java")))(t)...)
	srcs = append(srcs, must(filepath.Glob(filepath.Join(javaDir, "mobile", "*.java")))(t)...)
	classes := filepath.Join(out, "classes")
	cmd = exec.Command(javac, append([]string{"-Xlint:none", "-d", classes}, srcs...)...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, msg)
	}
	for _, class := range []string{"mobile/Mobile.class", "mobile/Node.class", "mobile/EventHandler.class", "app/ReaderApp.class"} {
		if _, err := os.Stat(filepath.Join(classes, class)); err != nil {
			t.Errorf("javac made no %s: %v", class, err)
		}
	}
	t.Logf("javac compiled %d generated and app sources", len(srcs))
}

// readerApp uses every part of the binding as an Android app would.
const readerApp = `package app;

import mobile.*;

public class ReaderApp implements EventHandler, LogSink {
	@Override public void onEvent(String kind, String json) {}
	@Override public void log(long level, String line) {}

	// The inviting device: a short code to show, followed to its end.
	public String invite(Node node) throws Exception {
		Pairing p = node.openPairing();
		String shown = p.getCode() + p.getExpires() + p.getAddresses();
		p = node.waitPairing(p.getID(), 300000L);
		if (!p.ended()) {
			p = node.cancelPairing(p.getID());
		}
		p = node.pairing(p.getID());
		return shown + p.getState() + p.getDeviceName() + p.getDevice() + p.getDetail();
	}

	// The joining device: the code the user typed; cancelJoin from another
	// thread ends the wait.
	public String join(Node node, String code, String pairAddr) {
		try {
			return node.joinAt(code, pairAddr);
		} catch (Exception e) {
			return Mobile.errorCode(e) + e.getMessage();
		}
	}

	public String run(String dir) throws Exception {
		Config cfg = Mobile.newConfig(dir);
		cfg.setName("Pixel");
		cfg.setNoMDNS(false);
		cfg.setHTTP("127.0.0.1:0");
		cfg.setPairListen("");
		cfg.setLogLevel("warn");
		cfg.setLogSink(this);
		cfg.setMemoryLimit(32L << 20);
		Node node = Mobile.start(cfg);
		try {
			node.setEventHandler(this);
			Book b = node.setPosition("md5:900150983cd24fb0d6963f7d28e17f72", 1234L, 0.25, "Title");
			long at = b.getChar() + b.getFurthestChar() + b.getTotalMs() + b.getThisDeviceMs();
			b = node.addReadTime(b.getKey(), 60000L, "session-1");
			BookList shelf = node.shelf(false);
			for (long i = 0; i < shelf.len(); i++) {
				at += shelf.get(i).getChar();
			}
			node.delete(b.getKey());
			node.book(b.getKey());
			String lib = node.join(node.invite()) + invite(node) + join(node, "7-crossover-clockwork", "");
			node.cancelJoin();
			SyncReport r = node.syncOnce(30000L);
			for (long i = 0; i < r.getPeersKnown(); i++) {
				SyncPeerReport p = r.peerAt(i);
				at += p.getReceived() + p.getSent();
			}
			return node.device() + lib + r.getSummary() + node.apiAddress() + node.apiToken() + at
				+ r.getCaughtUp() + r.getElapsedMs() + b.getDeleted() + b.getPositionAt();
		} finally {
			node.stop();
		}
	}
}
`

// exported lists the package's exported functions, methods of exported
// types, and fields of exported structs, from its non-test sources.
func exported(t *testing.T) (funcs, methods, fields []string) {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					funcs = append(funcs, d.Name.Name)
					continue
				}
				recv := d.Recv.List[0].Type
				if star, ok := recv.(*ast.StarExpr); ok {
					recv = star.X
				}
				if id := recv.(*ast.Ident); id.IsExported() {
					methods = append(methods, id.Name+"."+d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					ts, ok := spec.(*ast.TypeSpec)
					if !ok || !ts.Name.IsExported() {
						continue
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						continue
					}
					for _, fl := range st.Fields.List {
						for _, name := range fl.Names {
							if name.IsExported() {
								fields = append(fields, ts.Name.Name+"."+name.Name)
							}
						}
					}
				}
			}
		}
	}
	if len(funcs) == 0 || len(methods) == 0 || len(fields) == 0 {
		t.Fatalf("found %d funcs, %d methods, %d fields: the parse went wrong", len(funcs), len(methods), len(fields))
	}
	return funcs, methods, fields
}

// declared reports whether text has a declaration matching pattern, whose
// Go name is matched case-insensitively (gobind lowers the first letters).
func declared(text, pattern string) bool {
	return regexp.MustCompile(`(?i)` + pattern).MatchString(text)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
