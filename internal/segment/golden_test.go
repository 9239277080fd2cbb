package segment

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"haystack/internal/attrs"
)

var update = flag.Bool("update", false, "rewrite testdata/golden-*.seg from the current writer")

// goldenEntries is the fixed input of the golden files. Never change it:
// the files pin the format.
func goldenEntries() []Entry {
	var es []Entry
	lines := []string{
		"2015-07-29 17:41:44,747 - INFO  [QuorumPeer] - LOOKING",
		"",
		"multi\nline\nentry",
		"Jun 14 15:16:01 combo sshd(pam_unix)[19939]: authentication failure",
		"\x00\x01\xff binary \r\n",
		"081109 203615 148 INFO dfs.DataNode$PacketResponder: PacketResponder 1 for block blk_38865049064139660 terminating",
	}
	for i := range 40 {
		es = append(es, Entry{
			Time:   1_438_191_704_747_000_000 + int64(i%7)*1_000_000 - int64(i%3)*5_000_000,
			Stream: uint32(i%4) * 1000,
			Line:   []byte(lines[i%len(lines)]),
		})
	}
	return es
}

// goldenAttrEntries is the fixed input of the version-4 and -5 golden files:
// goldenEntries with metadata on some entries, none on a run of them
// long enough for blocks without any. Never change it either.
func goldenAttrEntries() []Entry {
	es := goldenEntries()
	for i := range es {
		var ps []attrs.Pair
		switch {
		case i < 12 && i%2 == 0:
			ps = []attrs.Pair{{Name: "trace_id", Value: fmt.Sprintf("%032x", uint64(i)*0x9E3779B97F4A7C15)}, {Name: "span_id", Value: fmt.Sprintf("%016x", i*7919)}}
		case i >= 26 && i%3 != 0:
			ps = []attrs.Pair{{Name: "severity", Value: []string{"INFO", "WARN"}[i%2]}, {Name: "bin", Value: "\x00\xff\n" + strconv.Itoa(i)}}
		}
		a, err := attrs.Encode(nil, ps)
		if err != nil {
			panic(err)
		}
		es[i].Attrs = a
	}
	return es
}

// goldens are the golden files and their options. The uncompressed ones
// (golden-v2.seg, golden-v3.seg, golden-v4.seg) depend on this package alone, so the
// byte-identical check pins the format. The compressed ones depend on the
// codec libraries' encoders too, so they are only required to decode to
// the golden entries (old files must stay readable); -update rewrites
// them. The version-1 files were written before the skip index and are
// never rewritten: they must stay readable, and their blocks say "maybe"
// to every needle. Version-2 files are still written (by the bloom
// filter writer that tests keep) and compared, so that the reader of
// version 2 stays tested against what version 2 wrote; so are version-3
// files. The version-4 to version-6 files hold goldenAttrEntries, with
// metadata; they differ only in the skip index, to which version 5 adds
// an index of the metadata values and version 6 per-block filters of
// whole values. The version-7 files hold goldenEscapeEntries, whose
// lines have escapes, of which version 7 adds escape grams to the
// lines' index.
var goldens = []struct {
	file          string
	opts          Options
	version       uint32
	byteIdentical bool
}{
	{"golden-v1.seg", Options{Codec: CodecNone, BlockSize: 512}, formatV1, false},
	{"golden-v1-lz4.seg", Options{Codec: CodecLZ4, BlockSize: 512}, formatV1, false},
	{"golden-v1-zstd.seg", Options{Codec: CodecZstd, BlockSize: 512}, formatV1, false},
	{"golden-v2.seg", Options{Codec: CodecNone, BlockSize: 512}, formatV2, true},
	{"golden-v2-lz4.seg", Options{Codec: CodecLZ4, BlockSize: 512}, formatV2, false},
	{"golden-v2-zstd.seg", Options{Codec: CodecZstd, BlockSize: 512}, formatV2, false},
	{"golden-v3.seg", Options{Codec: CodecNone, BlockSize: 512}, formatV3, true},
	{"golden-v3-lz4.seg", Options{Codec: CodecLZ4, BlockSize: 512}, formatV3, false},
	{"golden-v3-zstd.seg", Options{Codec: CodecZstd, BlockSize: 512}, formatV3, false},
	{"golden-v4.seg", Options{Codec: CodecNone, BlockSize: 512}, formatV4, true},
	{"golden-v4-lz4.seg", Options{Codec: CodecLZ4, BlockSize: 512}, formatV4, false},
	{"golden-v4-zstd.seg", Options{Codec: CodecZstd, BlockSize: 512}, formatV4, false},
	{"golden-v5.seg", Options{Codec: CodecNone, BlockSize: 512}, formatV5, true},
	{"golden-v5-lz4.seg", Options{Codec: CodecLZ4, BlockSize: 512}, formatV5, false},
	{"golden-v5-zstd.seg", Options{Codec: CodecZstd, BlockSize: 512}, formatV5, false},
	{"golden-v6.seg", Options{Codec: CodecNone, BlockSize: 512}, formatV6, true},
	{"golden-v6-lz4.seg", Options{Codec: CodecLZ4, BlockSize: 512}, formatV6, false},
	{"golden-v6-zstd.seg", Options{Codec: CodecZstd, BlockSize: 512}, formatV6, false},
	{"golden-v7.seg", Options{Codec: CodecNone, BlockSize: 512}, formatVersion, true},
	{"golden-v7-lz4.seg", Options{Codec: CodecLZ4, BlockSize: 512}, formatVersion, false},
	{"golden-v7-zstd.seg", Options{Codec: CodecZstd, BlockSize: 512}, formatVersion, false},
}

