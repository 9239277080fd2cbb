package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"haystack/internal/segment"
)

// compactFixture writes entries of two streams through a small head
// (several segments) and leaves some in the WAL, then closes the store.
// It returns every entry in store order.
func compactFixture(t *testing.T, dir string) []Entry {
	t.Helper()
	st, err := Open(dir, Options{HeadBytes: 8 << 10, Segment: segment.Options{BlockSize: 2 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(11, 12))
	ids := []uint32{st.Stream(`{s="a"}`), st.Stream(`{s="b"}`)}
	var want []Entry
	for i := range 25 {
		es := genEntries(r, 20, ids[i%2])
		for k := range es {
			es[k].Time += int64(i) * 1e12
		}
		want = append(want, es...)
		if err := st.Append(&Batch{Entries: es, Sources: []Source{{Key: "/x", Offset: int64(i)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return want
}

// segFiles lists the files in the segments directory.
func segFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := readDirNames(filepath.Join(dir, segDir))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

func TestCompact(t *testing.T) {
	dir := t.TempDir()
	want := compactFixture(t, dir)
	before, _ := readManifest(dir)
	if len(before.Segments) < 3 {
		t.Fatalf("fixture has %d segments, want several", len(before.Segments))
	}

	// Uncommitted entries in the WAL are flushed and compacted too.
	st, err := Open(dir, Options{FsyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	extra := genEntries(rand.New(rand.NewPCG(13, 14)), 30, 1)
	for k := range extra {
		extra[k].Time += 1e15
	}
	if err := st.Append(&Batch{Entries: extra}); err != nil {
		t.Fatal(err)
	}
	want = append(want, extra...)
	var calls []string
	layout := segment.Options{BlockSize: 16 << 10, Level: 3}
	// Runs of at most 20 KiB: the ~8 KiB segments merge two or three
	// into one.
	cs, err := st.Compact(context.Background(), CompactOptions{Segment: &layout, MergeBytes: 20 << 10, Workers: 2, Progress: func(done, total int64) {
		calls = append(calls, fmt.Sprint(done, "/", total))
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	after, _ := readManifest(dir)
	if cs.Segments != len(before.Segments)+1 || cs.Written != len(after.Segments) || cs.Written < 2 || cs.Written*2 > cs.Segments+1 {
		t.Fatalf("rewrote %d segments into %d; %d before (+1 flushed), %d after", cs.Segments, cs.Written, len(before.Segments), len(after.Segments))
	}
	for _, sm := range after.Segments {
		if sm.RawBytes > 20<<10 {
			t.Fatalf("merged segment %s holds %d raw bytes, over the 20 KiB bound", sm.Name, sm.RawBytes)
		}
	}
	var raw, size int64
	var names []string
	for _, sm := range after.Segments {
		if !sm.Compacted {
			t.Fatalf("segment %s not marked compacted", sm.Name)
		}
		fi, err := os.Stat(filepath.Join(dir, segDir, sm.Name))
		if err != nil || fi.Size() != sm.Size {
			t.Fatalf("%s: %v, size %d, manifest %d", sm.Name, err, fi.Size(), sm.Size)
		}
		raw += sm.RawBytes
		size += sm.Size
		names = append(names, sm.Name)
	}
	slices.Sort(names)
	if cs.RawBytes != raw || cs.After != size {
		t.Fatalf("stats %+v, manifest raw %d size %d", cs, raw, size)
	}
	if got := segFiles(t, dir); !slices.Equal(got, names) {
		t.Fatalf("segment files %v, manifest %v (old files left behind?)", got, names)
	}
	if len(calls) == 0 || calls[len(calls)-1] != fmt.Sprint(raw, "/", raw) {
		t.Fatalf("progress calls %v, want ending at %d/%d", calls, raw, raw)
	}
	if got := allEntries(t, dir); !equalEntries(got, want) {
		t.Fatalf("after compaction: %d entries, want %d (or content differs)", len(got), len(want))
	}
	// The new layout is in effect: 16 KiB blocks instead of 2 KiB.
	snap, err := OpenSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range snap.Parts {
		raw := after.Segments[i].RawBytes
		if n := p.NumBlocks(); n > int(raw/(16<<10))+1 {
			t.Fatalf("%s: %d blocks for %d raw bytes: not 16 KiB blocks", p.Name(), n, raw)
		}
	}
	snap.Close()
	if ps, err := Verify(dir); err != nil || len(ps) != 0 {
		t.Fatalf("verify: %v %v", ps, err)
	}
	// Sources and streams survive; a second Compact has nothing to do.
	st, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if src, ok := st.Source("/x"); !ok || src.Offset != 24 {
		t.Fatalf("source %+v %v", src, ok)
	}
	if st.Stream(`{s="b"}`) != 1 {
		t.Fatal("stream table changed")
	}
	cs, err = st.Compact(context.Background(), CompactOptions{})
	if err != nil || cs.Segments != 0 {
		t.Fatalf("second compact: %+v %v", cs, err)
	}
	// New segments after compacted ones merge among themselves only (the
	// default bound, 256 MiB, takes them all); the compacted stay.
	more := genEntries(rand.New(rand.NewPCG(15, 16)), 300, 0)
	for k := range more {
		more[k].Time += 2e15
	}
	for i := 0; i < len(more); i += 20 {
		if err := st.Append(&Batch{Entries: more[i : i+20]}); err != nil {
			t.Fatal(err)
		}
		if i%100 == 0 {
			if err := st.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	want = append(want, more...)
	mid, _ := readManifest(dir)
	cs, err = st.Compact(context.Background(), CompactOptions{Workers: 1})
	if err != nil || cs.Written != 1 || cs.Segments < 3 {
		t.Fatalf("third compact: %+v %v", cs, err)
	}
	last, _ := readManifest(dir)
	if len(last.Segments) != len(after.Segments)+1 || !slices.Equal(last.Segments[:len(after.Segments)], after.Segments) {
		t.Fatalf("segments %v after the third compaction; before it %v", last.Segments, mid.Segments)
	}
	st.Close()
	if got := allEntries(t, dir); !equalEntries(got, want) {
		t.Fatalf("after the third compaction: %d entries, want %d (or content differs)", len(got), len(want))
	}
	if got := segFiles(t, dir); len(got) != len(last.Segments) {
		t.Fatalf("segment files %v, manifest %d segments", got, len(last.Segments))
	}
}

// TestPlanAndSwapRuns: runs are consecutive uncompacted segments within
// the bound (a bigger one alone), and a swap refuses runs that moved.
func TestPlanAndSwapRuns(t *testing.T) {
	seg := func(name string, raw int64, compacted bool) SegmentMeta {
		return SegmentMeta{Name: name, RawBytes: raw, Compacted: compacted}
	}
	segs := []SegmentMeta{seg("a", 5, false), seg("b", 5, false), seg("c", 5, false), seg("d", 50, false),
		seg("e", 5, true), seg("f", 3, false), seg("g", 3, false)}
	names := func(runs [][]SegmentMeta) string {
		var out []string
		for _, r := range runs {
			var n string
			for _, sm := range r {
				n += sm.Name
			}
			out = append(out, n)
		}
		return fmt.Sprint(out)
	}
	for _, c := range []struct {
		limit int64
		want  string
	}{{10, "[ab c d fg]"}, {15, "[abc d fg]"}, {0, "[a b c d f g]"}, {1000, "[abcd fg]"}} {
		if got := names(planRuns(segs, c.limit, nil)); got != c.want {
			t.Errorf("limit %d: runs %s, want %s", c.limit, got, c.want)
		}
	}
	// The target spreads a small compaction over the workers.
	two := CompactOptions{Workers: 2}
	if got := names(two.plan(segs[:4], two.target(segs[:4], nil), nil)); got != "[abc d]" {
		t.Errorf("two workers: runs %s, want [abc d]", got)
	}
	runs := planRuns(segs, 10, nil) // ab c d fg
	out := []SegmentMeta{seg("AB", 10, true), seg("C", 5, true), seg("D", 50, true), seg("FG", 6, true)}
	got, err := swapRuns(append(slices.Clone(segs), seg("h", 1, false)), runs, out)
	if err != nil {
		t.Fatal(err)
	}
	var gn []string
	for _, sm := range got {
		gn = append(gn, sm.Name)
	}
	if fmt.Sprint(gn) != "[AB C D e FG h]" {
		t.Fatalf("swap: %v", gn)
	}
	// A run whose segments are no longer consecutive, or gone.
	moved := []SegmentMeta{segs[0], segs[2], segs[1], segs[3], segs[4], segs[5], segs[6]}
	if _, err := swapRuns(moved, runs, out); err == nil {
		t.Fatal("swap of a run that is no longer consecutive succeeded")
	}
	if _, err := swapRuns(segs[1:], runs, out); err == nil {
		t.Fatal("swap of a run whose first segment left succeeded")
	}
}

// TestPlanMerges: small compacted segments are merged again once a run
// of them reaches half the limit or maxSmallRun segments, and nothing
// else is.
func TestPlanMerges(t *testing.T) {
	seg := func(name string, raw int64, compacted bool) SegmentMeta {
		return SegmentMeta{Name: name, RawBytes: raw, Compacted: compacted}
	}
	names := func(runs [][]SegmentMeta) string {
		var out []string
		for _, r := range runs {
			var n string
			for _, sm := range r {
				n += sm.Name
			}
			out = append(out, n)
		}
		return fmt.Sprint(out)
	}
	// limit 100: small is below 25, a run is merged from 50 up to 100.
	for _, c := range []struct {
		segs []SegmentMeta
		skip string
		want string
	}{
		{[]SegmentMeta{seg("a", 20, true), seg("b", 20, true), seg("c", 10, true)}, "", "[abc]"},                                                              // exactly 50
		{[]SegmentMeta{seg("a", 20, true), seg("b", 20, true), seg("c", 9, true)}, "", "[]"},                                                                  // 49: waits
		{[]SegmentMeta{seg("a", 24, true), seg("b", 25, true), seg("c", 24, true)}, "", "[]"},                                                                 // 25 is not small
		{[]SegmentMeta{seg("a", 20, true), seg("b", 20, false), seg("c", 20, true)}, "", "[]"},                                                                // not compacted: a barrier
		{[]SegmentMeta{seg("a", 20, true), seg("b", 20, true), seg("c", 20, true)}, "b", "[]"},                                                                // unreadable: a barrier
		{[]SegmentMeta{seg("a", 50, true)}, "", "[]"},                                                                                                         // one segment alone is never rewritten
		{[]SegmentMeta{seg("a", 24, true), seg("b", 24, true), seg("c", 24, true), seg("d", 24, true), seg("e", 24, true), seg("f", 24, true)}, "", "[abcd]"}, // 96; ef (48) waits
		{[]SegmentMeta{seg("a", 24, true), seg("b", 24, true), seg("c", 24, true), seg("d", 24, true), seg("e", 24, true), seg("f", 24, true), seg("g", 3, true)}, "", "[abcd efg]"},
		{[]SegmentMeta{seg("a", 10, true), seg("b", 30, true), seg("c", 20, true), seg("d", 20, true), seg("e", 20, true)}, "", "[cde]"},
	} {
		skip := map[string]bool{c.skip: c.skip != ""}
		if got := names(planMerges(c.segs, 100, skip)); got != c.want {
			t.Errorf("%v skip %q: runs %s, want %s", c.segs, c.skip, got, c.want)
		}
	}
	// Tiny segments (a quiet tenant's idle flushes) are merged in runs of
	// maxSmallRun however small; fewer wait.
	var tiny []SegmentMeta
	for i := range 2*maxSmallRun + 3 {
		tiny = append(tiny, seg(fmt.Sprintf("%02d,", i), 1, true))
	}
	if got := planMerges(tiny, 100, nil); len(got) != 2 || len(got[0]) != maxSmallRun || len(got[1]) != maxSmallRun || got[1][0].Name != fmt.Sprintf("%02d,", maxSmallRun) {
		t.Errorf("%d tiny segments: runs %s, want two of %d", len(tiny), names(got), maxSmallRun)
	}
	if got := planMerges(tiny[:maxSmallRun-1], 100, nil); len(got) != 0 {
		t.Errorf("%d tiny segments: runs %s, want none", maxSmallRun-1, names(got))
	}
	if got := planMerges([]SegmentMeta{seg("a", 1, true), seg("b", 1, true)}, 0, nil); len(got) != 0 {
		t.Errorf("limit 0 merged %v", got)
	}
	// plan: segments not compacted yet come first, then merges, up to
	// Workers runs.
	segs := []SegmentMeta{seg("a", 20, true), seg("b", 20, true), seg("c", 20, true), seg("d", 20, false), seg("e", 20, true), seg("f", 20, true), seg("g", 20, true)}
	one := CompactOptions{Workers: 1, MergeBytes: 100}
	if got := names(one.plan(segs, 100, nil)); got != "[d]" {
		t.Errorf("plan with a segment not compacted: %s, want [d]", got)
	}
	segs[3].Compacted = true
	if got := names(one.plan(segs, 100, nil)); got != "[abcde]" {
		t.Errorf("plan after it: %s, want [abcde]", got)
	}
	if got := names(CompactOptions{Workers: 1, MergeBytes: -1}.plan(segs, 100, nil)); got != "[]" {
		t.Errorf("plan without merging: %s, want []", got)
	}
}

// TestWriterCompactMergesSmall compacts after every flush, as hay serve
// does when it is fed slowly: each compaction finds one new segment. The
// small compacted segments must be merged again, each entry rewritten at
// most twice, and no entry lost, duplicated or moved.
func TestWriterCompactMergesSmall(t *testing.T) {
	dir := t.TempDir()
	w, err := OpenWriter(dir, WriterOptions{Options: Options{HeadBytes: 2 << 10, Segment: segment.Options{BlockSize: 1 << 10}}})
	if err != nil {
		t.Fatal(err)
	}
	const limit = 16 << 10
	opt := CompactOptions{Workers: 1, MergeBytes: limit, Segment: &segment.Options{BlockSize: 2 << 10, Level: 3}}
	var want []string
	var raw, rewritten int64
	for b := range 120 {
		var es []LabeledEntry
		for i := range 8 + b%5 {
			line := fmt.Sprintf("batch %d line %d %s", b, i, strings.Repeat("x", (b*7+i*13)%40))
			es = append(es, LabeledEntry{Labels: `{s="x"}`, Time: int64(len(want)), Line: []byte(line)})
			want = append(want, `{s="x"}|`+fmt.Sprint(len(want))+"|"+line)
			raw += int64(len(line))
		}
		if err := w.Append(context.Background(), es); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		cs, err := w.Compact(context.Background(), opt)
		if err != nil {
			t.Fatal(err)
		}
		rewritten += cs.RawBytes
	}
	v, err := w.View()
	if err != nil {
		t.Fatal(err)
	}
	if got := viewLines(t, v); !slices.Equal(got, want) {
		t.Fatalf("after the merges: %d entries, want %d, or not in order", len(got), len(want))
	}
	segs, _ := writerSegments(w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// Every stretch of small segments left is one still waiting: under
	// half the limit. Without merging there would be one per flush.
	var small, merged int64
	var names []string
	for _, sm := range segs {
		names = append(names, sm.Name)
		if !sm.Compacted {
			t.Fatalf("segment %s not compacted", sm.Name)
		}
		if sm.RawBytes >= limit/4 {
			merged++
			if small >= limit/2 {
				t.Fatalf("small segments of %d bytes left unmerged before %s", small, sm.Name)
			}
			small = 0
			continue
		}
		small += sm.RawBytes
	}
	// A merged segment holds at least a quarter of the limit (a run of
	// maxSmallRun may be merged below half of it), and fewer than
	// maxSmallRun small ones wait.
	if small >= limit/2 || merged == 0 || len(segs) > int(raw/(limit/4))+maxSmallRun {
		t.Fatalf("%d segments (%d merged) for %d raw bytes, %d small at the end", len(segs), merged, raw, small)
	}
	if rewritten > 2*raw {
		t.Fatalf("%d bytes rewritten for %d raw bytes: more than twice", rewritten, raw)
	}
	slices.Sort(names)
	if got := segFiles(t, dir); !slices.Equal(got, names) {
		t.Fatalf("files %v, manifest %v", got, names)
	}
	if ps, err := Verify(dir); err != nil || len(ps) != 0 {
		t.Fatalf("verify: %v %v", ps, err)
	}
	t.Logf("%d segments, %d merged, %d raw bytes, %d rewritten", len(segs), merged, raw, rewritten)
}

// TestCompactCrash stops a compaction at each step, as kill -9 would, and
// checks that the next Open leaves exactly the entries and one copy of
// each segment.
func TestCompactCrash(t *testing.T) {
	for _, step := range []string{"written", "listed"} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			want := compactFixture(t, dir)
			crash := errors.New("crash")
			compactHook = func(s string) error {
				if s == step {
					return crash
				}
				return nil
			}
			defer func() { compactHook = nil }()
			st, err := Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Compact(context.Background(), CompactOptions{Workers: 2}); !errors.Is(err, crash) {
				t.Fatalf("compact: %v", err)
			}
			st.lock.Close() // the process dies: no Close, no flush
			// A reader meanwhile sees every entry once.
			if got := allEntries(t, dir); !equalEntries(got, want) {
				t.Fatalf("reader after crash: %d entries, want %d", len(got), len(want))
			}
			compactHook = nil
			st, err = Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			st.Close()
			m, _ := readManifest(dir)
			var names []string
			for _, sm := range m.Segments {
				names = append(names, sm.Name)
			}
			slices.Sort(names)
			if got := segFiles(t, dir); !slices.Equal(got, names) {
				t.Fatalf("after recovery: files %v, manifest %v", got, names)
			}
			if got := allEntries(t, dir); !equalEntries(got, want) {
				t.Fatalf("after recovery: %d entries, want %d", len(got), len(want))
			}
			// And compaction finishes on the next run.
			st, _ = Open(dir, Options{})
			if _, err := st.Compact(context.Background(), CompactOptions{}); err != nil {
				t.Fatal(err)
			}
			st.Close()
			if got := allEntries(t, dir); !equalEntries(got, want) {
				t.Fatalf("after the second compaction: %d entries, want %d", len(got), len(want))
			}
		})
	}
}

// TestCompactDamage: a damaged segment stops Compact with an error naming
// the file, and nothing changes.
func TestCompactDamage(t *testing.T) {
	dir := t.TempDir()
	compactFixture(t, dir)
	m, _ := readManifest(dir)
	victim := m.Segments[1].Name
	path := filepath.Join(dir, segDir, victim)
	data, _ := os.ReadFile(path)
	data[40] ^= 1 // inside block 0
	os.WriteFile(path, data, 0o644)
	files := segFiles(t, dir)
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Compact(context.Background(), CompactOptions{Workers: 1})
	if err == nil || !strings.Contains(err.Error(), victim) {
		t.Fatalf("compact of a damaged segment: %v", err)
	}
	var ce *segment.CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is not a *segment.CorruptError", err)
	}
	st.Close()
	after, _ := readManifest(dir)
	if after.Segments[1].Name != victim || after.Segments[1].Compacted {
		t.Fatalf("damaged segment replaced: %+v", after.Segments[1])
	}
	// The damaged segment's run was not swapped in: its files are all
	// still there.
	if got := segFiles(t, dir); len(got) != len(files) || !slices.Contains(got, victim) {
		t.Fatalf("files %v, before %v", got, files)
	}
}

func TestCompactCancel(t *testing.T) {
	dir := t.TempDir()
	want := compactFixture(t, dir)
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := st.Compact(ctx, CompactOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("compact with a cancelled context: %v", err)
	}
	st.Close()
	if got := allEntries(t, dir); !equalEntries(got, want) {
		t.Fatal("entries changed by a cancelled compaction")
	}
	m, _ := readManifest(dir)
	for _, sm := range m.Segments {
		if sm.Compacted {
			t.Fatal("a cancelled compaction replaced a segment")
		}
	}
}

// whileCompacting runs compact on its own goroutine and check(i) over and
// over until it has returned (at least once after), failing on its error.
// It returns how many checks ran.
func whileCompacting(t *testing.T, compact func() error, check func(i int)) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- compact() }()
	i := 0
	for finished := false; !finished; i++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished = true
		default:
		}
		check(i)
	}
	return i
}

// TestCompactConcurrentReader reads the store over and over while Compact
// replaces its segments one by one: a reader that finds a segment gone
// re-reads the manifest, so every read sees every entry once and nothing
// damaged.
func TestCompactConcurrentReader(t *testing.T) {
	dir := t.TempDir()
	want := compactFixture(t, dir)
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	reads := whileCompacting(t, func() error {
		_, err := st.Compact(context.Background(), CompactOptions{Workers: 1, MergeBytes: 16 << 10})
		return err
	}, func(i int) {
		if got := allEntries(t, dir); !equalEntries(got, want) {
			t.Fatalf("read %d during compaction: %d entries, want %d", i, len(got), len(want))
		}
	})
	st.Close()
	t.Logf("%d reads during compaction", reads)
}

// TestWriterCompact compacts a Writer's segments while one appender adds
// batches and views are taken and read: every view holds exactly the
// first k appended entries for some k, in order, and the end state holds
// them all, in compacted segments only.
func TestWriterCompact(t *testing.T) {
	dir := t.TempDir()
	w, err := OpenWriter(dir, WriterOptions{Options: Options{HeadBytes: 6 << 10, Segment: segment.Options{BlockSize: 1 << 10}}})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for b := range 60 {
		for i := range 20 {
			want = append(want, fmt.Sprintf(`{s="x"}|%d|batch %d line %d`, b*20+i, b, i))
		}
	}
	layout := segment.Options{BlockSize: 4 << 10, Level: 3}
	appended := make(chan struct{})
	go func() {
		defer close(appended)
		for b := range 60 {
			var es []LabeledEntry
			for i := range 20 {
				es = append(es, LabeledEntry{Labels: `{s="x"}`, Time: int64(b*20 + i), Line: fmt.Appendf(nil, "batch %d line %d", b, i)})
			}
			if err := w.Append(context.Background(), es); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	compacted := 0
	checkView := func() {
		v, err := w.View()
		if err != nil {
			t.Fatal(err)
		}
		got := viewLines(t, v)
		if len(got) > len(want) || !slices.Equal(got, want[:len(got)]) {
			t.Fatalf("a view during compaction holds %d entries that are not the first %d appended", len(got), len(got))
		}
	}
	for done := false; !done; {
		select {
		case <-appended:
			done = true
		default:
		}
		cs, err := w.Compact(context.Background(), CompactOptions{Segment: &layout, Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		compacted += cs.Segments
		checkView()
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	cs, err := w.Compact(context.Background(), CompactOptions{Segment: &layout})
	if err != nil {
		t.Fatal(err)
	}
	compacted += cs.Segments
	checkView()
	v, _ := w.View()
	if got := viewLines(t, v); !slices.Equal(got, want) {
		t.Fatalf("final view: %d entries, want %d", len(got), len(want))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	m, _ := readManifest(dir)
	var names []string
	for _, sm := range m.Segments {
		if !sm.Compacted {
			t.Fatalf("segment %s not compacted", sm.Name)
		}
		names = append(names, sm.Name)
	}
	slices.Sort(names)
	if got := segFiles(t, dir); !slices.Equal(got, names) || compacted < 3 {
		t.Fatalf("files %v, manifest %v, %d segments compacted", got, names, compacted)
	}
	if ps, err := Verify(dir); err != nil || len(ps) != 0 {
		t.Fatalf("verify: %v %v", ps, err)
	}
}

// TestWriterBackgroundCompaction: with CompactInterval the Writer
// compacts on its own, tells OnCompact, and Close stops it.
func TestWriterBackgroundCompaction(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var reports []CompactStats
	w, err := OpenWriter(dir, WriterOptions{
		Options:         Options{HeadBytes: 6 << 10, Segment: segment.Options{BlockSize: 1 << 10}},
		CompactInterval: 5 * time.Millisecond,
		OnCompact: func(cs CompactStats, err error) {
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			reports = append(reports, cs)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var es []LabeledEntry
	for i := range 500 {
		es = append(es, LabeledEntry{Labels: `{s="y"}`, Time: int64(i), Line: fmt.Appendf(nil, "entry %d of the background test", i)})
	}
	if err := w.Append(context.Background(), es); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	// Wait until OnCompact has reported every segment (it is told after
	// the swap, so the manifest alone could be ahead of it).
	deadline := time.Now().Add(20 * time.Second)
	for {
		all, left := writerSegments(w)
		segs := len(all)
		mu.Lock()
		reported := 0
		for _, r := range reports {
			reported += r.Written
		}
		mu.Unlock()
		if left == 0 && reported == segs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s: %d of %d segments not compacted, %d reported", left, segs, reported)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	v := allEntries(t, dir)
	if len(v) != len(es) {
		t.Fatalf("%d entries after background compaction, want %d", len(v), len(es))
	}
	for i, e := range v {
		if string(e.Line) != string(es[i].Line) || e.Time != es[i].Time {
			t.Fatalf("entry %d: %q at %d, want %q at %d", i, e.Line, e.Time, es[i].Line, es[i].Time)
		}
	}
}

// writerSegments returns a copy of the Writer's manifest segments and the
// number not compacted yet.
func writerSegments(w *Writer) (segs []SegmentMeta, left int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, sm := range w.s.man.Segments {
		if !sm.Compacted {
			left++
		}
	}
	return slices.Clone(w.s.man.Segments), left
}

// writerWithSegments opens a Writer on dir with a tiny head and small
// blocks and commits batches of 10 entries through it, flushed: a store
// of many segments.
func writerWithSegments(t *testing.T, dir string, batches int) *Writer {
	t.Helper()
	w, err := OpenWriter(dir, WriterOptions{Options: Options{HeadBytes: 4 << 10, Segment: segment.Options{BlockSize: 1 << 10}}})
	if err != nil {
		t.Fatal(err)
	}
	for b := range batches {
		var es []LabeledEntry
		for i := range 10 {
			es = append(es, LabeledEntry{Labels: `{s="x"}`, Time: int64(b*10 + i), Line: fmt.Appendf(nil, "batch %d line %d padding padding padding", b, i)})
		}
		if err := w.Append(context.Background(), es); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestVerifyDuringCompaction: hay verify on a store whose segments a
// compaction replaces meanwhile reports no damage (it follows the
// manifest to the replacements).
func TestVerifyDuringCompaction(t *testing.T) {
	dir := t.TempDir()
	w := writerWithSegments(t, dir, 200)
	// One segment per swap: as many replacements as possible.
	whileCompacting(t, func() error {
		_, err := w.Compact(context.Background(), CompactOptions{Workers: 1, MergeBytes: -1})
		return err
	}, func(i int) {
		ps, err := Verify(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p.Damage {
				t.Fatalf("verify run %d during compaction of an intact store: %s", i, p)
			}
		}
	})
	w.Close()
}

// TestWriterCompactSkipsUnreadable: a damaged segment fails the
// compaction that reads it, and later calls leave it out and compact the
// rest; searches still read everything else.
func TestWriterCompactSkipsUnreadable(t *testing.T) {
	dir := t.TempDir()
	w := writerWithSegments(t, dir, 40)
	segs, _ := writerSegments(w)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	victim := filepath.Join(dir, segDir, segs[0].Name)
	data, _ := os.ReadFile(victim)
	data[40] ^= 1
	os.WriteFile(victim, data, 0o644)
	opt := CompactOptions{Workers: 1, MergeBytes: -1}
	if _, err := w.Compact(context.Background(), opt); err == nil || !strings.Contains(err.Error(), segs[0].Name) {
		t.Fatalf("first compaction: %v, want the damaged segment named", err)
	}
	cs, err := w.Compact(context.Background(), opt)
	if err != nil || cs.Segments != len(segs)-1 {
		t.Fatalf("second compaction: %+v %v, want the %d others", cs, err, len(segs)-1)
	}
	now, _ := writerSegments(w)
	first := now[0]
	if first.Name != segs[0].Name || first.Compacted {
		t.Fatalf("damaged segment replaced: %+v", first)
	}
	if got := segFiles(t, dir); len(got) != len(segs) {
		t.Fatalf("files %v: orphans or losses", got)
	}
	w.Close()
}

//go:noinline
func readFirstBlock(p Part, b *segment.Block) error {
	return p.ReadBlock(0, b)
}

// TestSwappedPartReadWhileCollected: a part Writer.Compact swapped out
// has its mapping closed by a cleanup once the *SegmentPart is
// unreachable; a read through its last reference, with collections
// running, must finish before that (SegmentPart keeps itself alive). A
// regression unmaps the segment under the decoder and kills the test
// binary. (Found in review.)
func TestSwappedPartReadWhileCollected(t *testing.T) {
	dir := t.TempDir()
	w, err := OpenWriter(dir, WriterOptions{Options: Options{HeadBytes: 64 << 20, Segment: segment.Options{BlockSize: 4 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	const segs = 24
	for s := range segs {
		var es []LabeledEntry
		for i := range 20000 {
			es = append(es, LabeledEntry{Labels: `{s="x"}`, Time: int64(s*100000 + i), Line: fmt.Appendf(nil, "seg %d line %d %x %x", s, i, r.Uint64(), r.Uint64())})
		}
		if err := w.Append(context.Background(), es); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	v, err := w.View()
	if err != nil {
		t.Fatal(err)
	}
	parts := append([]Part(nil), v.Parts...)
	v = nil
	layout := segment.Options{BlockSize: 4 << 20, Level: 1}
	if _, err := w.Compact(context.Background(), CompactOptions{Segment: &layout, Workers: 2}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
			}
		}
	}()
	b := segment.GetBlock()
	bad := 0
	for i := range parts {
		p := parts[i]
		parts[i] = nil
		if err := readFirstBlock(p, b); err != nil {
			bad++
			t.Errorf("part %d: %v", i, err)
		}
	}
	close(stop)
	t.Logf("%d of %d reads failed", bad, segs)
	w.Close()
}

// TestWriterCompactReturnsUnderIngest: segments flushed while a
// compaction runs are left to the next call, so that a call returns (and
// reports) under steady ingest. Here each group swapped in is followed
// by a new flushed segment; a call that took those too would go on until
// the test stops adding them.
func TestWriterCompactReturnsUnderIngest(t *testing.T) {
	dir := t.TempDir()
	w := writerWithSegments(t, dir, 30)
	start, _ := writerSegments(w)
	added := 0
	opt := CompactOptions{Workers: 1, MergeBytes: -1}
	opt.Progress = func(done, total int64) {
		if added >= 40 {
			return
		}
		added++
		es := []LabeledEntry{{Labels: `{s="x"}`, Time: int64(1000 + added), Line: fmt.Appendf(nil, "flushed during compaction %d", added)}}
		if err := w.Append(context.Background(), es); err != nil {
			t.Error(err)
		}
		if err := w.Flush(); err != nil {
			t.Error(err)
		}
	}
	cs, err := w.Compact(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	if cs.Segments != len(start) {
		t.Fatalf("compacted %d segments, want the %d there at the start (%d flushed meanwhile)", cs.Segments, len(start), added)
	}
	if _, left := writerSegments(w); left != added {
		t.Fatalf("%d segments left to compact, want the %d flushed meanwhile", left, added)
	}
	opt.Progress = nil
	if cs, err = w.Compact(context.Background(), opt); err != nil || cs.Segments != added {
		t.Fatalf("next call: %+v %v, want the %d flushed meanwhile", cs, err, added)
	}
	w.Close()
	if got := allEntries(t, dir); len(got) != 300+added {
		t.Fatalf("%d entries, want %d", len(got), 300+added)
	}
}

// TestWriterBackgroundMergeBytes: the background compaction uses
// WriterOptions.CompactMergeBytes: with a small limit it merges the
// flushed segments; with merging off it rewrites each alone, one
// compacted segment per flush. How far the merging gets depends on how
// the flushes and the compaction ticks interleave: a small compacted
// segment between two merged ones, or a run of fewer than 16 whose bytes
// stay under half the limit, is left as it is; alone the test ends at
// 4-6 segments, and a loaded CI machine once left 8, so the bound is 12,
// well apart from the 30 of merging off.
func TestWriterBackgroundMergeBytes(t *testing.T) {
	for _, c := range []struct {
		merge   int64
		atMost  int
		atLeast int
	}{{16 << 10, 12, 1}, {-1, 30, 30}} {
		dir := t.TempDir()
		w, err := OpenWriter(dir, WriterOptions{Options: Options{HeadBytes: 1 << 30}, CompactInterval: 5 * time.Millisecond, CompactMergeBytes: c.merge})
		if err != nil {
			t.Fatal(err)
		}
		for b := range 30 {
			es := []LabeledEntry{{Labels: `{s="x"}`, Time: int64(b), Line: []byte(strings.Repeat("y", 1000) + fmt.Sprint(b))}}
			if err := w.Append(context.Background(), es); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		var segs []SegmentMeta
		var left int
		for {
			segs, left = writerSegments(w)
			if left == 0 && len(segs) <= c.atMost || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if len(segs) > c.atMost || len(segs) < c.atLeast || left != 0 {
			t.Errorf("merge bytes %d: %d segments after background compaction (%d not compacted), want %d to %d, all compacted", c.merge, len(segs), left, c.atLeast, c.atMost)
		}
	}
}
