package segment

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"haystack/internal/attrs"
)

// metaNeedles are needles for the metadata exactness check: metadata
// values whole and in pieces (case changed too), values joined across
// two pairs or two entries (present only if one value or line holds
// them), and the name of a pair joined to its value.
func metaNeedles(rng *rand.Rand, entries []Entry) [][]byte {
	ns := [][]byte{[]byte("trace_id"), []byte("span_id"), []byte("severity_text")}
	var vals [][]byte
	for _, e := range entries {
		attrs.Each(e.Attrs, func(name, v []byte) bool {
			vals = append(vals, v)
			if rng.IntN(50) == 0 {
				ns = append(ns, append(append(bytes.Clone(name), '='), v...))
			}
			return true
		})
	}
	for range 100 {
		v := vals[rng.IntN(len(vals))]
		ns = append(ns, v)
		if len(v) > 0 {
			i := rng.IntN(len(v))
			j := min(len(v), i+1+rng.IntN(12))
			ns = append(ns, v[i:j], asciiCase(v[i:j], true))
		}
		w := vals[rng.IntN(len(vals))]
		ns = append(ns, append(bytes.Clone(v[max(0, len(v)-2):]), w[:min(len(w), 2)]...))
	}
	return ns
}

// checkExactValues requires MayContainValue to be exact on a version-5
// segment with no unindexed block: false if and only if some lowered
// 4-gram of the needle is in no metadata value of the block (each value
// on its own). On an older segment it must say "maybe" to everything.
func checkExactValues(t *testing.T, r *Reader, entries []Entry, needles [][]byte) {
	t.Helper()
	// Each needle's grams and case variants, once (not once a block: that
	// was most of the time on segments of many blocks, 5x more under qemu).
	wants := make([]map[uint32]bool, len(needles))
	variants := make([][][]byte, len(needles))
	for i, n := range needles {
		wants[i] = map[uint32]bool{}
		lowerGrams(n, wants[i])
		variants[i] = [][]byte{n, asciiCase(n, true), asciiCase(n, false)}
	}
	k := 0
	for bi := range r.NumBlocks() {
		set := map[uint32]bool{}
		for _, e := range entries[k : k+r.BlockMeta(bi).Entries] {
			attrs.Each(e.Attrs, func(_, v []byte) bool {
				lowerGrams(v, set)
				return true
			})
		}
		k += r.BlockMeta(bi).Entries
		for i, n := range needles {
			all := true
			for g := range wants[i] {
				all = all && set[g]
			}
			all = all || len(n) < SkipGram || !r.MetaIndexed()
			for _, v := range variants[i] {
				if got := r.MayContainValue(bi, v, false); got != all {
					t.Fatalf("block %d: MayContainValue(%q) = %v, want %v", bi, v, got, all)
				}
			}
		}
	}
}

