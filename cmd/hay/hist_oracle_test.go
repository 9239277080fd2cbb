package main

// A differential test of `hay search --hist` against an oracle computed
// from the ingested entries: bucket i holds start+i*w <= t < start+(i+1)*w
// (search.Buckets), start a multiple of w (UTC), at most 60 buckets, w the
// smallest of 1s 5s 10s 30s 1m 5m 10m 30m 1h 3h 6h 12h 1d 7d 30d (then
// whole multiples of 30d) that covers the range in 60 buckets
// (search.ChooseBuckets), --since inclusive and --until exclusive
// (`hay search --help`). The range the histogram covers comes from the
// block index (search.TimeRange), so it is known exactly only when every
// entry matches and --since/--until, when given, fall on an entry's time
// (since) or just after one (until): then the width is checked exactly,
// otherwise only the invariants above and the counts.
//
// HAY_HIST_SEED=N reruns one seed.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"haystack/internal/store"
)

type hoEntry struct {
	t      int64
	source string
	line   string
}

// hoWidths are ChooseBuckets' widths as `hay search --help` and
// internal/search document them.
var hoWidths = []int64{1e9, 5e9, 10e9, 30e9, 60e9, 300e9, 600e9, 1800e9, 3600e9, 3 * 3600e9, 6 * 3600e9, 12 * 3600e9, 86400e9, 7 * 86400e9, 30 * 86400e9}

func hoFloor(t, w int64) int64 {
	b := t / w * w
	if b > t {
		b -= w
	}
	return b
}

// hoWantWidth is the width the documented rule gives for lo..hi.
func hoWantWidth(lo, hi int64) int64 {
	n := func(w int64) int64 { return (hi-hoFloor(lo, w))/w + 1 }
	for _, w := range hoWidths {
		if n(w) <= 60 {
			return w
		}
	}
	w := int64(30 * 86400e9)
	for n(w) > 60 {
		w += 30 * 86400e9
	}
	return w
}

func hoTime(t int64) string { return time.Unix(0, t).UTC().Format(time.RFC3339Nano) }

// hoScenario draws a data set around a scale: entries on bucket
// boundaries of every width, equal times, a few streams.
func hoScenario(r *rand.Rand, kind int) []hoEntry {
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var span int64
	switch kind {
	case 0: // a few seconds, millisecond detail
		span = int64(1+r.IntN(5)) * 1e9
	case 1: // minutes
		span = int64(1+r.IntN(120)) * 60e9
	case 2: // days
		span = int64(1+r.IntN(40)) * 86400e9
	case 3: // the whole range ingest accepts: 1970 .. 2199
		base = 0
		span = time.Date(2199, 12, 31, 0, 0, 0, 0, time.UTC).UnixNano()
	case 4: // one instant: a single bucket
		span = 0
	case 6: // before 1970, up to two centuries (a store `hay serve` wrote)
		base = time.Date(1800+r.IntN(150), 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
		span = r.Int64N(200 * 365 * 86400e9)
	case 7: // across 1970-01-01T00:00:00Z (a store `hay serve` wrote)
		base = -int64(1+r.IntN(7200)) * 1e9
		span = -2*base + int64(r.IntN(3)-1)
	case 5: // right around a 60-bucket edge of a width: 59..61 widths
		w := hoWidths[r.IntN(len(hoWidths))]
		span = w*int64(58+r.IntN(4)) + int64(r.IntN(3)-1)
		base = hoFloor(base, w) + int64(r.IntN(2))*w/2
	}
	n := 5 + r.IntN(60)
	es := make([]hoEntry, 0, n+4)
	add := func(t int64) {
		src := []string{"a.log", "b.log", "c.log"}[r.IntN(3)]
		word := []string{"ok", "err", "warn"}[r.IntN(3)]
		es = append(es, hoEntry{t: t, source: src, line: fmt.Sprintf("%s m %s %d", hoTime(t), word, len(es))})
	}
	add(base)
	add(base + span) // the ends are exact
	for range n {
		var t int64
		switch r.IntN(4) {
		case 0: // on a boundary of some width
			w := hoWidths[r.IntN(len(hoWidths))]
			t = base + hoFloor(r.Int64N(span+1), w)
			if t < base {
				t = base
			}
		case 1: // one ns either side of a boundary
			w := hoWidths[r.IntN(len(hoWidths))]
			t = hoFloor(base+r.Int64N(span+1), w) + int64(r.IntN(3)-1)
			t = min(max(t, base), base+span)
		case 2: // equal to an earlier entry
			t = es[r.IntN(len(es))].t
		default:
			t = base + r.Int64N(span+1)
		}
		add(t)
	}
	return es
}

type hoBucket struct {
	Start string  `json:"start"`
	Width float64 `json:"width_seconds"`
	Count int64   `json:"count"`
}

var hoTotalLine = regexp.MustCompile(`^total ([0-9]+) in ([0-9]+) buckets of (\S+) \(UTC\)$`)

func TestHistOracle(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	if v := os.Getenv("HAY_HIST_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("HAY_HIST_SEED=%q", v)
		}
		seeds = []uint64{s}
	}
	cases := 0
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("rerun: HAY_HIST_SEED=%d go test -run TestHistOracle ./cmd/hay", seed)
				}
			}()
			cases += hoRun(t, seed)
		})
	}
	t.Logf("%d searches compared", cases)
}