// goldenEscapeEntries is the fixed input of the version-7 golden files:
// goldenAttrEntries with every fifth line one with escapes (JSON from Go
// with \u003c, logfmt's and Go's quoted escapes, upper-case hex digits,
// an escaped backslash). Never change it either.
func goldenEscapeEntries() []Entry {
	es := goldenAttrEntries()
	lines := []string{
		`{"level":"info","msg":"\u003cb\u003e ok \u0026 done","trace_id":"5f89b9dc03bdc1981f886353c7c0df13"}`,
		`level=warn msg="\x35f\070\u0039\U00000041" user=\u004A`,
		`{"path":"C:\\u0035","k":"\u003C\u00e9\ud83d\ude00"}`,
	}
	for i := range es {
		if i%5 == 2 {
			es[i].Line = []byte(lines[i/5%len(lines)])
		}
	}
	return es
}

// goldenFor returns the golden entries of a file of format version.
func goldenFor(version uint32) []Entry {
	if version >= formatVersion {
		return goldenEscapeEntries()
	}
	if version >= formatV4 {
		return goldenAttrEntries()
	}
	return goldenEntries()
}

func TestGolden(t *testing.T) {
	for _, g := range goldens {
		t.Run(g.file, func(t *testing.T) {
			golden := filepath.Join("testdata", g.file)
			if g.version == formatV1 {
				entries, r := readAll(t, golden)
				equalEntries(t, entries, goldenEntries())
				if r.Info().SkipBytes != 0 {
					t.Errorf("version 1 file has a skip index")
				}
				for i := range r.NumBlocks() {
					if !r.MayContain(i, []byte("absent from every entry"), false) {
						t.Errorf("version 1 block %d: MayContain false without an index", i)
					}
				}
				return
			}
			path, _ := writeSegmentVersion(t, t.TempDir(), "seg", goldenFor(g.version), g.opts, g.version)
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/segment -update to create it)", err)
			}
			if g.byteIdentical && !bytes.Equal(got, want) {
				t.Errorf("writer output differs from %s (%d vs %d bytes, first difference at %d); "+
					"a format change needs a new version, not -update", golden, len(got), len(want), firstDiff(got, want))
			}
			entries, r := readAll(t, golden)
			equalEntries(t, entries, goldenFor(g.version))
			if v := binary.LittleEndian.Uint32(want[8:]); v != g.version {
				t.Errorf("%s is version %d", golden, v)
			}
			if r.NumBlocks() < 3 {
				t.Errorf("golden file has %d blocks; it should exercise several", r.NumBlocks())
			}
			checkMayContain(t, r, entries)
			if g.version >= formatV3 {
				checkExact(t, r, entries, goldenNeedles(entries))
			}
			checkExactValues(t, r, entries, goldenNeedles(entries))
			if got, want := r.MetaIndexed(), g.version >= formatV5; got != want {
				t.Errorf("MetaIndexed() = %v in version %d", got, g.version)
			}
			if got, want := r.ValueFiltered(), g.version >= formatV6; got != want {
				t.Errorf("ValueFiltered() = %v in version %d", got, g.version)
			}
			checkValueFilters(t, r, entries, g.version >= formatV6)
			if g.version >= formatV3 {
				checkEscapes(t, r, entries, g.version >= formatVersion)
			}
		})
	}
}

