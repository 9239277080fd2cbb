package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkFlushManyStreams measures a flush of a small head (100
// entries of one stream) in a store whose stream table holds 200,000
// streams: the MANIFEST carries the whole table and is rewritten and
// fsynced at every flush (E9's write amplification); since STREAMS, a
// flush appends only new streams there. It reports the manifest's bytes,
// written once per flush, and the bytes a flush appended to STREAMS.
func BenchmarkFlushManyStreams(b *testing.B) {
	for _, n := range []int{10_000, 200_000} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			w, err := OpenWriter(dir, WriterOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			var es []LabeledEntry
			for i := range n {
				es = append(es, LabeledEntry{Labels: fmt.Sprintf(`{app="s0_%d", l01="%08d", l02="%08d"}`, i, (i*31+1)%1000000, (i*31+2)%1000000), Line: []byte("x")})
			}
			if err := w.Append(context.Background(), es); err != nil {
				b.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				b.Fatal(err)
			}
			small := make([]LabeledEntry, 100)
			for i := range small {
				small[i] = LabeledEntry{Labels: es[0].Labels, Line: []byte("a line of the head")}
			}
			streams0 := fileSizeOr0(filepath.Join(dir, streamsName))
			for b.Loop() {
				if err := w.Append(context.Background(), small); err != nil {
					b.Fatal(err)
				}
				if err := w.Flush(); err != nil {
					b.Fatal(err)
				}
			}
			fi, err := os.Stat(filepath.Join(dir, manifestName))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(fi.Size()), "manifestB/flush")
			b.ReportMetric(float64(fileSizeOr0(filepath.Join(dir, streamsName))-streams0)/float64(b.N), "streamsB/flush")
		})
	}
}

func fileSizeOr0(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
