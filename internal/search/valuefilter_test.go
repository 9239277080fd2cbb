package search

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"haystack/internal/attrs"
	"haystack/internal/segment"
	"haystack/internal/store"
	"haystack/internal/testseed"
)

// Segment format 6's value filters (review R11c-2): a label filter that
// needs an exact metadata value skips the blocks whose filter lacks it,
// where the values' 4-gram index of format 5 saturates (hex ids in
// blocks of many short entries).

// otelID returns entry i's unique id of digits hex digits.
func otelID(seed uint64, i, digits int) string {
	r := rand.New(rand.NewPCG(seed, uint64(i)))
	return fmt.Sprintf("%016x%016x", r.Uint64(), r.Uint64())[:digits]
}

// otelBodies are short OTel-like log bodies: with ~70 bytes of metadata
// an entry, a 1 MiB block holds ~12,000 entries.
var otelBodies = []string{"cache miss", "request served", "db query", "retrying", "cache hit", "GET /api 200"}

// buildOTelStore writes n entries of short bodies with a unique trace_id
// (32 hex digits) and span_id (16) each, over streams
// {service_name="svc-K"}, in len(versions) runs of that segment format
// (0: the current one) with the options' block size.
func buildOTelStore(t testing.TB, versions []int, n, streams, blockSize int) *store.Snapshot {
	t.Helper()
	return buildOTelStoreIn(t, t.TempDir(), versions, n, streams, blockSize)
}

func buildOTelStoreIn(t testing.TB, dir string, versions []int, n, streams, blockSize int) *store.Snapshot {
	t.Helper()
	return buildVersioned(t, dir, versions, n, 5000, store.Options{Segment: segment.Options{BlockSize: blockSize}}, func(st *store.Store, i int) store.Entry {
		return store.Entry{Time: int64(i) * 1e6,
			Stream: st.Stream(fmt.Sprintf(`{service_name="svc-%d"}`, i%streams)),
			Line:   []byte(otelBodies[i%len(otelBodies)]),
			Attrs:  attrs.MustPairs("trace_id", otelID(1, i, 32), "span_id", otelID(2, i, 16))}
	})
}

// TestValueFilterPrunesHexIDs is R11c-2: 120,000 OTel-like entries in 1
// MiB blocks (~12,000 entries a block, whose ids hold most of the 65,536
// hex 4-grams). Before format 6 a trace id lookup decoded every block
// (the values' gram index answered "maybe" for all but a few); the value
// filters leave its own block and at most ~1% others, and the answer
// equals a brute-force run (NoIndex).
func TestValueFilterPrunesHexIDs(t *testing.T) {
	const n = 120_000
	snap := buildOTelStore(t, []int{0}, n, 200, 1<<20)
	absent := otelID(1, n+5, 32)
	queries := []struct {
		src  string
		want int64
	}{
		{`{service_name=~".+"} | trace_id="` + absent + `"`, 0},
		{`{service_name=~".+"} | trace_id="` + otelID(1, 777, 32) + `"`, 1},
		{`{service_name="svc-77"} | span_id="` + otelID(2, 90_077, 16) + `"`, 1},
		{`{service_name=~".+"} | trace_id=~"` + otelID(1, 5, 32) + `|` + otelID(1, 100_005, 32) + `"`, 2},
		{`{service_name=~"svc-1.*"} | trace_id="` + absent + `" or span_id="` + otelID(2, 60_010, 16) + `"`, 1},
	}
	for _, c := range queries {
		_, gn, stats := sameWithoutIndex(t, snap.Parts, c.src, Query{Plan: mustPlan(t, c.src), Labels: snap.Labels})
		if gn != c.want {
			t.Fatalf("%s: %d entries, want %d", c.src, gn, c.want)
		}
		t.Logf("%s: blocks %d, decoded %d, pruned by the index %d", c.src, stats.Blocks, stats.Decoded, stats.PrunedIndex)
		if stats.Blocks < 8 {
			t.Fatalf("%d blocks: want several", stats.Blocks)
		}
		// Each wanted entry's block, and rarely a false positive.
		if stats.Decoded > c.want+1 {
			t.Errorf("%s: %d of %d blocks decoded for %d entries", c.src, stats.Decoded, stats.Blocks, c.want)
		}
	}
}