// TestMetaIndexExact: a version-5 segment's skip index holds, apart from
// the lines' grams, the grams of its entries' metadata values, each
// value on its own, and is exact for both (the lines' index exactly as
// before: values do not leak into line searches); the same entries in
// version 4 have no values' index (MetaIndexed false, MayContainValue
// always true) and the same lines' index.
func TestMetaIndexExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	corpora := attrCorpora(t)
	// Case differences and values the lines also hold.
	var mixed []Entry
	for i := range 1500 {
		e := Entry{Time: int64(i), Stream: uint32(i % 3), Line: fmt.Appendf(nil, "req %d done", i)}
		id := fmt.Sprintf("%08X%08x", rng.Uint32(), rng.Uint32()%64)
		switch i % 4 {
		case 0:
			e.Attrs = attrs.MustPairs("trace_id", id)
		case 1:
			e.Attrs = attrs.MustPairs("trace_id", id, "user", "Alice-"+fmt.Sprint(i%17))
			e.Line = fmt.Appendf(e.Line, " trace=%s", id)
		case 2:
			e.Attrs = attrs.MustPairs("x", "abc", "y", "\xff\x80\xff\x80ab")
		}
		mixed = append(mixed, e)
	}
	corpora["attrs-case"] = mixed
	corpora["attrs-otel"] = corpora["attrs-otel"][:600] // the oracle is slow
	for name, es := range corpora {
		for _, bs := range []int{1 << 20, 4096, 300} {
			if bs == 300 && (name == "attrs-limit" || name == "attrs-otel") {
				continue // slow, and blocks of one entry are covered by the others
			}
			t.Run(fmt.Sprint(name, "-", bs), func(t *testing.T) {
				needles := append(metaNeedles(rng, es), gramNeedles(rng, es)[:300]...)
				for _, v := range []uint32{formatV4, formatVersion} {
					path, _ := writeSegmentVersion(t, t.TempDir(), "s", es, Options{BlockSize: bs, Codec: CodecLZ4}, v)
					got, r := readAll(t, path)
					equalEntries(t, got, es)
					if r.MetaIndexed() != (v == formatVersion) {
						t.Fatalf("version %d: MetaIndexed %v", v, r.MetaIndexed())
					}
					for _, w := range r.grams.unindexed {
						if w != 0 {
							t.Fatalf("version %d: unindexed blocks %b", v, w)
						}
					}
					for _, w := range r.vgramsUnindexed() {
						if w != 0 {
							t.Fatalf("version %d: blocks unindexed for values %b", v, w)
						}
					}
					if err := r.Verify(); err != nil {
						t.Fatal(err)
					}
					checkExact(t, r, es, needles)
					checkExactValues(t, r, es, needles)
					if bs == 4096 && name != "attrs-limit" {
						// Every short piece of every line and value: slow.
						checkMayContain(t, r, es)
					}
					r.Close()
				}
			})
		}
	}
}

