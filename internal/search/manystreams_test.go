package search

import (
	"bytes"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"haystack/internal/query"
	"haystack/internal/segment"
	"haystack/internal/store"
)

// buildManyStreams writes perStream entries for each of streams streams,
// interleaved round by round (each round visits the streams in a new
// random order) so that every block holds many streams, each line padded
// with pad bytes of 'x', and returns the
// entries in ingestion order with the store's snapshot. Times rise
// slowly (three entries share each time), so ties across streams are
// common; a stream's own times never go backwards. blockSize and
// headBytes 0 mean the store's defaults; unflushed entries stay in the
// WAL (the head part).
func buildManyStreams(t testing.TB, r *rand.Rand, streams, perStream, pad, blockSize int, headBytes int64, unflushed int) ([]entry, *store.Snapshot) {
	t.Helper()
	words := []string{"error", "warn", "timeout", "id=7", "ERROR", "ok"}
	var es []entry
	order := make([]int, streams)
	for i := range order {
		order[i] = i
	}
	for round := range perStream {
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, s := range order {
			line := fmt.Sprintf("s%d r%d %s", s, round, words[r.IntN(len(words))])
			if r.IntN(50) == 0 {
				line += " rareword"
			}
			line += strings.Repeat("x", pad)
			es = append(es, entry{time: int64(len(es) / 3), stream: uint32(s), line: line})
		}
	}
	snap := writeStreams(t, es, streams, store.Options{HeadBytes: headBytes, Segment: segment.Options{BlockSize: blockSize}}, unflushed)
	return es, snap
}

