package search

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"haystack/internal/logtest"
	"haystack/internal/segment"
	"haystack/internal/store"
	"haystack/internal/testseed"
)

// The skip index against brute force: every query runs with and without
// the index (Query.NoIndex) over real segments (format 2, n-gram filters)
// and must give identical output; Query.Stats shows the index pruning.

// indexCorpus is a store built from lines, with the lines kept for a naive
// count.
type indexCorpus struct {
	snap  *store.Snapshot
	lines [][]byte
	sel   string // a LogQL selector of every stream
}

// buildIndexed stores lines (stream of line i: streams[i]) with small
// blocks so that a few MB make hundreds of blocks in several segments.
func buildIndexed(t testing.TB, lines [][]byte, streams []string, sel string) indexCorpus {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{HeadBytes: 1 << 20, Segment: segment.Options{BlockSize: 16 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	var b store.Batch
	for i, l := range lines {
		b.Entries = append(b.Entries, store.Entry{Time: int64(i) * 1e6, Stream: st.Stream(streams[i]), Line: l})
		if len(b.Entries) == 500 || i == len(lines)-1 {
			if err := st.Append(&b); err != nil {
				t.Fatal(err)
			}
			b = store.Batch{}
		}
	}
	snap := closeAndSnapshot(t, st, dir)
	for _, p := range snap.Parts {
		if _, ok := p.(*store.SegmentPart); !ok {
			t.Fatalf("part %s is not a segment: everything must be flushed", p.Name())
		}
	}
	return indexCorpus{snap: snap, lines: lines, sel: sel}
}

func loghubCorpus(t testing.TB) indexCorpus {
	files, err := filepath.Glob("../../testdata/loghub/*.log")
	if err != nil || len(files) == 0 {
		t.Fatalf("no loghub samples: %v", err)
	}
	var lines [][]byte
	var streams []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for l := range bytes.SplitSeq(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
			lines = append(lines, bytes.TrimSuffix(l, []byte("\r")))
			streams = append(streams, fmt.Sprintf(`{source=%q}`, filepath.Base(f)))
		}
	}
	return buildIndexed(t, lines, streams, `{source=~".+"}`)
}

func generatedCorpus(t testing.TB, n int64) indexCorpus {
	g := logtest.NewGenerator(logtest.Config{Lines: n, Seed: 6})
	var lines [][]byte
	var streams []string
	for range n {
		l, s, _ := g.Next(nil)
		lines = append(lines, l)
		streams = append(streams, fmt.Sprintf(`{app=%q}`, g.Stream(s).App))
	}
	return buildIndexed(t, lines, streams, `{app=~".+"}`)
}

// indexQuery is one query of the comparison: a literal (Pattern, Fold) or
// a LogQL source.
type indexQuery struct {
	pattern []byte
	fold    bool
	logql   string
}

func (q indexQuery) String() string {
	if q.logql != "" {
		return q.logql
	}
	return fmt.Sprintf("%q fold=%v", q.pattern, q.fold)
}

// indexQueries makes the queries for a corpus: literals of 1-40 bytes cut
// from random lines (present; many of the longer ones rare), the same with
// a byte changed (mostly absent), case-changed with fold, fixed frequent
// and absent words, ANDs and ORs of two, regexes, and a negative filter.
func indexQueries(rng *rand.Rand, c indexCorpus) []indexQuery {
	cut := func(n int) []byte {
		for {
			l := c.lines[rng.IntN(len(c.lines))]
			if len(l) >= n {
				i := rng.IntN(len(l) - n + 1)
				return bytes.Clone(l[i : i+n])
			}
		}
	}
	printable := func(b []byte) bool {
		for _, c := range b {
			if c < 0x20 || c >= 0x7f {
				return false
			}
		}
		return true
	}
	quote := func(b []byte) string { return strconv.Quote(string(b)) }
	quoteS := func(s string) string { return strconv.Quote(s) }
	var qs []indexQuery
	for _, n := range []int{1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 40} {
		p := cut(n)
		qs = append(qs, indexQuery{pattern: p})
		m := bytes.Clone(p)
		m[n/2] = "zqjxk#~"[rng.IntN(7)]
		qs = append(qs, indexQuery{pattern: m})
		qs = append(qs, indexQuery{pattern: bytes.ToUpper(cut(n)), fold: true})
		qs = append(qs, indexQuery{pattern: m, fold: true})
	}
	for _, w := range []string{"error", "INFO", "kernel panic", "segfault at", "xyzzy", "Connection", "closed", "=", " "} {
		qs = append(qs, indexQuery{pattern: []byte(w)}, indexQuery{pattern: []byte(strings.ToUpper(w)), fold: true})
	}
	sel := c.sel
	for len(qs) < 120 {
		a, b := cut(4+rng.IntN(12)), cut(3+rng.IntN(10))
		if !printable(a) || !printable(b) {
			continue
		}
		switch rng.IntN(6) {
		case 0:
			qs = append(qs, indexQuery{logql: sel + ` |= ` + quote(a) + ` |= ` + quote(b)})
		case 1:
			qs = append(qs, indexQuery{logql: sel + ` |= ` + quote(a) + ` or ` + quote(b)})
		case 2:
			qs = append(qs, indexQuery{logql: sel + ` |~ ` + quoteS(regexp.QuoteMeta(string(a))+".*"+regexp.QuoteMeta(string(b)))})
		case 3:
			qs = append(qs, indexQuery{logql: sel + ` |~ ` + quoteS("(?i)"+regexp.QuoteMeta(strings.ToUpper(string(a))))})
		case 4:
			qs = append(qs, indexQuery{logql: sel + ` |~ ` + quoteS(regexp.QuoteMeta(string(a))+"|"+regexp.QuoteMeta(string(b))+"zz")})
		case 5:
			qs = append(qs, indexQuery{logql: sel + ` |= ` + quote(a) + ` != ` + quote(b)})
		}
	}
	return qs
}

// runBoth runs q with and without the index and returns the outputs and
// stats.
func runBoth(t *testing.T, c indexCorpus, iq indexQuery, count bool) (idx, brute []out, si, sb Stats) {
	t.Helper()
	q := Query{Pattern: iq.pattern, Fold: iq.fold, Count: count, Labels: c.snap.Labels}
	if iq.logql != "" {
		q.Plan = mustPlan(t, iq.logql)
	}
	var n1, n2 int64
	q.Stats = &si
	idx, n1 = collectOut(t, c.snap, q)
	q.NoIndex, q.Stats = true, &sb
	brute, n2 = collectOut(t, c.snap, q)
	if n1 != n2 {
		t.Fatalf("%v: %d matches with the index, %d without", iq, n1, n2)
	}
	if count {
		idx, brute = []out{{line: fmt.Sprint(n1)}}, []out{{line: fmt.Sprint(n2)}}
	}
	return idx, brute, si, sb
}

func naiveCount(c indexCorpus, p []byte, fold bool) int64 {
	var n int64
	for _, l := range c.lines {
		if fold && bytes.Contains(asciiLower(l), asciiLower(p)) || !fold && bytes.Contains(l, p) {
			n++
		}
	}
	return n
}

func asciiLower(b []byte) []byte {
	o := bytes.Clone(b)
	for i, c := range o {
		if 'A' <= c && c <= 'Z' {
			o[i] = c + 'a' - 'A'
		}
	}
	return o
}

func TestIndexEqualsBruteForce(t *testing.T) {
	for _, cs := range []struct {
		name  string
		build func(testing.TB) indexCorpus
	}{
		{"loghub", loghubCorpus},
		{"generated", func(t testing.TB) indexCorpus { return generatedCorpus(t, 10000) }},
	} {
		t.Run(cs.name, func(t *testing.T) {
			c := cs.build(t)
			rng := rand.New(rand.NewPCG(6, uint64(len(c.lines))))
			qs := indexQueries(rng, c)
			if len(qs) < 100 {
				t.Fatalf("only %d queries", len(qs))
			}
			if testseed.Emulated() {
				// Every third query keeps the byte-order coverage (each
				// kind: plain, changed, folded, each needle length range,
				// the LogQL combinations; a third of them counted); the
				// native run does them all.
				var some []indexQuery
				for i := 0; i < len(qs); i += 3 {
					some = append(some, qs[i])
				}
				qs = some
			}
			var blocks, pruned, skipping int64
			for i, iq := range qs {
				idx, brute, si, sb := runBoth(t, c, iq, i%3 == 2)
				if fmt.Sprint(idx) != fmt.Sprint(brute) {
					t.Fatalf("%v: output with the index differs from brute force (%d vs %d results)", iq, len(idx), len(brute))
				}
				// Counting reads each block once; delivering matches merges
				// the streams and may read a block once per stream in it.
				count := i%3 == 2
				if sb.PrunedIndex != 0 || sb.Decoded < sb.Blocks || count && sb.Decoded != sb.Blocks || si.Blocks != sb.Blocks {
					t.Fatalf("%v: brute force pruned %d, decoded %d of %d blocks", iq, sb.PrunedIndex, sb.Decoded, sb.Blocks)
				}
				if count && si.PrunedIndex+si.Decoded != si.Blocks {
					t.Fatalf("%v: %d pruned + %d decoded != %d blocks", iq, si.PrunedIndex, si.Decoded, si.Blocks)
				}
				if iq.logql == "" {
					if want := naiveCount(c, iq.pattern, iq.fold); int64(len(brute)) != want && i%3 != 2 {
						t.Fatalf("%v: %d matches, naive count %d", iq, len(brute), want)
					}
					if len(iq.pattern) < segment.SkipGram && si.PrunedIndex != 0 {
						t.Fatalf("%v: a needle shorter than %d bytes pruned %d blocks", iq, segment.SkipGram, si.PrunedIndex)
					}
				}
				blocks += si.Blocks
				pruned += si.PrunedIndex
				if si.PrunedIndex > 0 {
					skipping++
				}
			}
			t.Logf("%d queries over %d lines, %d blocks: the index pruned %.1f%% of the blocks (in %d queries)",
				len(qs), len(c.lines), blocks/int64(len(qs)), 100*float64(pruned)/float64(blocks), skipping)
			if skipping < int64(len(qs))/4 {
				t.Fatalf("the index pruned blocks in only %d of %d queries", skipping, len(qs))
			}
		})
	}
}

// TestIndexSkipsBlocks: selective needles must decode few blocks, so the
// index cannot silently stop working; frequent ones decode them all.
func TestIndexSkipsBlocks(t *testing.T) {
	c := generatedCorpus(t, 20000)
	// A line's trace id or other long token: in one or a few lines.
	var rare []byte
	for _, l := range c.lines {
		if i := bytes.Index(l, []byte("trace_id")); i >= 0 && len(l) >= i+30 {
			rare = bytes.Clone(l[i+11 : i+27])
			break
		}
	}
	if rare == nil {
		t.Fatal("no trace id in the generated lines")
	}
	for _, tc := range []struct {
		q          indexQuery
		maxDecoded float64 // share of the blocks
	}{
		{indexQuery{pattern: []byte("kernel panic: out of memory")}, 0.05},
		{indexQuery{pattern: []byte("KERNEL PANIC"), fold: true}, 0.05},
		{indexQuery{pattern: rare}, 0.05},
		{indexQuery{pattern: bytes.ToUpper(rare), fold: true}, 0.05},
		{indexQuery{logql: `{app=~".+"} |= ` + strconv.Quote(string(rare)) + ` |= "trace"`}, 0.05},
		{indexQuery{logql: `{app=~".+"} |= "kernel panic" or "segfault at 0"`}, 0.10},
		{indexQuery{logql: `{app=~".+"} |~ "kernel.*panic"`}, 0.10},
	} {
		idx, brute, si, sb := runBoth(t, c, tc.q, true)
		if fmt.Sprint(idx) != fmt.Sprint(brute) {
			t.Fatalf("%v: results differ", tc.q)
		}
		if _, _, si2, _ := runBoth(t, c, tc.q, false); si2.PrunedIndex != si.PrunedIndex {
			t.Fatalf("%v: delivering pruned %d blocks, counting %d", tc.q, si2.PrunedIndex, si.PrunedIndex)
		}
		t.Logf("%v: %s matches, %d of %d blocks decoded (%d pruned by the index)", tc.q, idx[0].line, si.Decoded, si.Blocks, si.PrunedIndex)
		if si.Blocks < 100 || float64(si.Decoded) > tc.maxDecoded*float64(si.Blocks) || sb.Decoded != sb.Blocks {
			t.Fatalf("%v: decoded %d of %d blocks with the index (allowed %.0f%%), %d without", tc.q, si.Decoded, si.Blocks, 100*tc.maxDecoded, sb.Decoded)
		}
	}
	// A frequent needle keeps every block.
	_, _, si, _ := runBoth(t, c, indexQuery{pattern: []byte("=")}, true)
	if si.PrunedIndex != 0 {
		t.Fatalf("\"=\" pruned %d blocks", si.PrunedIndex)
	}
}

// closeAndSnapshot closes st, the store at dir, and opens a snapshot of
// it, closed when the test ends.
func closeAndSnapshot(t testing.TB, st *store.Store, dir string) *store.Snapshot {
	t.Helper()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	snap, err := store.OpenSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { snap.Close() })
	return snap
}
