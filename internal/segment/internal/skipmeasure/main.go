// Command skipmeasure compares skip-index designs for segment blocks
// (issue 6) before one is built into the format: n-gram length 3 or 4,
// a bloom filter per block (bits per distinct n-gram, hash count) or
// postings lists per segment (n-gram -> the blocks holding it), and the
// block size.
//
// The input lines are cut into blocks as segment.Writer cuts them, and
// written as a real segment (default codec) for the stored size. For each
// design it reports the index's size as a share of that stored size, the
// index's build time in this tool (exact sorted n-gram sets, then the
// encoding, per MB of raw text, one goroutine: far slower than the
// Writer's, which needs no exact sets; see BenchmarkSkipBuild), and its false-positive rate for absent and for rare
// needles: of the blocks that do not contain the needle, the fraction the
// index keeps anyway. N-grams are ASCII-lowered and never span two lines;
// truth is "the lowered block contains the lowered needle", what a
// case-insensitive search can use.
//
// Usage:
//
//	go run ./internal/segment/internal/skipmeasure [-sizes 64,256] [-seg 32] FILE...
package main

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"haystack/internal/segment"
)

func main() {
	sizes := flag.String("sizes", "64,256", "block sizes in KiB")
	segMiB := flag.Int("seg", 32, "segment size in MiB of raw text for postings lists (the store's head flush size)")
	needles := flag.Int("needles", 60, "needles per class")
	segs := flag.String("segs", "", "instead: report the skip index's share of the segment files matching this glob")
	flag.Parse()
	if *segs != "" {
		reportSegs(*segs)
		return
	}
	if flag.NArg() == 0 {
		log.Fatal("usage: skipmeasure [-sizes 64,256] FILE...")
	}
	var lines [][]byte
	var raw int
	for _, f := range flag.Args() {
		b, err := os.ReadFile(f)
		if err != nil {
			log.Fatal(err)
		}
		for l := range bytes.SplitSeq(b, []byte{'\n'}) {
			l = bytes.TrimSuffix(l, []byte{'\r'})
			if len(l) == 0 {
				continue
			}
			lines = append(lines, l)
			raw += len(l) + 1
		}
	}
	fmt.Printf("%d lines, %.1f MB\n\n", len(lines), float64(raw)/1e6)
	fmt.Println("| block | n | design | index/stored | build MB/s | FPR absent | FPR rare | blocks kept: absent / rare |")
	fmt.Println("|---:|---:|---|---:|---:|---:|---:|---:|")
	for _, s := range strings.Split(*sizes, ",") {
		kib, err := strconv.Atoi(s)
		if err != nil {
			log.Fatal(err)
		}
		run(lines, kib<<10, *segMiB<<20, *needles)
	}
}

type block struct {
	lines [][]byte
	lower []byte // the lowered lines joined by '\n' (truth)
	raw   int
}

func cut(lines [][]byte, size int) []block {
	var bs []block
	var cur block
	for _, l := range lines {
		if len(cur.lines) > 0 && cur.raw+len(l)+1 > size {
			bs = append(bs, cur)
			cur = block{}
		}
		cur.lines = append(cur.lines, l)
		cur.raw += len(l) + 1
		if cur.raw >= size {
			bs = append(bs, cur)
			cur = block{}
		}
	}
	if len(cur.lines) > 0 {
		bs = append(bs, cur)
	}
	for i := range bs {
		var b []byte
		for _, l := range bs[i].lines {
			b = append(b, lowerASCII(l)...)
			b = append(b, '\n')
		}
		bs[i].lower = b
	}
	return bs
}

func lowerASCII(b []byte) []byte {
	o := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		o[i] = c
	}
	return o
}

func lowerByte(c byte) uint32 {
	if 'A' <= c && c <= 'Z' {
		c += 'a' - 'A'
	}
	return uint32(c)
}

// grams returns the distinct lowered n-grams of lines, sorted.
func grams(dst []uint32, lines [][]byte, n int) []uint32 {
	dst = dst[:0]
	for _, l := range lines {
		if len(l) < n {
			continue
		}
		var g uint32
		for i := range n - 1 {
			g = g<<8 | lowerByte(l[i])
		}
		for i := n - 1; i < len(l); i++ {
			g = g<<8 | lowerByte(l[i])
			if n == 3 {
				g &= 0xffffff
			}
			dst = append(dst, g)
		}
	}
	slices.Sort(dst)
	return slices.Compact(dst)
}

func needleGrams(nd []byte, n int) []uint32 {
	var gs []uint32
	for i := 0; i+n <= len(nd); i++ {
		var g uint32
		for _, c := range nd[i : i+n] {
			g = g<<8 | lowerByte(c)
		}
		gs = append(gs, g)
	}
	return gs
}

func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

type bloom struct {
	bits []uint64
	m    uint64
	k    int
}

