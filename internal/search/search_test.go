package search

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"haystack/internal/store"
)

type entry struct {
	time   int64
	stream uint32
	line   string
}

// build writes entries to a new store with a small head (so several
// segments) and returns its snapshot. unflushed entries stay in the WAL only.
func build(t testing.TB, es []entry, unflushed int) *store.Snapshot {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{HeadBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for s := range 4 {
		st.Stream(fmt.Sprintf(`{s="%d"}`, s))
	}
	flushed := len(es) - unflushed
	for i := 0; i < len(es); i += 7 {
		var b store.Batch
		for _, e := range es[i:min(i+7, len(es))] {
			b.Entries = append(b.Entries, store.Entry{Time: e.time, Stream: e.stream, Line: []byte(e.line)})
		}
		if err := st.Append(&b); err != nil {
			t.Fatal(err)
		}
		if i+7 >= flushed && i < flushed {
			st.Flush()
		}
	}
	// Leave the store open (unflushed data only in the WAL), as after a
	// crash; the snapshot must see it. The test's end releases it.
	if unflushed == 0 {
		st.Close()
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

var words = []string{"error", "ERROR", "warn", "a", "ab", "\n", "\x00", "\xff", "timeout", "id=", "Err", "", " "}

func genLog(r *rand.Rand, n, streams int) []entry {
	es := make([]entry, n)
	tm := make([]int64, streams)
	for i := range es {
		s := r.IntN(streams)
		tm[s] += int64(r.IntN(3)) // equal times happen
		var b bytes.Buffer
		for range r.IntN(8) {
			b.WriteString(words[r.IntN(len(words))])
		}
		es[i] = entry{time: tm[s], stream: uint32(s), line: b.String()}
	}
	return es
}

// oracle: per stream in order, merged by (time, stream); bytes.Contains
// (after ASCII lower-casing when fold) per entry.
func oracle(es []entry, q Query, streams int) []entry {
	lower := func(s string) string {
		b := []byte(s)
		for i, c := range b {
			if 'A' <= c && c <= 'Z' {
				b[i] = c + 32
			}
		}
		return string(b)
	}
	per := make([][]entry, streams)
	for _, e := range es {
		until := q.Until
		if until == 0 {
			until = 1 << 62
		}
		if e.time < q.Since || e.time >= until {
			continue
		}
		ok := bytes.Contains([]byte(e.line), q.Pattern)
		if q.Fold {
			ok = bytes.Contains([]byte(lower(e.line)), []byte(lower(string(q.Pattern))))
		}
		if ok {
			per[e.stream] = append(per[e.stream], e)
		}
	}
	var out []entry
	for {
		best := -1
		for s := range per {
			if len(per[s]) > 0 && (best < 0 || per[s][0].time < per[best][0].time) {
				best = s
			}
		}
		if best < 0 {
			break
		}
		out = append(out, per[best][0])
		per[best] = per[best][1:]
		if q.Limit > 0 && int64(len(out)) == q.Limit {
			break
		}
	}
	return out
}

func collect(t *testing.T, snap *store.Snapshot, q Query) ([]entry, int64) {
	t.Helper()
	var got []entry
	n, err := Run(context.Background(), snap.Parts, q, func(m *Match) error {
		got = append(got, entry{m.Time, m.Stream, string(m.Line)})
		return nil
	}, func(err error) { t.Errorf("block error: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	return got, n
}

func TestRunOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, streams := range []int{1, 3} {
		es := genLog(r, 3000, streams)
		snap := build(t, es, 100)
		if len(snap.Parts) < 3 {
			t.Fatalf("only %d parts", len(snap.Parts))
		}
		if _, ok := snap.Parts[len(snap.Parts)-1].(*store.HeadPart); !ok {
			t.Fatal("no head part: the test does not cover unflushed entries")
		}
		pats := []string{"", "e", "error", "ERROR", "rror\nw", "\x00\xff", "aba", "timeoutid=", "zzz", "r\n"}
		for _, p := range pats {
			for _, fold := range []bool{false, true} {
				for _, w := range []int{1, 3} {
					for _, lim := range []int64{0, 1, 17} {
						q := Query{Pattern: []byte(p), Fold: fold, Workers: w, Limit: lim}
						if lim == 17 {
							q.Since, q.Until = 200, 600
						}
						want := oracle(es, q, streams)
						got, n := collect(t, snap, q)
						if fmt.Sprint(got) != fmt.Sprint(want) || n != int64(len(want)) {
							t.Fatalf("streams %d %q fold %v workers %d limit %d: got %d (n %d), want %d",
								streams, p, fold, w, lim, len(got), n, len(want))
						}
						q.Count = true
						if _, n := collect(t, snap, q); n != int64(len(want)) {
							t.Fatalf("count %q: %d, want %d", p, n, len(want))
						}
					}
				}
			}
		}
	}
}

// TestSpanRejected: a hit spanning two entries is no match, and the scan
// still finds a later real match in the next entry.
func TestSpanRejected(t *testing.T) {
	es := []entry{{1, 0, "xxab"}, {2, 0, "cab"}, {3, 0, ""}, {4, 0, "abc"}, {5, 0, "ab"}}
	snap := build(t, es, 0)
	got, _ := collect(t, snap, Query{Pattern: []byte("abc")})
	if fmt.Sprint(got) != fmt.Sprint([]entry{{4, 0, "abc"}}) {
		t.Fatalf("got %v", got)
	}
	got, _ = collect(t, snap, Query{Pattern: []byte("b")})
	if len(got) != 4 {
		t.Fatalf("got %v", got)
	}
}

func TestCancel(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	snap := build(t, genLog(r, 2000, 1), 0)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err := Run(ctx, snap.Parts, Query{}, func(*Match) error {
		n++
		if n == 10 {
			cancel()
		}
		return nil
	}, func(error) {})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v after %d matches", err, n)
	}
}

// TestDamagedSegment: a flipped bit in one segment is reported with its
// file and block, and the other segments' matches still come out.
func TestDamagedSegment(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	es := genLog(r, 3000, 1)
	snap := build(t, es, 0)
	seg := filepath.Join(snap.Dir, snap.Parts[0].Name())
	snap.Close()
	data, _ := os.ReadFile(seg)
	data[30] ^= 4
	os.WriteFile(seg, data, 0o644)
	snap, err := store.OpenSnapshot(snap.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	var errs []error
	// Not a count: counting every entry needs no decoding and would not
	// notice the damage (the count comes from the checksummed index).
	n, err := Run(context.Background(), snap.Parts, Query{}, func(*Match) error { return nil }, func(e error) { errs = append(errs, e) })
	if err != nil || len(errs) != 1 {
		t.Fatalf("err %v, block errors %v", err, errs)
	}
	if msg := errs[0].Error(); !bytes.Contains([]byte(msg), []byte(filepath.Base(seg))) || !bytes.Contains([]byte(msg), []byte("block 0")) {
		t.Fatalf("error does not name file and block: %s", msg)
	}
	lost := int64(snap.Parts[0].BlockMeta(0).Entries)
	if n != int64(len(es))-lost {
		t.Fatalf("count %d, want %d", n, int64(len(es))-lost)
	}
}

// TestAllPruned: when the skip index rules out every block, Run and Hist
// start no worker and still report the counts: nothing matched, every
// block pruned by the index, none decoded. The same query without the
// index decodes every block and finds nothing either.
func TestAllPruned(t *testing.T) {
	var es []entry
	for i := range 500 {
		es = append(es, entry{time: int64(i) * 1e9, stream: uint32(i % 4), line: fmt.Sprintf("line %d of the corpus, status=%d", i, 200+i%5)})
	}
	snap := build(t, es, 0)
	for _, noIndex := range []bool{false, true} {
		for _, count := range []bool{false, true} {
			var st Stats
			q := Query{Pattern: []byte("needle-absent-7c3e9a"), Count: count, NoIndex: noIndex, Stats: &st}
			n, err := Run(context.Background(), snap.Parts, q, func(m *Match) error {
				t.Errorf("emitted %q", m.Line)
				return nil
			}, func(err error) { t.Error(err) })
			if err != nil || n != 0 {
				t.Fatalf("noIndex=%v count=%v: Run = %d, %v", noIndex, count, n, err)
			}
			if st.Blocks == 0 {
				t.Fatal("no blocks")
			}
			if !noIndex && (st.PrunedIndex != st.Blocks || st.Decoded != 0) {
				t.Fatalf("count=%v: stats %+v, want every block pruned by the index", count, st)
			}
			if noIndex && (st.PrunedIndex != 0 || st.Decoded < st.Blocks) {
				t.Fatalf("count=%v: brute force stats %+v", count, st)
			}
		}
		var st Stats
		q := Query{Pattern: []byte("needle-absent-7c3e9a"), NoIndex: noIndex, Stats: &st}
		counts, err := Hist(context.Background(), snap.Parts, q, Buckets{Start: 0, Width: 60e9, N: 9}, func(err error) { t.Error(err) })
		if err != nil || len(counts) != 9 {
			t.Fatalf("Hist = %v, %v", counts, err)
		}
		for _, c := range counts {
			if c != 0 {
				t.Fatalf("Hist = %v", counts)
			}
		}
		if !noIndex && st.PrunedIndex != st.Blocks {
			t.Fatalf("Hist stats %+v", st)
		}
	}
	// A cancelled context is still reported when there is nothing to do.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, snap.Parts, Query{Pattern: []byte("needle-absent-7c3e9a"), Count: true}, nil, func(error) {}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Run: %v", err)
	}
}
