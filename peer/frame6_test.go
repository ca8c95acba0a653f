package peer

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// Version 6 asks a relay question in a flat array and numbers it, and its
// answer, by their place on the stream.
func TestAskForm(t *testing.T) {
	for _, tc := range []struct {
		name string
		ask  wireAsk
		ok   bool
	}{
		{"one item", wireAsk{3, 0, 41}, true},
		{"three items", wireAsk{19, 0, 41, 2, 42, 7, 40}, true},
		{"the most items", make(wireAsk, 1+2*maxWantItems), true},
		{"no item", wireAsk{3}, false},
		{"half an item", wireAsk{3, 0, 41, 2}, false},
		{"too many items", make(wireAsk, 3+2*maxWantItems), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := tc.ask.want(5)
			if !tc.ok {
				if !errors.Is(err, ErrProtocol) {
					t.Fatalf("got %+v, %v; want ErrProtocol", w, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if w.N != 5 || w.List != tc.ask[0] || len(w.Items) != len(tc.ask)/2 || fmt.Sprint(askOf(w)) != fmt.Sprint(tc.ask) {
				t.Fatalf("%v became %+v", tc.ask, w)
			}
			// It crosses the wire whole: the decoder's array limit holds it.
			f, err := decodeFrame(frameBody(t, &wireFrame{Ask: tc.ask}))
			if err != nil || fmt.Sprint(f.Ask) != fmt.Sprint(tc.ask) {
				t.Fatalf("round trip: %v, %v", f, err)
			}
		})
	}
}

// The question a device of a 20-device mesh asks for most changes (three
// sources held) and its answer, in bytes on the wire with their length.
func TestAskSize(t *testing.T) {
	w := &wireWant{N: 3, List: 19, Items: []wireWantItem{{Index: 0, Seq: 41}, {Index: 2, Seq: 42}, {Index: 7, Seq: 40}}}
	size := func(f *wireFrame, v uint64) int {
		var buf bytes.Buffer
		if err := appendFrameV(&buf, f, v); err != nil {
			t.Fatal(err)
		}
		return buf.Len()
	}
	for _, tc := range []struct {
		name string
		f    *wireFrame
		v    uint64
		want int
	}{
		{"want", &wireFrame{Want: w}, 5, 22},
		{"ask", &wireFrame{Ask: askOf(w)}, 6, 14},
		{"numbered answer", &wireFrame{Have: &wireHave{N: 3}}, 5, 6},
		{"answer", &wireFrame{Have: &wireHave{}}, 6, 4},
	} {
		if got := size(tc.f, tc.v); got != tc.want {
			t.Errorf("%s: %d bytes, want %d", tc.name, got, tc.want)
		}
	}
}

// A sender of version 6 numbers the answers it receives in order, so one
// that comes after its Ask was given up on is not taken for the next one's;
// a direct list is not an answer; and a number, which version 6 leaves out,
// is refused.
func TestAnswersNumberedByPlace(t *testing.T) {
	fo := newFanout()
	take := func(h *wireHave) {
		t.Helper()
		if err := fo.have(h, 6); err != nil {
			t.Fatal(err)
		}
	}
	take(&wireHave{})                                         // answers Ask 1
	take(&wireHave{List: 4, Direct: []wireMark{{Device: 9}}}) // a direct list
	take(&wireHave{Lacks: []uint64{0}})                       // answers Ask 2
	// Nobody waited for the first answer: only the latest is kept.
	if h := <-fo.answers; h.N != 2 || fmt.Sprint(h.Lacks) != "[0]" {
		t.Fatalf("got answer %+v, want the second", h)
	}
	if fo.ver != 4 || len(fo.list) != 1 {
		t.Fatalf("direct list %d of %v, want version 4 of one device", fo.ver, fo.list)
	}
	for _, tc := range []struct {
		name string
		h    *wireHave
		v    uint64
	}{
		{"a numbered answer on version 6", &wireHave{N: 3}, 6},
		{"an unnumbered answer on version 5", &wireHave{}, 5},
	} {
		if err := fo.have(tc.h, tc.v); !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v, want ErrProtocol", tc.name, err)
		}
	}
}
