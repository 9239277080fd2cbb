package search

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"haystack/internal/attrs"
	"haystack/internal/segment"
	"haystack/internal/store"
	"haystack/internal/testseed"
)

// The skip index over structured metadata values (segment format 5,
// query.Plan.MetaIndex): label filters on metadata skip blocks in
// version-5 segments, never in version-4 ones, and results equal a
// brute-force run (NoIndex) whatever the query.

// metaTraceID is trace k's id: 32 hex digits, as OTel's.
func metaTraceID(k int) string {
	r := rand.New(rand.NewPCG(uint64(k), 77))
	return fmt.Sprintf("%016x%016x", r.Uint64(), r.Uint64())
}

// buildMetaStore writes entries in len(versions) runs, each flushed to
// segments of that format version (0: the current), in 8 KiB blocks.
// Streams: {app="checkout"}, {app="api",trace_id="stream-trace"} (a
// stream label named like the metadata) and {app="cart"}. Entry i
// belongs to trace i/20 (traces are local, as in real logs); with
// metadata it carries trace_id, span_id, sometimes user (mixed case) and
// an empty value; its line is plain text, JSON or logfmt holding a trace
// id (its own or another) for the parser queries.
func buildMetaStore(t testing.TB, versions []int, withMeta bool, n int) *store.Snapshot {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(5, 6))
	streams := []string{`{app="checkout"}`, `{app="api",trace_id="stream-trace"}`, `{app="cart"}`}
	return buildVersioned(t, dir, versions, n, 200, store.Options{HeadBytes: 64 << 10, Segment: segment.Options{BlockSize: 8 << 10}}, func(st *store.Store, i int) store.Entry {
		trace := metaTraceID(i / 20)
		var line string
		switch i % 4 {
		case 0:
			line = fmt.Sprintf("level=%s msg=%q trace_id=%s", []string{"info", "error"}[rng.IntN(2)], "request served", metaTraceID(i/20+1))
		case 1:
			line = fmt.Sprintf(`{"level":"warn","trace_id":"%s","n":%d}`, trace, i)
		default:
			line = fmt.Sprintf("GET /cart/%d 200 %dms", rng.IntN(1000), rng.IntN(500))
		}
		e := store.Entry{Time: int64(i) * 1e6, Stream: st.Stream(streams[i%3]), Line: []byte(line)}
		if withMeta && i%7 != 3 {
			kv := []string{"trace_id", trace, "span_id", fmt.Sprintf("%016x", rng.Uint64())}
			if i%5 == 0 {
				kv = append(kv, "user", fmt.Sprintf("Alice-%d", i/20))
			}
			if i%11 == 0 {
				kv = append(kv, "empty", "")
			}
			e.Attrs = attrs.MustPairs(kv...)
		}
		return e
	})
}

// metaQueries returns random LogQL queries with label filters on
// metadata: present, absent, substrings, other case, empty values,
// regexes, _extracted and stream-label names, or and and, parsers before
// and after, drop and keep, mixed with line filters.
func metaIndexQueries(rng *rand.Rand, traces int, count int) []string {
	full := func() string { return metaTraceID(rng.IntN(traces + 3)) } // some beyond the stored ones
	id := func() string {
		v := full()
		switch rng.IntN(6) {
		case 0:
			return v[:8+rng.IntN(16)] // a prefix: equal to no value
		case 1:
			return strings.ToUpper(v)
		}
		return v
	}
	matcher := func() string {
		switch rng.IntN(16) {
		case 0:
			return fmt.Sprintf(`trace_id=~"%s.*"`, full()[:10])
		case 1:
			return fmt.Sprintf(`trace_id=~"(?i)%s"`, strings.ToUpper(id()))
		case 2:
			return fmt.Sprintf(`trace_id!="%s"`, id())
		case 3:
			return `trace_id=""`
		case 4:
			return `empty=""`
		case 5:
			return fmt.Sprintf(`user="Alice-%d"`, rng.IntN(traces+2))
		case 6:
			return fmt.Sprintf(`user="alice-%d"`, rng.IntN(traces+2))
		case 7:
			return fmt.Sprintf(`trace_id_extracted="%s"`, id())
		case 8:
			return `trace_id="stream-trace"`
		case 9:
			return fmt.Sprintf(`span_id=~".*%s.*"`, full()[:6])
		case 10:
			return fmt.Sprintf(`trace_id="%s" or user="Alice-%d"`, id(), rng.IntN(traces))
		case 11:
			return fmt.Sprintf(`trace_id="%s" or level="warn"`, id())
		}
		return fmt.Sprintf(`trace_id="%s"`, id())
	}
	sels := []string{`{app=~".+"}`, `{app="checkout"}`, `{app="api"}`, `{app=~"checkout|cart"}`}
	var qs []string
	for range count {
		var b strings.Builder
		b.WriteString(sels[rng.IntN(len(sels))])
		for range 1 + rng.IntN(3) {
			switch rng.IntN(10) {
			case 0:
				b.WriteString(" | json")
			case 1:
				b.WriteString(" | logfmt")
			case 2:
				b.WriteString(` |= "error"`)
			case 3:
				b.WriteString(" | drop span_id")
			case 4:
				fmt.Fprintf(&b, ` |= "%s"`, full()[:12])
			default:
				b.WriteString(" | " + matcher())
			}
		}
		qs = append(qs, b.String())
	}
	return qs
}

