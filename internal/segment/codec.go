package segment

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Codec names the compression of a block's sections.
type Codec uint8

const (
	// CodecDefault in Options means the default chosen by measurement:
	// per block, LZ4 when it reaches AutoMinRatio, else zstd. It is never
	// stored in a file.
	CodecDefault Codec = 0

	// CodecNone stores sections uncompressed.
	CodecNone Codec = 1

	// CodecLZ4 stores each section as one raw LZ4 block (pierrec/lz4/v4).
	CodecLZ4 Codec = 2

	// CodecZstd stores each section as one zstd frame (klauspost/compress).
	CodecZstd Codec = 3
)

// String returns the codec's name: "none", "lz4", "zstd" or "default".
func (c Codec) String() string {
	switch c {
	case CodecDefault:
		return "default"
	case CodecNone:
		return "none"
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", uint8(c))
}

// ParseCodec returns the codec named by s ("none", "lz4", "zstd",
// "default" or "").
func ParseCodec(s string) (Codec, error) {
	switch s {
	case "", "default":
		return CodecDefault, nil
	case "none":
		return CodecNone, nil
	case "lz4":
		return CodecLZ4, nil
	case "zstd":
		return CodecZstd, nil
	}
	return 0, fmt.Errorf("unknown codec %q (want none, lz4 or zstd)", s)
}

// zstd encoders and the decoder are expensive to build (hundreds of KiB of
// tables), so one of each is shared by the whole process. EncodeAll and
// DecodeAll are safe for concurrent use and keep per-goroutine state in
// internal pools sized by the concurrency option.
var (
	zstdEncoders [5]func() *zstd.Encoder // indexed by Options.Level (0 = default)
	zstdDecoder  = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
			// Decoding is bounded by the caller's cap (the size recorded in
			// the checksummed index), and by MaxBlockRawBytes overall, so a
			// damaged frame header cannot ask for gigabytes.
			zstd.WithDecodeAllCapLimit(true),
			zstd.WithDecoderMaxMemory(MaxBlockRawBytes),
			zstd.WithDecoderMaxWindow(MaxBlockRawBytes),
		)
		if err != nil {
			panic("segment: zstd decoder options: " + err.Error()) // options are constants
		}
		return d
	})
)

func init() {
	// Level 0 is the measured default, zstd's default level: with 1 MiB
	// blocks of generated logs it stores 4.1x smaller where the fastest
	// level stores 3.9x (under the 4x target), compresses at ~110 MB/s a
	// core in ingest (above its 100), and decodes a little faster; the
	// better level stores 4.5x and scans 7-14% faster but ingests at
	// only ~70 MB/s a core (docs/BENCHMARKS.md, "Store and search (issue 4)").
	levels := [5]zstd.EncoderLevel{zstd.SpeedDefault, zstd.SpeedFastest, zstd.SpeedDefault, zstd.SpeedBetterCompression, zstd.SpeedBestCompression}
	for i, l := range levels {
		zstdEncoders[i] = sync.OnceValue(func() *zstd.Encoder {
			e, err := zstd.NewWriter(nil,
				zstd.WithEncoderLevel(l),
				zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
				// Our block CRC covers the stored bytes; a second checksum
				// inside the frame would only slow decoding down.
				zstd.WithEncoderCRC(false),
				zstd.WithSingleSegment(true),
				// Entropy-code literals even in a section without matches:
				// meta sections (small varints) have few matches but a
				// skewed byte distribution; on generated logs this stores
				// them in 3.7 bytes per entry instead of 4.8.
				zstd.WithAllLitEntropyCompression(true),
				// A match never reaches back further than the block: the
				// default 8 MiB window only makes each pooled encoder keep
				// a 16 MiB history buffer (32 MiB of a compaction's heap on
				// 2 cores). 1 MiB covers ingest's and compaction's blocks
				// whole; a larger block (--block-size up to 4 MiB, or one
				// long line) still compresses, with matches up to 1 MiB back.
				zstd.WithWindowSize(1<<20),
			)
			if err != nil {
				panic("segment: zstd encoder options: " + err.Error())
			}
			return e
		})
	}
}

// lz4Compressors reuses LZ4 hash tables (64 KiB each) across blocks.
var lz4Compressors = sync.Pool{New: func() any { return new(lz4.Compressor) }}

// compressor compresses sections for one Writer.
type compressor struct {
	codec Codec // CodecDefault: LZ4 where it reaches AutoMinRatio, else zstd
	level int   // zstd level (also for CodecDefault), or LZ4 HC depth
	hc    *lz4.CompressorHC
}

// AutoMinRatio is the compression ratio LZ4 must reach on a block's data
// for the default codec to store the block with LZ4: LZ4 decodes 2-2.5x
// faster than zstd, and a block that LZ4 shrinks this much meets the
// storage target anyway. Other blocks get zstd, which shrinks log text
// ~1.5x more. See docs/BENCHMARKS.md, "Compression (issue 4)".
const AutoMinRatio = 4

// autoTryLZ4 is the zstd ratio from which the default codec also tries
// LZ4. On log text LZ4's ratio is 0.6-0.7 of zstd's (fastest level), so
// below 5x LZ4 would miss AutoMinRatio and trying it would only slow
// ingestion down.
const autoTryLZ4 = 5

// autoTryLZ4Better is autoTryLZ4 for zstd's better and best levels (3, 4:
// hay compact), which shrink log text further: on 1M generated lines in
// 512 KiB blocks LZ4 stores 2.70x where the better level stores 5.01x,
// 0.54 of it, so LZ4 can reach AutoMinRatio only from ~7.5x. Trying it
// below that cost compaction 9% of its CPU for nothing.
const autoTryLZ4Better = 7.5

