package search

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"haystack/internal/attrs"
	"haystack/internal/segment"
	"haystack/internal/store"
	"haystack/internal/testseed"
)

// TestMetaIndexBudgetSearch (R11c-1): a segment whose entries carry
// unique base62 request ids exceeds the values' index budget, so it is
// written without one (not MetaIndexed): label filters on its metadata
// that need a substring skip no block (Stats.PrunedIndex 0; the old
// writer's index skipped blocks at the cost of +70% of the segment),
// those that need an exact value skip most blocks by format 6's value
// filters (~4% of the segment), and all give exactly what a brute-force
// run (NoIndex) gives.
func TestMetaIndexBudgetSearch(t *testing.T) {
	const n = 120_000
	const b62 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{HeadBytes: 64 << 20, Segment: segment.Options{BlockSize: 256 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	streams := []uint32{st.Stream(`{app="checkout"}`), st.Stream(`{app="cart"}`)}
	var ids []string
	var b store.Batch
	id := make([]byte, 22)
	for i := range n {
		for k := range id {
			id[k] = b62[rng.IntN(len(b62))]
		}
		if i%997 == 0 {
			ids = append(ids, string(id))
		}
		b.Entries = append(b.Entries, store.Entry{Time: int64(i) * 1e6, Stream: streams[i%2],
			Line:  []byte(fmt.Sprintf("GET /cart/%d 200 %dms", rng.IntN(1000), rng.IntN(500))),
			Attrs: attrs.MustPairs("request_id", string(id), "service", "checkout")})
		if len(b.Entries) == 1000 {
			if err := st.Append(&b); err != nil {
				t.Fatal(err)
			}
			b = store.Batch{}
		}
	}
	snap := closeAndSnapshot(t, st, dir)
	segs := 0
	for _, p := range snap.Parts {
		if m, ok := p.(MetaSkipper); ok {
			segs++
			if m.MetaIndexed() {
				t.Errorf("a segment of unique base62 ids kept its values' index")
			}
		}
	}
	if segs == 0 {
		t.Fatal("no segment written")
	}
	var queries []string
	// Under emulation (testseed.Emulated) 12 ids, 3 of each kind of query,
	// keep the byte-order coverage; the native run does 40.
	for k, v := range ids[:testseed.Scale(40, 12)] {
		switch k % 4 {
		case 0:
			queries = append(queries, `{app=~".+"} | request_id="`+v+`"`)
		case 1:
			queries = append(queries, `{app="checkout"} | request_id=~"(?i)`+strings.ToUpper(v[2:14])+`.*"`)
		case 2:
			queries = append(queries, `{app=~".+"} | request_id="`+v[:21]+`Q"`) // most likely absent
		default:
			queries = append(queries, `{app="cart"} | service="checkout" | request_id=~"`+v[:10]+`.*|zzzzzz"`)
		}
	}
	found := 0
	for _, src := range queries {
		_, wn, stats := sameWithoutIndex(t, snap.Parts, src, Query{Plan: mustPlan(t, src), Labels: snap.Labels})
		// Regexes ask the values' gram index, which was given up: no
		// block ruled out. An exact value asks the value filters of
		// format 6, which rule out all but its block (and ~1% others).
		if exact := !strings.Contains(src, "request_id=~"); !exact && stats.PrunedIndex != 0 {
			t.Errorf("%s: %d blocks ruled out by a values' index the budget should have given up", src, stats.PrunedIndex)
		} else if exact && stats.PrunedIndex*10 < stats.Blocks*8 {
			t.Errorf("%s: %d of %d blocks ruled out by the value filters", src, stats.PrunedIndex, stats.Blocks)
		}
		if wn > 0 {
			found++
		}
	}
	if found*2 < len(queries) {
		t.Errorf("only %d of %d queries found entries", found, len(queries))
	}
}
