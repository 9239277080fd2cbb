// Command measure compares the segment codecs on log files, to choose the
// default codec (segment.CodecDefault) and segment.DefaultBlockSize
// (issue 4).
//
// For each codec setting and block size it writes the input as a segment
// and reports:
//
//   - ratio: the input files' size over the segment file's size (what the
//     store saves on disk, block index and metadata included);
//   - compress MB/s: the codec alone on the blocks' data sections, one
//     reused encoder, MB of raw data per second;
//   - decompress GB/s: the codec alone decoding those sections into a
//     pre-sized buffer;
//   - ReadBlock GB/s: segment.Reader.ReadBlock over every block (checksum,
//     both sections, offsets, times, streams), GB of Block.Data per second.
//     This is what a search pays per byte before the substring kernel runs.
//
// Speeds are single-goroutine, per second of the measuring thread's CPU
// time (getrusage RUSAGE_THREAD, so other processes on a shared machine do
// not count), the best of three rounds.
//
// Usage:
//
//	go run ./internal/segment/internal/measure [-name NAME] [-sizes 64,256,1024] [-min 300ms] FILE...
//
// All files form one corpus called NAME (default: the first file's name).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"golang.org/x/sys/unix"

	"haystack/internal/logtest"
	"haystack/internal/segment"
)

type setting struct {
	name  string
	codec segment.Codec
	level int
}

var settings = []setting{
	{"none", segment.CodecNone, 0},
	{"lz4", segment.CodecLZ4, 0},
	{"lz4-hc9", segment.CodecLZ4, 9},
	{"zstd-fastest", segment.CodecZstd, 1},
	{"zstd-default", segment.CodecZstd, 2},
	{"zstd-better", segment.CodecZstd, 3},
	{"default", segment.CodecDefault, 0},
}

func main() {
	name := flag.String("name", "", "corpus name for the table (default: first file's name)")
	sizes := flag.String("sizes", "64,256,1024", "block sizes in KiB, comma-separated")
	minDur := flag.Duration("min", 300*time.Millisecond, "minimum time per measurement round")
	only := flag.String("codecs", "", "comma-separated subset of: none,lz4,lz4-hc9,zstd-fastest,zstd-default,zstd-better,default")
	header := flag.Bool("header", true, "print the table header")
	gen := flag.Int64("gen", 0, "also use N lines from internal/logtest (seed 1; as `hay gen --lines N --seed 1`)")
	flag.Parse()
	if flag.NArg() == 0 && *gen == 0 {
		log.Fatal("usage: measure [-name NAME] [-sizes 64,256,1024] [-gen N] [FILE...]")
	}
	if *name == "" {
		if flag.NArg() > 0 {
			*name = filepath.Base(flag.Arg(0))
		} else {
			*name = fmt.Sprintf("generated %d lines", *gen)
		}
	}
	var rawSize int64
	var entries []segment.Entry
	if *gen > 0 {
		// Entries as ingest would store them: one per line, the
		// generator's streams, and its times at the millisecond precision
		// of the timestamps printed in the lines (which ingest parses).
		g := logtest.NewGenerator(logtest.Config{Lines: *gen, Seed: 1})
		var buf []byte
		for range *gen {
			start := len(buf)
			var stream int
			var ts time.Time
			buf, stream, ts = g.Next(buf)
			rawSize += int64(len(buf)-start) + 1
			entries = append(entries, segment.Entry{Time: ts.Truncate(time.Millisecond).UnixNano(), Stream: uint32(stream), Line: buf[start:len(buf):len(buf)]})
		}
	}
	for _, f := range flag.Args() {
		data, err := os.ReadFile(f)
		if err != nil {
			log.Fatal(err)
		}
		rawSize += int64(len(data))
		entries = append(entries, split(data, int64(len(entries)))...)
	}
	dir, err := os.MkdirTemp("", "segmeasure")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	if *header {
		fmt.Println("| corpus | codec | block | ratio | compress MB/s | decompress GB/s | ReadBlock GB/s |")
		fmt.Println("|---|---|---:|---:|---:|---:|---:|")
	}
	for _, kib := range strings.Split(*sizes, ",") {
		k, err := strconv.Atoi(kib)
		if err != nil {
			log.Fatal(err)
		}
		for _, s := range settings {
			if *only != "" && !strings.Contains(","+*only+",", ","+s.name+",") {
				continue
			}
			r := measure(dir, entries, s, k<<10, *minDur)
			comp, dec := fmt.Sprintf("%.0f", r.compMBs), fmt.Sprintf("%.2f", r.decGBs)
			if s.codec == segment.CodecNone {
				comp, dec = "—", "—"
			}
			if s.codec == segment.CodecDefault {
				comp += " (writer)"
				dec = "—"
			}
			fmt.Printf("| %s | %s | %d KiB | %.2f | %s | %s | %.2f |\n",
				*name, s.name, k, float64(rawSize)/float64(r.fileBytes), comp, dec, r.readGBs)
		}
	}
}