// metaIdxOut is out with the entry's metadata.
type metaIdxOut struct {
	out
	attrs string
}

func runMetaIdx(t testing.TB, parts []store.Part, q Query) ([]metaIdxOut, int64) {
	t.Helper()
	var got []metaIdxOut
	n, err := Run(context.Background(), parts, q, func(m *Match) error {
		got = append(got, metaIdxOut{out{m.Time, m.Stream, string(m.Line), m.Context, m.GroupStart}, string(m.Attrs)})
		return nil
	}, func(err error) { t.Errorf("block error: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	return got, n
}

// TestMetaIndexOracle: random queries on stores of format 5, format 4,
// both (a store written before and after an upgrade), with and without
// metadata, give with the skip index exactly what a brute-force run
// (NoIndex) gives, entries and metadata, in each order, counted and
// listed; and on format 5 with metadata the index skips blocks for some
// of them (it is used), on format 4 never for metadata.
func TestMetaIndexOracle(t *testing.T) {
	const n = 3000
	rng := rand.New(rand.NewPCG(61, 62))
	// Under emulation (testseed.Emulated) 40 queries a store keep the
	// byte-order coverage; the native run does all 150.
	queries := testseed.Scale(150, 40)
	for _, c := range []struct {
		name     string
		versions []int
		meta     bool
	}{
		{"v5", []int{0}, true},
		{"v4", []int{4}, true},
		{"v4-then-v5", []int{4, 0}, true},
		{"v5-then-v4", []int{0, 4}, true},
		{"v5-no-metadata", []int{0}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			snap := buildMetaStore(t, c.versions, c.meta, n)
			pruned, found := 0, 0
			for i, src := range metaIndexQueries(rng, n/20, queries) {
				p := mustPlan(t, src)
				order := []Order{Oldest, Newest, Stored}[i%3]
				q := Query{Plan: p, Labels: snap.Labels, Order: order}
				if i%4 == 0 {
					q.Limit = 7
				}
				wn, skipped := indexAgreesWithBrute(t, snap.Parts, src, q, Query{Plan: p, Labels: snap.Labels, Count: true, Index: snap.Index()})
				if skipped {
					pruned++
				}
				if wn > 0 {
					found++
				}
			}
			t.Logf("%d of %d queries skipped blocks by the index, %d found entries", pruned, queries, found)
			if found*5 < queries {
				t.Errorf("only %d queries found entries: the test would prove little", found)
			}
			if c.name == "v5" && pruned*3 < queries {
				t.Errorf("the index skipped blocks for only %d queries", pruned)
			}
		})
	}
}

// TestMetaIndexSkipsBlocks: the incident's query, a trace id as a label
// filter, decodes only the blocks that hold the trace in a version-5
// store, and every block of the selected streams in a version-4 store
// (whose index does not know metadata), with the same result.
func TestMetaIndexSkipsBlocks(t *testing.T) {
	const n = 6000
	trace := metaTraceID(123) // entries 2460..2479
	for _, c := range []struct {
		name     string
		versions []int
	}{{"v5", []int{0}}, {"v4", []int{4}}} {
		t.Run(c.name, func(t *testing.T) {
			snap := buildMetaStore(t, c.versions, true, n)
			for _, src := range []string{
				`{app=~".+"} | trace_id="` + trace + `"`,
				`{app="checkout"} | trace_id="` + trace + `" | json`,
				`{app=~".+"} | span_id!="x" | trace_id=~"(?i)` + strings.ToUpper(trace) + `"`,
			} {
				got, gn, st := sameWithoutIndex(t, snap.Parts, src, Query{Plan: mustPlan(t, src), Labels: snap.Labels})
				if gn == 0 {
					t.Fatalf("%s: no entry", src)
				}
				kept := st.Blocks - st.PrunedTime - st.PrunedStream - st.PrunedIndex
				t.Logf("%s: %d blocks, %d decoded, %d ruled out by the index, %d entries", src, st.Blocks, st.Decoded, st.PrunedIndex, gn)
				switch c.name {
				case "v5":
					// The trace's 20 entries lie in one or two blocks. The
					// api stream has trace_id as a stream label, which the
					// filter reads there ("stream-trace": no entry of it
					// passes), so it keeps no block either.
					if kept > 3 || st.Decoded > 3 {
						t.Errorf("%s: kept %d blocks, decoded %d", src, kept, st.Decoded)
					}
				case "v4":
					if st.PrunedIndex != 0 {
						t.Errorf("%s: a version-4 segment was skipped for metadata (%d blocks)", src, st.PrunedIndex)
					}
				}
				// A line search for a value that only metadata holds: the
				// lines' index rules out every block, in either version
				// (the values' index is apart; line filters never match
				// metadata).
				span, ok := attrs.Get([]byte(got[0].attrs), "span_id")
				if !ok {
					t.Fatalf("%s: first entry without span_id: %q", src, got[0].attrs)
				}
				var ls Stats
				if _, n := runMetaIdx(t, snap.Parts, Query{Pattern: span, Count: true, Stats: &ls}); n != 0 || ls.Decoded != 0 || ls.PrunedIndex != ls.Blocks {
					t.Errorf("line search for span id %s: %d entries, %d of %d blocks decoded", span, n, ls.Decoded, ls.Blocks)
				}
			}
		})
	}
}

// buildVersioned writes entries 0..n-1 into a store at dir in one run per
// segment format version in versions (0: the current one), each a
// store.Open with opts at that version: a run's share of the entries, made
// by entry (in order: a generator's random draws stay the same), appended
// in batches of batch. It returns a snapshot of the whole store.
func buildVersioned(t testing.TB, dir string, versions []int, n, batch int, opts store.Options, entry func(st *store.Store, i int) store.Entry) *store.Snapshot {
	t.Helper()
	per := (n + len(versions) - 1) / len(versions)
	for run, v := range versions {
		o := opts
		o.Segment.Version = v
		st, err := store.Open(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		var b store.Batch
		for i := run * per; i < min(n, (run+1)*per); i++ {
			b.Entries = append(b.Entries, entry(st, i))
			if len(b.Entries) == batch {
				if err := st.Append(&b); err != nil {
					t.Fatal(err)
				}
				b = store.Batch{}
			}
		}
		if len(b.Entries) > 0 {
			if err := st.Append(&b); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := store.OpenSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { snap.Close() })
	return snap
}

// indexAgreesWithBrute runs q (listing) and cq (its count) with the skip
// index and with NoIndex over parts, and fails on any difference: the
// entries, their order, the counts, and (without a limit) the count
// against the entries listed. It returns how many entries NoIndex lists
// and whether the index skipped blocks.
func indexAgreesWithBrute(t testing.TB, parts []store.Part, src string, q, cq Query) (listed int64, skipped bool) {
	t.Helper()
	_, wn, st := sameWithoutIndex(t, parts, src, q)
	cn, ccount := runMetaIdx(t, parts, cq)
	if cn != nil {
		t.Fatalf("%s: a count delivered entries", src)
	}
	bq := cq
	bq.NoIndex = true
	if _, bcount := runMetaIdx(t, parts, bq); ccount != bcount || bcount != wn && q.Limit == 0 {
		t.Fatalf("%s: count %d with the index, %d without, %d listed", src, ccount, bcount, wn)
	}
	return wn, st.PrunedIndex > 0
}

// sameWithoutIndex runs q over parts with the skip index and with NoIndex
// and fails unless both give the same entries (metadata included) in the
// same order, or the same count for a Count query. It returns the
// entries, their number and the indexed run's Stats.
func sameWithoutIndex(t testing.TB, parts []store.Part, src string, q Query) ([]metaIdxOut, int64, Stats) {
	t.Helper()
	var st Stats
	q.Stats = &st
	got, gn := runMetaIdx(t, parts, q)
	brute := q
	brute.NoIndex, brute.Stats = true, nil
	want, wn := runMetaIdx(t, parts, brute)
	if gn != wn || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s (%v): with the index %d entries, without %d\nindex: %.300v\nbrute: %.300v", src, q.Order, gn, wn, got, want)
	}
	return got, wn, st
}
