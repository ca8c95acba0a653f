package resident

import "testing"

func TestParseMapsLine(t *testing.T) {
	tests := []struct {
		line string
		want Mapping
		ok   bool
	}{
		{"7f1c2a000000-7f1c2a100000 rw-s 00000000 08:01 1234 /data/db/000012.sst",
			Mapping{0x7f1c2a000000, 0x7f1c2a100000, "rw-s", 0, "/data/db/000012.sst"}, true},
		{"7f1c2a000000-7f1c2a100000 r--p 0001f000 08:01 1234                     /a dir/db/000012.sst",
			Mapping{0x7f1c2a000000, 0x7f1c2a100000, "r--p", 0x1f000, "/a dir/db/000012.sst"}, true},
		{"7f1c2a000000-7f1c2a100000 rw-s 00000000 08:01 1234 /data/db/000012.sst (deleted)",
			Mapping{0x7f1c2a000000, 0x7f1c2a100000, "rw-s", 0, "/data/db/000012.sst (deleted)"}, true},
		{"7ffd5c1f1000-7ffd5c212000 rw-p 00000000 00:00 0                          [stack]",
			Mapping{0x7ffd5c1f1000, 0x7ffd5c212000, "rw-p", 0, "[stack]"}, true},
		{"c000000000-c004000000 rw-p 00000000 00:00 0 ", Mapping{}, false},
		{"c000000000-c004000000 rw-p 00000000 00:00 0", Mapping{}, false},
		{"zz-7f rw-p 00000000 00:00 0 /x", Mapping{}, false},
		{"7f-7e rw-p 00000000 00:00 0 /x", Mapping{}, false},
		{"7e-7f rw-p zz 00:00 0 /x", Mapping{}, false},
		{"7e-7f rw 0 00:00 0 /x", Mapping{}, false},
		{"", Mapping{}, false},
	}
	for _, tt := range tests {
		got, ok := ParseMapsLine(tt.line)
		if ok != tt.ok || ok && got != tt.want {
			t.Errorf("ParseMapsLine(%q) = %+v, %v; want %+v, %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}
