package logtest

import (
	"io"
	"testing"
)

// BenchmarkGenerate measures generation speed into io.Discard; it feeds
// 1 GB benchmark corpora, so it should run well above disk speed.
func BenchmarkGenerate(b *testing.B) {
	const size = 64 << 20
	b.SetBytes(size)
	for b.Loop() {
		if _, _, err := Generate(io.Discard, Config{Size: size}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNext measures the per-line API; bytes are the default mean
// line plus its newline.
func BenchmarkNext(b *testing.B) {
	g := NewGenerator(Config{})
	buf := make([]byte, 0, 64<<10)
	b.SetBytes(DefaultMeanLen + 1)
	for b.Loop() {
		buf, _, _ = g.Next(buf[:0])
	}
}
