package search

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"haystack/internal/query"
	"haystack/internal/segment"
	"haystack/internal/store"
	"haystack/internal/testseed"
)

// TestMayMatchBlocksOracle checks mayMatchBlocks, the whole-part answer
// the executor uses, against MayMatch asked block by block, for random
// required-literal trees over segments of every format with a skip
// index that the writer still makes (postings with and without metadata,
// value filters and escape grams):
// literals present in some blocks, absent, shorter than a gram, empty,
// folded, and NONE/ALL leaves under AND and OR. (Formats 1 to 3, which
// no writer makes any more, are checked in the segment package against
// their golden files: TestMayContainBlocks.)
func TestMayMatchBlocksOracle(t *testing.T) {
	seed := testseed.Seed(t, "HAY_BLOCKMASK_SEED")
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	dir := t.TempDir()
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"}
	snap := buildVersioned(t, dir, []int{4, 5, 6, 7}, 3000, 250,
		store.Options{Segment: segment.Options{BlockSize: 256}},
		func(st *store.Store, i int) store.Entry {
			line := fmt.Sprintf("%s id=%05d %s", words[i*7%len(words)], i, words[(i/40)%len(words)])
			return store.Entry{Time: int64(i), Stream: st.Stream(`{app="m"}`), Line: []byte(line)}
		})
	defer snap.Close()
	lits := []string{"ab", "", "zzzz-absent", "ALPHA", "id=0", "id=01", "id=02999", "=0042", "harlie", "otel id"}
	for _, w := range words {
		lits = append(lits, w, fmt.Sprintf("%s id=%03d", w, r.IntN(300)))
	}
	var tree func(depth int) *query.Expr
	tree = func(depth int) *query.Expr {
		switch k := r.IntN(10); {
		case depth > 2 || k < 5:
			l := lits[r.IntN(len(lits))]
			fold := r.IntN(2) == 0
			if fold {
				l = lowerASCII([]byte(l))
			}
			return &query.Expr{Op: query.OpLit, Lit: query.Lit{Text: l, Fold: fold}}
		case k == 5:
			return &query.Expr{Op: query.OpNone}
		case k == 6:
			return &query.Expr{Op: query.OpAll}
		default:
			op := query.OpAnd
			if k >= 8 {
				op = query.OpOr
			}
			x := &query.Expr{Op: op}
			for range r.IntN(4) {
				x.Sub = append(x.Sub, tree(depth+1))
			}
			return x
		}
	}
	parts, some := 0, 0 // some: trees that keep some blocks of a part, not all
	for _, p := range snap.Parts {
		bs, ok := p.(BlockSkipper)
		if !ok {
			continue
		}
		parts++
		n := p.NumBlocks()
		if n < 65 {
			t.Fatalf("a part of %d blocks: want more than one word of bitmap", n)
		}
		for range testseed.Scale(400, 80) {
			x := tree(0)
			bm := mayMatchBlocks(x, bs, n)
			kept := 0
			for bi := range n {
				got := bm == nil || bm[bi/64]&(1<<(bi%64)) != 0
				if want := MayMatch(x, bs, bi); got != want {
					t.Fatalf("%s block %d of %s: mayMatchBlocks %v, MayMatch %v", x, bi, p.(*store.SegmentPart).Name(), got, want)
				}
				if got {
					kept++
				}
			}
			if kept > 0 && kept < n {
				some++
			}
		}
	}
	t.Logf("%d trees of %d kept some blocks of a part, not all", some, 4*testseed.Scale(400, 80))
	if some < testseed.Scale(100, 20) {
		t.Fatalf("only %d trees kept some blocks but not all: the oracle hardly tests pruning", some)
	}
	if parts != 4 {
		t.Fatalf("%d segments answer for all blocks, want 4", parts)
	}
}

// countingPart counts the skip index lookups a search makes.
type countingPart struct {
	*store.SegmentPart
	perBlock, whole *atomic.Int64
}