// TestValueFilterOracle: random label filters on stores of unique hex
// ids with short bodies and many streams, written in formats 4, 5 and 6
// (mixed, in small blocks: many blocks and segments), give with the
// index exactly what NoIndex gives: =, =~ (alternatives, prefixes, (?i)),
// !=, names that a stream label takes (trace_id on some streams), that
// end in _extracted, or that no entry has, or and and, and after json and
// logfmt; and on format 6 exact values rule blocks out.
func TestValueFilterOracle(t *testing.T) {
	const n = 6000
	rng := rand.New(rand.NewPCG(95, 6))
	// Under emulation (testseed.Emulated) 30 queries a store keep the
	// byte-order coverage; the native run does all 100.
	queries := testseed.Scale(100, 30)
	for _, c := range []struct {
		name     string
		versions []int
	}{
		{"v6", []int{0}},
		{"v4-v5-v6", []int{4, 5, 0}},
		{"v6-v5", []int{0, 5}},
	} {
		t.Run(c.name, func(t *testing.T) {
			snap := buildValueStore(t, c.versions, n)
			pruned, found := 0, 0
			for i := range queries {
				src := valueQuery(rng, n)
				p := mustPlan(t, src)
				q := Query{Plan: p, Labels: snap.Labels, Order: []Order{Oldest, Newest, Stored}[i%3]}
				if i%5 == 0 {
					q.Count = true
				}
				_, wn, stats := sameWithoutIndex(t, snap.Parts, src, q)
				if stats.PrunedIndex > 0 {
					pruned++
				}
				if wn > 0 {
					found++
				}
			}
			t.Logf("%d of %d queries pruned blocks, %d found entries", pruned, queries, found)
			if pruned*100 < 40*queries || found*100 < 20*queries {
				t.Errorf("%d queries pruned, %d found: the test does not exercise the filters", pruned, found)
			}
		})
	}
}

// valueIDs are entry i's metadata values: a unique trace id (its
// trace_id) and span id, and for some entries a shared user and a value
// under trace_id_extracted.
func valueIDs(i int) (trace, span string) { return otelID(3, i, 32), otelID(4, i, 16) }

// buildValueStore writes n entries in 2 KiB blocks, in len(versions)
// runs of those formats. Streams {app="a"}, {app="b",trace_id="T"} (a
// stream label named like the metadata) and {app="c"}; every line is
// short, some are JSON or logfmt with a trace id.
func buildValueStore(t testing.TB, versions []int, n int) *store.Snapshot {
	t.Helper()
	dir := t.TempDir()
	streams := []string{`{app="a"}`, `{app="b",trace_id="` + otelID(3, 17, 32) + `"}`, `{app="c"}`}
	return buildVersioned(t, dir, versions, n, 100, store.Options{HeadBytes: 32 << 10, Segment: segment.Options{BlockSize: 2 << 10}}, func(st *store.Store, i int) store.Entry {
		trace, span := valueIDs(i)
		line := otelBodies[i%len(otelBodies)]
		switch i % 9 {
		case 1:
			line = fmt.Sprintf(`{"msg":"x","trace_id":"%s"}`, otelID(3, i+1, 32))
		case 2:
			line = fmt.Sprintf(`msg=y trace_id=%s`, otelID(3, i+2, 32))
		}
		e := store.Entry{Time: int64(i) * 1e6, Stream: st.Stream(streams[i%3]), Line: []byte(line)}
		if i%10 != 9 {
			kv := []string{"trace_id", trace, "span_id", span}
			if i%4 == 0 {
				kv = append(kv, "user", []string{"alice", "Bob", "carol"}[i%3])
			}
			if i%6 == 0 {
				kv = append(kv, "trace_id_extracted", otelID(3, i+3, 32))
			}
			e.Attrs = attrs.MustPairs(kv...)
		}
		return e
	})
}

