package search

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"haystack/internal/query"
	"haystack/internal/segment"
	"haystack/internal/store"
)

// countingLabelPart counts the lookups a search makes of a segment's
// indexes for label filters, block by block and for all blocks at once.
type countingLabelPart struct {
	*store.SegmentPart
	perBlock, whole *atomic.Int64
}

func (p countingLabelPart) MayContain(i int, lit []byte, fold bool) bool {
	p.perBlock.Add(1)
	return p.SegmentPart.MayContain(i, lit, fold)
}

func (p countingLabelPart) MayContainValue(i int, lit []byte, fold bool) bool {
	p.perBlock.Add(1)
	return p.SegmentPart.MayContainValue(i, lit, fold)
}

func (p countingLabelPart) MayHaveValue(i int, v []byte) bool {
	p.perBlock.Add(1)
	return p.SegmentPart.MayHaveValue(i, v)
}

func (p countingLabelPart) MayHoldEscape(i int, c byte) bool {
	p.perBlock.Add(1)
	return p.SegmentPart.MayHoldEscape(i, c)
}

func (p countingLabelPart) MayContainBlocks(lit []byte, fold bool) []uint64 {
	p.whole.Add(1)
	return p.SegmentPart.MayContainBlocks(lit, fold)
}

func (p countingLabelPart) MayContainValueBlocks(lit []byte, fold bool) []uint64 {
	p.whole.Add(1)
	return p.SegmentPart.MayContainValueBlocks(lit, fold)
}

func (p countingLabelPart) MayHaveValueBlocks(v []byte) []uint64 {
	p.whole.Add(1)
	return p.SegmentPart.MayHaveValueBlocks(v)
}

func (p countingLabelPart) MayHoldEscapeBlocks(c byte) []uint64 {
	p.whole.Add(1)
	return p.SegmentPart.MayHoldEscapeBlocks(c)
}

// needLookups is an upper bound on the index lookups that answer n for
// all blocks at once: one per literal of a leaf's tree, exact value and
// escaped character.
func needLookups(n *query.Need) int64 {
	var lits func(x *query.Expr) int64
	lits = func(x *query.Expr) int64 {
		if x == nil {
			return 0
		}
		k := int64(0)
		if x.Op == query.OpLit {
			k++
		}
		for _, s := range x.Sub {
			k += lits(s)
		}
		return k
	}
	k := int64(0)
	if n.Op == query.OpLit {
		k += lits(n.X) + int64(len(n.Exact)) + int64(len(n.Escaped))
	}
	for _, s := range n.Sub {
		k += needLookups(s)
	}
	return k
}

// TestManyLabelValuesLookupOnce is review F7: a label filter after a
// parser ORing 1,100 user ids (more than a segment Reader caches
// literals) asked the skip indexes block by block, rebuilding each
// literal's bitmap for every block (583 ms against 58 ms with
// --no-index in the review; 25 s against 0.4 s on 1,995 blocks). Each
// literal must be looked up at most once per segment in the time range
// (none in a segment outside it), and the count must be NoIndex's.
func TestManyLabelValuesLookupOnce(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{Segment: segment.Options{BlockSize: 2 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	sid := st.Stream(`{app="x"}`)
	var b store.Batch
	for i := range 8000 {
		line := fmt.Sprintf(`level=info route=/api user_id=%d msg="GET /v1/orders 200"`, 1_000_000+i*37)
		if i%2 == 1 {
			line = fmt.Sprintf(`{"level":"info","route":"/api","user_id":"%d","msg":"GET /v1/orders 200"}`, 1_000_000+i*37)
		}
		b.Entries = append(b.Entries, store.Entry{Time: int64(i), Stream: sid, Line: []byte(line)})
	}
	if err := st.Append(&b); err != nil {
		t.Fatal(err)
	}
	if err := st.Flush(); err != nil {
		t.Fatal(err)
	}
	// A second segment, later than the searches' time range: it must
	// cost no lookup at all.
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
			p = countingLabelPart{sp, &perBlock, &whole}
		}
		parts = append(parts, p)
		blocks += p.NumBlocks()
	}
	if blocks < 100 {
		t.Fatalf("%d blocks, want many", blocks)
	}
	var ms []string
	for i := range 1100 {
		id := 2_000_000 + i // in no line
		if i%100 == 0 {
			// In one line each: entry i's (logfmt) or i+1's (JSON).
			id = 1_000_000 + (i+i/100%2)*37
		}
		ms = append(ms, fmt.Sprintf("user_id=%q", fmt.Sprint(id)))
	}
	for _, parser := range []string{"logfmt", "json"} {
		src := `{app="x"} | ` + parser + " | " + strings.Join(ms, " or ")
		plan := mustPlan(t, src)
		x := plan.LabelIndex([]query.Label{{Name: "app", Value: "x"}})
		if x == nil {
			t.Fatalf("%s: no requirement", parser)
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
		// The entries of the 11 ids the lines hold: 6 logfmt, 5 JSON,
		// and each parser reads its own lines only.
		want := int64(5)
		if parser == "logfmt" {
			want = 6
		}
		if brute := count(true); got != brute || got != want {
			t.Fatalf("%s: count %d with the index, %d without; want %d", parser, got, brute, want)
		}
		// One segment is in the time range: a lookup a literal at most.
		if max := needLookups(x); lookups > max {
			t.Fatalf("%s: %d skip index lookups (%d per block, %d for all blocks) over %d blocks; want at most %d, one a literal",
				parser, lookups, perBlock.Load(), whole.Load(), blocks, max)
		}
		t.Logf("%s: %d lookups (%d per block, %d for all blocks) over %d blocks, at most %d", parser, lookups, perBlock.Load(), whole.Load(), blocks, needLookups(x))
	}
}