func (p countingPart) MayContain(i int, lit []byte, fold bool) bool {
	p.perBlock.Add(1)
	return p.SegmentPart.MayContain(i, lit, fold)
}

func (p countingPart) MayContainBlocks(lit []byte, fold bool) []uint64 {
	p.whole.Add(1)
	return p.SegmentPart.MayContainBlocks(lit, fold)
}

// TestManyLiteralsLookupOnce: a grep for 1,100 ids (more than a
// segment's cache of literal bitmaps holds) must look each literal up
// once per segment, not once per block (review 15 H100-1: 1,100 absent
// ids over ~2,000 blocks took 73 s with the index, 0.16 s without), and
// count what the brute-force search counts.
func TestManyLiteralsLookupOnce(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{Segment: segment.Options{BlockSize: 2 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	sid := st.Stream(`{app="x"}`)
	var b store.Batch
	for i := range 8000 {
		line := fmt.Sprintf("GET /v1/orders 200 user_id=%d route=/api", 1_000_000+i*37)
		b.Entries = append(b.Entries, store.Entry{Time: int64(i), Stream: sid, Line: []byte(line)})
	}
	if err := st.Append(&b); err != nil {
		t.Fatal(err)
	}
	if err := st.Flush(); err != nil {
		t.Fatal(err)
	}
	// A second segment, later than the searches' time range below: it
	// must cost no lookup at all (review 15d F6).
	b = store.Batch{}
	for i := range 500 {
		b.Entries = append(b.Entries, store.Entry{Time: 1_000_000 + int64(i), Stream: sid, Line: []byte("later user_id=2000000 ")})
	}
	if err := st.Append(&b); err != nil {
		t.Fatal(err)
	}
	snap := closeAndSnapshot(t, st, dir)
	var perBlock, whole atomic.Int64
	var parts []store.Part
	blocks := 0
	for _, p := range snap.Parts {
		if sp, ok := p.(*store.SegmentPart); ok {
			p = countingPart{sp, &perBlock, &whole}
		}
		parts = append(parts, p)
		blocks += p.NumBlocks()
	}
	if blocks < 100 {
		t.Fatalf("%d blocks, want many", blocks)
	}
	var pats []string
	for i := range 1100 {
		id := 2_000_000 + i // in no line
		if i%100 == 0 {
			id = 1_000_000 + i*37 // in one line each
		}
		pats = append(pats, fmt.Sprintf("user_id=%d ", id))
	}
	// With a last literal too short for the index, every block may
	// match: the whole-part answer is nil, and must not send the search
	// back to asking block by block (review 15d F1).
	for _, short := range []bool{false, true} {
		ps := pats
		if short {
			ps = append(slices.Clip(pats), "zq") // in no line
		}
		const want = 11
		gq, err := query.FromGrep(query.GrepOptions{Patterns: ps})
		if err != nil {
			t.Fatal(err)
		}
		plan, err := query.Compile(gq)
		if err != nil {
			t.Fatal(err)
		}
		count := func(noIndex bool) int64 {
			n, err := Run(context.Background(), parts, Query{Plan: plan, Labels: snap.Labels, Count: true, NoIndex: noIndex, Until: 100_000, UntilSet: true},
				func(*Match) error { return nil }, func(err error) { t.Error(err) })
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		perBlock.Store(0)
		whole.Store(0)
		got := count(false)
		lookups := perBlock.Load() + whole.Load()
		if brute := count(true); got != brute || got != want {
			t.Fatalf("short %v: count %d with the index, %d without; want %d", short, got, brute, want)
		}
		// One segment is in the time range: at most a lookup a literal.
		if max := int64(len(ps)); lookups > max {
			t.Fatalf("short %v: %d skip index lookups (%d per block, %d for all blocks) for %d literals over %d blocks; want at most %d",
				short, lookups, perBlock.Load(), whole.Load(), len(ps), blocks, max)
		}
	}
}
