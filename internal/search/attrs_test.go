package search

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"haystack/internal/attrs"
	"haystack/internal/query"
	"haystack/internal/segment"
	"haystack/internal/store"
	"haystack/internal/testexec"
	"haystack/internal/testseed"
)

// Structured metadata (Match.Attrs) through every path of Run: entries
// with and without metadata are appended through store.Writer.Append and
// searched in the head, in segments, after compaction and after a kill
// and WAL replay, in every order, with limits, context and the merges of
// many streams that copy hits (compactHits, contextCopy, cursor.detach);
// each delivered entry must carry exactly the metadata it was appended
// with.

// aEntry is an appended entry: its stream is labels {s="<stream>"}.
type aEntry struct {
	time   int64
	stream int
	line   string
	attrs  string
}

// genMeta returns random metadata: none half the time, else a few pairs
// with empty, binary (invalid UTF-8) or OTel-like values; now and then
// the limits (MaxPairs pairs, or close to MaxBytes).
func genMeta(r *rand.Rand) string {
	var ps []attrs.Pair
	switch x := r.IntN(60); {
	case x < 30:
		return ""
	case x == 30:
		for i := range attrs.MaxPairs {
			ps = append(ps, attrs.Pair{Name: fmt.Sprintf("k%03d", i), Value: strings.Repeat("v", r.IntN(3))})
		}
	case x == 31:
		ps = []attrs.Pair{{Name: "big", Value: strings.Repeat("\xfe", attrs.MaxBytes-16-r.IntN(64))}}
	default:
		names := []string{"trace_id", "span_id", "severity", "a", "_x", "Z9"}
		for range 1 + r.IntN(3) {
			var v string
			switch r.IntN(4) {
			case 0:
				v = ""
			case 1:
				v = string([]byte{0xff, 0x00, byte(r.IntN(256)), '\n'})
			case 2:
				v = fmt.Sprintf("%016x%016x", r.Uint64(), r.Uint64())
			default:
				v = "v" + strconv.Itoa(r.IntN(100))
			}
			ps = append(ps, attrs.Pair{Name: names[r.IntN(len(names))], Value: v})
		}
	}
	b, err := attrs.Encode(nil, ps)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// genMetaLog makes n entries over streams streams, times out of order
// within a window (so that time-ordered runs hold and copy blocks),
// lines unique (their index first) and some holding "err".
func genMetaLog(r *rand.Rand, n, streams int) []aEntry {
	hi := make([]int64, streams)
	es := make([]aEntry, n)
	ws := []string{"err", "ok", "warn", "x"}
	for i := range es {
		s := r.IntN(streams)
		tm := hi[s] + 1 - int64(r.IntN(8))
		hi[s] = max(hi[s], tm)
		es[i] = aEntry{time: 1000 + tm, stream: s, line: fmt.Sprintf("%d %s %s", i, ws[r.IntN(len(ws))], strings.Repeat("y", r.IntN(30))), attrs: genMeta(r)}
	}
	return es
}

func metaLabels(s int) string { return fmt.Sprintf(`{s="%d"}`, s) }

// appendMeta appends es through w in batches of random sizes.
func appendMeta(t testing.TB, r *rand.Rand, w *store.Writer, es []aEntry) {
	t.Helper()
	for i := 0; i < len(es); {
		n := min(1+r.IntN(16), len(es)-i)
		batch := make([]store.LabeledEntry, n)
		for j, e := range es[i : i+n] {
			batch[j] = store.LabeledEntry{Labels: metaLabels(e.stream), Time: e.time, Line: []byte(e.line), Attrs: []byte(e.attrs)}
		}
		if err := w.Append(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
		i += n
	}
}

// metaOracle returns the entries of es that contain pat, in q's order
// (Oldest, Newest or Stored), cut at limit (0: none). ids maps a stream
// to its id in the store (order of first appearance).
func metaOracle(es []aEntry, ids map[int]uint32, pat string, order Order, limit int) []aEntry {
	return metaOracleFn(es, ids, func(e aEntry) bool { return strings.Contains(e.line, pat) }, order, limit)
}

// metaOracleFn is metaOracle for the entries keep accepts.
func metaOracleFn(es []aEntry, ids map[int]uint32, keep func(aEntry) bool, order Order, limit int) []aEntry {
	type pos struct {
		e aEntry
		i int
	}
	var all []pos
	for i, e := range es {
		if keep(e) {
			all = append(all, pos{e, i})
		}
	}
	var out []aEntry
	if order == Stored {
		// Each stream in ingestion order, merged by the time of each
		// stream's next entry, ties to the lower stream id.
		per := map[uint32][]aEntry{}
		for _, p := range all {
			per[ids[p.e.stream]] = append(per[ids[p.e.stream]], p.e)
		}
		for {
			best, ok := uint32(0), false
			for id, q := range per {
				if len(q) > 0 && (!ok || q[0].time < per[best][0].time || q[0].time == per[best][0].time && id < best) {
					best, ok = id, true
				}
			}
			if !ok {
				break
			}
			out = append(out, per[best][0])
			per[best] = per[best][1:]
		}
	} else {
		slices.SortStableFunc(all, func(a, b pos) int {
			return cmp.Or(cmp.Compare(a.e.time, b.e.time), cmp.Compare(ids[a.e.stream], ids[b.e.stream]), cmp.Compare(a.i, b.i))
		})
		if order == Newest {
			slices.Reverse(all)
		}
		for _, p := range all {
			out = append(out, p.e)
		}
	}
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// streamIDs numbers es's streams in order of first appearance, as a new
// store does.
func streamIDs(es []aEntry) map[int]uint32 {
	ids := map[int]uint32{}
	for _, e := range es {
		if _, ok := ids[e.stream]; !ok {
			ids[e.stream] = uint32(len(ids))
		}
	}
	return ids
}

// got is a delivered match, copied.
type got struct {
	time          int64
	stream        uint32
	line, attrs   string
	context, grpS bool
}

func runMeta(t *testing.T, parts []store.Part, q Query) []got {
	t.Helper()
	var out []got
	_, err := Run(context.Background(), parts, q, func(m *Match) error {
		out = append(out, got{m.Time, m.Stream, string(m.Line), string(m.Attrs), m.Context, m.GroupStart})
		return nil
	}, func(err error) { t.Errorf("block error: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// metaQueries are the queries checked: every order, with and without a
// pattern and a limit, one worker (so that a merge of the streams copies
// hits: more than 2×workers streams) and the default, and with context.
func metaQueries() []Query {
	var qs []Query
	for _, order := range []Order{Oldest, Newest, Stored} {
		for _, pat := range []string{"", "err", "span_id"} { // span_id: in metadata only, never matched
			for _, limit := range []int64{0, 1, 7} {
				for _, workers := range []int{1, 0} {
					qs = append(qs, Query{Pattern: []byte(pat), Order: order, Limit: limit, Workers: workers})
				}
			}
		}
		qs = append(qs,
			Query{Pattern: []byte("err"), Order: order, Before: 1, After: 2, Workers: 1},
			Query{Pattern: []byte("warn"), Order: order, Before: 3, Limit: 5},
			Query{Pattern: []byte("ok"), Order: order, After: 1, Grouped: true, Workers: 1},
		)
	}
	return qs
}

// checkMeta runs every query over parts: the delivered entries (context
// ones included) must be those plain (a twin store of the same entries
// without metadata) delivers, in the same order, each with exactly the
// metadata it was appended with; without context, also the oracle's.
func checkMeta(t *testing.T, what string, parts, plain []store.Part, es []aEntry) {
	t.Helper()
	ids := streamIDs(es)
	byLine := map[string]string{}
	for _, e := range es {
		byLine[e.line] = e.attrs
	}
	var compacted int64
	for _, q := range metaQueries() {
		var st Stats
		q.Stats = &st
		res := runMeta(t, parts, q)
		compacted += st.Compacted
		q.Stats = nil
		twin := runMeta(t, plain, q)
		name := fmt.Sprintf("%s: %q order %d limit %d workers %d context -B%d -A%d", what, q.Pattern, q.Order, q.Limit, q.Workers, q.Before, q.After)
		if len(res) != len(twin) {
			t.Fatalf("%s: %d entries, %d without metadata", name, len(res), len(twin))
		}
		for i, g := range res {
			w := twin[i]
			w.attrs = byLine[w.line]
			if g != w {
				t.Fatalf("%s: entry %d: got %d %d %q attrs %q ctx %v, want %d %d %q attrs %q ctx %v", name, i, g.time, g.stream, g.line, g.attrs, g.context, w.time, w.stream, w.line, w.attrs, w.context)
			}
		}
		if q.Before > 0 || q.After > 0 || q.Grouped {
			continue
		}
		want := metaOracle(es, ids, string(q.Pattern), q.Order, int(q.Limit))
		if len(res) != len(want) {
			t.Fatalf("%s: %d entries, the oracle %d", name, len(res), len(want))
		}
		for i, g := range res {
			w := want[i]
			if g.time != w.time || g.stream != ids[w.stream] || g.line != w.line || g.attrs != w.attrs {
				t.Fatalf("%s: entry %d: got %d %d %q attrs %q, want %d %d %q attrs %q", name, i, g.time, g.stream, g.line, g.attrs, w.time, ids[w.stream], w.line, w.attrs)
			}
		}
	}
	if compacted == 0 {
		t.Fatalf("%s: no search copied hits (compactHits, contextCopy)", what)
	}

	// A LogQL label filter on metadata sees each entry's own (the
	// filter's confirmation, Plan.MatchEntryAttrs), in every order.
	pq, err := query.Parse(`{s=~".+"} | a=~"v.+"`)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := query.Compile(pq)
	if err != nil {
		t.Fatal(err)
	}
	keep := func(e aEntry) bool {
		v, ok := attrs.Get([]byte(e.attrs), "a")
		return ok && len(v) >= 2 && v[0] == 'v' && utf8.Valid(v)
	}
	labels := func(id uint32) string {
		for s, x := range ids {
			if x == id {
				return metaLabels(s)
			}
		}
		return ""
	}
	for _, order := range []Order{Oldest, Newest, Stored} {
		for _, limit := range []int64{0, 3} {
			res := runMeta(t, parts, Query{Plan: plan, Labels: labels, Order: order, Limit: limit, Workers: 1})
			want := metaOracleFn(es, ids, keep, order, int(limit))
			if len(res) != len(want) || len(want) == 0 && limit == 0 {
				t.Fatalf("%s: label filter on metadata, order %d limit %d: %d entries, want %d", what, order, limit, len(res), len(want))
			}
			for i, g := range res {
				w := want[i]
				if g.time != w.time || g.stream != ids[w.stream] || g.line != w.line || g.attrs != w.attrs {
					t.Fatalf("%s: label filter on metadata, order %d: entry %d: got %q attrs %q, want %q attrs %q", what, order, i, g.line, g.attrs, w.line, w.attrs)
				}
			}
		}
	}
}

// TestRunAttrs appends entries with and without metadata to a store and,
// with the same entries without metadata, to a twin; and searches both
// in the head, with some in segments, all in segments, after
// compaction, with more in the head, and from a snapshot after the
// writer was abandoned (its head replayed from the WAL).
func TestRunAttrs(t *testing.T) {
	seed := testseed.Seed(t, "HAY_SEARCH_ATTRS_SEED")
	t.Logf("seed %d (HAY_SEARCH_ATTRS_SEED=%d repeats it)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 5))
	const streams = 6
	es := genMetaLog(r, 900, streams)
	bare := slices.Clone(es)
	for i := range bare {
		bare[i].attrs = ""
	}
	opt := store.WriterOptions{Options: store.Options{Segment: segment.Options{BlockSize: 2 << 10}}}
	dirs := [2]string{t.TempDir(), t.TempDir()}
	var ws [2]*store.Writer
	for i, d := range dirs {
		w, err := store.OpenWriter(d, opt)
		if err != nil {
			t.Fatal(err)
		}
		ws[i] = w
	}
	defer func() {
		for _, w := range ws {
			w.Close()
		}
	}()
	add := func(from, to int) {
		appendMeta(t, r, ws[0], es[from:to])
		appendMeta(t, r, ws[1], bare[from:to])
	}
	check := func(what string, n int) {
		t.Helper()
		var parts [2][]store.Part
		for i, w := range ws {
			v, err := w.View()
			if err != nil {
				t.Fatal(err)
			}
			parts[i] = v.Parts
		}
		checkMeta(t, what, parts[0], parts[1], es[:n])
	}
	flush := func() {
		for _, w := range ws {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	add(0, 300)
	check("head", 300)
	flush()
	add(300, 500)
	check("segment and head", 500)
	flush()
	add(500, 700)
	flush()
	check("segments", 700)
	for _, w := range ws {
		if _, err := w.Compact(context.Background(), store.CompactOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	check("compacted", 700)
	add(700, 900)
	check("compacted and head", 900)
	// The writers are left open (their heads only in the WAL, as after a
	// crash); snapshots replay the WAL.
	var snaps [2]*store.Snapshot
	for i, d := range dirs {
		s, err := store.OpenSnapshot(d)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		snaps[i] = s
	}
	checkMeta(t, "snapshot", snaps[0].Parts, snaps[1].Parts, es)
}

// metaKillEnv, when set, makes TestRunAttrsKill the child: a Writer on
// the directory it names appending genMetaLog's entries for the seed in
// HAY_SEARCH_ATTRS_KILL_SEED, in batches, printing "ack N" (N entries
// acknowledged) after each, until it is killed.
const metaKillEnv = "HAY_SEARCH_ATTRS_KILL_DIR"

const metaKillEntries = 8000

func metaKillChild(dir string) {
	seed, _ := strconv.ParseUint(os.Getenv("HAY_SEARCH_ATTRS_KILL_SEED"), 10, 64)
	es := genMetaLog(rand.New(rand.NewPCG(seed, 6)), metaKillEntries, 4)
	w, err := store.OpenWriter(dir, store.WriterOptions{Options: store.Options{HeadBytes: 256 << 10, Segment: segment.Options{BlockSize: 8 << 10}}})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	out := bufio.NewWriter(os.Stdout)
	r := rand.New(rand.NewPCG(seed, 7))
	for i := 0; i < len(es); {
		n := min(1+r.IntN(30), len(es)-i)
		batch := make([]store.LabeledEntry, n)
		for j, e := range es[i : i+n] {
			batch[j] = store.LabeledEntry{Labels: metaLabels(e.stream), Time: e.time, Line: []byte(e.line), Attrs: []byte(e.attrs)}
		}
		if err := w.Append(context.Background(), batch); err != nil {
			fmt.Fprintln(out, "error", err)
			out.Flush()
			os.Exit(1)
		}
		i += n
		fmt.Fprintln(out, "ack", i)
		out.Flush()
	}
	fmt.Fprintln(out, "done")
	out.Flush()
	select {} // killed
}

// TestRunAttrsKill kills (SIGKILL) a writer appending entries with and
// without metadata at a random moment (flushes run all along), then
// searches the directory, the WAL replayed: every acknowledged entry is
// there with its metadata, and what is there is a prefix of what was
// appended (Oldest and Newest against the oracle; a snapshot, then a
// reopened writer).
func TestRunAttrsKill(t *testing.T) {
	if dir := os.Getenv(metaKillEnv); dir != "" {
		metaKillChild(dir)
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	seed := testseed.Seed(t, "HAY_SEARCH_ATTRS_KILL_SEED")
	t.Logf("seed %d (HAY_SEARCH_ATTRS_KILL_SEED=%d repeats the entries and kill time, not the scheduling)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 8))
	es := genMetaLog(rand.New(rand.NewPCG(seed, 6)), metaKillEntries, 4)
	dir := t.TempDir()
	cmd := testexec.Command(exe, "-test.run=^TestRunAttrsKill$")
	cmd.Env = append(os.Environ(), metaKillEnv+"="+dir, "HAY_SEARCH_ATTRS_KILL_SEED="+strconv.FormatUint(seed, 10))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	acked := 0
	want := 50 + r.IntN(400)
	for seen := 0; seen < want && sc.Scan(); seen++ {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || f[0] != "ack" {
			t.Fatalf("child said %q", sc.Text())
		}
		acked, _ = strconv.Atoi(f[1])
	}
	time.Sleep(time.Duration(r.IntN(2000)) * time.Microsecond)
	cmd.Process.Signal(syscall.SIGKILL)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "ack" {
			acked, _ = strconv.Atoi(f[1])
		}
	}
	cmd.Wait()
	if acked < 50 {
		t.Fatalf("only %d entries acknowledged", acked)
	}
	check := func(what string, parts []store.Part) {
		t.Helper()
		// How many entries survived: a prefix, at least the
		// acknowledged ones.
		all := runMeta(t, parts, Query{Order: Stored})
		n := len(all)
		if n < acked || n > len(es) {
			t.Fatalf("%s: %d entries, %d acknowledged", what, n, acked)
		}
		ids := streamIDs(es[:n])
		for _, order := range []Order{Oldest, Newest} {
			for _, pat := range []string{"", "err"} {
				res := runMeta(t, parts, Query{Pattern: []byte(pat), Order: order, Workers: 1})
				want := metaOracle(es[:n], ids, pat, order, 0)
				if len(res) != len(want) {
					t.Fatalf("%s: %q order %d: %d entries, want %d", what, pat, order, len(res), len(want))
				}
				for i, g := range res {
					w := want[i]
					if g.time != w.time || g.stream != ids[w.stream] || g.line != w.line || g.attrs != w.attrs {
						t.Fatalf("%s: %q order %d: entry %d: got %d %d %q attrs %q, want %d %d %q attrs %q", what, pat, order, i, g.time, g.stream, g.line, g.attrs, w.time, ids[w.stream], w.line, w.attrs)
					}
				}
			}
		}
		t.Logf("%s: %d entries (%d acknowledged), %d parts", what, n, acked, len(parts))
	}
	snap, err := store.OpenSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	check("snapshot", snap.Parts)
	snap.Close()
	w, err := store.OpenWriter(dir, store.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	v, err := w.View()
	if err != nil {
		t.Fatal(err)
	}
	check("reopened", v.Parts)
}

// TestPeakCopiedCountsAttrs: the copies a time-ordered run keeps of its
// hits (cursor.detach, compactHits) count each hit's metadata in
// Stats.PeakCopied. Every entry has a 180-byte line and 68 bytes of
// metadata, so each copied hit costs 180+68+20 bytes; every block begins
// with an entry from long ago, so an Oldest run holds copies of them all
// (resetEntries).
func TestPeakCopiedCountsAttrs(t *testing.T) {
	meta, err := attrs.Encode(nil, []attrs.Pair{{Name: "trace_id", Value: strings.Repeat("a", 32)}, {Name: "span_id", Value: strings.Repeat("b", 16)}})
	if err != nil || len(meta) != 68 {
		t.Fatalf("metadata of %d bytes: %v", len(meta), err)
	}
	const lineLen, hit = 180, 180 + 68 + 20
	w, err := store.OpenWriter(t.TempDir(), store.WriterOptions{Options: store.Options{Segment: segment.Options{BlockSize: 4 << 10}}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var batch []store.LabeledEntry
	for i, e := range resetEntries(3000, 1, 1, false) {
		line := fmt.Sprintf("%06d error %s", i, strings.Repeat("z", lineLen-13))
		batch = append(batch, store.LabeledEntry{Labels: `{s="0"}`, Time: e.time, Line: []byte(line), Attrs: meta})
	}
	if err := w.Append(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	for _, flush := range []bool{false, true} {
		if flush {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		v, err := w.View()
		if err != nil {
			t.Fatal(err)
		}
		var st Stats
		res := runMeta(t, v.Parts, Query{Pattern: []byte("error"), Workers: 1, Stats: &st})
		if len(res) != 3000 || res[0].attrs != string(meta) {
			t.Fatalf("flushed %v: %d entries", flush, len(res))
		}
		if st.PeakCopied == 0 || st.PeakCopied%hit != 0 {
			t.Fatalf("flushed %v: peak copied %d bytes, not a multiple of %d (a hit's line, metadata and 20 bytes)", flush, st.PeakCopied, hit)
		}
		t.Logf("flushed %v: peak copied %d hits", flush, st.PeakCopied/hit)
	}
}
