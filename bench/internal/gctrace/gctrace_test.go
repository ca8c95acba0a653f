package gctrace

import (
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		want    Cycle
		wantErr error // nil: no error; ErrNotTrace; errAny: some other error
	}{
		{
			name: "a collection",
			line: "gc 12 @3.456s 1%: 0.018+1.2+0.004 ms clock, 0.036+0.1/0.9/0+0.009 ms cpu, 14->15->6 MB, 16 MB goal, 0 MB stacks, 0 MB globals, 2 P",
			want: Cycle{N: 12, Start: 14, End: 15, Marked: 6, Goal: 16},
		},
		{
			name: "forced",
			line: "gc 3 @0.5s 0%: 0.01+0.2+0.003 ms clock, 0.02+0/0.1/0+0.006 ms cpu, 2->2->1 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P (forced)",
			want: Cycle{N: 3, Start: 2, End: 2, Marked: 1, Goal: 4},
		},
		{name: "a log line", line: `time=2026-12-05T10:00:00Z level=WARN msg="peer refused"`, wantErr: ErrNotTrace},
		{name: "a log line starting with gc", line: "gc done", wantErr: ErrNotTrace},
		{name: "no heap sizes", line: "gc 4 @0.1s 0%: 0.1 ms clock", wantErr: errAny},
		{name: "a size that is not a number", line: "gc 4 @0.1s 0%: 1 ms clock, 1 ms cpu, 4->x->2 MB, 5 MB goal", wantErr: errAny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.line)
			switch {
			case tt.wantErr == nil && (err != nil || got != tt.want):
				t.Errorf("Parse = %+v, %v; want %+v", got, err, tt.want)
			case tt.wantErr == ErrNotTrace && !errors.Is(err, ErrNotTrace):
				t.Errorf("Parse = %+v, %v; want ErrNotTrace", got, err)
			case tt.wantErr == errAny && (err == nil || errors.Is(err, ErrNotTrace)):
				t.Errorf("Parse = %+v, %v; want an error about the line", got, err)
			}
		})
	}
}

var errAny = errors.New("any error")
