package segment

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"haystack/internal/attrs"
)

// writeSegment writes entries with opts to dir/name and returns the path
// and the writer's Info.
func writeSegment(t testing.TB, dir, name string, entries []Entry, opts Options) (string, Info) {
	t.Helper()
	return writeSegmentVersion(t, dir, name, entries, opts, formatVersion)
}

// writeSegmentVersion is writeSegment in format version (formatVersion or
// formatV2).
func writeSegmentVersion(t testing.TB, dir, name string, entries []Entry, opts Options, version uint32) (string, Info) {
	t.Helper()
	path := filepath.Join(dir, name)
	w, err := create(path, opts, version)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := w.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	info, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	return path, info
}

// readAll opens path and decodes every entry, checking the structure the
// API promises along the way.
func readAll(t testing.TB, path string) ([]Entry, *Reader) {
	t.Helper()
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	var out []Entry
	b := GetBlock()
	defer PutBlock(b)
	for i := range r.NumBlocks() {
		if err := r.ReadBlock(i, b); err != nil {
			t.Fatal(err)
		}
		checkBlock(t, r.BlockMeta(i), b)
		for k := range b.Len() {
			e := b.Entry(k)
			e.Line, e.Attrs = bytes.Clone(e.Line), bytes.Clone(e.Attrs)
			out = append(out, e)
		}
	}
	return out, r
}

// checkBlock checks a decoded block against its index entry.
func checkBlock(t testing.TB, m BlockMeta, b *Block) {
	t.Helper()
	n := m.Entries
	if len(b.Offsets) != n+1 || len(b.Times) != n || len(b.Streams) != n || len(b.Data) != m.RawBytes {
		t.Fatalf("block shape: %d offsets, %d times, %d streams, %d bytes; meta %+v", len(b.Offsets), len(b.Times), len(b.Streams), len(b.Data), m)
	}
	if b.Offsets[0] != 0 || int(b.Offsets[n]) != len(b.Data) {
		t.Fatalf("offsets do not span Data")
	}
	for k := range n {
		if b.Offsets[k] > b.Offsets[k+1] {
			t.Fatalf("offsets not monotonic at %d", k)
		}
	}
	lo, hi := slices.Min(b.Times), slices.Max(b.Times)
	if lo != m.MinTime || hi != m.MaxTime {
		t.Fatalf("times [%d,%d], meta [%d,%d]", lo, hi, m.MinTime, m.MaxTime)
	}
	st := slices.Clone(b.Streams)
	slices.Sort(st)
	if st = slices.Compact(st); !slices.Equal(st, m.Streams) {
		t.Fatalf("streams %v, meta %v", st, m.Streams)
	}
	// Metadata: none at all, or n+1 offsets spanning AttrData with at
	// least one entry's metadata, each valid.
	if len(b.AttrOffsets) == 0 {
		if len(b.AttrData) != 0 {
			t.Fatalf("%d bytes of AttrData without offsets", len(b.AttrData))
		}
		for k := range n {
			if b.Attrs(k) != nil {
				t.Fatalf("entry %d has metadata in a block without", k)
			}
		}
		return
	}
	if len(b.AttrOffsets) != n+1 || b.AttrOffsets[0] != 0 || int(b.AttrOffsets[n]) != len(b.AttrData) || len(b.AttrData) == 0 {
		t.Fatalf("attr offsets: %d for %d entries, spanning %d of %d bytes", len(b.AttrOffsets), n, b.AttrOffsets[n%len(b.AttrOffsets)], len(b.AttrData))
	}
	for k := range n {
		if b.AttrOffsets[k] > b.AttrOffsets[k+1] {
			t.Fatalf("attr offsets not monotonic at %d", k)
		}
		if err := attrs.Validate(b.Attrs(k)); err != nil {
			t.Fatalf("entry %d: metadata %q: %v", k, b.Attrs(k), err)
		}
	}
}

func equalEntries(t testing.TB, got, want []Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Time != w.Time || g.Stream != w.Stream || !bytes.Equal(g.Line, w.Line) || !bytes.Equal(g.Attrs, w.Attrs) {
			t.Fatalf("entry %d: got {%d %d %q %q}, want {%d %d %q %q}", i, g.Time, g.Stream, trunc(g.Line), trunc(g.Attrs), w.Time, w.Stream, trunc(w.Line), trunc(w.Attrs))
		}
	}
}

