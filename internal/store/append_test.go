package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"haystack/internal/segment"
)

// viewLines reads every entry of a view as "labels|time|line".
func viewLines(t *testing.T, v *View) []string {
	t.Helper()
	var out []string
	for _, p := range v.Parts {
		for i := range p.NumBlocks() {
			var b segment.Block
			if err := p.ReadBlock(i, &b); err != nil {
				t.Fatal(err)
			}
			for k := range b.Times {
				out = append(out, fmt.Sprintf("%s|%d|%s", v.Labels(b.Streams[k]), b.Times[k], b.Line(k)))
			}
		}
	}
	return out
}

func TestWriterConcurrentAppend(t *testing.T) {
	dir := t.TempDir()
	var syncs atomic.Int64
	w, err := OpenWriter(dir, WriterOptions{Options: Options{HeadBytes: 64 << 10}, OnSync: func(time.Duration) { syncs.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	const writers, batches, per = 8, 20, 50
	var want []string
	var wg sync.WaitGroup
	for g := range writers {
		lab := fmt.Sprintf("{w=\"%d\"}", g)
		for b := range batches {
			for i := range per {
				want = append(want, fmt.Sprintf("%s|%d|line %d %d %d", lab, b*per+i, g, b, i))
			}
		}
		wg.Go(func() {
			for b := range batches {
				var es []LabeledEntry
				for i := range per {
					es = append(es, LabeledEntry{Labels: lab, Time: int64(b*per + i), Line: fmt.Appendf(nil, "line %d %d %d", g, b, i)})
				}
				if err := w.Append(context.Background(), es); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if n := syncs.Load(); n > writers*batches {
		t.Errorf("%d fsyncs for %d appends", n, writers*batches)
	}
	v, err := w.View()
	if err != nil {
		t.Fatal(err)
	}
	got := viewLines(t, v)
	sort.Strings(got)
	sort.Strings(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("view has %d entries, want %d", len(got), len(want))
	}
	if w.Stats().Segments == 0 {
		t.Error("no segment was flushed with a 64 KiB head")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(context.Background(), []LabeledEntry{{Labels: "{a=\"b\"}", Line: []byte("x")}}); !errors.Is(err, ErrWriterClosed) {
		t.Fatalf("append after close: %v", err)
	}
	s, err := OpenSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got = viewLines(t, &View{Parts: s.Parts, Streams: s.Manifest.Streams})
	sort.Strings(got)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("reopened store has %d entries, want %d", len(got), len(want))
	}
}

func TestWriterSyncFailure(t *testing.T) {
	dir := t.TempDir()
	w, err := OpenWriter(dir, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ok := []LabeledEntry{{Labels: `{a="1"}`, Time: 1, Line: []byte("kept")}}
	if err := w.Append(ctx, ok); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("injected eio")
	w.syncFn = func() error { return boom }
	if err := w.Append(ctx, []LabeledEntry{{Labels: `{a="1"}`, Time: 2, Line: []byte("unsynced")}}); !errors.Is(err, boom) {
		t.Fatalf("append with failing fsync: %v", err)
	}
	w.syncFn = w.s.Sync
	if err := w.Append(ctx, ok); !errors.Is(err, boom) {
		t.Fatalf("append after a failed fsync must fail too: %v", err)
	}
	if err := w.Close(); !errors.Is(err, boom) {
		t.Fatalf("close of a failed store: %v", err)
	}
	// The WAL still holds both records (the write itself succeeded); what
	// matters is that the first, acknowledged one is there.
	w2, err := OpenWriter(dir, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := w2.View()
	got := viewLines(t, v)
	if len(got) == 0 || got[0] != `{a="1"}|1|kept` {
		t.Fatalf("after reopen: %q", got)
	}
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
}
