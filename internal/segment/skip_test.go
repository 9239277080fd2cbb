package segment

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"haystack/internal/attrs"
	"haystack/internal/testseed"
	"unsafe"
)

// checkMayContain requires MayContain to say yes, exactly and folded, for
// every substring (up to 12 bytes, and a sample of longer ones) of every
// entry in the block holding it, and reports how selective it is for
// needles absent from a block.
//
// Under emulation (testseed.Emulated) it checks every fourth entry of each
// block, the first always, and of those the substrings that start at
// every fourth byte (each up to 12 bytes long, so they still hold every
// gram of the entry): every block's postings are still decoded and asked,
// on big-endian, in a sixteenth of the time; the native run checks every
// substring of every entry.
func checkMayContain(t *testing.T, r *Reader, entries []Entry) {
	t.Helper()
	stride := testseed.Scale(1, 4)
	k := 0
	for bi := range r.NumBlocks() {
		m := r.BlockMeta(bi)
		for ei, e := range entries[k : k+m.Entries] {
			if ei%stride != 0 {
				continue
			}
			l := e.Line
			for i := 0; i < len(l); i += stride {
				for j := i; j <= len(l) && j <= i+12; j++ {
					lit := l[i:j]
					if !r.MayContain(bi, lit, false) || !r.MayContain(bi, asciiCase(lit, true), true) || !r.MayContain(bi, asciiCase(lit, false), true) {
						t.Fatalf("block %d: MayContain(%q) false, but entry %q holds it", bi, lit, l)
					}
				}
			}
			if !r.MayContain(bi, l, false) {
				t.Fatalf("block %d: MayContain false for a whole entry %q", bi, l)
			}
			if r.MetaIndexed() {
				// Version 5: every metadata value, and each piece of it.
				attrs.Each(e.Attrs, func(_, v []byte) bool {
					for i := 0; i < len(v); i += stride {
						for j := i; j <= len(v) && j <= i+12; j++ {
							if !r.MayContainValue(bi, v[i:j], false) || !r.MayContainValue(bi, asciiCase(v[i:j], true), true) {
								t.Fatalf("block %d: MayContainValue(%q) false, but metadata value %q holds it", bi, v[i:j], v)
							}
						}
					}
					if !r.MayContainValue(bi, v, false) {
						t.Fatalf("block %d: MayContainValue false for a whole metadata value %q", bi, v)
					}
					return true
				})
			}
		}
		k += m.Entries
	}
}

// asciiCase maps ASCII letters to upper or lower case and leaves every
// other byte alone (bytes.ToUpper would rewrite invalid UTF-8).
func asciiCase(b []byte, upper bool) []byte {
	o := bytes.Clone(b)
	for i, c := range o {
		if upper && 'a' <= c && c <= 'z' {
			o[i] = c - 32
		} else if !upper && 'A' <= c && c <= 'Z' {
			o[i] = c + 32
		}
	}
	return o
}

// TestSkipNoFalseNegatives writes random and log-like entries with
// several block sizes and checks every short substring of every entry.
func TestSkipNoFalseNegatives(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	var es []Entry
	for i := range 400 {
		n := rng.IntN(60)
		b := make([]byte, n)
		for j := range b {
			switch rng.IntN(4) {
			case 0:
				b[j] = byte(rng.IntN(256)) // any byte, invalid UTF-8 too
			default:
				b[j] = "abcXYZ019 =\"\n\r\xff"[rng.IntN(15)]
			}
		}
		if i%5 == 0 {
			b = fmt.Appendf(b, " User=%d TRACE_id=%x", rng.IntN(1000), rng.Uint64())
		}
		es = append(es, Entry{Time: int64(i), Stream: uint32(i % 3), Line: b})
	}
	for _, v := range []uint32{formatV2, formatVersion} {
		for _, bs := range []int{1, 64, 1000, 1 << 20} {
			t.Run(fmt.Sprint(v, "-", bs), func(t *testing.T) {
				path, info := writeSegmentVersion(t, t.TempDir(), "s", es, Options{BlockSize: bs}, v)
				got, r := readAll(t, path)
				equalEntries(t, got, es)
				if info.SkipBytes == 0 || r.Info().SkipBytes != info.SkipBytes {
					t.Fatalf("skip bytes %d, reader %d", info.SkipBytes, r.Info().SkipBytes)
				}
				checkMayContain(t, r, es)
			})
		}
	}
}

