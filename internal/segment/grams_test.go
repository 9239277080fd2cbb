package segment

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// lowerGrams returns the set of ASCII-lowered 4-grams of b.
func lowerGrams(b []byte, into map[uint32]bool) {
	for i := 0; i+SkipGram <= len(b); i++ {
		into[binary.BigEndian.Uint32(asciiCase(b[i:i+SkipGram], false))] = true
	}
}

// blockGrams is the oracle: per block, the set of lowered 4-grams of its
// entries, computed naively from the entries.
func blockGrams(r *Reader, entries []Entry) []map[uint32]bool {
	var sets []map[uint32]bool
	k := 0
	for bi := range r.NumBlocks() {
		m := map[uint32]bool{}
		for _, e := range entries[k : k+r.BlockMeta(bi).Entries] {
			lowerGrams(e.Line, m)
		}
		k += r.BlockMeta(bi).Entries
		sets = append(sets, m)
	}
	return sets
}

// checkExact requires MayContain to be exact on a version 3 segment with
// no unindexed block: false if and only if some lowered 4-gram of the
// needle is absent from the block (needles shorter than 4 bytes: true).
func checkExact(t *testing.T, r *Reader, entries []Entry, needles [][]byte) {
	t.Helper()
	if r.grams == nil {
		t.Fatal("not a version 3 segment")
	}
	sets := blockGrams(r, entries)
	for _, n := range needles {
		want := map[uint32]bool{}
		lowerGrams(n, want)
		variants := [][]byte{n, asciiCase(n, true), asciiCase(n, false)} // once, not once a block
		for bi, set := range sets {
			all := true
			for g := range want {
				all = all && set[g]
			}
			all = all || len(n) < SkipGram
			for _, v := range variants {
				if got := r.MayContain(bi, v, true); got != all {
					t.Fatalf("block %d: MayContain(%q) = %v, want %v", bi, v, got, all)
				}
				if got := r.MayContain(bi, v, false); got != all {
					t.Fatalf("block %d: MayContain(%q, exact) = %v, want %v", bi, v, got, all)
				}
			}
		}
	}
}

// gramCorpora are entries for the exactness tests: random bytes over a
// small alphabet (so that needles are often present), log-like lines
// with mixed case and hex ids, bytes >= 0x80, and short entries.
func gramCorpora() map[string][]Entry {
	rng := rand.New(rand.NewPCG(3, 3))
	cs := map[string][]Entry{}
	var es []Entry
	for i := range 600 {
		b := make([]byte, rng.IntN(40))
		for j := range b {
			b[j] = "abAB01\xff\x80 "[rng.IntN(9)]
		}
		es = append(es, Entry{Time: int64(i), Line: b})
	}
	cs["random"] = es
	es = nil
	levels := []string{"INFO", "warn", "Error", "DEBUG"}
	for i := range 3000 {
		line := fmt.Appendf(nil, "2026-11-30T03:%02d:%02dZ %s [svc-%d] User=%d msg=\"Request Done\" trace_id=%016x status=%d",
			i/60%60, i%60, levels[i%4], i%7, rng.IntN(500), rng.Uint64()&0xfffff0000fffff, 200+100*(i%3))
		if i%17 == 0 {
			line = append(line, " caf\xc3\xa9 \xff\xfe"...)
		}
		es = append(es, Entry{Time: int64(i), Line: line})
	}
	cs["logs"] = es
	es = nil
	for i := range 300 {
		es = append(es, Entry{Time: int64(i), Line: []byte("abcdefgh"[i%8 : i%8+min(3, 8-i%8)])})
	}
	cs["short"] = es
	return cs
}

// gramNeedles returns needles for entries: pieces of entries (exact,
// upper-cased), pieces spanning two consecutive entries, random strings
// and known absent ones.
func gramNeedles(rng *rand.Rand, entries []Entry) [][]byte {
	ns := [][]byte{
		[]byte("status=999"), []byte("needle-absent-7c3e9a"), []byte("ABCD"), []byte("ab\xff\x80"),
		[]byte("\xff\xff\xff\xff"), []byte("abc"), []byte(""), []byte("x"),
	}
	for range 400 {
		e := entries[rng.IntN(len(entries))].Line
		if len(e) == 0 {
			continue
		}
		i := rng.IntN(len(e))
		j := min(len(e), i+1+rng.IntN(12))
		ns = append(ns, e[i:j], asciiCase(e[i:j], true))
		// The end of one entry joined to the start of the next: present
		// in the block only if some single entry holds it.
		k := rng.IntN(len(entries) - 1)
		a, b := entries[k].Line, entries[k+1].Line
		ns = append(ns, append(bytes.Clone(a[max(0, len(a)-3):]), b[:min(len(b), 3)]...))
		r := make([]byte, 4+rng.IntN(4))
		for x := range r {
			r[x] = "aAbB01 \xff\x80=:"[rng.IntN(11)]
		}
		ns = append(ns, r)
	}
	return ns
}

