package pair

import (
	"bufio"
	"bytes"
	"crypto/sha512"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// draftVectors reads testdata/cpace-ristretto255-sha512.txt: every line
// ending in ':' (or naming a length) starts a label, and the lines of hex
// after it are its value. Labels repeat across sections (the ISK appears
// twice), so each occurrence is kept in order.
func draftVectors(t *testing.T) map[string][][]byte {
	t.Helper()
	f, err := os.Open("testdata/cpace-ristretto255-sha512.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][][]byte{}
	var label string
	var cur []byte
	flush := func() {
		if label != "" && cur != nil {
			out[label] = append(out[label], cur)
		}
		label, cur = "", nil
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if b, err := hex.DecodeString(line); err == nil && line != "" && label != "" {
			cur = append(cur, b...)
			continue
		}
		if strings.HasPrefix(line, "(length:") {
			continue // the length line under a label that wrapped
		}
		flush()
		if i := strings.Index(line, ": (length:"); i >= 0 {
			label = line[:i]
		} else if strings.HasSuffix(line, ":") {
			label = strings.TrimSuffix(line, ":")
		}
	}
	flush()
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func vec(t *testing.T, v map[string][][]byte, label string, i int) []byte {
	t.Helper()
	if len(v[label]) <= i {
		t.Fatalf("test vector %q #%d missing from testdata", label, i)
	}
	return v[label][i]
}

// TestDraftVectors checks every step of CPace against Appendix B.3 of
// draft-irtf-cfrg-cpace-21, byte for byte.
func TestDraftVectors(t *testing.T) {
	v := draftVectors(t)
	prs := []byte("Password")
	ci := []byte("\x0bA_initiator\x0bB_responder")
	sid, _ := hex.DecodeString("7e4b4791d6a8ef019b936c79fb7f2c57")
	ada, adb := []byte("ADa"), []byte("ADb")

	check := func(name string, got, want []byte) {
		t.Helper()
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %x\nwant %x", name, got, want)
		}
	}
	gs := generatorString(prs, ci, sid)
	check("generator_string", gs, vec(t, v, "generator_string(G.DSI,PRS,CI,sid,H.s_in_bytes)", 0))
	h := sha512.Sum512(gs)
	check("hash result", h[:], vec(t, v, "hash result", 0))
	g, err := calculateGenerator(prs, ci, sid)
	if err != nil {
		t.Fatal(err)
	}
	genc, _ := g.MarshalBinary()
	check("encoded generator g", genc, vec(t, v, "encoded generator g", 0))

	ya, err := scalarFromBytes(vec(t, v, "ya (little endian)", 0))
	if err != nil {
		t.Fatal(err)
	}
	yb, err := scalarFromBytes(vec(t, v, "yb (little endian)", 0))
	if err != nil {
		t.Fatal(err)
	}
	Ya, _ := scalarMult(ya, g)
	Yb, _ := scalarMult(yb, g)
	check("Ya", Ya, vec(t, v, "Ya", 0))
	check("Yb", Yb, vec(t, v, "Yb", 0))
	ka, kb := scalarMultVfy(ya, Yb), scalarMultVfy(yb, Ya)
	check("scalar_mult_vfy(ya,Yb)", ka, vec(t, v, "scalar_mult_vfy(ya,Yb)", 0))
	check("scalar_mult_vfy(yb,Ya)", kb, vec(t, v, "scalar_mult_vfy(yb,Ya)", 0))

	tir := transcriptIR(Ya, ada, Yb, adb)
	check("transcript_ir", tir, vec(t, v, "transcript_ir(Ya,ADa,Yb,ADb)", 0))
	check("ISK (initiator/responder)", deriveISK(sid, ka, tir), vec(t, v, "ISK result", 0))
	toc := transcriptOC(Ya, ada, Yb, adb)
	check("transcript_oc", toc, vec(t, v, "transcript_oc(Ya,ADa,Yb,ADb)", 0))
	check("ISK (parallel)", deriveISK(sid, ka, toc), vec(t, v, "ISK result", 1))

	// The session code path gives the same ISK for both roles.
	pa := &party{sid: sid, y: ya, share: Ya}
	pb := &party{sid: sid, y: yb, share: Yb}
	iskA, err := pa.finish(Yb, Ya, ada, Yb, adb)
	if err != nil {
		t.Fatal(err)
	}
	iskB, err := pb.finish(Ya, Ya, ada, Yb, adb)
	if err != nil {
		t.Fatal(err)
	}
	check("ISK of initiator", iskA, vec(t, v, "ISK result", 0))
	check("ISK of responder", iskB, vec(t, v, "ISK result", 0))

	// B.3.10 and B.3.11.
	s, err := scalarFromBytes(vec(t, v, "s", 0))
	if err != nil {
		t.Fatal(err)
	}
	check("scalar_mult_vfy(s,X)", scalarMultVfy(s, vec(t, v, "X", 0)), vec(t, v, "G.scalar_mult_vfy(s,X)", 0))
	for _, bad := range []string{"Y_i1", "Y_i2 == G.I"} {
		check("scalar_mult_vfy(s,"+bad+")", scalarMultVfy(s, vec(t, v, bad, 0)), identity)
		if _, err := pa.finish(vec(t, v, bad, 0), Ya, ada, vec(t, v, bad, 0), adb); err != ErrBadElement {
			t.Errorf("share %s: err %v, want ErrBadElement", bad, err)
		}
	}
}

// TestStringUtilities checks the draft's Appendix A vectors for the helpers
// the transcript is built from.
func TestStringUtilities(t *testing.T) {
	seq := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i)
		}
		return b
	}
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"prepend_len empty", prependLen(nil, nil), "00"},
		{"prepend_len 1234", prependLen(nil, []byte("1234")), "0431323334"},
		{"prepend_len 127", prependLen(nil, seq(127))[:1], "7f"},
		{"prepend_len 128", prependLen(nil, seq(128))[:3], "800100"},
		{"lv_cat", lvCat([]byte("1234"), []byte("5"), nil, []byte("678")), "043132333401350003363738"},
		{"transcript_ir", transcriptIR([]byte("123"), []byte("PartyA"), []byte("234"), []byte("PartyB")), "03313233065061727479410332333406506172747942"},
		{"transcript_oc 1", transcriptOC([]byte("123"), []byte("PartyA"), []byte("234"), []byte("PartyB")), "6f6303323334065061727479420331323306506172747941"},
		{"transcript_oc 2", transcriptOC([]byte("3456"), []byte("PartyA"), []byte("2345"), []byte("PartyB")), "6f63043334353606506172747941043233343506506172747942"},
	}
	for _, tc := range tests {
		if got := hex.EncodeToString(tc.got); got != tc.want {
			t.Errorf("%s = %s, want %s", tc.name, got, tc.want)
		}
	}
}
