package search

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"haystack/internal/attrs"
	"haystack/internal/segment"
	"haystack/internal/store"
)

// Query.SkipAttrs: searches that never look at metadata read segment
// blocks without it (segment.Reader.ReadBlockLines), with the same
// results; plans whose label filters may test metadata still read it.

// readCounts counts a part's block reads by kind.
type readCounts struct{ whole, lines atomic.Int64 }

// countedPart counts the reads of a part that cannot skip metadata (the
// head); countedSegPart also offers ReadBlockLines, as a SegmentPart.
type countedPart struct {
	store.Part
	n *readCounts
}

func (p countedPart) ReadBlock(i int, dst *segment.Block) error {
	p.n.whole.Add(1)
	return p.Part.ReadBlock(i, dst)
}

type countedSegPart struct{ countedPart }

func (p countedSegPart) ReadBlockLines(i int, dst *segment.Block) error {
	p.n.lines.Add(1)
	return p.Part.(linesPart).ReadBlockLines(i, dst)
}

// counted wraps parts: segment parts count into seg, others into head.
func counted(parts []store.Part, seg, head *readCounts) []store.Part {
	out := make([]store.Part, len(parts))
	for i, p := range parts {
		if _, ok := p.(linesPart); ok {
			out[i] = countedSegPart{countedPart{p, seg}}
		} else {
			out[i] = countedPart{p, head}
		}
	}
	return out
}

func TestNeedsAttrs(t *testing.T) {
	for s, want := range map[string]bool{
		`{s="1"}`:                            false,
		`{s="1"} |= "x" != "y" |~ "a.c"`:     false,
		`{s="1"} | logfmt`:                   false,
		`{s="1"} | json | drop a, b`:         false,
		`{s="1"} | keep a`:                   false,
		`{s="1"} | a="x"`:                    true,
		`{s="1"} |= "x" | logfmt | b > 3`:    true,
		`{s="1"} | __error__=""`:             true,
		`{s="1"} | logfmt | drop a | c!="x"`: true,
	} {
		if got := NeedsAttrs(mustPlan(t, s)); got != want {
			t.Errorf("NeedsAttrs(%s) = %v, want %v", s, got, want)
		}
	}
	if NeedsAttrs(nil) {
		t.Error("NeedsAttrs(nil) = true")
	}
}