// TestGramIndexExact checks the version 3 index against the naive oracle
// in both directions, for several corpora and block sizes (one block;
// many; more than 64, so that postings span several bitmap words).
func TestGramIndexExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for name, es := range gramCorpora() {
		for _, bs := range []int{1 << 20, 4096, 300} {
			t.Run(fmt.Sprint(name, "-", bs), func(t *testing.T) {
				path, _ := writeSegment(t, t.TempDir(), "s", es, Options{BlockSize: bs, Codec: CodecLZ4})
				got, r := readAll(t, path)
				defer r.Close()
				equalEntries(t, got, es)
				if err := r.grams.check(); err != nil {
					t.Fatal(err)
				}
				checkExact(t, r, es, gramNeedles(rng, es))
				t.Logf("%d blocks, skip index %d of %d bytes", r.NumBlocks(), r.Info().SkipBytes, r.Info().FileBytes)
			})
		}
	}
}

// TestGramSpanningEntries: a needle made of the end of one entry and the
// start of the next is absent, in every block, unless an entry holds it.
func TestGramSpanningEntries(t *testing.T) {
	es := []Entry{{Line: []byte("xxxxfoo")}, {Line: []byte("barxxxx")}, {Line: []byte("ab")}, {Line: []byte("cd")}}
	path, _ := writeSegment(t, t.TempDir(), "s", es, Options{})
	_, r := readAll(t, path)
	defer r.Close()
	for _, n := range []string{"foobar", "obar", "foob", "abcd", "FOOBAR"} {
		if r.MayContain(0, []byte(n), true) {
			t.Errorf("MayContain(%q) true: it only spans two entries", n)
		}
	}
	for _, n := range []string{"xfoo", "XXFOO", "barx", "ab", "abc"} {
		if !r.MayContain(0, []byte(n), false) {
			t.Errorf("MayContain(%q) false", n)
		}
	}
}

// TestGramUnindexed: a block with too many distinct grams for its size
// (random bytes) is left unindexed and answers "maybe"; the other blocks
// stay exact.
func TestGramUnindexed(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	noise := make([]byte, 64<<10)
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	es := []Entry{
		{Line: []byte("first block: plain text")},
		{Line: noise},
		{Line: []byte("third block: plain text again")},
	}
	path, _ := writeSegment(t, t.TempDir(), "s", es, Options{BlockSize: 100})
	_, r := readAll(t, path)
	defer r.Close()
	if r.NumBlocks() != 3 {
		t.Fatalf("%d blocks", r.NumBlocks())
	}
	if r.grams.unindexed[0] != 1<<1 {
		t.Fatalf("unindexed blocks %b, want block 1", r.grams.unindexed[0])
	}
	for _, n := range []string{"absent needle", "plain text", "first", "again"} {
		want := []bool{n == "plain text" || n == "first", true, n == "plain text" || n == "again"}
		for bi := range 3 {
			if got := r.MayContain(bi, []byte(n), false); got != want[bi] {
				t.Errorf("block %d: MayContain(%q) = %v, want %v", bi, n, got, want[bi])
			}
		}
	}
	if r.Info().SkipBytes > 1000 {
		t.Errorf("skip index of %d bytes: the noise was indexed", r.Info().SkipBytes)
	}
}