func newCompressor(c Codec, level int) (*compressor, error) {
	cp := &compressor{codec: c, level: level}
	switch c {
	case CodecNone:
	case CodecZstd, CodecDefault:
		if level < 0 || level >= len(zstdEncoders) {
			return nil, fmt.Errorf("zstd level %d out of range 0..%d", level, len(zstdEncoders)-1)
		}
	case CodecLZ4:
		if level < 0 || level > 9 {
			return nil, fmt.Errorf("lz4 level %d out of range 0..9", level)
		}
		if level > 0 {
			cp.hc = &lz4.CompressorHC{Level: lz4.CompressionLevel(1 << (8 + level))}
		}
	default:
		return nil, fmt.Errorf("unknown codec %d", uint8(c))
	}
	return cp, nil
}

// compressBlock appends a block's data section compressed to dst and
// returns the codec used, choosing it for CodecDefault; CodecNone (and
// dst unchanged) when compression does not shrink the data.
func (cp *compressor) compressBlock(dst, data []byte) ([]byte, Codec, error) {
	if cp.codec != CodecDefault {
		return cp.compressAs(dst, data, cp.codec)
	}
	out, c, err := cp.compressAs(dst, data, CodecZstd)
	try := float64(autoTryLZ4)
	if cp.level >= 3 {
		try = autoTryLZ4Better
	}
	if err != nil || c != CodecZstd || float64(len(out)-len(dst))*try > float64(len(data)) {
		return out, c, err
	}
	// zstd output is out[len(dst):]; LZ4's goes after it.
	both, ok, err := cp.compress(out, data, CodecLZ4)
	if err != nil {
		return dst, 0, err
	}
	n := len(both) - len(out)
	if !ok || n*AutoMinRatio > len(data) {
		return out, CodecZstd, nil
	}
	copy(both[len(dst):], both[len(out):])
	return both[:len(dst)+n], CodecLZ4, nil
}

// compressAs appends src compressed with c to dst, or returns dst and
// CodecNone when c does not shrink src.
func (cp *compressor) compressAs(dst, src []byte, c Codec) ([]byte, Codec, error) {
	if c == CodecNone {
		return dst, CodecNone, nil
	}
	out, ok, err := cp.compress(dst, src, c)
	if err != nil {
		return dst, 0, err
	}
	if !ok {
		return dst, CodecNone, nil
	}
	return out, c, nil
}

// compress appends src compressed with c (LZ4 or zstd) to dst. It returns
// ok=false when the codec cannot shrink src, in which case dst's extension
// is garbage and the caller stores src uncompressed.
func (cp *compressor) compress(dst, src []byte, c Codec) ([]byte, bool, error) {
	if len(src) == 0 {
		return dst, true, nil
	}
	switch c {
	case CodecZstd:
		out := zstdEncoders[cp.level]().EncodeAll(src, dst)
		return out, len(out)-len(dst) < len(src), nil
	case CodecLZ4:
		start := len(dst)
		dst = grow(dst, lz4.CompressBlockBound(len(src)))
		var n int
		var err error
		if cp.hc != nil {
			n, err = cp.hc.CompressBlock(src, dst[start:])
		} else {
			c := lz4Compressors.Get().(*lz4.Compressor)
			n, err = c.CompressBlock(src, dst[start:])
			lz4Compressors.Put(c)
		}
		if err != nil {
			return dst[:start], false, fmt.Errorf("lz4: %w", err)
		}
		// n == 0 means incompressible.
		return dst[:start+n], n > 0 && n < len(src), nil
	}
	return dst, false, nil
}

// grow returns dst with room for n more bytes, extending its length by n.
func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst[:len(dst)+n]
	}
	out := make([]byte, len(dst)+n, 2*len(dst)+n)
	copy(out, dst)
	return out
}

// decodeSlack is spare capacity past a section's decoded size: zstd's
// assembly uses 16-byte copies that may write up to 32 bytes past the end,
// and falls back to slower exact copies when the buffer has no room for that.
const decodeSlack = 64

var errSize = errors.New("decoded size differs from the recorded size")

// decompress decodes src, stored with codec, into
// dst[:raw], reusing dst's capacity. It never produces more than raw bytes.
func decompress(codec Codec, dst, src []byte, raw int) ([]byte, error) {
	if cap(dst) < raw+decodeSlack {
		dst = make([]byte, raw, raw+decodeSlack)
	}
	dst = dst[:raw]
	if raw == 0 || len(src) == 0 {
		if raw != len(src) {
			return dst, errors.New("empty section with nonzero size")
		}
		return dst, nil
	}
	switch codec {
	case CodecNone:
		if len(src) != raw {
			return dst, errSize
		}
		copy(dst, src)
		return dst, nil
	case CodecLZ4:
		n, err := lz4.UncompressBlock(src, dst)
		if err != nil {
			return dst, fmt.Errorf("lz4: %w", err)
		}
		if n != raw {
			return dst, errSize
		}
		return dst, nil
	case CodecZstd:
		// The cap limit makes DecodeAll stop at raw+decodeSlack bytes; the
		// slack lets it use its fast copies up to the end.
		out, err := zstdDecoder().DecodeAll(src, dst[:0:raw+decodeSlack])
		if err != nil {
			return dst, fmt.Errorf("zstd: %w", err)
		}
		if len(out) != raw || (raw > 0 && &out[0] != &dst[0]) {
			return dst, errSize
		}
		return dst, nil
	}
	return dst, fmt.Errorf("unknown codec byte %d", uint8(codec))
}
