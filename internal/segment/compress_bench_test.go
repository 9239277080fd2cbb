package segment

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// The compression measurement of issue 4. The table in docs/BENCHMARKS.md
// comes from internal/segment/internal/measure; these benchmarks give the
// same numbers in `go test -bench` form:
//
//	go test ./internal/segment -run='^$' -bench='Codec|ReadBlock'

// loghubEntries reads the repository's Loghub samples as entries, split the
// way ingest splits lines (trailing "\r" stripped). It returns them and the
// files' total size.
func loghubEntries(tb testing.TB) ([]Entry, int64) {
	files, err := filepath.Glob("../../testdata/loghub/*.log")
	if err != nil || len(files) == 0 {
		tb.Fatalf("no loghub samples: %v", err)
	}
	var es []Entry
	var size int64
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		size += int64(len(data))
		for len(data) > 0 {
			i := bytes.IndexByte(data, '\n')
			var line []byte
			if i < 0 {
				line, data = data, nil
			} else {
				line, data = data[:i], data[i+1:]
			}
			es = append(es, Entry{Time: int64(len(es)), Stream: uint32(len(f)), Line: bytes.TrimSuffix(line, []byte("\r"))})
		}
	}
	return es, size
}

var benchSizes = []int{64 << 10, 256 << 10, 1 << 20}

var benchSettings = []struct {
	name  string
	codec Codec
	level int
}{
	{"none", CodecNone, 0},
	{"lz4", CodecLZ4, 0},
	{"lz4-hc9", CodecLZ4, 9},
	{"zstd-fastest", CodecZstd, 1},
	{"zstd-default", CodecZstd, 2},
	{"default", CodecDefault, 0},
}

// BenchmarkReadBlock measures ReadBlock over every block of a segment of
// the Loghub samples: the decode cost a search pays per raw byte. It also
// reports the storage ratio (input size / segment size).
func BenchmarkReadBlock(b *testing.B) {
	entries, size := loghubEntries(b)
	dir := b.TempDir()
	for _, bs := range benchSizes {
		for _, s := range benchSettings {
			b.Run(fmt.Sprintf("%s/%dKiB", s.name, bs>>10), func(b *testing.B) {
				path, info := writeSegment(b, dir, "seg", entries, Options{Codec: s.codec, Level: s.level, BlockSize: bs})
				r, err := Open(path)
				if err != nil {
					b.Fatal(err)
				}
				defer r.Close()
				blk := GetBlock()
				defer PutBlock(blk)
				b.SetBytes(info.RawBytes)
				b.ReportMetric(float64(size)/float64(info.FileBytes), "ratio")
				for b.Loop() {
					for i := range r.NumBlocks() {
						if err := r.ReadBlock(i, blk); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}

// BenchmarkCodec measures the codecs alone on the data sections of the
// blocks the writer cuts: compress and decompress, with reused encoders and
// pre-sized destinations.
func BenchmarkCodec(b *testing.B) {
	entries, _ := loghubEntries(b)
	for _, bs := range benchSizes {
		// Cut blocks as the writer does.
		var blocks [][]byte
		var cur []byte
		fill := 0
		var raw int64
		for _, e := range entries {
			if fill > 0 && fill+len(e.Line)+1 > bs {
				blocks, cur, fill = append(blocks, cur), nil, 0
			}
			cur = append(cur, e.Line...)
			fill += len(e.Line) + 1
			raw += int64(len(e.Line))
		}
		blocks = append(blocks, cur)
		for _, s := range benchSettings[1 : len(benchSettings)-1] {
			var enc func(dst, src []byte) []byte
			var dec func(dst, src []byte) ([]byte, error)
			switch s.codec {
			case CodecZstd:
				lv := []zstd.EncoderLevel{zstd.SpeedDefault, zstd.SpeedFastest, zstd.SpeedDefault}[s.level]
				e, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(lv), zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false))
				d, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
				enc = func(dst, src []byte) []byte { return e.EncodeAll(src, dst[:0]) }
				dec = func(dst, src []byte) ([]byte, error) { return d.DecodeAll(src, dst[:0]) }
			case CodecLZ4:
				cp, err := newCompressor(CodecLZ4, s.level)
				if err != nil {
					b.Fatal(err)
				}
				enc = func(dst, src []byte) []byte { out, _, _ := cp.compress(dst[:0], src, CodecLZ4); return out }
				dec = func(dst, src []byte) ([]byte, error) {
					n, err := lz4.UncompressBlock(src, dst[:cap(dst)])
					return dst[:n], err
				}
			}
			comp := make([][]byte, len(blocks))
			var stored int64
			for i, blk := range blocks {
				comp[i] = enc(nil, blk)
				stored += int64(len(comp[i]))
			}
			b.Run(fmt.Sprintf("compress/%s/%dKiB", s.name, bs>>10), func(b *testing.B) {
				b.SetBytes(raw)
				b.ReportMetric(float64(raw)/float64(stored), "ratio")
				var dst []byte
				for b.Loop() {
					for _, blk := range blocks {
						dst = enc(dst, blk)
					}
				}
			})
			b.Run(fmt.Sprintf("decompress/%s/%dKiB", s.name, bs>>10), func(b *testing.B) {
				b.SetBytes(raw)
				dst := make([]byte, 0, bs+MaxEntryBytes/64)
				for b.Loop() {
					for i, c := range comp {
						out, err := dec(dst, c)
						if err != nil || len(out) != len(blocks[i]) {
							b.Fatalf("block %d: %d bytes, %v", i, len(out), err)
						}
					}
				}
			})
		}
	}
}