// TestGramCacheAndConcurrency asks for many literals (more than the
// per-Reader cache holds) from several goroutines and compares with the
// answers of a fresh Reader asked one literal at a time; also the
// "maybe" after Close.
func TestGramCacheAndConcurrency(t *testing.T) {
	es := gramCorpora()["logs"]
	path, _ := writeSegment(t, t.TempDir(), "s", es, Options{BlockSize: 8 << 10})
	_, r := readAll(t, path)
	rng := rand.New(rand.NewPCG(9, 9))
	needles := gramNeedles(rng, es)
	for len(needles) < 3*maxCachedLiterals {
		needles = append(needles, fmt.Appendf(nil, "user=%d", rng.IntN(2000)))
	}
	want := make([][]bool, len(needles))
	ref, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range needles {
		for bi := range ref.NumBlocks() {
			want[i] = append(want[i], ref.MayContain(bi, n, false))
			ref.grams.cache = nil // computed afresh each time
		}
	}
	ref.Close()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for k := range needles {
				i := (k*7 + w*131) % len(needles)
				for bi := range r.NumBlocks() {
					if got := r.MayContain(bi, needles[i], true); got != want[i][bi] {
						t.Errorf("block %d: MayContain(%q) = %v, want %v", bi, needles[i], got, want[i][bi])
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if len(r.grams.cache) > maxCachedLiterals {
		t.Errorf("cache holds %d literals", len(r.grams.cache))
	}
	r.Close()
	for bi := range r.NumBlocks() {
		if !r.MayContain(bi, []byte("needle-absent-7c3e9a"), false) {
			t.Fatalf("block %d: MayContain false after Close", bi)
		}
	}
}

// TestGoldenLayoutV3 decodes golden-v3.seg's skip index by hand,
// following the package doc rather than the reader, and compares every
// gram's blocks with the oracle.
func TestGoldenLayoutV3(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "golden-v3.seg"))
	if err != nil {
		t.Fatal(err)
	}
	ft := data[len(data)-72:]
	if string(data[:8]) != "HAYSTSEG" || binary.LittleEndian.Uint32(data[8:]) != 3 || binary.LittleEndian.Uint32(ft[44:]) != 3 {
		t.Fatalf("header %q", data[:16])
	}
	skipOff, skipLen := binary.LittleEndian.Uint64(ft[24:]), binary.LittleEndian.Uint64(ft[32:])
	section := data[skipOff : skipOff+skipLen]
	skip := section
	crcTable := crc32.MakeTable(crc32.Castagnoli)
	uv := func() uint64 {
		v, n := binary.Uvarint(skip)
		if n <= 0 {
			t.Fatal("bad varint")
		}
		skip = skip[n:]
		return v
	}
	nb := int(uv())
	if nb != int(binary.LittleEndian.Uint32(ft[20:])) || uv() != 0 {
		t.Fatalf("block count %d or unindexed blocks", nb)
	}
	g := int(uv())
	groups := (g + 31) / 32
	// Entries of 12 bytes: first gram, offset, CRC of the group's bytes.
	table := skip[:12*groups]
	skip = skip[12*groups:]
	// The footer's CRC covers the head: the counts and the table.
	if crc32.Checksum(section[:len(section)-len(skip)], crcTable) != binary.LittleEndian.Uint32(ft[40:]) {
		t.Fatal("skip head checksum")
	}
	areaBytes := skip
	area := len(skip)
	got := map[uint32][]int{}
	var gram uint32
	for i := range g {
		if i%32 == 0 {
			k := i / 32
			gram = binary.LittleEndian.Uint32(table[12*k:])
			off := binary.LittleEndian.Uint32(table[12*k+4:])
			if int(off) != area-len(skip) {
				t.Fatalf("group %d at %d, table says %d", k, area-len(skip), off)
			}
			end := uint32(area)
			if k+1 < groups {
				end = binary.LittleEndian.Uint32(table[12*k+16:])
			}
			if crc32.Checksum(areaBytes[off:end], crcTable) != binary.LittleEndian.Uint32(table[12*k+8:]) {
				t.Fatalf("group %d checksum", k)
			}
		}
		v := uv()
		gram += uint32(v >> 3)
		var ids []int
		list := func(n int) {
			b := -1
			for range n {
				b += int(uv()) + 1
				ids = append(ids, b)
			}
		}
		switch code := v & 7; code {
		case 0:
			for b := range nb {
				ids = append(ids, b)
			}
		case 1:
			for b := range nb {
				if skip[b/8]&(1<<(b%8)) != 0 {
					ids = append(ids, b)
				}
			}
			skip = skip[(nb+7)/8:]
		case 2:
			list(int(uv()) + 1)
			not := ids
			ids = nil
			for b := range nb {
				if !slices.Contains(not, b) {
					ids = append(ids, b)
				}
			}
		case 3:
			list(int(uv()) + 1)
		default:
			list(int(code) - 3)
		}
		got[gram] = ids
	}
	if len(skip) != 0 {
		t.Fatalf("%d bytes left after the postings", len(skip))
	}
	entries, r := readAll(t, filepath.Join("testdata", "golden-v3.seg"))
	defer r.Close()
	want := map[uint32][]int{}
	for bi, set := range blockGrams(r, entries) {
		for gr := range set {
			want[gr] = append(want[gr], bi)
		}
	}
	for gr := range want {
		slices.Sort(want[gr])
	}
	if len(got) != len(want) || len(got) != g {
		t.Fatalf("%d grams decoded, %d in the entries, count %d", len(got), len(want), g)
	}
	for gr, ids := range want {
		if !slices.Equal(got[gr], ids) {
			t.Fatalf("gram %q: blocks %v, want %v", binary.BigEndian.AppendUint32(nil, gr), got[gr], ids)
		}
	}
}

// FuzzGramIndex feeds the version 3 skip-index parser and lookup
// arbitrary sections (the CRC of a real file shields them from
// FuzzOpenAndRead's mutations). Nothing may panic; when the whole index
// decodes cleanly, each lookup must agree with a full decode of it.
func FuzzGramIndex(f *testing.F) {
	for _, s := range gramIndexSeeds() {
		f.Add(s.section, s.blocks, s.needle)
	}
	f.Fuzz(func(t *testing.T, section []byte, blocks uint8, needle []byte) {
		section = bytes.Clone(section)
		x, err := parseGrams(section, int(blocks))
		if err != nil {
			return
		}
		if len(needle) < SkipGram {
			needle = append(needle, "abcd"...)
		}
		key := asciiCase(needle, false)
		// First as given: mutated postings mostly fail their group's CRC,
		// which must answer "maybe" and record the damage.
		if bm := x.blocksOf(key); bm == nil && x.damage.Load() == nil {
			t.Fatal("lookup failed without recording damage")
		}
		// Then with every group's CRC made valid (x.table points into
		// section), so that the decoder itself meets the mutations.
		fixGroupCRCs(x)
		x, err = parseGrams(section, int(blocks))
		if err != nil {
			t.Fatalf("reparse: %v", err)
		}
		bm := x.blocksOf(key)
		for i := range int(blocks) {
			x.mayContain(i, needle)
		}
		if x.check() != nil {
			return
		}
		if bm == nil {
			t.Fatal("lookup failed on an index that checks clean")
		}
		// The oracle: decode every gram, intersect naively.
		all := map[uint32]*posting{}
		for k := range len(x.table) / gramTableEntry {
			it := x.iter(k)
			for it.next() {
				p := it.p
				all[it.gram] = &p
			}
		}
		for b := range int(blocks) {
			want := true
			for i := 0; i+SkipGram <= len(key); i++ {
				p := all[binary.BigEndian.Uint32(key[i:])]
				in := x.unindexed[b/64]&(1<<(b%64)) != 0
				if p != nil {
					res := make([]uint64, (int(blocks)+63)/64)
					res[b/64] = 1 << (b % 64)
					p.and(res)
					in = res[b/64] != 0
				}
				want = want && in
			}
			if got := bm[b/64]&(1<<(b%64)) != 0; got != want {
				t.Fatalf("block %d: %v, want %v", b, got, want)
			}
		}
	})
}

// fixGroupCRCs rewrites the CRC of each of x's groups in its table.
func fixGroupCRCs(x *gramIndex) {
	for k := range len(x.table) / gramTableEntry {
		b, _ := x.groupBytes(k)
		binary.LittleEndian.PutUint32(x.table[k*gramTableEntry+8:], crc32.Checksum(b, castagnoli))
	}
}

type gramIndexSeed struct {
	section []byte
	blocks  uint8
	needle  []byte
}

// gramIndexSeeds returns the skip sections of small written segments
// (one block; several; more than 8, for multi-byte bitmaps; with an
// unindexed block) with needles present and absent.
func gramIndexSeeds() []gramIndexSeed {
	var seeds []gramIndexSeed
	dir, err := os.MkdirTemp("", "seed")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	noise := make([]byte, 20000)
	rng := rand.New(rand.NewPCG(4, 4))
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	for n, bs := range []int{1 << 20, 60, 25} {
		var es []Entry
		for i := range 20 {
			es = append(es, Entry{Line: fmt.Appendf(nil, "line %d level=INFO user=%d", i, i%3)})
		}
		if n == 2 {
			es = append(es, Entry{Line: noise})
		}
		path := filepath.Join(dir, fmt.Sprint(n))
		// Version 4: its skip section is one index, which the fuzz target
		// parses (version 5's lines' index is the same bytes).
		w, err := Create(path, Options{BlockSize: bs, Codec: CodecNone, Version: formatV4})
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
		ft := data[len(data)-footerSize:]
		off, l := binary.LittleEndian.Uint64(ft[24:]), binary.LittleEndian.Uint64(ft[32:])
		for _, nd := range []string{"level=info", "user=2", "line 1", "absent"} {
			seeds = append(seeds, gramIndexSeed{data[off : off+l], uint8(r.NumBlocks()), []byte(nd)})
		}
	}
	return seeds
}

// TestGramIndexSeeds checks that the FuzzGramIndex seeds parse and check
// clean, and that the seed corpus directory is there.
func TestGramIndexSeeds(t *testing.T) {
	seeds := gramIndexSeeds()
	dir := filepath.Join("testdata", "fuzz", "FuzzGramIndex")
	if *update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, s := range seeds {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nuint8(%d)\n[]byte(%q)\n", s.section, s.blocks, s.needle)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	unindexed := false
	for i, s := range seeds {
		x, err := parseGrams(s.section, int(s.blocks))
		if err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
		if err := x.check(); err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
		unindexed = unindexed || x.unindexed[0] != 0
	}
	if !unindexed {
		t.Error("no seed has an unindexed block")
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) < len(seeds) {
		t.Fatalf("fuzz seeds missing (%v); run go test ./internal/segment -update", err)
	}
}

// BenchmarkGramBuild measures the writer's index of 32 blocks of 1 MiB
// of the Loghub samples (add per block, then encode), per raw byte: the
// ingest cost of the skip index, without (v6) and with (v7) escape
// grams. Compare with BenchmarkSkipBuild (v2).
func BenchmarkGramBuild(b *testing.B) {
	es, _ := loghubEntries(b)
	var datas [][]byte
	var lenss [][]uint32
	var data []byte
	var lens []uint32
	total := 0
	for _, e := range es {
		if len(data)+len(lens) >= DefaultBlockSize {
			datas, lenss = append(datas, data), append(lenss, lens)
			total += len(data)
			data, lens = nil, nil
		}
		data = append(data, e.Line...)
		lens = append(lens, uint32(len(e.Line)))
	}
	datas, lenss = append(datas, data), append(lenss, lens)
	total += len(data)
	// v6 without escape grams, v7 with (the lines' index of each).
	for _, v := range []struct {
		name    string
		escapes bool
	}{{"v6", false}, {"v7", true}} {
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(int64(total))
			var out []byte
			for b.Loop() {
				s := gramBuilder{escapes: v.escapes}
				for i := range datas {
					s.add(datas[i], lenss[i], gramCandLimit(len(datas[i])))
				}
				out, _ = s.encode()
			}
			b.ReportMetric(float64(len(out))/float64(total)*100, "index-%raw")
		})
	}
}

