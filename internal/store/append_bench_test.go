package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"haystack/internal/attrs"
)

// benchEntries returns n log lines of about 100 bytes, with OTel-like
// metadata (trace_id of 32 hex digits, span_id of 16) when otel.
func benchEntries(n int, otel bool) []Entry {
	r := rand.New(rand.NewPCG(1, 2))
	es := make([]Entry, n)
	paths := []string{"/api/v1/push", "/loki/api/v1/query_range", "/metrics", "/ready"}
	for i := range es {
		es[i] = Entry{
			Time: 1764460800000000000 + int64(i)*1000000,
			Line: fmt.Appendf(nil, "2026-11-30T00:00:%02d.%03dZ level=info msg=\"request served\" path=%s status=200 dur=%dms",
				i%60, i%1000, paths[r.IntN(len(paths))], r.IntN(500)),
		}
		if otel {
			a, err := attrs.Encode(nil, []attrs.Pair{
				{Name: "trace_id", Value: fmt.Sprintf("%016x%016x", r.Uint64(), r.Uint64())},
				{Name: "span_id", Value: fmt.Sprintf("%016x", r.Uint64())},
			})
			if err != nil {
				panic(err)
			}
			es[i].Attrs = a
		}
	}
	return es
}

// BenchmarkAppend measures ingest into a store: Store.Append of batches
// of 1000 entries (hay ingest's path: the WAL synced on its byte and time
// budget, the head flushed into segments in the background), and
// Writer.Append of batches of 100 (a push: a group commit and fsync per
// batch), without metadata and with OTel-like trace and span ids.
// wal-B/entry is what the WAL record of a batch takes an entry.
//
// store-cpu is Store.Append with no fsync and the head flushed every 20
// MB outside the timer: the encoding, write(2) and head path alone, which
// the shared test machine measures with less noise.
// benchStoreBatch opens a store with opt and returns a batch of 1000
// entries of one stream in it, the benchmark's bytes set to their lines'.
func benchStoreBatch(b *testing.B, otel bool, opt Options) (*Store, *Batch) {
	es := benchEntries(1000, otel)
	s, err := Open(b.TempDir(), opt)
	if err != nil {
		b.Fatal(err)
	}
	id := s.Stream(`{job="bench"}`)
	line := 0
	for i := range es {
		es[i].Stream = id
		line += len(es[i].Line)
	}
	b.SetBytes(int64(line))
	return s, &Batch{Entries: es}
}

func BenchmarkAppend(b *testing.B) {
	for _, meta := range []string{"none", "otel"} {
		b.Run("store-cpu/"+meta, func(b *testing.B) {
			s, batch := benchStoreBatch(b, meta == "otel", Options{FsyncInterval: -1, FsyncBytes: 1 << 40, HeadBytes: 1 << 40})
			n := 0
			for b.Loop() {
				if err := s.Append(batch); err != nil {
					b.Fatal(err)
				}
				if n++; n%200 == 0 {
					b.StopTimer()
					if err := s.Flush(); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			}
			b.StopTimer()
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		})
		b.Run("store/"+meta, func(b *testing.B) {
			s, batch := benchStoreBatch(b, meta == "otel", Options{})
			for b.Loop() {
				if err := s.Append(batch); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(recHeader+len(appendBatch(nil, batch)))/float64(len(batch.Entries)), "wal-B/entry")
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		})
		b.Run("writer/"+meta, func(b *testing.B) {
			src := benchEntries(100, meta == "otel")
			es := make([]LabeledEntry, len(src))
			line := 0
			for i, e := range src {
				es[i] = LabeledEntry{Labels: `{job="bench"}`, Time: e.Time, Line: e.Line, Attrs: e.Attrs}
				line += len(e.Line)
			}
			w, err := OpenWriter(b.TempDir(), WriterOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(line))
			for b.Loop() {
				if err := w.Append(context.Background(), es); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkWALRecord measures a WAL record's encoding and decoding, for
// a batch of 1000 entries without metadata and with OTel-like metadata.
func BenchmarkWALRecord(b *testing.B) {
	for _, meta := range []string{"none", "otel"} {
		es := benchEntries(1000, meta == "otel")
		batch := &Batch{Entries: es}
		rec := appendBatch(nil, batch)
		b.Run("encode/"+meta, func(b *testing.B) {
			b.SetBytes(int64(len(rec)))
			buf := make([]byte, 0, len(rec))
			for b.Loop() {
				buf = appendBatch(buf[:0], batch)
			}
		})
		b.Run("decode/"+meta, func(b *testing.B) {
			b.SetBytes(int64(len(rec)))
			for b.Loop() {
				if _, err := decodeBatch(rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHeadAdd measures adding entries to the head (the blocks
// reused), without metadata and with OTel-like metadata.
func BenchmarkHeadAdd(b *testing.B) {
	for _, meta := range []string{"none", "otel"} {
		b.Run(meta, func(b *testing.B) {
			es := benchEntries(1000, meta == "otel")
			n := 0
			for _, e := range es {
				n += len(e.Line)
			}
			b.SetBytes(int64(n))
			var h head
			for b.Loop() {
				blocks := h.blocks
				h.reset()
				h.recycle(blocks)
				for _, e := range es {
					h.add(e)
				}
			}
		})
	}
}