func trunc(b []byte) []byte {
	if len(b) > 60 {
		return b[:60]
	}
	return b
}

// wantInfo computes the Info a segment of entries must report.
func wantInfo(entries []Entry) Info {
	var in Info
	for i, e := range entries {
		if i == 0 {
			in.MinTime, in.MaxTime = e.Time, e.Time
		}
		in.MinTime = min(in.MinTime, e.Time)
		in.MaxTime = max(in.MaxTime, e.Time)
		in.RawBytes += int64(len(e.Line))
	}
	in.Entries = int64(len(entries))
	return in
}

// corpora returns named entry sets covering the edges the format must keep.
func corpora() map[string][]Entry {
	c := map[string][]Entry{}

	var allBytes []Entry
	for v := range 256 {
		allBytes = append(allBytes, Entry{Time: int64(v), Stream: 1, Line: bytes.Repeat([]byte{byte(v)}, v%7+1)})
	}
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	allBytes = append(allBytes, Entry{Time: 1000, Stream: 2, Line: all})
	c["every-byte"] = allBytes

	c["empty-entries"] = []Entry{{}, {Time: 5}, {Time: 5, Line: []byte("x")}, {}, {Time: -3}, {}}
	c["newlines"] = []Entry{
		{Time: 1, Line: []byte("a\nb")}, {Time: 2, Line: []byte("\n")}, {Time: 3, Line: []byte("\n\n\r\n")},
		{Time: 4, Line: []byte("trailing\n")}, {Time: 5, Line: []byte("\nleading")},
	}

	rng := rand.New(rand.NewPCG(1, 2))
	huge := make([]byte, 300_000)
	for i := range huge {
		huge[i] = byte('a' + rng.IntN(26))
	}
	c["huge"] = []Entry{
		{Time: 1, Line: []byte("small before")},
		{Time: 2, Line: huge},
		{Time: 3, Line: huge[:70_000]},
		{Time: 4, Line: []byte("small after")},
		{Time: 5, Line: huge[5:]},
	}

	var many []Entry
	for i := range 3000 {
		s := uint32(rng.IntN(500))
		if i%100 == 0 {
			s = math.MaxUint32 - uint32(i)
		}
		many = append(many, Entry{Time: int64(i / 10), Stream: s, Line: fmt.Appendf(nil, "stream %d line %d", s, i)})
	}
	c["many-streams"] = many

	var times []Entry
	ts := []int64{5, 5, 5, 4, 3, 3, 10, -10, math.MaxInt64, math.MinInt64, 0, math.MinInt64, math.MaxInt64, 7, 7}
	for i, tm := range ts {
		times = append(times, Entry{Time: tm, Stream: uint32(i % 3), Line: fmt.Appendf(nil, "t=%d", tm)})
	}
	c["odd-times"] = times

	var scaled []Entry
	for i := range 400 {
		// Whole seconds and milliseconds, going back at times, around 0.
		unit := []int64{1e9, 1e6, 1e3}[i/150]
		scaled = append(scaled, Entry{Time: (int64(i) - 200 - int64(i%3)*7) * unit, Stream: uint32(i % 2), Line: []byte("s")})
	}
	c["scaled-times"] = scaled

	var logs []Entry
	for i := range 5000 {
		logs = append(logs, Entry{
			Time:   1_700_000_000_000_000_000 + int64(i)*1_000_000 - int64(rng.IntN(3_000_000)),
			Stream: uint32(i % 4),
			Line: fmt.Appendf(nil, "2026-11-30T01:%02d:%02d.%03dZ level=%s msg=%q user=%d latency=%dms",
				i/60%60, i%60, i%1000, []string{"info", "warn", "error", "debug"}[rng.IntN(4)],
				[]string{"request served", "cache miss", "timeout talking to db", "retrying"}[rng.IntN(4)],
				rng.IntN(10000), rng.IntN(2000)),
		})
	}
	c["logs"] = logs

	var random []Entry
	for range 500 {
		l := make([]byte, rng.IntN(300))
		for j := range l {
			l[j] = byte(rng.Uint32())
		}
		random = append(random, Entry{Time: int64(rng.Uint64()), Stream: rng.Uint32(), Line: l})
	}
	c["random"] = random
	return c
}