// writeStreams stores es (in order, 100 entries a batch) in a new store
// whose streams 0..streams-1 are {s="i",g="i%4"}, flushes all but the
// last unflushed entries (they stay in the WAL: the head part), and
// returns a snapshot of it.
func writeStreams(t testing.TB, es []entry, streams int, opt store.Options, unflushed int) *store.Snapshot {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	for s := range streams {
		if id := st.Stream(fmt.Sprintf(`{s="%d",g="%d"}`, s, s%4)); id != uint32(s) {
			t.Fatalf("stream %d got id %d", s, id)
		}
	}
	flushed := len(es) - unflushed
	for i := 0; i < len(es); i += 100 {
		var b store.Batch
		for _, e := range es[i:min(i+100, len(es))] {
			b.Entries = append(b.Entries, store.Entry{Time: e.time, Stream: e.stream, Line: []byte(e.line)})
		}
		if err := st.Append(&b); err != nil {
			t.Fatal(err)
		}
		if i+100 >= flushed && i < flushed {
			if err := st.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if unflushed == 0 {
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Cleanup(func() { st.Close() })
	}
	snap, err := store.OpenSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { snap.Close() })
	return snap
}

// streamHead is a merge cursor over one stream's delivered entries.
type streamHead struct {
	items []manyItem
	ents  []entry // the stream's entries in range, in iteration order
}

type manyItem struct {
	out
	pos int // index into its stream's ents
}

type headHeap struct {
	hs  []*streamHead
	rev bool
}

func (h *headHeap) Len() int { return len(h.hs) }
func (h *headHeap) Less(i, j int) bool {
	a, b := h.hs[i].items[0], h.hs[j].items[0]
	if h.rev {
		a, b = b, a
	}
	if a.time != b.time {
		return a.time < b.time
	}
	return a.stream < b.stream
}
func (h *headHeap) Swap(i, j int) { h.hs[i], h.hs[j] = h.hs[j], h.hs[i] }
func (h *headHeap) Push(x any)    { h.hs = append(h.hs, x.(*streamHead)) }
func (h *headHeap) Pop() any {
	x := h.hs[len(h.hs)-1]
	h.hs = h.hs[:len(h.hs)-1]
	return x
}

// manyOracle is Run's definition computed entry by entry, in O(entries ×
// log streams) so that it stays usable with thousands of streams: each
// selected stream's entries in the time range, in ingestion order
// (reversed for Newest), matched one by one (Plan.MatchEntry, or
// bytes.Contains for a pattern), context around matches within the
// stream, the streams merged by time with ties to the lower stream id
// (higher for Newest), then the limit with the last match's trailing
// After context.
func manyOracle(t testing.TB, snap *store.Snapshot, es []entry, q Query, streams int) ([]out, int64) {
	until := q.Until
	if until == 0 && !q.UntilSet {
		until = 1 << 62
	}
	before, after := q.Before, q.After
	if q.Order == Newest {
		before, after = after, before
	}
	byStream := make([][]entry, streams)
	for _, e := range es {
		if e.time >= q.Since && e.time < until {
			byStream[e.stream] = append(byStream[e.stream], e)
		}
	}
	h := &headHeap{rev: q.Order == Newest}
	for s := range streams {
		var ls []query.Label
		if q.Plan != nil {
			ls = labelsOf(t, snap, uint32(s))
			if !q.Plan.MatchStream(ls) {
				continue
			}
		}
		ents := byStream[s]
		if q.Order == Newest {
			slices.Reverse(ents)
		}
		hit := make([]bool, len(ents))
		for i, e := range ents {
			if q.Plan != nil {
				hit[i] = q.Plan.MatchEntry(ls, []byte(e.line))
			} else if q.Fold {
				hit[i] = bytes.Contains(bytes.ToLower([]byte(e.line)), bytes.ToLower(q.Pattern))
			} else {
				hit[i] = bytes.Contains([]byte(e.line), q.Pattern)
			}
		}
		show := make([]bool, len(ents))
		for i, hi := range hit {
			if hi {
				for j := max(0, i-before); j <= min(len(ents)-1, i+after); j++ {
					show[j] = true
				}
			}
		}
		sh := &streamHead{ents: ents}
		for i, e := range ents {
			if show[i] {
				group := (before > 0 || after > 0) && (i == 0 || !show[i-1])
				sh.items = append(sh.items, manyItem{out{e.time, e.stream, e.line, !hit[i], group}, i})
			}
		}
		if len(sh.items) > 0 {
			h.hs = append(h.hs, sh)
		}
	}
	heap.Init(h)
	var res []out
	var n int64
	for h.Len() > 0 {
		sh := h.hs[0]
		o := sh.items[0]
		sh.items = sh.items[1:]
		if len(sh.items) == 0 {
			heap.Pop(h)
		} else {
			heap.Fix(h, 0)
		}
		res = append(res, o.out)
		if !o.context {
			n++
			if q.Limit > 0 && n == q.Limit {
				for _, f := range sh.ents[o.pos+1 : min(len(sh.ents), o.pos+1+after)] {
					res = append(res, out{f.time, f.stream, f.line, true, false})
				}
				break
			}
		}
	}
	return res, n
}

// TestManyStreams: thousands of streams interleaved in the same blocks
// (as Loki pushes make them), merged by Run, give exactly the oracle's
// entries in both orders, with limits, context, time bounds, stream
// selectors, parser stages and the skip index, and every block task
// finishes (Progress).
func TestManyStreams(t *testing.T) {
	const streams = 3000
	r := rand.New(rand.NewPCG(40, 41))
	es, snap := buildManyStreams(t, r, streams, 5, 0, 4<<10, 96<<10, 700)
	if len(snap.Parts) < 3 {
		t.Fatalf("only %d parts", len(snap.Parts))
	}
	if _, ok := snap.Parts[len(snap.Parts)-1].(*store.HeadPart); !ok {
		t.Fatal("no head part: the test does not cover unflushed entries")
	}
	blocks, shared := 0, 0
	for _, p := range snap.Parts {
		for bi := range p.NumBlocks() {
			blocks++
			if len(p.BlockMeta(bi).Streams) >= 20 {
				shared++
			}
		}
	}
	if blocks < 20 || shared < blocks/2 {
		t.Fatalf("%d blocks, %d with 20 streams or more: want many blocks shared by many streams", blocks, shared)
	}
	last := es[len(es)-1].time
	type qc struct {
		src, pat      string
		before, after int
		limit         int64
		since, until  int64
	}
	cases := []qc{
		{src: `{s=~".+"} |= "error"`},
		{src: `{s=~".+"} |= "error"`, limit: 10},
		{src: `{s=~".+"} |= "rareword"`, before: 1, after: 2},
		{src: `{s=~".+"} |= "rareword"`, before: 3, limit: 7},
		{src: `{s=~".+"} |= "rareword"`, after: 2, limit: 1},
		{src: `{s=~".+"} |= "rareword"`, before: 2, after: 2, since: last / 3, until: 2 * last / 3},
		{src: `{g="1"} |~ "(?i)timeout"`, after: 1},
		{src: `{g=~"0|2"} != "ok" != "warn"`, limit: 100},
		{src: `{s=~"1.*"} | logfmt`, before: 1, limit: 50},
		{src: `{s=~".+"}`, limit: 25, since: last / 2},
		{src: `{s=~".+"} |= "zzz-absent"`, before: 1, after: 1},
		{pat: "warn"},
		{pat: "WARN", limit: 30},
		{pat: "rareword", before: 1, after: 1},
	}
	for _, c := range cases {
		for _, order := range []Order{Oldest, Newest} {
			for _, noIndex := range []bool{false, true} {
				q := Query{Pattern: []byte(c.pat), Fold: c.pat == "WARN", Before: c.before, After: c.after,
					Limit: c.limit, Since: c.since, Until: c.until, Order: order, NoIndex: noIndex, Workers: 3}
				if c.src != "" {
					q.Plan, q.Labels = mustPlan(t, c.src), snap.Labels
				}
				var pr Progress
				q.Progress = &pr
				want, wn := manyOracle(t, snap, es, q, streams)
				got, n := collectOut(t, snap, q)
				if d := firstMismatch(got, want); d != "" || n != wn {
					t.Fatalf("%+v order %d noIndex %v: got %d entries (n %d), want %d (n %d): %s",
						c, order, noIndex, len(got), n, len(want), wn, d)
				}
				if c.limit == 0 && pr.Done.Load() != pr.Total.Load() {
					t.Fatalf("%+v: progress %d of %d", c, pr.Done.Load(), pr.Total.Load())
				}
			}
		}
	}
}

// TestManyStreamsDecodes: with a selective query most runs have no hit
// in a shared block and let go of it at once; the cache keeps the block
// (or, past its budget, its match results) for the runs still to come,
// so a block is decoded again only for a run that has a hit in it, not
// once per stream as when each run matched the block itself. Small
// blocks all fit the budget; blocks of 1 MiB with one worker (a budget of
// 2 MiB) mostly keep only their match results. Results are the oracle's
// either way.
func TestManyStreamsDecodes(t *testing.T) {
	r := rand.New(rand.NewPCG(48, 49))
	for _, c := range []struct {
		streams, perStream, pad, blockSize int
	}{{3000, 5, 0, 4 << 10}, {2000, 16, 200, 0}} {
		es, snap := buildManyStreams(t, r, c.streams, c.perStream, c.pad, c.blockSize, 0, 0)
		for _, w := range []int{1, 3} {
			for _, cx := range []int{0, 1} {
				var st Stats
				q := Query{Plan: mustPlan(t, `{s=~".+"} |= "rareword"`), Labels: snap.Labels, Workers: w, Before: cx, After: cx, Stats: &st}
				got, n := collectOut(t, snap, q)
				want, wn := manyOracle(t, snap, es, q, c.streams)
				if d := firstMismatch(got, want); d != "" || n != wn {
					t.Fatalf("%+v workers %d context %d: n %d, want %d: %s", c, w, cx, n, wn, d)
				}
				t.Logf("%+v workers %d context %d: %d matches, stats %+v", c, w, cx, n, st)
				if st.Blocks < 5 {
					t.Fatalf("%d blocks: want more", st.Blocks)
				}
				if n == 0 || (cx == 0 || c.blockSize != 0) && st.Decoded > st.Blocks+n {
					t.Fatalf("%+v workers %d context %d: %d blocks decoded %d times for %d matches", c, w, cx, st.Blocks, st.Decoded, n)
				}
			}
		}
	}
}

// TestManyStreamsCancel: cancelling a merge of many streams mid-way stops
// Run with the context's error, and what was emitted is the oracle's
// beginning.
func TestManyStreamsCancel(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 43))
	es, snap := buildManyStreams(t, r, 2000, 3, 0, 4<<10, 0, 0)
	q := Query{Plan: mustPlan(t, `{s=~".+"}`), Labels: snap.Labels, Workers: 2}
	want, _ := manyOracle(t, snap, es, q, 2000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []out
	_, err := Run(ctx, snap.Parts, q, func(m *Match) error {
		got = append(got, out{m.Time, m.Stream, string(m.Line), m.Context, m.GroupStart})
		if len(got) == 100 {
			cancel()
		}
		return nil
	}, func(err error) { t.Error(err) })
	// The merge notices the cancellation when it next waits for a block,
	// so a few more entries may come out: they must still be the oracle's.
	if !errors.Is(err, context.Canceled) || len(got) < 100 || len(got) > len(want) {
		t.Fatalf("err %v after %d entries", err, len(got))
	}
	if d := firstMismatch(got, want[:len(got)]); d != "" {
		t.Fatal(d)
	}
}

