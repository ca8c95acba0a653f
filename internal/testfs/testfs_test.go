package testfs

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCopyTree(t *testing.T) {
	from, to := t.TempDir(), filepath.Join(t.TempDir(), "copy")
	files := map[string]string{"a": "1", filepath.Join("d", "b"): "22", filepath.Join("d", "e", "c"): ""}
	for name, data := range files {
		p := filepath.Join(from, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	CopyTree(t, from, to)
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(to, name))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
	}
}
