package keyalgo

import "testing"

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		a    Algo
		name string
		size int
	}{{MD5, "md5", 16}, {SHA256, "sha256", 32}} {
		if got := tc.a.String(); got != tc.name {
			t.Errorf("%d.String() = %q, want %q", tc.a, got, tc.name)
		}
		if got := tc.a.Size(); got != tc.size {
			t.Errorf("%v.Size() = %d, want %d", tc.a, got, tc.size)
		}
		if got, err := Parse(tc.name); err != nil || got != tc.a {
			t.Errorf("Parse(%q) = %v, %v", tc.name, got, err)
		}
	}
	if Algo(0).Size() != 0 || Algo(3).Size() != 0 {
		t.Error("an unknown algorithm has a digest size")
	}
	if _, err := Parse("sha1"); err == nil {
		t.Error("Parse accepted sha1")
	}
}