// TestSkipAttrsSameResults runs each query over a store with metadata
// (segments and head) with SkipAttrs and without (the oracle: today's
// path), and asserts the same entries in the same order, the same counts
// and histograms; without metadata from segment blocks when skipped and
// with it when the plan needs it; and that segment blocks were read
// without metadata exactly when they could be.
func TestSkipAttrsSameResults(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	es := genMetaLog(r, 900, 6)
	w, err := store.OpenWriter(t.TempDir(), store.WriterOptions{Options: store.Options{Segment: segment.Options{BlockSize: 2 << 10}}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	appendMeta(t, r, w, es[:400])
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	appendMeta(t, r, w, es[400:700])
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	appendMeta(t, r, w, es[700:]) // in the head
	v, err := w.View()
	if err != nil {
		t.Fatal(err)
	}
	headAttrs := map[string]string{} // line -> metadata, of the head's entries
	for _, e := range es[700:] {
		headAttrs[e.line] = e.attrs
	}

	var qs []Query
	for _, q := range metaQueries() {
		qs = append(qs, q)
		if q.Before == 0 && q.After == 0 && !q.Grouped {
			c := q
			c.Count = true
			qs = append(qs, c)
		}
	}
	for _, s := range []string{`{s=~".+"} |= "err"`, `{s="2"} != "ok"`, `{s=~".+"} | logfmt`, `{s=~"[13]"} |= "warn" | drop a`, `{s=~".+"} | a=~"v.+"`, `{s=~".+"} |= "err" | trace_id!=""`} {
		p := mustPlan(t, s)
		for _, order := range []Order{Oldest, Newest, Stored} {
			qs = append(qs, Query{Plan: p, Index: v.Index(), Order: order}, Query{Plan: p, Index: v.Index(), Order: order, Limit: 5, Workers: 1})
		}
		qs = append(qs, Query{Plan: p, Index: v.Index(), Count: true})
	}

	for _, q := range qs {
		name := fmt.Sprintf("%q plan %v order %d limit %d workers %d count %v -B%d -A%d", q.Pattern, q.Plan != nil, q.Order, q.Limit, q.Workers, q.Count, q.Before, q.After)
		if q.Plan != nil {
			name = q.Plan.Query.String() + " " + name
		}
		var seg, head [2]readCounts
		var res [2][]got
		var n [2]int64
		for i, skip := range []bool{false, true} {
			q := q
			q.SkipAttrs = skip
			var err error
			n[i], err = Run(context.Background(), counted(v.Parts, &seg[i], &head[i]), q, func(m *Match) error {
				res[i] = append(res[i], got{m.Time, m.Stream, string(m.Line), string(m.Attrs), m.Context, m.GroupStart})
				return nil
			}, func(err error) { t.Errorf("%s: block error: %v", name, err) })
			if err != nil {
				t.Fatal(err)
			}
		}
		if n[0] != n[1] || len(res[0]) != len(res[1]) {
			t.Fatalf("%s: %d matches (%d delivered) with metadata, %d (%d) without", name, n[0], len(res[0]), n[1], len(res[1]))
		}
		if !q.Count && n[0] == 0 && q.Pattern == nil && q.Plan == nil {
			t.Fatalf("%s: nothing matched", name)
		}
		needs := NeedsAttrs(q.Plan)
		for j, g := range res[1] {
			want := res[0][j]
			if !needs {
				// Segment blocks are read without metadata; the head
				// keeps it (copied from memory).
				want.attrs = headAttrs[want.line]
			}
			if g != want {
				t.Fatalf("%s: entry %d: got %+v, want %+v", name, j, g, want)
			}
		}
		if seg[0].lines.Load() != 0 {
			t.Fatalf("%s: SkipAttrs unset, yet %d blocks read without metadata", name, seg[0].lines.Load())
		}
		whole, lines := seg[1].whole.Load(), seg[1].lines.Load()
		if needs && lines != 0 || !needs && whole != 0 {
			t.Fatalf("%s: with SkipAttrs, %d segment blocks read whole and %d without metadata", name, whole, lines)
		}
		if q.Limit == 0 && whole+lines != seg[0].whole.Load() { // with a limit, how far workers read ahead varies
			t.Fatalf("%s: %d segment block reads with SkipAttrs, %d without", name, whole+lines, seg[0].whole.Load())
		}
		if q.Limit == 0 && head[0].whole.Load() != head[1].whole.Load() {
			t.Fatalf("%s: head reads differ", name)
		}
	}

	// Hist with SkipAttrs counts the same.
	b := Buckets{Start: 1000, Width: 7, N: 200}
	for _, q := range []Query{{Pattern: []byte("err")}, {Plan: mustPlan(t, `{s=~".+"} | a=~"v.+"`), Index: v.Index()}} {
		var seg readCounts
		q.SkipAttrs = true
		hs, err := Hist(context.Background(), counted(v.Parts, &seg, new(readCounts)), q, b, func(err error) { t.Error(err) })
		if err != nil {
			t.Fatal(err)
		}
		q.SkipAttrs = false
		hw, err := Hist(context.Background(), v.Parts, q, b, func(err error) { t.Error(err) })
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(hs) != fmt.Sprint(hw) {
			t.Fatalf("hist differs with SkipAttrs: %v, %v", hs, hw)
		}
		if NeedsAttrs(q.Plan) != (seg.lines.Load() == 0) || seg.lines.Load()+seg.whole.Load() == 0 {
			t.Fatalf("hist: %d blocks read whole, %d without metadata", seg.whole.Load(), seg.lines.Load())
		}
	}
}

// TestSkipAttrsDamagedMetadata: a segment whose attrs section is damaged
// but CRC-valid (an invalid metadata name, checksum recomputed) is
// counted and listed with SkipAttrs (the section is not decoded), and is
// reported as damaged without it and whenever a label filter needs the
// metadata. Real files, through store.OpenSnapshot: no wrapper decides.
func TestSkipAttrsDamagedMetadata(t *testing.T) {
	dir := t.TempDir()
	w, err := store.OpenWriter(dir, store.WriterOptions{Options: store.Options{Segment: segment.Options{Codec: segment.CodecNone, BlockSize: 1 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	var batch []store.LabeledEntry
	const n = 50
	for i := range n {
		a, err := attrs.Encode(nil, []attrs.Pair{{Name: "trace_id", Value: fmt.Sprintf("%032x", i)}})
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, store.LabeledEntry{Labels: `{s="1"}`, Time: int64(1000 + i), Line: fmt.Appendf(nil, "line %d", i), Attrs: a})
	}
	if err := w.Append(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
	if len(segs) != 1 {
		t.Fatalf("%d segments, want 1", len(segs))
	}
	f, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	// One uncompressed block from offset 16; its attrs section ends
	// with the last entry's metadata, and the block's CRC follows it.
	last := []byte(fmt.Sprintf("%032x", n-1))
	end := bytes.LastIndex(f, last) + len(last)
	first := bytes.Index(f, []byte("trace_id"))
	if end < len(last) || first < 16 || first > end || bytes.Count(f, []byte("line 0")) != 1 {
		t.Fatalf("layout not as expected: attrs end %d, first name at %d", end, first)
	}
	f[first] = '9' // "9race_id": not a valid name
	binary.LittleEndian.PutUint32(f[end:], crc32.Checksum(f[16:end], crc32.MakeTable(crc32.Castagnoli)))
	if err := os.WriteFile(segs[0], f, 0o644); err != nil {
		t.Fatal(err)
	}
	snap, err := store.OpenSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	if len(snap.Damaged) != 0 {
		t.Fatal(snap.Damaged)
	}
	ix := snap.Index()
	for _, c := range []struct {
		q       Query
		want    int64
		damaged bool
	}{
		{Query{Pattern: []byte("line"), Count: true, SkipAttrs: true}, n, false},
		{Query{Pattern: []byte("line 4"), SkipAttrs: true}, 11, false},
		{Query{Plan: mustPlan(t, `{s="1"} |= "line 1"`), Index: ix, Count: true, SkipAttrs: true}, 11, false},
		{Query{Pattern: []byte("line"), Count: true}, 0, true},
		{Query{Pattern: []byte("line 4")}, 0, true},
		{Query{Plan: mustPlan(t, `{s="1"} | trace_id!="x"`), Index: ix, Count: true, SkipAttrs: true}, 0, true},
	} {
		var errs []error
		var lines []string
		got, err := Run(context.Background(), snap.Parts, c.q, func(m *Match) error {
			if len(m.Attrs) != 0 {
				t.Errorf("%q: metadata %q from a block read without it", m.Line, m.Attrs)
			}
			lines = append(lines, string(m.Line))
			return nil
		}, func(err error) { errs = append(errs, err) })
		if err != nil {
			t.Fatal(err)
		}
		what := fmt.Sprintf("pattern %q plan %v skip %v count %v", c.q.Pattern, c.q.Plan != nil, c.q.SkipAttrs, c.q.Count)
		if got != c.want {
			t.Errorf("%s: %d matches, want %d", what, got, c.want)
		}
		var ce *segment.CorruptError
		if c.damaged != (len(errs) == 1 && errors.As(errs[0], &ce) && strings.Contains(errs[0].Error(), "attrs section")) || !c.damaged && len(errs) != 0 {
			t.Errorf("%s: errors %v, want damage %v", what, errs, c.damaged)
		}
		if !c.q.Count && int64(len(lines)) != c.want {
			t.Errorf("%s: %d lines delivered, want %d", what, len(lines), c.want)
		}
	}
}