// split cuts file data into entries the way ingest does: one per line, a
// trailing "\r" stripped, a last line without "\n" kept.
func split(data []byte, t0 int64) []segment.Entry {
	var es []segment.Entry
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		var line []byte
		if i < 0 {
			line, data = data, nil
		} else {
			line, data = data[:i], data[i+1:]
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		es = append(es, segment.Entry{Time: t0 + int64(len(es)), Line: line})
	}
	return es
}

type result struct {
	fileBytes                int64
	compMBs, decGBs, readGBs float64
}

func measure(dir string, entries []segment.Entry, s setting, blockSize int, minDur time.Duration) result {
	path := filepath.Join(dir, "seg")
	w, err := segment.Create(path, segment.Options{Codec: s.codec, Level: s.level, BlockSize: blockSize})
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		if err := w.Add(e); err != nil {
			log.Fatal(err)
		}
	}
	info, err := w.Commit()
	if err != nil {
		log.Fatal(err)
	}
	r, err := segment.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()

	// The blocks' data sections, as the writer cut them.
	var blocks [][]byte
	b := new(segment.Block)
	for i := range r.NumBlocks() {
		if err := r.ReadBlock(i, b); err != nil {
			log.Fatal(err)
		}
		blocks = append(blocks, bytes.Clone(b.Data))
	}
	raw := float64(info.RawBytes)
	res := result{fileBytes: info.FileBytes}

	res.readGBs = rate(raw, minDur, func() {
		for i := range r.NumBlocks() {
			if err := r.ReadBlock(i, b); err != nil {
				log.Fatal(err)
			}
		}
	}) / 1e9
	if s.codec == segment.CodecNone {
		return res
	}
	if s.codec == segment.CodecDefault {
		// LZ4 or zstd per block: time the whole writer instead of a codec.
		res.compMBs = rate(raw, minDur, func() {
			w, err := segment.Create(filepath.Join(dir, "seg2"), segment.Options{Codec: s.codec, Level: s.level, BlockSize: blockSize})
			if err != nil {
				log.Fatal(err)
			}
			for _, e := range entries {
				if err := w.Add(e); err != nil {
					log.Fatal(err)
				}
			}
			if _, err := w.Commit(); err != nil {
				log.Fatal(err)
			}
		}) / 1e6
		return res
	}

	comp := make([][]byte, len(blocks))
	var encode func(dst, src []byte) []byte
	var decode func(dst, src []byte) []byte
	switch s.codec {
	case segment.CodecZstd:
		lv := []zstd.EncoderLevel{zstd.SpeedDefault, zstd.SpeedFastest, zstd.SpeedDefault, zstd.SpeedBetterCompression}[s.level]
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(lv), zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false), zstd.WithSingleSegment(true))
		if err != nil {
			log.Fatal(err)
		}
		dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
		if err != nil {
			log.Fatal(err)
		}
		encode = func(dst, src []byte) []byte { return enc.EncodeAll(src, dst[:0]) }
		decode = func(dst, src []byte) []byte {
			out, err := dec.DecodeAll(src, dst[:0])
			if err != nil {
				log.Fatal(err)
			}
			return out
		}
	case segment.CodecLZ4:
		var c lz4.Compressor
		hc := lz4.CompressorHC{Level: lz4.CompressionLevel(1 << (8 + s.level))}
		encode = func(dst, src []byte) []byte {
			dst = dst[:cap(dst)]
			if len(dst) < lz4.CompressBlockBound(len(src)) {
				dst = make([]byte, lz4.CompressBlockBound(len(src)))
			}
			var n int
			var err error
			if s.level > 0 {
				n, err = hc.CompressBlock(src, dst)
			} else {
				n, err = c.CompressBlock(src, dst)
			}
			if err != nil {
				log.Fatal(err)
			}
			return dst[:n]
		}
		decode = func(dst, src []byte) []byte {
			n, err := lz4.UncompressBlock(src, dst[:cap(dst)])
			if err != nil {
				log.Fatal(err)
			}
			return dst[:n]
		}
	}
	res.compMBs = rate(raw, minDur, func() {
		for i, blk := range blocks {
			comp[i] = encode(comp[i], blk)
		}
	}) / 1e6
	out := make([]byte, 0, segment.MaxBlockSize)
	res.decGBs = rate(raw, minDur, func() {
		for i, c := range comp {
			if got := decode(out, c); len(got) != len(blocks[i]) {
				log.Fatalf("block %d decoded to %d bytes, want %d", i, len(got), len(blocks[i]))
			}
		}
	}) / 1e9
	return res
}

// rate runs pass repeatedly for at least minDur of this thread's CPU time,
// three times, and returns the best bytes per CPU second. CPU time rather
// than wall time, because the measuring machine is shared: time spent
// waiting for a core is not the codec's.
func rate(bytesPerPass float64, minDur time.Duration, pass func()) float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	best := 0.0
	for range 3 {
		n := 0
		start := threadCPU()
		for threadCPU()-start < minDur || n == 0 {
			pass()
			n++
		}
		best = max(best, bytesPerPass*float64(n)/(threadCPU()-start).Seconds())
	}
	return best
}

// threadCPU returns the CPU time used by the calling OS thread.
func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		log.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