func hoRun(t *testing.T, seed uint64) int {
	r := rand.New(rand.NewPCG(seed, 20261130))
	kind := int(seed % 8)
	es := hoScenario(r, kind)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	// One file per stream; odd seeds write each file in time order,
	// even ones in draw order (out of order, as logs merged by hand are).
	slices.SortStableFunc(es, func(a, b hoEntry) int { return int(min(max(a.t-b.t, -1), 1)) })
	written := es
	if seed%2 == 0 {
		written = slices.Clone(es)
		r.Shuffle(len(written), func(i, j int) { written[i], written[j] = written[j], written[i] })
	}
	files := map[string]*strings.Builder{}
	for _, e := range written {
		if files[e.source] == nil {
			files[e.source] = &strings.Builder{}
		}
		files[e.source].WriteString(e.line + "\n")
	}
	if kind >= 6 {
		// Times ingest cannot read (before 1970): written to the store
		// directly, as the server's push does.
		w, err := store.OpenWriter(data, store.WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range written {
			if err := w.Append(context.Background(), []store.LabeledEntry{{Labels: fmt.Sprintf(`{source=%q}`, e.source), Time: e.t, Line: []byte(e.line)}}); err != nil {
				t.Fatal(err)
			}
			if i%16 == 15 {
				if err := w.Flush(); err != nil { // several segments
					t.Fatal(err)
				}
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		files = nil
	}
	for _, src := range slices.Sorted(func(yield func(string) bool) {
		for k := range files {
			if !yield(k) {
				return
			}
		}
	}) {
		p := filepath.Join(dir, src)
		if err := os.WriteFile(p, []byte(files[src].String()), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, code := hayInProcess(t, "ingest", "--data", data, p); code != 0 {
			t.Fatalf("ingest %s: exit %d: %s", src, code, out)
		}
	}
	// The times ingest read must be the ones written.
	got, code := hayInProcess(t, "search", "--data", data, "--json", " m ")
	if code != 0 {
		t.Fatalf("search: exit %d", code)
	}
	var gotTimes []string
	for _, l := range strings.Split(strings.TrimSpace(string(got)), "\n") {
		var v struct {
			Time string `json:"time"`
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		gotTimes = append(gotTimes, v.Time)
	}
	var wantTimes []string
	for _, e := range es {
		wantTimes = append(wantTimes, hoTime(e.t))
	}
	slices.Sort(gotTimes) // both sides alike: compared as multisets
	slices.Sort(wantTimes)
	if !slices.Equal(gotTimes, wantTimes) {
		t.Fatalf("ingested times %v, want %v", gotTimes, wantTimes)
	}

	n := 0
	for range 14 {
		n++
		hoQuery(t, r, data, es)
	}
	return n
}

// hoQuery runs one --hist search (JSON and text) and compares it.
func hoQuery(t *testing.T, r *rand.Rand, data string, es []hoEntry) {
	t.Helper()
	lo, hi := es[0].t, es[len(es)-1].t
	var args, pat []string // PATTERN goes last: flags stop at the first argument
	match := func(e hoEntry) bool { return true }
	all := true
	switch r.IntN(4) {
	case 0:
		pat = []string{" m "}
	case 1:
		pat = []string{"err"}
		match = func(e hoEntry) bool { return strings.Contains(e.line, "err") }
		all = false
	case 2:
		args = append(args, "--query", `{source="b.log"}`)
		match = func(e hoEntry) bool { return e.source == "b.log" }
		all = false
	default:
		args = append(args, "-v", "warn")
		match = func(e hoEntry) bool { return !strings.Contains(e.line, "warn") }
		all = false
	}
	since, until := int64(-1<<63), int64(1<<63-1)
	exact := all
	pick := func() int64 {
		switch r.IntN(4) {
		case 0:
			return es[r.IntN(len(es))].t
		case 1:
			return es[r.IntN(len(es))].t + int64(r.IntN(3)-1)
		case 2:
			return 0 // 1970-01-01T00:00:00Z: a bound, not "no bound"
		default:
			if hi == lo {
				return lo + r.Int64N(3) - 1
			}
			return lo + r.Int64N(hi-lo+1)
		}
	}
	if r.IntN(2) == 0 {
		since = pick()
		args = append(args, "--since", hoTime(since))
		exact = exact && slices.ContainsFunc(es, func(e hoEntry) bool { return e.t == since })
	}
	if r.IntN(2) == 0 {
		until = pick()
		args = append(args, "--until", hoTime(until))
		exact = exact && slices.ContainsFunc(es, func(e hoEntry) bool { return e.t == until-1 })
	}
	var ts []int64
	for _, e := range es {
		if e.t >= since && e.t < until && match(e) {
			ts = append(ts, e.t)
		}
	}
	args = append(args, pat...)
	desc := fmt.Sprintf("hay search --data D --hist %s", diffQuoteArgs(args))

	jargs := append([]string{"search", "--data", data, "--hist", "--json"}, args...)
	out, code := hayInProcess(t, jargs...)
	wantCode := 0
	if len(ts) == 0 {
		wantCode = 1
	}
	if code != wantCode {
		t.Fatalf("%s --json: exit %d, want %d (%d matches)\n%s", desc, code, wantCode, len(ts), out)
	}
	var bs []hoBucket
	for _, l := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		if l == "" {
			continue
		}
		var b hoBucket
		if err := json.Unmarshal([]byte(l), &b); err != nil {
			t.Fatalf("%s --json: %q: %v", desc, l, err)
		}
		bs = append(bs, b)
	}
	if len(ts) == 0 {
		for _, b := range bs {
			if b.Count != 0 {
				t.Fatalf("%s --json: no match, but bucket %+v", desc, b)
			}
		}
		return
	}
	if len(bs) == 0 || len(bs) > 60 {
		t.Fatalf("%s --json: %d buckets\n%s", desc, len(bs), out)
	}
	starts := make([]int64, len(bs))
	for i, b := range bs {
		tt, err := time.Parse(time.RFC3339Nano, b.Start)
		if err != nil {
			t.Fatalf("%s --json: %v", desc, err)
		}
		starts[i] = tt.UnixNano()
	}
	w := int64(bs[0].Width * 1e9)
	if float64(w)/1e9 != bs[0].Width || w <= 0 {
		t.Fatalf("%s --json: width %v s", desc, bs[0].Width)
	}
	if !slices.Contains(hoWidths, w) && w%(30*86400e9) != 0 {
		t.Fatalf("%s --json: width %v is not a documented one", desc, time.Duration(w))
	}
	for i := range bs {
		if bs[i].Width != bs[0].Width || starts[i] != starts[0]+int64(i)*w {
			t.Fatalf("%s --json: bucket %d %+v not contiguous with width %v from %s", desc, i, bs[i], time.Duration(w), bs[0].Start)
		}
	}
	if hoFloor(starts[0], w) != starts[0] {
		t.Fatalf("%s --json: first bucket %s not aligned to %v", desc, bs[0].Start, time.Duration(w))
	}
	wantCounts := make([]int64, len(bs))
	for _, x := range ts {
		i := (x - starts[0]) / w
		if x < starts[0] || i >= int64(len(bs)) {
			t.Fatalf("%s --json: match at %s outside the %d buckets of %v from %s", desc, hoTime(x), len(bs), time.Duration(w), bs[0].Start)
		}
		wantCounts[i]++
	}
	for i, b := range bs {
		if b.Count != wantCounts[i] {
			t.Fatalf("%s --json: bucket %s: %d, want %d (times %v)", desc, b.Start, b.Count, wantCounts[i], hoTimes(ts))
		}
	}
	if exact {
		wl, wh := max(lo, since), min(hi, until-1)
		if ww := hoWantWidth(wl, wh); ww != w {
			t.Fatalf("%s --json: width %v, want %v for %s .. %s", desc, time.Duration(w), time.Duration(ww), hoTime(wl), hoTime(wh))
		}
		if wn := (wh-hoFloor(wl, w))/w + 1; wn != int64(len(bs)) || starts[0] != hoFloor(wl, w) {
			t.Fatalf("%s --json: %d buckets from %s, want %d from %s", desc, len(bs), bs[0].Start, wn, hoTime(hoFloor(wl, w)))
		}
	}

	// The text form: the same buckets, a total line.
	targs := append([]string{"search", "--data", data, "--hist"}, args...)
	out, code = hayInProcess(t, targs...)
	if code != 0 {
		t.Fatalf("%s: exit %d\n%s", desc, code, out)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	m := hoTotalLine.FindStringSubmatch(lines[len(lines)-1])
	if m == nil || m[1] != strconv.Itoa(len(ts)) || m[2] != strconv.Itoa(len(bs)) || m[3] != time.Duration(w).String() {
		t.Fatalf("%s: last line %q, want total %d in %d buckets of %v", desc, lines[len(lines)-1], len(ts), len(bs), time.Duration(w))
	}
	if len(lines)-1 != len(bs) {
		t.Fatalf("%s: %d bucket lines, want %d", desc, len(lines)-1, len(bs))
	}
	layout := "2006-01-02 15:04:05"
	switch {
	case w%86400e9 == 0:
		layout = "2006-01-02"
	case w%60e9 == 0:
		layout = "2006-01-02 15:04"
	}
	for i, l := range lines[:len(bs)] {
		f := strings.Fields(l)
		when := time.Unix(0, starts[i]).UTC().Format(layout)
		if !strings.HasPrefix(l, when+" ") || len(f) < 2 || f[len(strings.Fields(when))] != strconv.FormatInt(wantCounts[i], 10) {
			t.Fatalf("%s: line %d %q, want %s and count %d", desc, i, l, when, wantCounts[i])
		}
	}
}

func hoTimes(ts []int64) []string {
	var s []string
	for _, t := range ts {
		s = append(s, hoTime(t))
	}
	return s
}
