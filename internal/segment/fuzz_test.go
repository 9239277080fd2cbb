package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"haystack/internal/attrs"
)

// FuzzOpenAndRead treats arbitrary bytes as a segment file: Open, then
// ReadBlock every block. It must never panic, and whatever decodes must be
// consistent with the block index.
func FuzzOpenAndRead(f *testing.F) {
	for _, g := range goldens {
		if data, err := os.ReadFile(filepath.Join("testdata", g.file)); err == nil {
			f.Add(data)
		}
	}
	path := filepath.Join(f.TempDir(), "seg")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := Open(path)
		if err != nil {
			var ce *CorruptError
			if errors.As(err, &ce) && ce.File != path {
				t.Fatalf("error names %q", ce.File)
			}
			return
		}
		defer r.Close()
		info := r.Info()
		if info.FileBytes != int64(len(data)) || info.Blocks != r.NumBlocks() {
			t.Fatalf("info %+v for %d bytes, %d blocks", info, len(data), r.NumBlocks())
		}
		b := GetBlock()
		defer PutBlock(b)
		bad := 0
		var entries, raw int64
		for i := range r.NumBlocks() {
			m := r.BlockMeta(i)
			entries += int64(m.Entries)
			raw += int64(m.RawBytes)
			if !slices.IsSorted(m.Streams) || len(slices.Compact(slices.Clone(m.Streams))) != len(m.Streams) {
				t.Fatalf("block %d streams %v", i, m.Streams)
			}
			if err := r.ReadBlock(i, b); err != nil {
				var ce *CorruptError
				if !errors.As(err, &ce) || ce.File != path || ce.Block != i {
					t.Fatalf("block %d: %v", i, err)
				}
				bad++
				continue
			}
			checkBlock(t, m, b)
			for k := range b.Len() {
				_ = b.Line(k) // must not panic
			}
			// The skip index must not panic on any needle; a crafted file
			// with valid checksums may still lie, so no answer is checked.
			for _, lit := range [][]byte{nil, []byte("ab"), []byte("abcd"), []byte("Error: x"), b.Data[:min(len(b.Data), 40)]} {
				r.MayContain(i, lit, false)
				r.MayContain(i, lit, true)
				r.MayContainValue(i, lit, false)
				r.MayHaveValue(i, lit)
			}
			for _, c := range []byte{'5', 'A', 0, 0x7f, 0x80} {
				r.MayHoldEscape(i, c)
			}
		}
		if entries != info.Entries || raw != info.RawBytes {
			t.Fatalf("info %+v, blocks add up to %d entries, %d bytes", info, entries, raw)
		}
		// A skip index whose head Open found damaged is gone (skipDamage),
		// and Verify reports it as the lazily checked parts.
		skipBad := r.skipDamage != nil || r.grams != nil && r.grams.check() != nil || r.vgrams != nil && r.vgrams.check() != nil ||
			r.vfilters != nil && r.vfilters.check() != nil
		verr := r.Verify()
		if (verr == nil) != (bad == 0 && !skipBad) {
			t.Fatalf("Verify %v with %d bad blocks, malformed skip index %v", verr, bad, skipBad)
		}
	})
}

// FuzzDecodeBlock feeds the block decoder arbitrary block bodies with a
// valid checksum and an arbitrary index entry, so that it exercises the
// structure checks that the CRC shields from FuzzOpenAndRead's mutations.
// It must never panic, and a block it accepts must agree with the entry.
func FuzzDecodeBlock(f *testing.F) {
	for _, seed := range decodeBlockSeeds() {
		f.Add(seed.body, seed.entries, seed.raw, seed.minT, seed.span, seed.streams)
	}
	dst, lines := new(Block), new(Block)
	f.Fuzz(func(t *testing.T, body []byte, entries uint16, raw uint32, minT int64, span uint32, streams []byte) {
		m := BlockMeta{
			MinTime: minT, MaxTime: minT + int64(span),
			Entries: int(entries), RawBytes: int(raw % (1 << 20)),
		}
		if m.MaxTime < m.MinTime {
			return // the reader rejects such an index entry at Open
		}
		for _, s := range streams {
			m.Streams = append(m.Streams, uint32(s))
		}
		slices.Sort(m.Streams)
		m.Streams = slices.Compact(m.Streams)
		src := binary.LittleEndian.AppendUint32(bytes.Clone(body), crc32.Checksum(body, castagnoli))
		// The same bytes as a block of each layout: up to version 3, and
		// from version 4 (with an attrs section).
		for _, v := range []uint32{formatV3, formatVersion} {
			// Without its metadata (ReadBlockLines) a block decodes
			// whenever it does with them, to the same lines.
			lerr := decodeBlockOpt(src, &m, lines, v, false)
			if err := decodeBlock(src, &m, dst, v); err != nil {
				continue
			}
			checkBlock(t, m, dst)
			if lerr != nil {
				t.Fatalf("version %d: decodes with metadata, not without: %v", v, lerr)
			}
			sameLines(t, "without metadata", lines, dst)
		}
	})
}

