package bookkey

import (
	"bytes"
	"context"
	"crypto/md5"
	"sync"
	"testing"
)

// novelText returns n bytes of a made-up novel: paragraphs of common Chinese
// characters and punctuation mixed with ASCII words, indented with U+3000,
// CRLF line ends, blank lines between paragraphs. It is deterministic.
func novelText(n int) []byte {
	han := []rune("的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处理府研")
	punct := []rune("，。、：；“”！？")
	var b bytes.Buffer
	b.Grow(n + 512)
	x := uint64(0x9E3779B97F4A7C15)
	next := func(m int) int { // xorshift64
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return int(x % uint64(m))
	}
	var line bytes.Buffer
	for b.Len() < n {
		line.Reset()
		line.WriteString("\u3000\u3000")
		for words := 3 + next(20); words > 0; words-- {
			if next(4) == 0 {
				for l := 2 + next(7); l > 0; l-- {
					line.WriteByte(byte('a' + next(26)))
				}
				line.WriteByte(' ')
				continue
			}
			for l := 1 + next(6); l > 0; l-- {
				line.WriteRune(han[next(len(han))])
			}
			line.WriteRune(punct[next(len(punct))])
		}
		line.WriteString("\r\n")
		if next(3) == 0 {
			line.WriteString("\r\n")
		}
		if b.Len()+line.Len() > n {
			break
		}
		b.Write(line.Bytes())
	}
	for b.Len() < n {
		b.WriteByte('.')
	}
	return b.Bytes()
}

var benchText = sync.OnceValue(func() []byte { return novelText(64 << 20) })

func benchmarkKey(b *testing.B, opt Options) {
	runKeyBenchmark(b, benchText(), opt)
}

// runKeyBenchmark keys data b.N times. The collections the testing package
// runs between runs can empty the pool of keyers; one call before the timer
// starts puts one back, so that the run measures the steady state of a
// process that keys book after book.
func runKeyBenchmark(b *testing.B, data []byte, opt Options) {
	var r bytes.Reader
	r.Reset(data)
	if _, err := Read(context.Background(), &r, opt); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(data)
		if _, err := Read(context.Background(), &r, opt); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKeyMD5 is the default key of a 64 MiB CRLF novel, read from
// memory: compare with BenchmarkRawMD5.
func BenchmarkKeyMD5(b *testing.B) { benchmarkKey(b, Options{}) }

func BenchmarkKeySHA256(b *testing.B) { benchmarkKey(b, Options{Algo: SHA256}) }

// BenchmarkRawMD5 is MD5 alone over the same bytes: the limit of
// BenchmarkKeyMD5, which cannot hash faster than one core does.
func BenchmarkRawMD5(b *testing.B) {
	data := benchText()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		md5.Sum(data)
	}
}

// BenchmarkKeyGB18030 is the same novel in GBK: decoding dominates.
func BenchmarkKeyGB18030(b *testing.B) { runKeyBenchmark(b, benchGBK(), Options{Encoding: GB18030}) }

var benchGBK = sync.OnceValue(func() []byte {
	gbk, err := gbkEncode(novelText(16 << 20))
	if err != nil {
		panic(err)
	}
	return gbk
})