// TestMetaIndexNoAttrsSameIndex: without metadata a version-5 segment's
// skip index is version 4's plus a few bytes (the lines' index's length
// and an empty values' index: B, U = 0, G = 0), so that stores without
// metadata pay nothing measurable for it; with metadata the lines' index
// is still version 4's byte for byte.
func TestMetaIndexNoAttrsSameIndex(t *testing.T) {
	for _, meta := range []bool{false, true} {
		es := otelEntries(t, 3000, meta)
		p4, i4 := writeSegmentVersion(t, t.TempDir(), "s", es, Options{BlockSize: 16 << 10}, formatV4)
		p5, i5 := writeSegmentVersion(t, t.TempDir(), "s", es, Options{BlockSize: 16 << 10}, formatVersion)
		b4, b5 := readFile(t, p4), readFile(t, p5)
		s4 := b4[i4.FileBytes-footerSize-i4.SkipBytes : i4.FileBytes-footerSize]
		s5 := b5[i5.FileBytes-footerSize-i5.SkipBytes : i5.FileBytes-footerSize]
		lines := binary.AppendUvarint(nil, uint64(len(s4)))
		if !bytes.HasPrefix(s5, append(lines, s4...)) {
			t.Fatalf("metadata %v: the version-5 skip index does not start with version 4's", meta)
		}
		// Version 6 (written here) adds 1 byte (the values' index's
		// length: 3) and, without metadata, an empty filters section.
		if !meta && (len(s5) != len(lines)+len(s4)+4 || i5.FileBytes-i4.FileBytes != int64(len(lines)+4)) {
			t.Fatalf("without metadata: version 4 %+v, version 5 %+v", i4, i5)
		}
		t.Logf("metadata %v: skip index %d bytes in version 4, %d in version 5, of %d and %d", meta, i4.SkipBytes, i5.SkipBytes, i4.FileBytes, i5.FileBytes)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// vgramsUnindexed is the values' index's bitmap of unindexed blocks (nil
// before version 5).
func (r *Reader) vgramsUnindexed() []uint64 {
	if r.vgrams == nil {
		return nil
	}
	return r.vgrams.unindexed
}

// TestMetaIndexSkipsTraceBlocks: on OTel-like entries (a random trace id
// and span id on each), a version-5 values' index keeps the block
// holding a trace id and rules out almost all others; version 4 keeps
// every block (it knows nothing of the values); the lines' index of
// either rules out every block (no line holds the ids).
func TestMetaIndexSkipsTraceBlocks(t *testing.T) {
	es := otelEntries(t, 6000, true)
	for _, v := range []uint32{formatV4, formatVersion} {
		path, _ := writeSegmentVersion(t, t.TempDir(), "s", es, Options{BlockSize: 32 << 10}, v)
		_, r := readAll(t, path)
		k, kept, total := 0, 0, 0
		for bi := range r.NumBlocks() {
			n := r.BlockMeta(bi).Entries
			for j := k; j < k+n; j += 97 {
				id, _ := attrs.Get(es[j].Attrs, "trace_id")
				for b2 := range r.NumBlocks() {
					if r.MayContain(b2, id, false) {
						t.Fatalf("version %d: block %d: the lines' index holds trace_id %s", v, b2, id)
					}
					may := r.MayContainValue(b2, id, false)
					if b2 == bi && !may {
						t.Fatalf("version %d: block %d holds trace_id %s, MayContainValue false", v, bi, id)
					}
					if b2 != bi {
						total++
						if may {
							kept++
						}
					}
				}
			}
			k += n
		}
		t.Logf("version %d: %d blocks, other blocks kept for a trace id: %d of %d", v, r.NumBlocks(), kept, total)
		if r.NumBlocks() < 10 {
			t.Fatalf("%d blocks; the test needs several", r.NumBlocks())
		}
		if v == formatVersion && kept*20 > total {
			t.Errorf("version 5 keeps %d of %d blocks without the trace id", kept, total)
		}
		if v == formatV4 && kept != total {
			t.Errorf("version 4 rules out %d of %d blocks by metadata values", total-kept, total)
		}
		r.Close()
	}
}

// TestOptionsVersion: Options.Version writes version 4 (an index of
// lines only), 5 (no value filters) or 6 (no escape grams) on request
// and refuses versions it cannot write.
func TestOptionsVersion(t *testing.T) {
	es := otelEntries(t, 200, true)
	for _, c := range []struct {
		version int
		want    uint32
	}{{0, formatVersion}, {4, formatV4}, {5, formatV5}, {6, formatV6}, {7, formatVersion}} {
		path := filepath.Join(t.TempDir(), "s")
		w, err := Create(path, Options{Version: c.version})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if err := w.Add(e); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		got, r := readAll(t, path)
		equalEntries(t, got, es)
		if r.version != c.want || r.MetaIndexed() != (c.want >= formatV5) || r.ValueFiltered() != (c.want >= formatV6) ||
			r.EscapeIndexed() != (c.want >= formatVersion) {
			t.Errorf("Version %d: wrote version %d, MetaIndexed %v, ValueFiltered %v, EscapeIndexed %v",
				c.version, r.version, r.MetaIndexed(), r.ValueFiltered(), r.EscapeIndexed())
		}
		r.Close()
	}
	for _, v := range []int{1, 2, 3, 8, -1} {
		if w, err := Create(filepath.Join(t.TempDir(), "s"), Options{Version: v}); err == nil {
			w.Abort()
			t.Errorf("Version %d: no error", v)
		}
	}
}

// TestGramManyBlocksWithoutGrams: more than a batch (256) of blocks in a
// row without a gram (entries under 4 bytes; in version 5's values'
// index, blocks without metadata), then blocks with grams. The builder
// used to keep the empty blocks' marks past a batch's 256 and panic.
func TestGramManyBlocksWithoutGrams(t *testing.T) {
	var es []Entry
	for i := range 1200 {
		es = append(es, Entry{Time: int64(i), Line: []byte("ab")})
	}
	for i := range 50 {
		es = append(es, Entry{Time: int64(1200 + i), Line: fmt.Appendf(nil, "line %d status=%d", i, 200+i%3)})
	}
	for _, v := range []uint32{formatV4, formatVersion} {
		path, _ := writeSegmentVersion(t, t.TempDir(), "s", es, Options{BlockSize: 8, Codec: CodecNone}, v)
		got, r := readAll(t, path)
		equalEntries(t, got, es)
		if r.NumBlocks() < 2*256 {
			t.Fatalf("%d blocks", r.NumBlocks())
		}
		checkExact(t, r, es, [][]byte{[]byte("status=201"), []byte("line 4"), []byte("absent")})
		r.Close()
	}
}

// TestGoldenLayoutV5 decodes golden-v5.seg by hand against the package
// doc: it is golden-v4.seg (the same entries) but for the version fields
// and the skip section, which is the uvarint length of version 4's skip
// index, that index byte for byte, then an index of the metadata values
// whose head counts the blocks, no unindexed one and the values'
// distinct lowered 4-grams (counted here from goldenAttrEntries); the
// footer's skipCRC covers the length and both heads.
func TestGoldenLayoutV5(t *testing.T) {
	v4 := readFile(t, filepath.Join("testdata", "golden-v4.seg"))
	v5 := readFile(t, filepath.Join("testdata", "golden-v5.seg"))
	le32, le64 := binary.LittleEndian.Uint32, binary.LittleEndian.Uint64
	f4, f5 := v4[len(v4)-footerSize:], v5[len(v5)-footerSize:]
	if le32(v5[8:]) != 5 || le32(f5[44:]) != 5 {
		t.Fatalf("version %d / %d", le32(v5[8:]), le32(f5[44:]))
	}
	// Header (but the version), blocks and block index: the same bytes.
	skip4, skip5 := le64(f4[24:]), le64(f5[24:])
	if skip4 != skip5 || !bytes.Equal(v4[12:skip4], v5[12:skip5]) || !bytes.Equal(f4[:24], f5[:24]) {
		t.Fatal("blocks or block index differ from version 4's")
	}
	s4 := v4[skip4 : len(v4)-footerSize]
	s5 := v5[skip5 : len(v5)-footerSize]
	l, n := binary.Uvarint(s5)
	if n <= 0 || l != uint64(len(s4)) || !bytes.Equal(s5[n:n+int(l)], s4) {
		t.Fatalf("the lines' index (length %d) is not version 4's skip index (%d bytes)", l, len(s4))
	}
	vals := s5[n+int(l):]
	grams := map[uint32]bool{}
	for _, e := range goldenAttrEntries() {
		attrs.Each(e.Attrs, func(_, v []byte) bool {
			lowerGrams(v, grams)
			return true
		})
	}
	d := vals
	var head []uint64
	for range 3 {
		x, m := binary.Uvarint(d)
		if m <= 0 {
			t.Fatal("bad uvarint in the values' index")
		}
		head, d = append(head, x), d[m:]
	}
	blocks := le32(f5[20:])
	if head[0] != uint64(blocks) || head[1] != 0 || head[2] != uint64(len(grams)) || len(grams) == 0 {
		t.Fatalf("values' index head %v, want [%d 0 %d]", head, blocks, len(grams))
	}
	groups := (len(grams) + 31) / 32
	valsHead := len(vals) - len(d) + 12*groups
	// The lines' head: version 4's skipCRC covers exactly it.
	r4, err := Open(filepath.Join("testdata", "golden-v4.seg"))
	if err != nil {
		t.Fatal(err)
	}
	defer r4.Close()
	linesHead := len(s4) - len(r4.grams.area)
	crc := crc32.Checksum(s5[:n], castagnoli)
	crc = crc32.Update(crc, castagnoli, s4[:linesHead])
	crc = crc32.Update(crc, castagnoli, vals[:valsHead])
	if crc != le32(f5[40:]) || le32(f4[40:]) != crc32.Checksum(s4[:linesHead], castagnoli) {
		t.Fatal("skipCRC does not cover the length and both heads")
	}
}