// goldenNeedles are needles for the exactness check of the golden files:
// absent ones, and pieces of the entries.
func goldenNeedles(entries []Entry) [][]byte {
	ns := [][]byte{[]byte("absent from every entry"), []byte("LOOKING"), []byte("looking"), []byte("ENTRY"), []byte("\x00\x01\xff b"), []byte("lineline")}
	for _, e := range entries[:6] {
		for i := 0; i+6 <= len(e.Line); i += 5 {
			ns = append(ns, e.Line[i:i+6])
		}
	}
	// Metadata values and pieces of them: in version 5 the values' index
	// holds them (in the blocks whose entries carry them), the lines'
	// index never.
	for _, e := range entries {
		attrs.Each(e.Attrs, func(_, v []byte) bool {
			ns = append(ns, v)
			for i := 0; i+5 <= len(v); i += 7 {
				ns = append(ns, v[i:i+5])
			}
			return true
		})
	}
	return ns
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestGoldenLayout decodes golden-v2.seg by hand, independently of the
// reader, following the package doc, so that the doc and the file agree.
func TestGoldenLayout(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "golden-v2.seg"))
	if err != nil {
		t.Fatal(err)
	}
	le := func(b []byte) uint64 {
		var v uint64
		for i := len(b) - 1; i >= 0; i-- {
			v = v<<8 | uint64(b[i])
		}
		return v
	}
	if string(data[:8]) != "HAYSTSEG" || le(data[8:12]) != 2 || le(data[12:16]) != 0 {
		t.Fatalf("header %q", data[:16])
	}
	ft := data[len(data)-72:]
	if string(ft[64:]) != "HAYSTSEG" || le(ft[44:48]) != 2 || le(ft[48:56]) != uint64(len(data)) {
		t.Fatalf("footer %x", ft)
	}
	idxOff, idxLen := le(ft[0:8]), le(ft[8:16])
	skipOff, skipLen := le(ft[24:32]), le(ft[32:40])
	if idxOff+idxLen != skipOff || skipOff+skipLen != uint64(len(data)-72) {
		t.Fatalf("index %d+%d, skip index %d+%d", idxOff, idxLen, skipOff, skipLen)
	}
	if crc32.Checksum(data[skipOff:skipOff+skipLen], crc32.MakeTable(crc32.Castagnoli)) != uint32(le(ft[40:44])) {
		t.Fatalf("skip index checksum")
	}
	// The skip index: block count, then per block the filter's size in
	// bytes, the filter and a CRC; the first entry's first 4-gram, lowered
	// ("2015"), hashed as the doc says, is set in block 0's filter.
	skip := data[skipOff : skipOff+skipLen]
	nb, k := binary.Uvarint(skip)
	if nb != le(ft[20:24]) || k != 1 {
		t.Fatalf("skip index has %d blocks", nb)
	}
	size, k2 := binary.Uvarint(skip[1:])
	filter := skip[1+k2 : 1+k2+int(size)]
	g := uint64('2')<<24 | uint64('0')<<16 | uint64('1')<<8 | uint64('5')
	h := (g * 0x9E3779B97F4A7C15) >> 32
	p := h % (size * 8)
	if filter[p/8]&(1<<(p%8)) == 0 {
		t.Fatalf("gram \"2015\" not set in block 0's filter (%d bytes, bit %d)", size, p)
	}
	// With codec none, the first block's data section holds the first
	// entries' bytes verbatim right after the block header.
	if data[16] != byte(CodecNone) {
		t.Fatalf("first block codec %d", data[16])
	}
	first := goldenEntries()[0].Line
	if !bytes.Contains(data[16:16+64+len(first)], first) {
		t.Fatalf("first entry not stored verbatim near the first block")
	}
}