// valueQuery returns a random query with label filters on the values of
// buildValueStore.
func valueQuery(rng *rand.Rand, n int) string {
	val := func() string {
		i := rng.IntN(n + n/10) // some beyond the stored ones
		switch rng.IntN(6) {
		case 0:
			_, s := valueIDs(i)
			return s
		case 1:
			return []string{"alice", "Bob", "bob", "carol", "dave"}[rng.IntN(5)]
		}
		t, _ := valueIDs(i)
		return t
	}
	name := func() string {
		return []string{"trace_id", "trace_id", "span_id", "user", "trace_id_extracted", "app", "nope"}[rng.IntN(7)]
	}
	matcher := func() string {
		v := val()
		switch rng.IntN(8) {
		case 0:
			return fmt.Sprintf("%s=~%q", name(), v+"|"+val())
		case 1:
			return fmt.Sprintf("%s=~%q", name(), v[:min(len(v), 6)]+".*")
		case 2:
			return fmt.Sprintf("%s=~%q", name(), "(?i)"+strings.ToUpper(v))
		case 3:
			return fmt.Sprintf("%s!=%q", name(), v)
		case 4:
			return fmt.Sprintf("%s=~%q", name(), "("+v+")?x?")
		}
		return fmt.Sprintf("%s=%q", name(), v)
	}
	sel := []string{`{app=~".+"}`, `{app="b"}`, `{app=~"a|c"}`}[rng.IntN(3)]
	var stages []string
	switch rng.IntN(6) {
	case 0:
		stages = append(stages, "json")
	case 1:
		stages = append(stages, "logfmt")
	case 2:
		stages = append(stages, "drop span_id")
	}
	f := matcher()
	switch rng.IntN(4) {
	case 0:
		f += " or " + matcher()
	case 1:
		f += ", " + matcher()
	}
	stages = append(stages, f)
	if rng.IntN(3) == 0 {
		sel += ` != "nothing"`
	}
	return sel + " | " + strings.Join(stages, " | ")
}

// TestValueFilterDamaged: a flipped bit in the last block's value filter
// of every segment (the skip section's last byte) leaves every answer
// equal to NoIndex's (the damaged filter is never trusted: its block is
// a maybe), and Snapshot.IndexDamage and store.Verify name each file.
func TestValueFilterDamaged(t *testing.T) {
	const n = 3000
	dir := t.TempDir()
	snap := buildOTelStoreIn(t, dir, []int{0}, n, 7, 16<<10)
	snap.Close()
	segs, _ := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
	if len(segs) == 0 {
		t.Fatal("no segment")
	}
	for _, f := range segs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)-72-1] ^= 0x10 // the last block's filter bits
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := store.OpenSnapshot(dir)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer snap.Close()
	for i := 0; i < n; i += 97 {
		for _, src := range []string{
			`{service_name=~".+"} | trace_id="` + otelID(1, i, 32) + `"`,
			`{service_name=~".+"} | span_id=~"` + otelID(2, i, 16) + `|x"`,
			`{service_name=~".+"} | trace_id="` + otelID(1, n+i, 32) + `"`,
		} {
			sameWithoutIndex(t, snap.Parts, "damaged index: "+src, Query{Plan: mustPlan(t, src), Labels: snap.Labels})
		}
	}
	dmg := snap.IndexDamage()
	if len(dmg) != len(segs) {
		t.Errorf("IndexDamage: %v, want one for each of %d segments", dmg, len(segs))
	}
	for _, e := range dmg {
		if !strings.Contains(e.Error(), "value filter of block") || !strings.Contains(e.Error(), dir) {
			t.Errorf("IndexDamage: %v", e)
		}
	}
	probs, err := store.Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(probs) < len(segs) {
		t.Errorf("Verify: %v, want a problem for each of %d segments", probs, len(segs))
	}
}
