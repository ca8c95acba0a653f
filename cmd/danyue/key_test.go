package main

import (
	"bufio"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// writeBooks makes a directory of books and returns it.
func writeBooks(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// gbkZhengWen is "正文\r\n" in GBK.
const gbkZhengWen = "\xd5\xfd\xce\xc4\r\n"

const (
	keyABC   = "md5:900150983cd24fb0d6963f7d28e17f72" // md5("abc")
	keyEmpty = "md5:d41d8cd98f00b204e9800998ecf8427e" // md5("")
)

func TestKeyPrintsOneLinePerFile(t *testing.T) {
	dir := writeBooks(t, map[string]string{
		"abc.txt":   "\uFEFF abc \r\n\r\n",
		"blank.txt": " \r\n\t ",
	})
	res := runCLI(t, nil, "key", filepath.Join(dir, "abc.txt"), filepath.Join(dir, "blank.txt"))
	if res.code != 0 || res.stderr != "" {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	// KOReader's id is of the file's bytes: for a small file, their MD5.
	want := keyABC + " 3 utf-8 koreader:" + md5hex("\uFEFF abc \r\n\r\n") + " " + filepath.Join(dir, "abc.txt") + "\n" +
		keyEmpty + " 0 utf-8 koreader:" + md5hex(" \r\n\t ") + " " + filepath.Join(dir, "blank.txt") + "\n"
	if res.stdout != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", res.stdout, want)
	}
}

func TestKeyJSON(t *testing.T) {
	dir := writeBooks(t, map[string]string{"gbk.txt": gbkZhengWen, "abc.txt": "abc"})
	// Flags may follow the files.
	res := runCLI(t, nil, "key", filepath.Join(dir, "gbk.txt"), filepath.Join(dir, "abc.txt"), "--json", "--algo", "sha256")
	if res.code != 0 {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(res.stdout))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 {
		t.Fatalf("stdout %q: want two JSON lines", res.stdout)
	}
	gbk := lines[0]
	if gbk["path"] != filepath.Join(dir, "gbk.txt") || gbk["encoding"] != "gb18030" ||
		gbk["utf16Len"] != 2.0 || gbk["bytes"] != 6.0 || !strings.HasPrefix(gbk["key"].(string), "sha256:") {
		t.Errorf("gbk line = %v", gbk)
	}
	if abc := lines[1]; abc["key"] != "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("abc line = %v", abc)
	}
	if abc := lines[1]; abc["koreaderId"] != md5hex("abc") {
		t.Errorf("abc line = %v, want koreaderId %s", abc, md5hex("abc"))
	}
	if len(gbk) != 6 {
		t.Errorf("fields %v, want path, key, encoding, utf16Len, bytes, koreaderId", gbk)
	}
}

// TestKeyGBKSameAsUTF8: the same text keys the same from GBK and UTF-8, and
// forcing the encoding gives what detection found.
func TestKeyGBKSameAsUTF8(t *testing.T) {
	dir := writeBooks(t, map[string]string{"gbk.txt": gbkZhengWen, "utf8.txt": "正文\n"})
	gbk := runCLI(t, nil, "key", filepath.Join(dir, "gbk.txt"))
	forced := runCLI(t, nil, "key", "--encoding", "gb18030", filepath.Join(dir, "gbk.txt"))
	utf8 := runCLI(t, nil, "key", filepath.Join(dir, "utf8.txt"))
	key := func(out string) string { return strings.Fields(out + " x")[0] }
	if key(gbk.stdout) != key(utf8.stdout) || gbk.stdout != forced.stdout || !strings.Contains(gbk.stdout, " 2 gb18030 ") {
		t.Fatalf("gbk %q, forced %q, utf-8 %q", gbk.stdout, forced.stdout, utf8.stdout)
	}
}

func TestKeyDirectory(t *testing.T) {
	dir := writeBooks(t, map[string]string{
		"b.txt":           "abc",
		"a/one.txt":       "abc\r\n",
		"a/deep/two.TXT":  "abc",
		"a/notes.md":      "not a book",
		"a/cover.txt.jpg": "not a book",
	})
	res := runCLI(t, nil, "key", dir)
	if res.code != 0 || res.stderr != "" {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	want := keyABC + " 3 utf-8 koreader:" + md5hex("abc") + " " + filepath.Join(dir, "a/deep/two.TXT") + "\n" +
		keyABC + " 3 utf-8 koreader:" + md5hex("abc\r\n") + " " + filepath.Join(dir, "a/one.txt") + "\n" +
		keyABC + " 3 utf-8 koreader:" + md5hex("abc") + " " + filepath.Join(dir, "b.txt") + "\n"
	if res.stdout != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", res.stdout, want)
	}
}

// TestKeyUnreadableFile: one bad path is reported on stderr, the others are
// still keyed, and the exit status says something failed.
func TestKeyUnreadableFile(t *testing.T) {
	dir := writeBooks(t, map[string]string{"a.txt": "abc", "books/c.txt": "abc"})
	dangling := filepath.Join(dir, "books", "b.txt")
	if err := os.Symlink(filepath.Join(dir, "gone"), dangling); err != nil {
		if runtime.GOOS == "windows" {
			t.Skipf("cannot make a symlink (%v): on Windows it takes Developer Mode or an administrator", err)
		}
		t.Fatal(err)
	}
	if _, err := os.Lstat(dangling); errors.Is(err, fs.ErrNotExist) {
		// Unix and Windows list the link itself; wine hides a link whose
		// target is missing, so the command never sees it there.
		t.Skipf("this system hides a symlink whose target is missing (%v), as wine does", err)
	}
	missing := filepath.Join(dir, "missing.txt")
	res := runCLI(t, nil, "key", missing, filepath.Join(dir, "a.txt"), filepath.Join(dir, "books"))
	if res.code != 1 {
		t.Fatalf("exit %d, want 1", res.code)
	}
	// The OS says "no such file" in its own words (Windows: "The system
	// cannot find the file specified."), and the command passes them on.
	_, err := os.Open(missing)
	var pe *os.PathError
	if !errors.As(err, &pe) {
		t.Fatalf("open %s: %v, want a *PathError", missing, err)
	}
	for _, want := range []string{
		"danyue: " + missing + ": " + pe.Err.Error() + "\n",
		"danyue: " + filepath.Join(dir, "books", "b.txt") + ": " + pe.Err.Error() + "\n",
	} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr %q lacks %q", res.stderr, want)
		}
	}
	line := keyABC + " 3 utf-8 koreader:" + md5hex("abc") + " "
	want := line + filepath.Join(dir, "a.txt") + "\n" + line + filepath.Join(dir, "books", "c.txt") + "\n"
	if res.stdout != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", res.stdout, want)
	}
}