// BenchmarkGramLookup measures the first MayContain of a 20-byte literal
// on a segment of the Loghub samples (binary search and group decode per
// gram; later calls for the literal hit the per-Reader cache).
func BenchmarkGramLookup(b *testing.B) {
	es, _ := loghubEntries(b)
	path, _ := writeSegment(b, b.TempDir(), "s", es, Options{BlockSize: 64 << 10})
	r, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	lit := []byte("connection reset by peer")
	for b.Loop() {
		r.grams.blocksOf(lit)
	}
}

// TestGramForgedPostings: postings that break the rules under valid
// checksums (a forgery; damage fails the CRC) open, answer "maybe" for
// needles reaching the bad group, and make Verify fail.
func TestGramForgedPostings(t *testing.T) {
	es := gramCorpora()["logs"][:200]
	dir := t.TempDir()
	// Version 4, whose lines' postings end the file (TestEveryTruncationAndBitFlip
	// covers version 5's two indexes).
	path, _ := writeSegmentVersion(t, dir, "s", es, Options{BlockSize: 4096}, formatV4)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := newReader(path, data)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Verify(); err != nil {
		t.Fatal(err)
	}
	first, _ := r.grams.group(0)
	needle := binary.BigEndian.AppendUint32(nil, first)
	absentEverywhere := !r.MayContain(0, []byte("needle-absent-7c3e9a"), false)
	// The first key of the postings area: delta 0 and a code below 8, in
	// one byte; give it a delta of 1.
	ft := data[len(data)-footerSize:]
	skipOff := binary.LittleEndian.Uint64(ft[24:])
	areaOff := len(data) - footerSize - len(r.grams.area)
	if data[areaOff] >= 8 || uint64(areaOff) <= skipOff {
		t.Fatalf("first key %#x at %d", data[areaOff], areaOff)
	}
	data[areaOff] |= 8
	// Group 0's CRC in the table, then the footer's CRC of the head.
	_, end := r.grams.group(1)
	tableEntry0 := data[areaOff-len(r.grams.table) : areaOff-len(r.grams.table)+gramTableEntry]
	binary.LittleEndian.PutUint32(tableEntry0[8:], crc32.Checksum(data[areaOff:areaOff+int(end)], castagnoli))
	binary.LittleEndian.PutUint32(ft[40:], crc32.Checksum(data[skipOff:areaOff], castagnoli))
	binary.LittleEndian.PutUint32(ft[60:], crc32.Checksum(ft[:60], castagnoli))
	r, err = newReader(path, data)
	if err != nil {
		t.Fatalf("forged postings: Open failed: %v", err)
	}
	for bi := range r.NumBlocks() {
		if !r.MayContain(bi, needle, false) {
			t.Fatalf("block %d: MayContain(%q) false on a malformed group", bi, needle)
		}
	}
	if !absentEverywhere {
		t.Fatal("the absent needle was not pruned before the forgery")
	}
	if ce := asCorrupt(t, r.IndexDamage(), "forged postings"); ce.Block != -1 || ce.File != path ||
		!strings.Contains(ce.Reason, "skip index group 0: malformed postings") {
		t.Fatalf("IndexDamage: %v", ce)
	}
	err = r.Verify()
	if ce := asCorrupt(t, err, "forged postings"); ce.Block != -1 || ce.File != path {
		t.Fatalf("Verify: %v", err)
	}
}