// TestManyStreamsDamaged: a damaged block shared by many merged streams
// is reported by each run that reads it (naming the file and block), and
// every other entry still comes out in the oracle's order.
func TestManyStreamsDamaged(t *testing.T) {
	const streams = 1500
	r := rand.New(rand.NewPCG(46, 47))
	es, snap := buildManyStreams(t, r, streams, 4, 0, 4<<10, 0, 0)
	// The entries of the block the damage will hit (segment 0, block 0).
	var blk segment.Block
	if err := snap.Parts[0].ReadBlock(0, &blk); err != nil {
		t.Fatal(err)
	}
	lost := map[string]bool{}
	for k := range blk.Len() {
		lost[string(blk.Line(k))] = true
	}
	runs := len(snap.Parts[0].BlockMeta(0).Streams)
	if runs < 20 {
		t.Fatalf("block 0 holds %d streams: want many", runs)
	}
	var kept []entry
	for _, e := range es {
		if !lost[e.line] {
			kept = append(kept, e)
		}
	}
	seg := filepath.Join(snap.Dir, snap.Parts[0].Name())
	snap.Close()
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	data[30] ^= 4
	if err := os.WriteFile(seg, data, 0o644); err != nil {
		t.Fatal(err)
	}
	snap, err = store.OpenSnapshot(snap.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	for _, c := range []struct {
		src   string
		order Order
		after int
	}{{`{s=~".+"}`, Oldest, 0}, {`{s=~".+"} |= "rareword"`, Newest, 0}, {`{s=~".+"} |= "error"`, Oldest, 1}} {
		q := Query{Plan: mustPlan(t, c.src), Labels: snap.Labels, Order: c.order, After: c.after, Workers: 2}
		want, wn := manyOracle(t, snap, kept, q, streams)
		var got []out
		var errs []error
		n, err := Run(context.Background(), snap.Parts, q, func(m *Match) error {
			got = append(got, out{m.Time, m.Stream, string(m.Line), m.Context, m.GroupStart})
			return nil
		}, func(err error) { errs = append(errs, err) })
		if err != nil {
			t.Fatal(err)
		}
		// Context passes over the damaged block as if its entries did
		// not exist, as the oracle over the other entries does.
		if d := firstMismatch(got, want); d != "" || n != wn {
			t.Fatalf("%s: n %d, want %d: %s", c.src, n, wn, d)
		}
		if len(errs) != runs {
			t.Fatalf("%s: %d block errors, want one per stream of the block (%d)", c.src, len(errs), runs)
		}
		for _, e := range errs {
			if msg := e.Error(); !strings.Contains(msg, filepath.Base(seg)) || !strings.Contains(msg, "block 0") {
				t.Fatalf("error does not name file and block: %s", msg)
			}
		}
	}
}

// BenchmarkManyStreams: `hay search` over a store fed by pushes with
// many streams: 20,000 streams of 5 entries (100,000 entries of about 20
// bytes, interleaved in a few blocks), merged oldest first. Finding F1
// (notes/extremes-findings.md): each block was scanned once per stream
// it holds.
func BenchmarkManyStreams(b *testing.B) {
	r := rand.New(rand.NewPCG(44, 45))
	es, snap := buildManyStreams(b, r, 20000, 5, 0, 0, 0, 0)
	var size int64
	for _, e := range es {
		size += int64(len(e.line))
	}
	for _, c := range []struct {
		name          string
		pat           string
		limit         int64
		before, after int
	}{
		{"limit10", "r", 10, 0, 0},
		{"all", "r", 0, 0, 0},
		{"context-C1", "r", 0, 1, 1},
		{"rare", "rareword", 0, 0, 0}, // about 1 entry in 50: most streams have no hit in a block
		{"rare-context-C1", "rareword", 0, 1, 1},
	} {
		want := int64(0)
		for _, e := range es {
			if strings.Contains(e.line, c.pat) {
				want++
			}
		}
		if c.limit > 0 {
			want = min(want, c.limit)
		}
		b.Run(c.name, func(b *testing.B) {
			q := Query{Pattern: []byte(c.pat), Limit: c.limit, Before: c.before, After: c.after}
			b.SetBytes(size)
			for b.Loop() {
				n, err := Run(context.Background(), snap.Parts, q, func(*Match) error { return nil }, func(err error) { b.Error(err) })
				if err != nil || n != want {
					b.Fatalf("n %d, want %d, err %v", n, want, err)
				}
			}
		})
	}
}

// firstMismatch describes where two result lists first differ; "" when
// they are equal.
func firstMismatch(got, want []out) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("at %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("%d entries, want %d", len(got), len(want))
	}
	return ""
}
