package search

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"haystack/internal/attrs"
	"haystack/internal/segment"
	"haystack/internal/store"
)

// BenchmarkCountAttrs counts a frequent needle (level=info, a quarter of
// the lines) over segments of 40,000 log lines of ~80 bytes in 1 MiB
// blocks, as `hay search -c level=info` does: with OTel-like metadata on
// every entry (trace_id, span_id, severity_text: 87 bytes), read
// (decode) or skipped (Query.SkipAttrs), and without metadata. MB/s
// counts line bytes. One worker, so that the numbers are per core.
func BenchmarkCountAttrs(b *testing.B) {
	for _, codec := range []segment.Codec{segment.CodecZstd, segment.CodecLZ4} {
		for _, meta := range []bool{true, false} {
			dir := b.TempDir()
			w, err := store.OpenWriter(dir, store.WriterOptions{Options: store.Options{Segment: segment.Options{Codec: codec}}})
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(7, 8))
			hex := func(k int) string {
				h := make([]byte, k)
				for i := range h {
					h[i] = "0123456789abcdef"[rng.IntN(16)]
				}
				return string(h)
			}
			var raw int64
			batch := make([]store.LabeledEntry, 0, 1000)
			for i := range 40_000 {
				e := store.LabeledEntry{
					Labels: fmt.Sprintf(`{app="a%d"}`, i%4),
					Time:   1_700_000_000_000_000_000 + int64(i)*1_000_000,
					Line: fmt.Appendf(nil, "2026-11-30T01:%02d:%02d.%03dZ level=%s msg=%q user=%d latency=%dms",
						i/60%60, i%60, i%1000, []string{"info", "warn", "error", "debug"}[rng.IntN(4)],
						[]string{"request served", "cache miss", "timeout talking to db", "retrying"}[rng.IntN(4)],
						rng.IntN(10000), rng.IntN(2000)),
				}
				if meta {
					e.Attrs, err = attrs.Encode(nil, []attrs.Pair{{Name: "trace_id", Value: hex(32)}, {Name: "span_id", Value: hex(16)}, {Name: "severity_text", Value: []string{"INFO", "WARN"}[i%2]}})
					if err != nil {
						b.Fatal(err)
					}
				}
				raw += int64(len(e.Line))
				if batch = append(batch, e); len(batch) == cap(batch) {
					if err := w.Append(context.Background(), batch); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			if err := w.Flush(); err != nil {
				b.Fatal(err)
			}
			w.Close()
			snap, err := store.OpenSnapshot(dir)
			if err != nil {
				b.Fatal(err)
			}
			name := "none"
			if meta {
				name = "otel"
			}
			for _, skip := range []bool{false, true} {
				mode := "decode"
				if skip {
					mode = "skip"
				}
				b.Run(fmt.Sprintf("%s/%s/%s", codec, name, mode), func(b *testing.B) {
					q := Query{Pattern: []byte("level=info"), Count: true, Workers: 1, SkipAttrs: skip}
					want := int64(-1)
					b.SetBytes(raw)
					for b.Loop() {
						n, err := Run(context.Background(), snap.Parts, q, nil, func(err error) { b.Fatal(err) })
						if err != nil {
							b.Fatal(err)
						}
						if want >= 0 && n != want || n < 9000 {
							b.Fatalf("count %d", n)
						}
						want = n
					}
				})
			}
			snap.Close()
		}
	}
}