func newBloom(gs []uint32, bitsPer float64, k int) bloom {
	m := uint64(math.Ceil(float64(len(gs))*bitsPer/64)) * 64
	m = max(m, 64)
	b := bloom{bits: make([]uint64, m/64), m: m, k: k}
	for _, g := range gs {
		h := mix(uint64(g))
		h1, h2 := h&0xffffffff, h>>32|1
		for i := range k {
			p := (h1 + uint64(i)*h2) % m
			b.bits[p/64] |= 1 << (p % 64)
		}
	}
	return b
}

func (b bloom) has(g uint32) bool {
	h := mix(uint64(g))
	h1, h2 := h&0xffffffff, h>>32|1
	for i := range b.k {
		p := (h1 + uint64(i)*h2) % b.m
		if b.bits[p/64]&(1<<(p%64)) == 0 {
			return false
		}
	}
	return true
}

// postingsSize encodes one segment's postings (gram -> ascending block
// numbers) the compact way: uvarint gram delta, uvarint count, then a
// bitmap over the segment's blocks, uvarint deltas of the blocks holding
// the gram, or uvarint deltas of the blocks lacking it, whichever is
// smallest (a gram in every block costs no list at all). It returns the encoded size.
func postingsSize(perBlock [][]uint32) int {
	m := map[uint32][]int{}
	for bi, gs := range perBlock {
		for _, g := range gs {
			m[g] = append(m[g], bi)
		}
	}
	keys := make([]uint32, 0, len(m))
	for g := range m {
		keys = append(keys, g)
	}
	slices.Sort(keys)
	size, prev := 0, uint32(0)
	var tmp [binary.MaxVarintLen64]byte
	bitmap := (len(perBlock) + 7) / 8
	for _, g := range keys {
		size += binary.PutUvarint(tmp[:], uint64(g-prev))
		prev = g
		bl := m[g]
		size += binary.PutUvarint(tmp[:], uint64(len(bl)))
		d, last := 0, 0
		for _, b := range bl {
			d += binary.PutUvarint(tmp[:], uint64(b-last))
			last = b
		}
		// The complement: the blocks lacking the gram.
		c, last, j := 0, 0, 0
		for b := range len(perBlock) {
			if j < len(bl) && bl[j] == b {
				j++
				continue
			}
			c += binary.PutUvarint(tmp[:], uint64(b-last))
			last = b
		}
		size += min(d, c, bitmap)
	}
	return size
}

type design struct {
	name    string
	bloom   bool
	bitsPer float64
	k       int
}

func run(lines [][]byte, blockSize, segBytes, nNeedles int) {
	blocks := cut(lines, blockSize)
	stored := storedSize(lines, blockSize)
	rng := rand.New(rand.NewPCG(1, 2))
	absent, rare := pickNeedles(rng, blocks, nNeedles)
	truth := func(nd []byte) []bool {
		lo := lowerASCII(nd)
		t := make([]bool, len(blocks))
		for i, b := range blocks {
			t[i] = bytes.Contains(b.lower, lo)
		}
		return t
	}
	absT := make([][]bool, len(absent))
	for i, nd := range absent {
		absT[i] = truth(nd)
	}
	rareT := make([][]bool, len(rare))
	for i, nd := range rare {
		rareT[i] = truth(nd)
	}
	designs := []design{
		{"postings per segment", false, 0, 0},
		{"bloom 8 bits, k=4", true, 8, 4},
		{"bloom 10 bits, k=5", true, 10, 5},
		{"bloom 16 bits, k=7", true, 16, 7},
		{"bloom 4 bits, k=2", true, 4, 2},
		{"bloom 2 bits, k=1", true, 2, 1},
		{"bloom 1.25 bits, k=1", true, 1.25, 1},
		{"bloom 1 bit, k=1", true, 1, 1},
	}
	for _, n := range []int{3, 4} {
		// Extraction once; its time is added to each design's build time.
		t0 := time.Now()
		per := make([][]uint32, len(blocks))
		var scratch []uint32
		total := 0
		for i, b := range blocks {
			scratch = grams(scratch, b.lines, n)
			per[i] = slices.Clone(scratch)
			total += len(scratch)
		}
		extract := time.Since(t0)
		rawBytes := 0
		for _, b := range blocks {
			rawBytes += b.raw
		}
		for _, d := range designs {
			t1 := time.Now()
			var size int
			var has func(bi int, g uint32) bool
			if d.bloom {
				bls := make([]bloom, len(blocks))
				for i := range blocks {
					bls[i] = newBloom(per[i], d.bitsPer, d.k)
					size += len(bls[i].bits) * 8
				}
				has = func(bi int, g uint32) bool { return bls[bi].has(g) }
			} else {
				// Segments of segBytes raw.
				start, acc := 0, 0
				for i, b := range blocks {
					acc += b.raw
					if acc >= segBytes || i == len(blocks)-1 {
						size += postingsSize(per[start : i+1])
						start, acc = i+1, 0
					}
				}
				has = func(bi int, g uint32) bool { _, ok := slices.BinarySearch(per[bi], g); return ok }
			}
			build := extract + time.Since(t1)
			fpr := func(nds [][]byte, tr [][]bool) (float64, float64) {
				fp, neg, kept, all := 0, 0, 0, 0
				for i, nd := range nds {
					gs := needleGrams(nd, n)
					for bi := range blocks {
						keep := true
						for _, g := range gs {
							if !has(bi, g) {
								keep = false
								break
							}
						}
						all++
						if keep {
							kept++
						}
						if !tr[i][bi] {
							neg++
							if keep {
								fp++
							}
						} else if !keep {
							log.Fatalf("false negative: %q block %d", nd, bi)
						}
					}
				}
				return float64(fp) / float64(max(neg, 1)), float64(kept) / float64(max(all, 1))
			}
			fa, ka := fpr(absent, absT)
			fr, kr := fpr(rare, rareT)
			fmt.Printf("| %d KiB | %d | %s | %.1f%% | %.0f | %.3f | %.3f | %.3f / %.3f |\n",
				blockSize>>10, n, d.name, 100*float64(size)/float64(stored),
				float64(rawBytes)/1e6/build.Seconds(), fa, fr, ka, kr)
		}
		fmt.Printf("|  |  | (%d blocks, %.0f distinct %d-grams a block, stored %.1f MB) | | | | | |\n",
			len(blocks), float64(total)/float64(len(blocks)), n, float64(stored)/1e6)
	}
}