func TestKeyUsageErrors(t *testing.T) {
	dir := writeBooks(t, map[string]string{"a.txt": "abc"})
	for _, args := range [][]string{
		{"key"},
		{"key", "--algo", "crc32", filepath.Join(dir, "a.txt")},
		{"key", "--encoding", "latin1", filepath.Join(dir, "a.txt")},
		{"key", "--frobnicate", filepath.Join(dir, "a.txt")},
	} {
		res := runCLI(t, nil, args...)
		// The flag package prints the help on stdout for a flag it does not know.
		if res.code != 2 || !strings.Contains(res.stderr, "Try: danyue ") || (res.stdout != "" && args[1] != "--frobnicate") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want a usage error with a hint", args, res.code, res.stdout, res.stderr)
		}
	}
}

// TestKeyPipedPrintsOnlyResults: with stderr not a terminal there is no
// progress bar, even for a directory and --data is accepted and ignored.
func TestKeyPipedPrintsOnlyResults(t *testing.T) {
	dir := writeBooks(t, map[string]string{"a.txt": strings.Repeat("正文 text\r\n", 1<<16)})
	res := runCLI(t, nil, "key", "--data", t.TempDir(), dir)
	if res.code != 0 || res.stderr != "" || strings.Count(res.stdout, "\n") != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
}

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}