// TestGoldenLayoutV4 decodes golden-v4.seg's blocks by hand, independently
// of the reader, following the package doc: the block index gives each
// block's length, the block header three codec bytes and seven uvarints,
// and the attrs section (stored raw in this file, or empty) each entry's
// metadata length and then the metadata.
func TestGoldenLayoutV4(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "golden-v4.seg"))
	if err != nil {
		t.Fatal(err)
	}
	le32 := binary.LittleEndian.Uint32
	le64 := binary.LittleEndian.Uint64
	if string(data[:8]) != "HAYSTSEG" || le32(data[8:]) != 4 {
		t.Fatalf("header %q", data[:16])
	}
	ft := data[len(data)-72:]
	if le32(ft[44:]) != 4 {
		t.Fatalf("footer version %d", le32(ft[44:]))
	}
	idx := data[le64(ft[0:]) : le64(ft[0:])+le64(ft[8:])]
	uv := func(b *[]byte) uint64 {
		v, n := binary.Uvarint(*b)
		if n <= 0 {
			t.Fatal("bad uvarint")
		}
		*b = (*b)[n:]
		return v
	}
	nb := uv(&idx)
	want := goldenAttrEntries()
	off := uint64(16)
	k := 0 // next entry
	sawNone, sawSome := false, false
	for range nb {
		length := uv(&idx)
		binary.Varint(idx) // minTime
		_, n := binary.Varint(idx)
		idx = idx[n:]
		uv(&idx) // span
		entries := uv(&idx)
		uv(&idx) // raw bytes
		for range uv(&idx) {
			uv(&idx) // streams
		}
		blk := data[off : off+length]
		off += length
		if crc32.Checksum(blk[:len(blk)-4], crc32.MakeTable(crc32.Castagnoli)) != le32(blk[len(blk)-4:]) {
			t.Fatal("block CRC")
		}
		if blk[0] != 1 || blk[1] != 1 || blk[2] != 1 {
			t.Fatalf("codecs %d %d %d, want none", blk[0], blk[1], blk[2])
		}
		h := blk[3 : len(blk)-4]
		if uv(&h) != entries {
			t.Fatal("header entries differ from the index's")
		}
		uv(&h)
		dataStored := uv(&h)
		uv(&h)
		metaStored := uv(&h)
		attrsRaw, attrsStored := uv(&h), uv(&h)
		if attrsRaw != attrsStored || uint64(len(h)) != dataStored+metaStored+attrsStored {
			t.Fatalf("sections %d+%d+%d in %d bytes", dataStored, metaStored, attrsStored, len(h))
		}
		sec := h[dataStored+metaStored:]
		if len(sec) == 0 {
			sawNone = true
			for j := range entries {
				if len(want[k+int(j)].Attrs) != 0 {
					t.Fatalf("entry %d: metadata missing from a block without an attrs section", k+int(j))
				}
			}
			k += int(entries)
			continue
		}
		sawSome = true
		lens := make([]uint64, entries)
		for j := range lens {
			lens[j] = uv(&sec)
		}
		for _, l := range lens {
			if !bytes.Equal(sec[:l], want[k].Attrs) {
				t.Fatalf("entry %d: metadata %q, want %q", k, sec[:l], want[k].Attrs)
			}
			sec = sec[l:]
			k++
		}
		if len(sec) != 0 {
			t.Fatalf("%d bytes after the metadata", len(sec))
		}
	}
	if k != len(want) || !sawNone || !sawSome {
		t.Fatalf("%d entries; blocks without metadata %v, with %v", k, sawNone, sawSome)
	}
}

// checkValueFilters checks MayHaveValue on r, whose entries are es (in
// block order): never false for a value some entry of the block has
// (under any name), and, when filtered (version 6), false for most
// values the block lacks; always true before version 6.
func checkValueFilters(t *testing.T, r *Reader, es []Entry, filtered bool) {
	t.Helper()
	all := map[string]bool{}
	per := make([]map[string]bool, r.NumBlocks())
	k := 0
	for i := range r.NumBlocks() {
		per[i] = map[string]bool{}
		for range r.BlockMeta(i).Entries {
			attrs.Each(es[k].Attrs, func(_, v []byte) bool {
				per[i][string(v)] = true
				all[string(v)] = true
				return true
			})
			k++
		}
	}
	all["absent from every entry"] = true
	all[""] = true
	absent, said := 0, 0
	for i := range r.NumBlocks() {
		for v := range all {
			got := r.MayHaveValue(i, []byte(v))
			switch {
			case per[i][v] && !got:
				t.Fatalf("block %d: MayHaveValue(%q) false, but an entry has it", i, v)
			case !per[i][v]:
				absent++
				if !got {
					said++
				}
			}
		}
	}
	if !filtered && said > 0 {
		t.Errorf("MayHaveValue false %d times without value filters", said)
	}
	if filtered && said*10 < absent*9 {
		t.Errorf("MayHaveValue false for %d of %d absent (block, value) pairs: want ~99%%", said, absent)
	}
}