// TestGramDamageConcurrent: lookups from several goroutines on an index
// with one damaged group (run with -race) all answer "maybe" where the
// good index does, agree on the damage, and leave the other groups
// usable.
func TestGramDamageConcurrent(t *testing.T) {
	es := gramCorpora()["logs"][:300]
	path, _ := writeSegment(t, t.TempDir(), "s", es, Options{BlockSize: 4096})
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	good, err := newReader(path, bytes.Clone(data))
	if err != nil {
		t.Fatal(err)
	}
	groups := len(good.grams.table) / gramTableEntry
	if groups < 3 {
		t.Fatalf("%d groups", groups)
	}
	// Damage the middle group's first byte.
	k := groups / 2
	_, off := good.grams.group(k)
	areaOff := len(data) - footerSize - len(good.grams.area)
	data[areaOff+int(off)] ^= 0x40
	r, err := newReader(path, data)
	if err != nil {
		t.Fatalf("Open failed on postings damage: %v", err)
	}
	lits := corpusLits(es)
	lits = append(lits, []byte("needle-absent-7c3e9a"), []byte("status=999"))
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for j := range lits {
				l := lits[(j+w*len(lits)/4)%len(lits)]
				for i := range r.NumBlocks() {
					if !r.MayContain(i, l, false) && good.MayContain(i, l, false) {
						t.Errorf("MayContain(%d, %q) false on the damaged index", i, l)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	ce := asCorrupt(t, r.IndexDamage(), "IndexDamage")
	if want := fmt.Sprintf("skip index group %d: checksum mismatch", k); ce.Reason != want || ce.File != path || ce.Block != -1 {
		t.Fatalf("IndexDamage %v, want reason %q", ce, want)
	}
	// Needles whose grams avoid group k are still pruned as before.
	lo, _ := r.grams.group(k)
	hi, _ := r.grams.group(k + 1)
	for _, n := range []string{"status=999", "needle-absent-7c3e9a", "zzzzqqqq"} {
		key := asciiCase([]byte(n), false)
		reaches := false
		for i := 0; i+SkipGram <= len(key); i++ {
			g := binary.BigEndian.Uint32(key[i:])
			reaches = reaches || (g >= lo && g < hi)
		}
		for i := range r.NumBlocks() {
			if got, want := r.MayContain(i, []byte(n), false), good.MayContain(i, []byte(n), false); got != want && !reaches {
				t.Fatalf("%q block %d: %v on the damaged index, %v on the good one", n, i, got, want)
			}
		}
	}
	if err := good.IndexDamage(); err != nil {
		t.Fatalf("good index: %v", err)
	}
	if err := r.Verify(); err == nil || asCorrupt(t, err, "Verify").Reason != ce.Reason {
		t.Fatalf("Verify: %v", err)
	}
}