type decodeBlockSeed struct {
	version uint32 // the layout it decodes as (not in the corpus: the fuzzer tries both)
	body    []byte
	entries uint16
	raw     uint32
	minT    int64
	span    uint32
	streams []byte
}

// decodeBlockSeeds returns valid blocks of each codec with their index
// entries: okBlock and the blocks of a small written segment.
func decodeBlockSeeds() []decodeBlockSeed {
	ok := okBlock()
	f := forge([]forged{ok})
	seeds := []decodeBlockSeed{{
		version: formatV1,
		body:    f[headerSize : len(f)-footerSize-4-len(forgeIndexOf(f))], entries: 3, raw: 5, minT: 5, span: 5, streams: []byte{4, 6},
	}}
	for _, c := range []Codec{CodecNone, CodecLZ4, CodecZstd} {
		dir, err := os.MkdirTemp("", "seed")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(dir)
		var es []Entry
		for i := range 20 {
			e := Entry{Time: int64(i%4) * 1e6, Stream: uint32(i % 3), Line: fmt.Appendf(nil, "line %d level=info", i)}
			if i%3 == 0 && i < 12 { // blocks with metadata, and blocks without
				e.Attrs, err = attrs.Encode(nil, []attrs.Pair{{Name: "trace_id", Value: fmt.Sprintf("%08x", i*7919)}, {Name: "x", Value: "\xff"}})
				if err != nil {
					panic(err)
				}
			}
			es = append(es, e)
		}
		path := filepath.Join(dir, "s")
		w, err := Create(path, Options{Codec: c, BlockSize: 100})
		if err != nil {
			panic(err)
		}
		for _, e := range es {
			w.Add(e)
		}
		if _, err := w.Commit(); err != nil {
			panic(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			panic(err)
		}
		r, err := newReader(path, data)
		if err != nil {
			panic(err)
		}
		for i := range r.NumBlocks() {
			m := r.BlockMeta(i)
			var st []byte
			for _, s := range m.Streams {
				st = append(st, byte(s))
			}
			seeds = append(seeds, decodeBlockSeed{
				version: formatVersion,
				body:    data[m.offset : m.offset+m.length-4], entries: uint16(m.Entries), raw: uint32(m.RawBytes),
				minT: m.MinTime, span: uint32(m.MaxTime - m.MinTime), streams: st,
			})
		}
	}
	return seeds
}

// forgeIndexOf returns the block index of a forged file.
func forgeIndexOf(f []byte) []byte {
	ft := f[len(f)-footerSize:]
	off := binary.LittleEndian.Uint64(ft[0:])
	n := binary.LittleEndian.Uint64(ft[8:])
	return f[off : off+n]
}

// FuzzRoundTrip writes entries derived from arbitrary bytes with options
// derived from them too, and requires reading them back exactly.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte("a\nb\n\nccc"), uint8(0), uint16(0))
	f.Add([]byte{0, 1, 2, 0xff, '\n', '\r', '\n'}, uint8(1), uint16(3))
	f.Add(bytes.Repeat([]byte("log line level=info\n"), 50), uint8(2), uint16(64))
	f.Add(bytes.Repeat([]byte("x"), 3000), uint8(5), uint16(1))
	f.Add([]byte("0;a;bb;0\n3x\n\x03\x00;\xff\n9"), uint8(3), uint16(8))
	f.Add([]byte(`{"m":"\u003cb\u003e \u0035"}`+"\n"+`k="\x35\065\U00000035\\u0036" \u00`+"\n35 \\"), uint8(1), uint16(30))
	dir := f.TempDir()
	n := 0
	f.Fuzz(func(t *testing.T, data []byte, opt uint8, bs uint16) {
		codecs := []Codec{CodecDefault, CodecNone, CodecLZ4, CodecZstd}
		o := Options{Codec: codecs[opt%4], BlockSize: int(bs)}
		if o.Codec == CodecLZ4 && opt&4 != 0 {
			o.Level = 1
		}
		if o.Codec == CodecZstd {
			o.Level = int(opt>>3) % 5
		}
		// Entries: split at '\n'; times and streams from the bytes around;
		// metadata for lines whose first byte is a multiple of 3, a pair
		// per ';'-separated part of the line, named by the part's length.
		var want []Entry
		for i, line := range bytes.Split(data, []byte("\n")) {
			var tm int64
			if len(line) >= 2 {
				tm = int64(int16(binary.LittleEndian.Uint16(line))) * 1e9
			}
			s := uint32(0)
			if len(line) > 0 {
				s = uint32(line[len(line)-1] % 5)
			}
			var a []byte
			if len(line) > 0 && line[0]%3 == 0 {
				var ps []attrs.Pair
				for _, p := range bytes.Split(line, []byte(";")) {
					ps = append(ps, attrs.Pair{Name: fmt.Sprintf("k%d", len(p)%200), Value: string(p)})
				}
				var err error
				if a, err = attrs.Encode(nil, ps); err != nil {
					a = nil // over a limit: no metadata
				}
			}
			want = append(want, Entry{Time: tm + int64(i), Stream: s, Line: line, Attrs: a})
		}
		n++
		path, info := writeSegment(t, dir, "rt"+strconv.Itoa(n), want, o)
		defer os.Remove(path)
		got, r := readAll(t, path)
		defer r.Close()
		equalEntries(t, got, want)
		if r.Info() != info {
			t.Fatalf("reader info %+v, writer %+v", r.Info(), info)
		}
		checkMayContain(t, r, want) // the skip index: no false negatives
		if !slices.ContainsFunc(r.grams.unindexed, func(w uint64) bool { return w != 0 }) {
			checkEscapes(t, r, want, true) // and exact escape grams
		}
	})
}