// TestSkipSelective checks that the index does say no: a needle absent
// from every block is dropped by nearly all of them, and a needle in one
// block is kept there. A test of selectivity, not of speed.
func TestSkipSelective(t *testing.T) {
	var es []Entry
	for i := range 5000 {
		es = append(es, Entry{Time: int64(i), Line: fmt.Appendf(nil, "level=info msg=\"request done\" user=%d path=/api/v1/items/%d", i%97, i*7919%100003)})
	}
	es[4321].Line = append(es[4321].Line, " NeedleInAHaystack"...)
	path, _ := writeSegment(t, t.TempDir(), "s", es, Options{BlockSize: 8 << 10})
	_, r := readAll(t, path)
	keptAbsent, keptRare, where := 0, 0, -1
	k := 0
	for bi := range r.NumBlocks() {
		if r.MayContain(bi, []byte("segfault at address"), false) {
			keptAbsent++
		}
		if r.MayContain(bi, []byte("needleinahaystack"), true) {
			keptRare++
		}
		if k <= 4321 && 4321 < k+r.BlockMeta(bi).Entries {
			where = bi
		}
		k += r.BlockMeta(bi).Entries
		if !r.MayContain(bi, []byte("sf"), false) {
			t.Fatalf("block %d: a needle shorter than %d bytes skipped a block", bi, SkipGram)
		}
	}
	if !r.MayContain(where, []byte("NeedleInAHaystack"), false) {
		t.Fatalf("block %d holds the needle but MayContain says no", where)
	}
	n := r.NumBlocks()
	t.Logf("%d blocks, %d skip bytes of %d; kept: absent %d, rare %d", n, r.Info().SkipBytes, r.Info().FileBytes, keptAbsent, keptRare)
	if n < 20 || keptAbsent > n/10 || keptRare > 1+n/10 {
		t.Fatalf("%d blocks: index keeps %d for an absent needle and %d for a needle in one block", n, keptAbsent, keptRare)
	}
}

// BenchmarkSkipBuild measures building one block's filter (both passes:
// counting and setting), per raw byte, on the Loghub samples cut into
// 256 KiB blocks: the ingest cost of the skip index. Compare with the
// Writer's ~200-300 MB/s (docs/BENCHMARKS.md).
func BenchmarkSkipBuild(b *testing.B) {
	es, _ := loghubEntries(b)
	var data []byte
	var lens []uint32
	for _, e := range es {
		if len(data)+len(e.Line) > DefaultBlockSize {
			break
		}
		data = append(data, e.Line...)
		lens = append(lens, uint32(len(e.Line)))
	}
	var s skipBuilder
	b.SetBytes(int64(len(data)))
	s.add(data, lens)
	b.ReportMetric(float64(len(s.out)), "filter-bytes")
	for b.Loop() {
		s.out = s.out[:0]
		s.add(data, lens)
	}
}

// BenchmarkMayContain measures one block's answer for a 20-byte needle.
func BenchmarkMayContain(b *testing.B) {
	es, _ := loghubEntries(b)
	var data []byte
	var lens []uint32
	for _, e := range es[:2000] {
		data = append(data, e.Line...)
		lens = append(lens, uint32(len(e.Line)))
	}
	var s skipBuilder
	s.add(data, lens)
	size := len(s.out) - 4 - 3 // a 3-byte size varint for this block
	filter := s.out[3 : 3+size]
	lit := []byte("connection reset by peer")
	for b.Loop() {
		mayContain(filter, lit)
	}
}