func optionSets() []Options {
	return []Options{
		{},
		{Codec: CodecNone, BlockSize: 1},
		{Codec: CodecNone, BlockSize: 100},
		{Codec: CodecLZ4, BlockSize: 7},
		{Codec: CodecLZ4, BlockSize: 4096},
		{Codec: CodecLZ4, BlockSize: 64 << 10, Level: 9},
		{Codec: CodecZstd, BlockSize: 33},
		{Codec: CodecZstd, BlockSize: 4096, Level: 1},
		{Codec: CodecZstd, BlockSize: 1 << 20, Level: 3},
	}
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for name, entries := range corpora() {
		for _, o := range optionSets() {
			t.Run(fmt.Sprintf("%s/%v-%d-%d", name, o.Codec, o.BlockSize, o.Level), func(t *testing.T) {
				path, winfo := writeSegment(t, dir, "seg", entries, o)
				got, r := readAll(t, path)
				equalEntries(t, got, entries)
				want := wantInfo(entries)
				want.Blocks = r.NumBlocks()
				st, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				want.FileBytes = st.Size()
				want.SkipBytes = winfo.SkipBytes // checked by TestSkip*
				if winfo != want || r.Info() != want {
					t.Fatalf("infos differ:\nwriter %+v\nreader %+v\nwant   %+v", winfo, r.Info(), want)
				}
				if r.Path() != path {
					t.Fatalf("Path() = %q", r.Path())
				}
				if err := r.Verify(); err != nil {
					t.Fatal(err)
				}
				checkBlockSizes(t, r, o)
				if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("temp file left behind: %v", err)
				}
			})
		}
	}
}

// checkBlockSizes checks that blocks respect the target size: every block
// with more than one entry fits in BlockSize (counting a byte per entry),
// and no block could have taken the next block's first entry.
func checkBlockSizes(t *testing.T, r *Reader, o Options) {
	bs := o.BlockSize
	if bs == 0 {
		bs = DefaultBlockSize
	}
	var b Block
	prev := -1 // fill of the previous block
	for i := range r.NumBlocks() {
		m := r.BlockMeta(i)
		if err := r.ReadBlock(i, &b); err != nil {
			t.Fatal(err)
		}
		fill := m.RawBytes + len(b.AttrData) + m.Entries
		if m.Entries > 1 && fill > bs {
			t.Fatalf("block %d holds %d bytes in %d entries, over the %d target", i, fill, m.Entries, bs)
		}
		if first := len(b.Line(0)) + len(b.Attrs(0)); prev >= 0 && prev < bs && BlockHasRoom(prev, first, bs) {
			t.Fatalf("block %d of %d bytes had room for block %d's first entry of %d", i-1, prev, i, first)
		}
		prev = fill
	}
}

func TestEmptySegment(t *testing.T) {
	path, info := writeSegment(t, t.TempDir(), "empty", nil, Options{})
	got, r := readAll(t, path)
	if len(got) != 0 || r.NumBlocks() != 0 || info.Blocks != 0 || info.Entries != 0 {
		t.Fatalf("empty segment: %d entries, %d blocks, info %+v", len(got), r.NumBlocks(), info)
	}
	// One byte of block count in the block index; the skip index has two
	// indexes (lines, metadata values) of three bytes each (block count,
	// unindexed blocks and grams, all 0), each framed by its length, and
	// an empty value filters section.
	if info.FileBytes != headerSize+footerSize+9 || info.SkipBytes != 8 || r.Info() != info {
		t.Fatalf("info %+v, reader %+v", info, r.Info())
	}
}