// writeFuzzSeeds writes the seed corpus of FuzzOpenAndRead (run with
// -update): small valid segments of each codec, an empty one, and a few
// damaged ones.
func writeFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzOpenAndRead")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	add := func(name string, data []byte) {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range []Options{{Codec: CodecNone, BlockSize: 40}, {Codec: CodecLZ4, BlockSize: 40}, {Codec: CodecZstd, BlockSize: 40}} {
		path, _ := writeSegment(t, tmp, o.Codec.String(), smallEntries()[:6], o)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		add("valid-"+o.Codec.String(), data)
		add("truncated-"+o.Codec.String(), data[:len(data)-1])
		flipped := bytes.Clone(data)
		flipped[headerSize+3] ^= 4
		add("flipped-"+o.Codec.String(), flipped)
	}
	path, _ := writeSegment(t, tmp, "empty", nil, Options{})
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	add("empty-segment", data)
	add("empty-file", nil)

	dir = filepath.Join("testdata", "fuzz", "FuzzDecodeBlock")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, sd := range decodeBlockSeeds() {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nuint16(%d)\nuint32(%d)\nint64(%d)\nuint32(%d)\n[]byte(%q)\n",
			sd.body, sd.entries, sd.raw, sd.minT, sd.span, sd.streams)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("block-%02d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDecodeBlockSeeds checks that the FuzzDecodeBlock seeds are valid
// blocks, so that the fuzzer starts from blocks that decode.
func TestDecodeBlockSeeds(t *testing.T) {
	for i, sd := range decodeBlockSeeds() {
		m := BlockMeta{MinTime: sd.minT, MaxTime: sd.minT + int64(sd.span), Entries: int(sd.entries), RawBytes: int(sd.raw)}
		for _, s := range sd.streams {
			m.Streams = append(m.Streams, uint32(s))
		}
		src := binary.LittleEndian.AppendUint32(bytes.Clone(sd.body), crc32.Checksum(sd.body, castagnoli))
		var b Block
		if err := decodeBlock(src, &m, &b, sd.version); err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
		checkBlock(t, m, &b)
	}
}

func TestFuzzSeeds(t *testing.T) {
	if *update {
		writeFuzzSeeds(t)
	}
	ents, err := os.ReadDir(filepath.Join("testdata", "fuzz", "FuzzOpenAndRead"))
	if err != nil || len(ents) < 5 {
		t.Fatalf("fuzz seeds missing (%v); run go test ./internal/segment -update", err)
	}
	if ents, err := os.ReadDir(filepath.Join("testdata", "fuzz", "FuzzDecodeBlock")); err != nil || len(ents) < 4 {
		t.Fatalf("fuzz seeds missing (%v); run go test ./internal/segment -update", err)
	}
}