// TestSkipDamageNamesBlock flips one bit in each block's filter: Open must
// open the segment without its skip index (a damaged filter could
// otherwise drop a block that holds a match), every block may match and
// reads as before, and IndexDamage and Verify name the file and that
// block's filter.
func TestSkipDamageNamesBlock(t *testing.T) {
	dir := t.TempDir()
	src, _ := writeSegmentVersion(t, dir, "good", withoutAttrs(smallEntries()), Options{Codec: CodecNone, BlockSize: 64}, formatV2)
	orig, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.NumBlocks() < 3 {
		t.Fatalf("%d blocks", r.NumBlocks())
	}
	path := filepath.Join(dir, "damaged")
	for i := range r.NumBlocks() {
		f := r.skip[i]
		// The filter's offset in the file: it is a subslice of the data.
		off := int(uintptr(unsafe.Pointer(&f[0])) - uintptr(unsafe.Pointer(&r.data[0])))
		buf := bytes.Clone(orig)
		buf[off+len(f)/2] ^= 0x10
		if err := os.WriteFile(path, buf, 0o644); err != nil {
			t.Fatal(err)
		}
		headDamageCheck(t, path, fmt.Sprintf("block %d's filter damaged", i), func() (*Reader, error) { return Open(path) }, r)
		dr, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := dr.IndexDamage(); !strings.Contains(fmt.Sprint(err), fmt.Sprintf("skip index of block %d:", i)) {
			t.Errorf("block %d's filter damaged: IndexDamage %v", i, err)
		}
		dr.Close()
	}
}

// TestMayContainBlocks checks MayContainBlocks, the whole-segment answer,
// against MayContain block by block on the golden segments of every
// format (none, blooms, postings, with metadata, value filters and escape
// grams), for every 4- and 7-byte substring of their lines and a few
// absent, short, upper-case and empty literals; after Close, nil.
func TestMayContainBlocks(t *testing.T) {
	files, err := filepath.Glob("testdata/golden-v*.seg")
	if err != nil || len(files) < 7 {
		t.Fatalf("golden files %v: %v", files, err)
	}
	for _, f := range files {
		r, err := Open(f)
		if err != nil {
			t.Fatal(err)
		}
		lits := [][]byte{nil, []byte("ab"), []byte("abc"), []byte("zzzz absent"), []byte("\x00\x01\x02\x03")}
		b := GetBlock()
		for i := range r.NumBlocks() {
			if err := r.ReadBlock(i, b); err != nil {
				t.Fatal(err)
			}
			for j := 0; j+SkipGram <= len(b.Data); j += 3 {
				lits = append(lits, bytes.Clone(b.Data[j:j+SkipGram]), bytes.ToUpper(b.Data[j:min(j+7, len(b.Data))]))
			}
		}
		PutBlock(b)
		pruned := 0
		for _, lit := range lits {
			for _, fold := range []bool{false, true} {
				bm := r.MayContainBlocks(lit, fold)
				for i := range r.NumBlocks() {
					got := bm == nil || bm[i/64]&(1<<(i%64)) != 0
					if want := r.MayContain(i, lit, fold); got != want {
						t.Fatalf("%s: %q (fold %v) block %d: MayContainBlocks %v, MayContain %v", f, lit, fold, i, got, want)
					}
					if !got {
						pruned++
					}
				}
			}
		}
		if pruned == 0 && !strings.Contains(f, "-v1") {
			t.Errorf("%s: no literal ruled out a block: the comparison tests nothing", f)
		}
		r.Close()
		if bm := r.MayContainBlocks([]byte("zzzz absent"), false); bm != nil {
			t.Errorf("%s: after Close MayContainBlocks %v, want nil (every block may)", f, bm)
		}
	}
}
