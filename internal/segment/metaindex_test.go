package segment

import (
	"bytes"
	"fmt"
	"math/rand/v2"
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
	for range 150 {
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

// TestMetaIndexExact: a version-5 segment's skip index holds the grams of
// its entries' metadata values, each value on its own, and is exact for
// them as for lines (the oracle, blockGrams, adds each value's grams);
// the same entries in version 4 leave the values out (MetaIndexed false),
// and the lines alone decide there. Without metadata both versions
// write the same skip index.
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
			t.Run(fmt.Sprint(name, "-", bs), func(t *testing.T) {
				needles := append(metaNeedles(rng, es), gramNeedles(rng, es)...)
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
					if err := r.grams.check(); err != nil {
						t.Fatal(err)
					}
					checkExact(t, r, es, needles)
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
// skip index is version 4's byte for byte, so that stores without
// metadata pay nothing for it.
func TestMetaIndexNoAttrsSameIndex(t *testing.T) {
	es := otelEntries(t, 3000, false)
	_, i4 := writeSegmentVersion(t, t.TempDir(), "s", es, Options{BlockSize: 16 << 10}, formatV4)
	_, i5 := writeSegmentVersion(t, t.TempDir(), "s", es, Options{BlockSize: 16 << 10}, formatVersion)
	if i4.SkipBytes != i5.SkipBytes || i4.FileBytes != i5.FileBytes {
		t.Fatalf("without metadata: version 4 %+v, version 5 %+v", i4, i5)
	}
}

// TestMetaIndexSkipsTraceBlocks: on OTel-like entries (a random trace id
// and span id on each), a version-5 index keeps the block holding a
// trace id and rules out almost all others; version 4, whose index holds
// lines only, knows nothing of the ids (the lines do not hold them).
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
					may := r.MayContain(b2, id, false)
					if v == formatVersion && b2 == bi && !may {
						t.Fatalf("version %d: block %d holds trace_id %s, MayContain false", v, bi, id)
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
		r.Close()
	}
}

// TestOptionsVersion: Options.Version writes version 4 on request (an
// index of lines only) and refuses versions it cannot write.
func TestOptionsVersion(t *testing.T) {
	es := otelEntries(t, 200, true)
	for _, c := range []struct {
		version int
		want    uint32
	}{{0, formatVersion}, {4, formatV4}, {5, formatVersion}} {
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
		if r.version != c.want || r.MetaIndexed() != (c.want == formatVersion) {
			t.Errorf("Version %d: wrote version %d, MetaIndexed %v", c.version, r.version, r.MetaIndexed())
		}
		r.Close()
	}
	for _, v := range []int{1, 2, 3, 6, -1} {
		if w, err := Create(filepath.Join(t.TempDir(), "s"), Options{Version: v}); err == nil {
			w.Abort()
			t.Errorf("Version %d: no error", v)
		}
	}
}