func TestWriterLifecycle(t *testing.T) {
	dir := t.TempDir()
	final := filepath.Join(dir, "a.seg")
	w, err := Create(final, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(final + ".tmp"); err != nil {
		t.Fatalf("no temp file: %v", err)
	}
	if err := w.Add(Entry{Line: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("abort left %v", ents)
	}
	if err := w.Add(Entry{}); err == nil {
		t.Fatal("Add after Abort succeeded")
	}
	if _, err := w.Commit(); err == nil {
		t.Fatal("Commit after Abort succeeded")
	}

	// A stale temp file from a crash is replaced.
	if err := os.WriteFile(final+".tmp", []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err = Create(final, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(Entry{Time: 1, Line: bytes.Repeat([]byte("y"), MaxEntryBytes+1)}); err == nil {
		t.Fatal("oversized entry accepted")
	}
	if err := w.Add(Entry{Time: 1, Line: []byte("ok")}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(); err == nil {
		t.Fatal("second Commit succeeded")
	}
	got, _ := readAll(t, final)
	equalEntries(t, got, []Entry{{Time: 1, Line: []byte("ok")}})

	for _, o := range []Options{{BlockSize: -1}, {BlockSize: MaxBlockSize + 1}, {Codec: 9}, {Codec: CodecZstd, Level: 7}, {Codec: CodecLZ4, Level: 10}} {
		if _, err := Create(filepath.Join(dir, "bad"), o); err == nil {
			t.Fatalf("Create accepted %+v", o)
		}
	}
	if _, err := Create(filepath.Join(dir, "no/such/dir/x"), Options{}); err == nil {
		t.Fatal("Create in a missing directory succeeded")
	}
}

func TestReaderMisuse(t *testing.T) {
	path, _ := writeSegment(t, t.TempDir(), "s", corpora()["newlines"], Options{BlockSize: 8})
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	b := GetBlock()
	if err := r.ReadBlock(-1, b); err == nil {
		t.Fatal("ReadBlock(-1) succeeded")
	}
	if err := r.ReadBlock(r.NumBlocks(), b); err == nil {
		t.Fatal("ReadBlock(n) succeeded")
	}
	if err := r.ReadBlock(0, b); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// Decoded data survives Close.
	if string(b.Line(0)) != "a\nb" {
		t.Fatalf("line 0 = %q after Close", b.Line(0))
	}
	if err := r.ReadBlock(0, b); err == nil {
		t.Fatal("ReadBlock after Close succeeded")
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing")); err == nil || errors.As(err, new(*CorruptError)) {
		t.Fatalf("Open of a missing file: %v", err)
	}
}

// TestBlockBuffersReused checks that decoding into a used Block gives the
// same rows whatever the previous contents, large or small.
func TestBlockBuffersReused(t *testing.T) {
	c := corpora()
	dir := t.TempDir()
	p1, _ := writeSegment(t, dir, "a", c["huge"], Options{BlockSize: 1000})
	p2, _ := writeSegment(t, dir, "b", c["logs"], Options{BlockSize: 1000, Codec: CodecLZ4})
	r1, err := Open(p1)
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	r2, err := Open(p2)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	b := new(Block)
	var got []Entry
	for i := range r2.NumBlocks() {
		if err := r1.ReadBlock(i%r1.NumBlocks(), b); err != nil {
			t.Fatal(err)
		}
		if err := r2.ReadBlock(i, b); err != nil {
			t.Fatal(err)
		}
		checkBlock(t, r2.BlockMeta(i), b)
		for k := range b.Len() {
			e := b.Entry(k)
			e.Line = bytes.Clone(e.Line)
			got = append(got, e)
		}
	}
	equalEntries(t, got, c["logs"])
}

func TestCodecNames(t *testing.T) {
	for _, c := range []Codec{CodecDefault, CodecNone, CodecLZ4, CodecZstd} {
		p, err := ParseCodec(c.String())
		if err != nil || p != c {
			t.Fatalf("ParseCodec(%q) = %v, %v", c.String(), p, err)
		}
	}
	if _, err := ParseCodec("gzip"); err == nil {
		t.Fatal("ParseCodec(gzip) succeeded")
	}
	if s := Codec(77).String(); !strings.Contains(s, "77") {
		t.Fatalf("Codec(77) = %q", s)
	}
}

// TestSectionsCompressedSeparately checks that a meta section that does not
// shrink (random times, streams and lengths: nothing for LZ4 to match) does
// not make the writer store the compressible data section raw as well.
func TestSectionsCompressedSeparately(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var es []Entry
	var raw int
	for range 2000 {
		l := bytes.Repeat([]byte("GET /api "), 1+rng.IntN(100))
		raw += len(l)
		es = append(es, Entry{Time: int64(rng.Uint64()), Stream: rng.Uint32(), Line: l})
	}
	path, info := writeSegment(t, t.TempDir(), "s", es, Options{Codec: CodecLZ4, BlockSize: 64 << 10})
	got, r := readAll(t, path)
	equalEntries(t, got, es)
	// The meta alone is at most 2000*(1+10+5+1) bytes stored raw; the data
	// compresses to a small fraction of its raw size.
	if info.FileBytes > int64(raw)/4+2000*17 {
		t.Errorf("%d bytes for %d raw: data section stored uncompressed?", info.FileBytes, raw)
	}
	// And the meta really was stored raw, or this test proves nothing.
	m := r.BlockMeta(0)
	if blk := r.data[m.offset:]; Codec(blk[0]) != CodecLZ4 || Codec(blk[1]) != CodecNone {
		t.Errorf("block 0 codecs %d/%d, want lz4 data and raw meta", blk[0], blk[1])
	}
}

func TestTimeScale(t *testing.T) {
	for _, c := range []struct {
		times []int64
		want  int
	}{
		{nil, 0},
		{[]int64{123}, 0},
		{[]int64{5, 5, 5}, maxTimeScale},
		{[]int64{0, 1e6, 3e6, -2e6}, 6},
		{[]int64{1, 1e9 + 1, 1}, 9},
		{[]int64{0, 1e9, 1e9 + 10}, 1},
		{[]int64{0, 7}, 0},
		{[]int64{math.MinInt64, math.MaxInt64}, 0},
		{[]int64{-1e18, 1e18}, 18},
	} {
		if got := timeScale(c.times); got != c.want {
			t.Errorf("timeScale(%v) = %d, want %d", c.times, got, c.want)
		}
	}
}

// TestDefaultCodecChoice checks the default codec's per-block choice: LZ4
// where it reaches AutoMinRatio, zstd where it does not but zstd shrinks
// the data, none where nothing does.
func TestDefaultCodecChoice(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	hex := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = "0123456789abcdef"[rng.IntN(16)]
		}
		return b
	}
	gen := map[string]func(i int) []byte{
		"lz4": func(i int) []byte {
			return fmt.Appendf(nil, "INFO request served path=/api/v1/items status=200 n=%d", i%10)
		},
		// Random ids in fixed text: LZ4 gets the text but not the ids
		// (< 4x); zstd also entropy-codes the ids' 4-bit alphabet.
		"zstd": func(i int) []byte {
			return fmt.Appendf(nil, "level=info msg=handled trace_id=%s span_id=%s", hex(32), hex(16))
		},
		"none": func(i int) []byte {
			b := make([]byte, 80)
			for j := range b {
				b[j] = byte(rng.Uint32())
			}
			return b
		},
	}
	for want, g := range gen {
		var es []Entry
		for i := range 3000 {
			es = append(es, Entry{Time: int64(i) * 1e6, Line: g(i)})
		}
		path, _ := writeSegment(t, t.TempDir(), "s", es, Options{BlockSize: 16 << 10})
		got, r := readAll(t, path)
		equalEntries(t, got, es)
		for i := range r.NumBlocks() {
			m := r.BlockMeta(i)
			if c := Codec(r.data[m.offset]); c.String() != want {
				t.Errorf("%s data: block %d stored with %v", want, i, c)
			}
		}
	}
}

// TestConcurrentReadBlock reads one segment from several goroutines at
// once (run with -race): ReadBlock shares the mapping and the zstd decoder.
func TestConcurrentReadBlock(t *testing.T) {
	entries := corpora()["logs"]
	path, _ := writeSegment(t, t.TempDir(), "s", entries, Options{BlockSize: 8 << 10})
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	errs := make(chan error, 4)
	for g := range 4 {
		go func() {
			b := GetBlock()
			defer PutBlock(b)
			k := 0
			for i := range r.NumBlocks() {
				if err := r.ReadBlock((i+g)%r.NumBlocks(), b); err != nil {
					errs <- err
					return
				}
				k += b.Len()
			}
			if k != len(entries) {
				errs <- fmt.Errorf("goroutine %d read %d entries, want %d", g, k, len(entries))
				return
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
