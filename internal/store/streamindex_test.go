package store

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"

	"haystack/internal/ingest"
)

// TestStreamIndexAPI checks Postings, Values and Names against the
// label sets, that an older index shows only its own streams, and that
// appending to a returned posting list does not write into the index.
func TestStreamIndexAPI(t *testing.T) {
	texts := []string{`{app="a", env="p"}`, `{app="b", env="p"}`, `{app="a"}`, `{app=""}`, `{x="\xff", app="c"}`, `{app="a", env="q"}`}
	var defs []StreamDef
	for i, s := range texts {
		defs = append(defs, StreamDef{ID: uint32(i), Labels: s})
	}
	x := newStreamIndex()
	old := newStreamIndexFor(x, defs[:3])
	ix := newStreamIndexFor(x, defs)
	for _, c := range []struct {
		ix          *StreamIndex
		name, value string
		want        []uint32
	}{
		{ix, "app", "a", []uint32{0, 2, 5}},
		{old, "app", "a", []uint32{0, 2}},
		{ix, "app", "c", []uint32{4}},
		{old, "app", "c", nil},
		{ix, "x", "\xff", []uint32{4}},
		{ix, "env", "p", []uint32{0, 1}},
		{ix, "env", "", nil},
		{ix, "app", "", nil}, // {app=""} does not parse: in no postings
		{ix, "nope", "a", nil},
	} {
		got := c.ix.Postings(c.name, c.value)
		if !slices.Equal(got, c.want) {
			t.Errorf("Postings(%s, %q) on %d streams = %v, want %v", c.name, c.value, c.ix.Len(), got, c.want)
		}
		if len(got) > 0 {
			_ = append(got, 99) // must not write into the index
		}
	}
	if got := ix.Postings("app", "a"); !slices.Equal(got, []uint32{0, 2, 5}) {
		t.Errorf("after an append to a result, Postings(app, a) = %v", got)
	}
	if got, want := ix.Names(), []string{"app", "env", "x"}; !slices.Equal(got, want) {
		t.Errorf("Names = %q, want %q", got, want)
	}
	if got, want := old.Names(), []string{"app", "env"}; !slices.Equal(got, want) {
		t.Errorf("old Names = %q, want %q", got, want)
	}
	vals := map[string][]uint32{}
	ix.Values("app", func(v string, ids []uint32) bool {
		vals[v] = slices.Clone(ids)
		return true
	})
	if want := map[string][]uint32{"a": {0, 2, 5}, "b": {1}, "c": {4}}; fmt.Sprint(vals) != fmt.Sprint(want) {
		t.Errorf("Values(app) = %v, want %v", vals, want)
	}
	n := 0
	ix.Values("app", func(string, []uint32) bool { n++; return false })
	if n != 1 {
		t.Errorf("Values went on after false: %d calls", n)
	}
	if ix.Labels(4) != texts[4] || ix.Labels(6) != "" {
		t.Errorf("Labels(4) = %q, Labels(6) = %q", ix.Labels(4), ix.Labels(6))
	}
}

// TestStreamIndexConcurrent has views index streams while appends add
// more (run with -race): each view's index answers for its own streams.
func TestStreamIndexConcurrent(t *testing.T) {
	w, err := OpenWriter(t.TempDir(), WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	const batches, per = 20, 50
	var wg sync.WaitGroup
	wg.Go(func() {
		for b := range batches {
			var es []LabeledEntry
			for i := range per {
				es = append(es, LabeledEntry{Labels: fmt.Sprintf(`{app="s%d", g="%d"}`, b*per+i, i%3), Line: []byte("x")})
			}
			if err := w.Append(context.Background(), es); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for range 2 {
		wg.Go(func() {
			for range 40 {
				v, err := w.View()
				if err != nil {
					t.Error(err)
					return
				}
				ix := v.Index()
				n := ix.Len()
				got := ix.Postings("g", "1")
				want := 0
				for id := range n {
					if ls, _ := ingest.ParseLabels(ix.Labels(uint32(id))); ls.Get("g") == "1" {
						want++
					}
				}
				if len(got) != want || len(got) > 0 && int(got[len(got)-1]) >= n {
					t.Errorf("view of %d streams: %d postings of g=1 (last %v), want %d", n, len(got), got, want)
					return
				}
				runtime.Gosched()
			}
		})
	}
	wg.Wait()
}

// BenchmarkStreamIndexBuild measures building the index of 200,000
// streams of three labels with unique values (E9's shape): the first
// query after a store opens pays it once. It reports the heap the index
// keeps, per stream and as a share of the label text.
func BenchmarkStreamIndexBuild(b *testing.B) {
	const n = 200_000
	defs := make([]StreamDef, n)
	text := 0
	for i := range defs {
		defs[i] = StreamDef{ID: uint32(i), Labels: fmt.Sprintf(`{app="s0_%d", l01="%08d", l02="%08d"}`, i, (i*31+1)%1000000, (i*31+2)%1000000)}
		text += len(defs[i].Labels)
	}
	var keep *StreamIndex
	var before, after runtime.MemStats
	for b.Loop() {
		b.StopTimer()
		keep = nil
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.StartTimer()
		keep = newStreamIndexFor(newStreamIndex(), defs)
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.StartTimer()
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heapB/stream")
	b.ReportMetric(float64(text)/n, "labelB/stream")
	runtime.KeepAlive(keep)
}