// pickNeedles returns absent needles (substrings of random lines of 6-24
// bytes with one middle byte replaced, checked absent everywhere, plus
// some words) and rare ones (substrings of random lines of 8-24 bytes held
// by at most 2% of the blocks, at least one).
func pickNeedles(rng *rand.Rand, blocks []block, n int) (absent, rare [][]byte) {
	words := []string{"segfault", "kernel panic", "OutOfMemoryError", "deadlock detected", "xyzzy", "Traceback", "checksum mismatch", "disk quota"}
	contains := func(nd []byte) int {
		lo := lowerASCII(nd)
		c := 0
		for _, b := range blocks {
			if bytes.Contains(b.lower, lo) {
				c++
			}
		}
		return c
	}
	for _, w := range words {
		if contains([]byte(w)) == 0 {
			absent = append(absent, []byte(w))
		}
	}
	const alpha = "abcdefghijklmnopqrstuvwxyz0123456789_=\" "
	for tries := 0; len(absent) < n && tries < 100*n; tries++ {
		b := blocks[rng.IntN(len(blocks))]
		l := b.lines[rng.IntN(len(b.lines))]
		m := 6 + rng.IntN(19)
		if len(l) < m {
			continue
		}
		i := rng.IntN(len(l) - m + 1)
		nd := bytes.Clone(l[i : i+m])
		nd[m/2] = alpha[rng.IntN(len(alpha))]
		if contains(nd) == 0 {
			absent = append(absent, nd)
		}
	}
	limit := max(1, len(blocks)/50)
	for tries := 0; len(rare) < n && tries < 100*n; tries++ {
		b := blocks[rng.IntN(len(blocks))]
		l := b.lines[rng.IntN(len(b.lines))]
		m := 8 + rng.IntN(17)
		if len(l) < m {
			continue
		}
		i := rng.IntN(len(l) - m + 1)
		nd := bytes.Clone(l[i : i+m])
		if c := contains(nd); c >= 1 && c <= limit {
			rare = append(rare, nd)
		}
	}
	return absent, rare
}

func storedSize(lines [][]byte, blockSize int) int {
	dir, err := os.MkdirTemp("", "skipmeasure")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	w, err := segment.Create(filepath.Join(dir, "s"), segment.Options{BlockSize: blockSize})
	if err != nil {
		log.Fatal(err)
	}
	for i, l := range lines {
		if err := w.Add(segment.Entry{Time: int64(i) * 1e6, Line: l}); err != nil {
			log.Fatal(err)
		}
	}
	info, err := w.Commit()
	if err != nil {
		log.Fatal(err)
	}
	// The stored size without a skip index (the segment is version 2).
	return int(info.FileBytes - info.SkipBytes)
}

// reportSegs prints the skip index's share of existing segment files.
func reportSegs(glob string) {
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		log.Fatalf("no segments match %q", glob)
	}
	var skip, size, raw, blocks int64
	for _, f := range files {
		r, err := segment.Open(f)
		if err != nil {
			log.Fatal(err)
		}
		in := r.Info()
		skip += in.SkipBytes
		size += in.FileBytes
		raw += in.RawBytes
		blocks += int64(in.Blocks)
		r.Close()
	}
	fmt.Printf("%d segments, %d blocks, raw %.1f MB, files %.1f MB, skip index %.2f MB = %.1f%% of the files (%.1f%% of the rest)\n",
		len(files), blocks, float64(raw)/1e6, float64(size)/1e6, float64(skip)/1e6,
		100*float64(skip)/float64(size), 100*float64(skip)/float64(size-skip))
}
