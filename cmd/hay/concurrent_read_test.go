package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"haystack/internal/ingest"
	"haystack/internal/segment"
	"haystack/internal/store"
)

// TestConcurrentReaders races readers against a writer: a real `hay serve`
// with a tiny head (a segment flushed every few pushes) and background
// compaction every 5 ms (new segments rewritten, runs of small ones merged
// under a small --merge-bytes, MANIFEST swapped, old files deleted) takes
// numbered lines from three pushers, while
//
//   - `hay search` processes read the same data directory (readers take no
//     lock): full answers oldest first, --limit answers both ways, -c,
//     --since/--until, plain text and --query; `hay verify` finds no
//     damage; in-process store.OpenSnapshot loops (hay search's read path
//     without the process start) decode or count every entry;
//   - a Loki client runs query_range both ways with limits, /series and
//     /labels, and pages through a fixed range as logcli does;
//   - a web-UI client pages /api/v1/search both ways exactly as the UI's
//     "load more" does (API.md: end=T or start=T, limit=page+k, drop the
//     first k rows at T) and checks /api/v1/hits.
//
// Every answer is checked against what the pushers recorded: each entry
// acknowledged (204) before the reader started is there, nothing twice,
// nothing never sent, each entry with its stream's labels and its own
// time, in the documented order (hay search: by time, ties to the stream
// created first, each stream in push order; newest: the exact reverse;
// the APIs: by time). A reader over a fixed past range (all of whose
// pushes have completed) must get exactly the entries sent in it. An
// error exit of hay search (a segment deleted under it) fails the test.
//
// HAY_CONC_SEED replays a run's choices (timing still varies);
// HAY_CONC_SECONDS sets how long the pushers run (default 6).
func TestConcurrentReaders(t *testing.T) {
	seed := envSeed(t, "HAY_CONC_SEED")
	secs := 6.0
	if v := os.Getenv("HAY_CONC_SECONDS"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			t.Fatalf("HAY_CONC_SECONDS=%q", v)
		}
		secs = f
	}
	t.Logf("seed %d (HAY_CONC_SEED=%d replays the choices)", seed, seed)
	defer func() {
		if t.Failed() {
			t.Logf("failed with seed %d: rerun with HAY_CONC_SEED=%d", seed, seed)
		}
	}()

	const pushers, streams = 3, 6 // pusher g owns streams 2g and 2g+1
	root := t.TempDir()
	tdir := filepath.Join(root, "fake") // the default tenant's store
	// Merges of runs of segments re-cut the blocks (512 KiB when
	// compacted), which moves the tie order of the native API's pages.
	merge := []string{"384KiB", "1MiB", "2MiB"}[seed%3]
	t.Logf("--merge-bytes %s", merge)
	// Without detected_level: the oracle is the labels and metadata sent.
	srv := startCrashServe(t, root, "--discover-log-levels=false", "--head-bytes", "48KiB", "--compact-interval", "5ms",
		"--merge-bytes", merge, "--max-concurrent-queries", "64")
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	st := &concState{
		t: t, seed: seed, base: srv.url, client: client,
		sent: make([][]concEntry, streams), acked: make([]int, streams),
		inflight: make([]int64, pushers),
	}
	for g := range st.inflight {
		st.inflight[g] = math.MaxInt64
	}
	st.start = time.Now().Add(-time.Second).UnixNano()
	// One entry per stream, in order, so that stream ids (the order of
	// first use, hay search's tie-break) follow the stream numbers.
	setup := rand.New(rand.NewPCG(seed, 0))
	for s := range streams {
		if !st.push(s/2, []int{s}, setup, 1) {
			t.Fatalf("setup push failed; seed %d; server log:\n%s", seed, srv.logs())
		}
	}

	var stop atomic.Bool
	var pw, rw sync.WaitGroup
	for g := range pushers {
		r := rand.New(rand.NewPCG(seed, uint64(1+g)))
		pw.Go(func() {
			for !stop.Load() && !st.tooMany() {
				ss := []int{2 * g, 2*g + 1}
				if r.IntN(3) > 0 {
					ss = ss[r.IntN(2):][:1]
				}
				if !st.push(g, ss, r, 30) {
					return
				}
				time.Sleep(time.Duration(r.IntN(3000)) * time.Microsecond)
			}
		})
	}
	var stats concStats
	reader := func(id int, f func(r *rand.Rand)) {
		r := rand.New(rand.NewPCG(seed, uint64(100+id)))
		rw.Go(func() {
			for !stop.Load() && !st.tooMany() {
				f(r)
			}
		})
	}
	for i := range 2 {
		reader(i, func(r *rand.Rand) { st.cliRead(tdir, r, &stats) })
	}
	reader(2, func(r *rand.Rand) { st.lokiRead(r, &stats) })
	reader(4, func(*rand.Rand) { st.snapshotRead(tdir, &stats) })
	reader(5, func(*rand.Rand) { st.snapshotCount(tdir, &stats) })
	reader(3, func(r *rand.Rand) { st.nativeRead(r, &stats) })
	time.Sleep(time.Duration(secs * float64(time.Second)))
	stop.Store(true)
	pw.Wait()
	rw.Wait()

	quiet := time.Now()
	// Quiet now: every reader must see exactly what was sent (all of it
	// acknowledged), however the compactions left it.
	final := rand.New(rand.NewPCG(seed, 999))
	for _, q := range concQueries {
		st.cliCheck(tdir, q, "full", nil, 0, 0, &stats)
	}
	for range 2 {
		st.nativePage(final, &stats)
		st.lokiPage(final, &stats)
	}

	srv.cmd.Process.Signal(syscall.SIGTERM)
	werr := srv.wait()
	crashCheckLogs(t, "concurrent readers", srv.logs())
	if werr != nil {
		t.Errorf("hay serve after SIGTERM: %v", werr)
	}
	st.cliCheck(tdir, concQueries[0], "full", nil, 0, 0, &stats)

	st.mu.Lock()
	total := 0
	for s := range streams {
		total += len(st.sent[s])
		if st.acked[s] != len(st.sent[s]) {
			t.Errorf("stream s%d: %d of %d entries acknowledged", s, st.acked[s], len(st.sent[s]))
		}
	}
	st.mu.Unlock()
	merges := 0 // compactions that merged a run of segments
	for _, l := range strings.Split(srv.logs(), "\n") {
		if _, rest, ok := strings.Cut(l, "msg=compacted"); ok {
			if _, n, ok := strings.Cut(rest, " segments="); ok && !strings.HasPrefix(n, "1 ") {
				merges++
			}
		}
	}
	t.Logf("%d merges; the quiet checks took %v", merges, time.Since(quiet).Round(time.Millisecond))
	t.Logf("%d entries in %d pushes; %d compactions logged; hay search runs %d (entries read %d), hay verify runs %d, snapshots %d (counted %d), query_range %d, Loki pages %d, native pages %d, series/labels %d, hits %d; backward ties in push order %d",
		total, st.pushes.Load(), srv.compacted.Load(), stats.cli.Load(), stats.cliEntries.Load(), stats.verify.Load(), stats.snaps.Load(), stats.counts.Load(), stats.loki.Load(),
		stats.lokiPages.Load(), stats.nativePages.Load(), stats.meta.Load(), stats.hits.Load(), st.backTies.Load())
	if srv.compacted.Load() == 0 {
		t.Errorf("no background compaction was logged: the test did not race compaction")
	}
	if stats.cli.Load() == 0 || stats.nativePages.Load() == 0 || stats.loki.Load() == 0 {
		t.Errorf("a reader never ran")
	}
	if t.Failed() {
		t.Logf("server log (tail):\n%s", concTail(srv.logs(), 4000))
	}
}

// concTail is the last n bytes of s.
func concTail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// concEntry is one line sent.
type concEntry struct {
	stream, seq int
	tag         int // the line holds "tag=zq<tag>"
	ts          int64
	line        string
}

// id names an entry by stream and position (pointers differ between
// views: a stream's slice moves as it grows).
func (e *concEntry) id() [2]int { return [2]int{e.stream, e.seq} }

// concLabels are the labels stream s is pushed with.
func concLabels(s int) map[string]string {
	return map[string]string{"app": "conc", "s": fmt.Sprintf("s%d", s)}
}

// concStored are the labels of stream s as stored and as the readers
// report them: hay serve adds service_name from app (Loki's
// discover_service_name).
func concStored(s int) map[string]string {
	m := concLabels(s)
	m["service_name"] = m["app"]
	return m
}

// concQuery is one selection, as hay search arguments, LogQL for the Loki
// API, the native API's q, and the oracle.
type concQuery struct {
	cli    []string
	logql  string
	native string
	match  func(*concEntry) bool
}

var concQueries = []concQuery{
	{[]string{"--", "n="}, `{app="conc"} |= "n="`, "n=", func(*concEntry) bool { return true }},
	{[]string{"--", "tag=zq2"}, `{app="conc"} |= "tag=zq2"`, "tag=zq2", func(e *concEntry) bool { return e.tag == 2 }},
	{[]string{"--", "s3 n="}, `{s="s3"}`, "s3 n=", func(e *concEntry) bool { return e.stream == 3 }},
	{[]string{"--query", `{s="s1"}`}, `{s="s1"}`, `{s="s1"}`, func(e *concEntry) bool { return e.stream == 1 }},
	{[]string{"--query", `{app="conc"} |= "tag=zq1"`}, `{app="conc"} |= "tag=zq1"`, `{app="conc"} |= "tag=zq1"`, func(e *concEntry) bool { return e.tag == 1 }},
	{[]string{"--query", `{s=~"s[024]"} != "tag=zq0"`}, `{s=~"s[024]"} != "tag=zq0"`, `{s=~"s[024]"} != "tag=zq0"`,
		func(e *concEntry) bool { return e.stream%2 == 0 && e.tag != 0 }},
	{[]string{"-e", "tag=zq3", "-e", "s5 n="}, `{app="conc"} |~ "tag=zq3|s5 n="`, `{app="conc"} |~ "tag=zq3|s5 n="`,
		func(e *concEntry) bool { return e.tag == 3 || e.stream == 5 }},
}

// concState is everything sent, shared by pushers and readers.
type concState struct {
	t      *testing.T
	seed   uint64
	base   string
	client *http.Client
	start  int64 // before every entry's time
	pushes atomic.Int64
	errs   atomic.Int64
	// backTies counts pairs of one stream's entries with equal times
	// that a backward query_range returned in push order.
	backTies atomic.Int64

	mu       sync.Mutex
	sent     [][]concEntry // per stream, in push order (append only)
	acked    []int         // per stream: its first acked entries were acknowledged
	inflight []int64       // per pusher: the first time of its push in flight, or MaxInt64
}

type concStats struct {
	cli, cliEntries, verify, snaps, counts, loki, lokiPages, nativePages, meta, hits atomic.Int64
}

// fail reports a problem (at most 30 in all, then the run winds down).
func (st *concState) fail(format string, args ...any) {
	st.t.Helper()
	if st.errs.Add(1) <= 30 {
		st.t.Errorf("seed %d: "+format, append([]any{st.seed}, args...)...)
	}
}

func (st *concState) tooMany() bool { return st.errs.Load() > 30 }

// concView is the pushers' record at one moment: per stream, the entries
// sent and how many of them were acknowledged.
type concView struct {
	sent  [][]concEntry
	acked []int
}

func (st *concState) view() concView {
	st.mu.Lock()
	defer st.mu.Unlock()
	v := concView{sent: make([][]concEntry, len(st.sent)), acked: slices.Clone(st.acked)}
	for s := range st.sent {
		v.sent[s] = st.sent[s][:len(st.sent[s]):len(st.sent[s])]
	}
	return v
}

// settled returns a time such that every entry at or before it belongs to
// a push that has completed, and every later push has later times; with
// the view of that moment. A reader over [start, settled] must find
// exactly the entries sent in it, however long it pages.
func (st *concState) settled() (int64, concView) {
	st.mu.Lock()
	end := time.Now().Truncate(time.Millisecond).UnixNano() - 1
	for _, f := range st.inflight {
		end = min(end, f-1)
	}
	st.mu.Unlock()
	v := st.view()
	for s, es := range v.sent {
		for i := v.acked[s]; i < len(es); i++ {
			if es[i].ts <= end {
				st.fail("settled view: stream s%d entry %d at %d <= %d not acknowledged", s, i, es[i].ts, end)
				break
			}
		}
	}
	return end, v
}

// push sends 1..maxN entries to each of streams ss in one Loki JSON push
// and records them; it reports false (after failing the test) when the
// push was not acknowledged. Times come from the wall clock in whole
// milliseconds plus a few nanoseconds, so that entries of one push, and
// of pushes to other streams in the same millisecond, often share a time.
func (st *concState) push(g int, ss []int, r *rand.Rand, maxN int) bool {
	type stream struct {
		Stream map[string]string `json:"stream"`
		Values [][2]string       `json:"values"`
	}
	var req struct {
		Streams []stream `json:"streams"`
	}
	st.mu.Lock()
	tick := time.Now().Truncate(time.Millisecond).UnixNano()
	first := int64(math.MaxInt64)
	upto := map[int]int{}
	for _, s := range ss {
		es := st.sent[s]
		prev := int64(0)
		if len(es) > 0 {
			prev = es[len(es)-1].ts
		}
		group := []int{1, 3, 1000}[r.IntN(3)]
		out := stream{Stream: concLabels(s)}
		for j := range 1 + r.IntN(maxN) {
			ts := max(prev, tick+int64(j/group))
			prev = ts
			e := concEntry{stream: s, seq: len(es), tag: r.IntN(4), ts: ts}
			e.line = fmt.Sprintf("s%d n=%06d tag=zq%d %s", s, e.seq, e.tag, concText(r))
			es = append(es, e)
			first = min(first, ts)
			out.Values = append(out.Values, [2]string{strconv.FormatInt(ts, 10), e.line})
		}
		st.sent[s] = es
		upto[s] = len(es)
		req.Streams = append(req.Streams, out)
	}
	st.inflight[g] = first
	st.mu.Unlock()

	body, err := json.Marshal(req)
	if err != nil {
		st.fail("%v", err)
		return false
	}
	resp, err := st.client.Post(st.base+"/loki/api/v1/push", "application/json", bytes.NewReader(body))
	if err != nil {
		st.fail("push: %v", err)
		return false
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		st.fail("push: %s %s", resp.Status, msg)
		return false
	}
	st.pushes.Add(1)
	st.mu.Lock()
	for s, n := range upto {
		st.acked[s] = n
	}
	st.inflight[g] = math.MaxInt64
	st.mu.Unlock()
	return true
}

// concText is a few random words without 'z', so that no text matches a
// tag or a stream's literal.
func concText(r *rand.Rand) string {
	const letters = "abcdefghijklmnopqrstuvwxy"
	b := make([]byte, r.IntN(120))
	for i := range b {
		if r.IntN(6) == 0 {
			b[i] = ' '
		} else {
			b[i] = letters[r.IntN(len(letters))]
		}
	}
	return string(b)
}

// concHit is one entry a reader got back, resolved against what was sent.
type concHit struct {
	e    *concEntry
	ts   int64
	line string
}

// resolve finds the entry a reader returned among those sent by the end
// of the read (v), and checks its labels, time and that q selects it.
func (st *concState) resolve(what string, v concView, q concQuery, labels map[string]string, ts int64, line string) (concHit, bool) {
	var s, n int
	if _, err := fmt.Sscanf(line, "s%d n=%d", &s, &n); err != nil || s < 0 || s >= len(v.sent) || n < 0 || n >= len(v.sent[s]) || v.sent[s][n].line != line {
		st.fail("%s: an entry never sent: %.100q", what, line)
		return concHit{}, false
	}
	e := &v.sent[s][n]
	ok := true
	if want := concStored(s); labels != nil && !maps.Equal(labels, want) {
		st.fail("%s: entry s%d n=%d with labels %v, sent to %v", what, s, n, labels, want)
		ok = false
	}
	if ts != e.ts {
		st.fail("%s: entry s%d n=%d has time %d, sent with %d", what, s, n, ts, e.ts)
		ok = false
	}
	if !q.match(e) {
		st.fail("%s: entry s%d n=%d does not match the query: %.100q", what, s, n, line)
		ok = false
	}
	return concHit{e: e, ts: ts, line: line}, ok
}

// concKey orders entries as hay search does oldest first: time, then
// stream (ids follow stream numbers), then push order.
func concKey(a, b *concEntry) int {
	if c := cmp.Compare(a.ts, b.ts); c != 0 {
		return c
	}
	if c := cmp.Compare(a.stream, b.stream); c != 0 {
		return c
	}
	return cmp.Compare(a.seq, b.seq)
}

// concExpected lists the entries of v that q selects, acknowledged only or
// all sent, with times in [lo, hi], oldest first (concKey).
func concExpected(v concView, q concQuery, ackedOnly bool, lo, hi int64) []*concEntry {
	var out []*concEntry
	for s, es := range v.sent {
		n := len(es)
		if ackedOnly {
			n = v.acked[s]
		}
		for i := range n {
			e := &es[i]
			if e.ts >= lo && e.ts <= hi && q.match(e) {
				out = append(out, e)
			}
		}
	}
	slices.SortFunc(out, concKey)
	return out
}

// cliRead runs one random `hay search` on the data directory.
func (st *concState) cliRead(dir string, r *rand.Rand, stats *concStats) {
	q := concQueries[r.IntN(len(concQueries))]
	before := st.view()
	switch r.IntN(7) {
	case 6:
		st.verify(dir, stats)
	case 0, 1:
		st.cliCheck(dir, q, "full", &before, 0, 0, stats)
	case 2:
		st.cliCheck(dir, q, "newest", &before, []int{1, 7, 50}[r.IntN(3)], 0, stats)
	case 3:
		st.cliCheck(dir, q, "oldest", &before, []int{1, 7, 50}[r.IntN(3)], 0, stats)
	case 4:
		st.cliCheck(dir, q, "count", &before, 0, 0, stats)
	case 5:
		st.cliCheck(dir, q, "range", &before, 0, r.Int64(), stats)
	}
}

// verify runs `hay verify` on the live data directory: STORE.md says it
// can run while the writer writes, so it must find no damage (a torn WAL
// tail and unlisted segments are notes, not damage).
func (st *concState) verify(dir string, stats *concStats) {
	cmd := hayCommand("verify", "--data", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	stats.verify.Add(1)
	if err != nil {
		st.fail("hay verify on the live store: %v: %s%s", err, out, stderr.String())
	}
}

// cliCheck runs hay search for q in one mode and checks its answer;
// before is the pushers' record as the process started (nil: now, for a
// quiet store, where then everything sent must be acknowledged).
func (st *concState) cliCheck(dir string, q concQuery, mode string, before *concView, limit int, rnd int64, stats *concStats) {
	if before == nil {
		v := st.view()
		before = &v
	}
	args := []string{"search", "--data", dir}
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	switch mode {
	case "newest":
		args = append(args, "--json", "--order", "newest", "--limit", strconv.Itoa(limit))
	case "oldest":
		args = append(args, "--json", "--limit", strconv.Itoa(limit))
	case "count":
		args = append(args, "-c")
	case "range":
		// A range between two times sent so far (to the nanosecond:
		// ties at the bounds are frequent).
		all := concExpected(*before, concQueries[0], false, lo, hi)
		a, b := all[int(uint64(rnd)%uint64(len(all)))].ts, all[int(uint64(rnd>>20)%uint64(len(all)))].ts
		lo, hi = min(a, b), max(a, b)
		args = append(args, "--json",
			"--since", time.Unix(0, lo).UTC().Format(time.RFC3339Nano),
			"--until", time.Unix(0, hi).UTC().Format(time.RFC3339Nano))
		hi-- // --until is exclusive
	default:
		args = append(args, "--json")
	}
	args = append(args, q.cli...)
	cmd := hayCommand(args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	after := st.view()
	stats.cli.Add(1)
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		st.fail("hay %s: %v", strings.Join(args[3:], " "), err)
		return
	}
	what := fmt.Sprintf("hay search %s (exit %d)", diffQuoteArgs(args[3:]), code)
	want := concExpected(*before, q, true, lo, hi) // acknowledged before the start
	if code != 0 && !(code == 1 && len(want) == 0) {
		st.fail("%s: stderr %q, stdout %d bytes; %d entries were acknowledged", what, stderr.String(), len(out), len(want))
		return
	}
	if mode == "count" {
		most := len(concExpected(after, q, false, lo, hi))
		n, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if code == 1 {
			n, err = 0, nil
		}
		if err != nil || n < len(want) || n > most {
			st.fail("%s: printed %q; %d entries were acknowledged before it, %d sent by its end", what, out, len(want), most)
		}
		return
	}
	var hits []*concEntry
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var j struct {
			Time   time.Time         `json:"time"`
			Labels map[string]string `json:"labels"`
			Line   string            `json:"line"`
		}
		if err := json.Unmarshal(sc.Bytes(), &j); err != nil {
			st.fail("%s: %v: %.200q", what, err, sc.Bytes())
			return
		}
		h, ok := st.resolve(what, after, q, j.Labels, j.Time.UnixNano(), j.Line)
		if !ok {
			return
		}
		if h.ts < lo || h.ts > hi {
			st.fail("%s: entry s%d n=%d at %d outside [%d, %d]", what, h.e.stream, h.e.seq, h.ts, lo, hi)
			return
		}
		hits = append(hits, h.e)
	}
	stats.cliEntries.Add(int64(len(hits)))
	// Strictly ordered by concKey (no entry twice), reversed for newest.
	dir1 := 1
	if mode == "newest" {
		dir1 = -1
	}
	for i := 1; i < len(hits); i++ {
		if concKey(hits[i-1], hits[i])*dir1 >= 0 {
			st.fail("%s: entry %d (s%d n=%d at %d) after entry %d (s%d n=%d at %d): out of order or twice",
				what, i, hits[i].stream, hits[i].seq, hits[i].ts, i-1, hits[i-1].stream, hits[i-1].seq, hits[i-1].ts)
			return
		}
	}
	// Every acknowledged entry up to the last one printed (all of them
	// when the answer is not cut by the limit) is there.
	got := map[[2]int]bool{}
	for _, e := range hits {
		got[e.id()] = true
	}
	cut := limit > 0 && len(hits) == limit
	if limit > 0 && len(hits) > limit {
		st.fail("%s: %d entries, over the limit", what, len(hits))
	}
	missing := 0
	var first *concEntry
	for _, e := range want {
		if cut && concKey(e, hits[len(hits)-1])*dir1 > 0 {
			continue
		}
		if !got[e.id()] {
			missing++
			if first == nil {
				first = e
			}
		}
	}
	if missing > 0 {
		st.fail("%s: %d of %d entries acknowledged before it are missing (%d printed), first s%d n=%d at %d",
			what, missing, len(want), len(hits), first.stream, first.seq, first.ts)
	}
}

// snapshotRead opens the data directory as hay search does
// (store.OpenSnapshot, no lock) and reads every entry: each stream must
// hold exactly its first entries in push order, at least all those
// acknowledged before the open, nothing damaged. It is hay search's read
// path without the process start, so it races the writer far more often.
func (st *concState) snapshotRead(dir string, stats *concStats) {
	before := st.view()
	snap, err := store.OpenSnapshot(dir)
	stats.snaps.Add(1)
	if err != nil {
		st.fail("open snapshot: %v", err)
		return
	}
	defer snap.Close()
	for _, d := range snap.Damaged {
		st.fail("open snapshot: damaged: %v", d)
	}
	after := st.view()
	next := make([]int, len(after.sent))
	var b segment.Block
	var parts []string
	for _, p := range snap.Parts {
		name := "head"
		if sp, ok := p.(*store.SegmentPart); ok {
			name = sp.Name()
		}
		parts = append(parts, name)
		for i := range p.NumBlocks() {
			if err := p.ReadBlock(i, &b); err != nil {
				st.fail("snapshot: %s block %d: %v", name, i, err)
				return
			}
			for k := range b.Len() {
				h, ok := st.resolve("snapshot", after, concQueries[0], concLabelMap(snap.Labels(b.Streams[k])), b.Times[k], string(b.Line(k)))
				if !ok {
					return
				}
				if s := h.e.stream; h.e.seq != next[s] {
					st.fail("snapshot (parts %v; manifest WAL start %d, %d segments): stream s%d holds n=%d after %d entries",
						parts, snap.Manifest.WALStart, len(snap.Manifest.Segments), s, h.e.seq, next[s])
					return
				}
				next[h.e.stream]++
			}
		}
	}
	for s, n := range next {
		if n < before.acked[s] {
			st.fail("snapshot (parts %v; manifest WAL start %d, %d segments): stream s%d holds %d entries, %d were acknowledged before it was opened",
				parts, snap.Manifest.WALStart, len(snap.Manifest.Segments), s, n, before.acked[s])
		}
	}
}

// snapshotCount opens the data directory as hay search does and counts
// its entries from the block index alone (no decoding, so it races the
// writer thousands of times a run): at least every entry acknowledged
// before the open, at most every entry sent by its end. A snapshot that
// missed a WAL file or a segment holds a whole head (~400 entries) too
// few, more than the pushes in flight (at most 3 x 60 entries) can hide.
func (st *concState) snapshotCount(dir string, stats *concStats) {
	before := st.view()
	snap, err := store.OpenSnapshot(dir)
	stats.counts.Add(1)
	if err != nil {
		st.fail("open snapshot: %v", err)
		return
	}
	defer snap.Close()
	for _, d := range snap.Damaged {
		st.fail("open snapshot: damaged: %v", d)
	}
	after := st.view()
	n := 0
	var parts []string
	for _, p := range snap.Parts {
		k := 0
		for i := range p.NumBlocks() {
			k += p.BlockMeta(i).Entries
		}
		parts = append(parts, fmt.Sprintf("%s:%d", p.Name(), k))
		n += k
	}
	lo, hi := 0, 0
	for s := range before.acked {
		lo += before.acked[s]
		hi += len(after.sent[s])
	}
	if n < lo || n > hi {
		st.fail("snapshot (manifest WAL start %d, %d segments; parts:entries %v): %d entries, %d were acknowledged before it was opened, %d sent by its end",
			snap.Manifest.WALStart, len(snap.Manifest.Segments), parts, n, lo, hi)
	}
}

// concLabelMap parses canonical labels ({a="x", b="y"}); nil if they do
// not parse.
func concLabelMap(canon string) map[string]string {
	ls, err := ingest.ParseLabels(canon)
	if err != nil {
		return nil
	}
	m := map[string]string{}
	for _, l := range ls {
		m[l.Name] = l.Value
	}
	return m
}

// get asks the server (429: again) and decodes its JSON answer into v;
// false after a failure was reported.
func (st *concState) get(what, path string, p url.Values, v any) bool {
	for {
		resp, err := st.client.Get(st.base + path + "?" + p.Encode())
		if err != nil {
			st.fail("%s: %v", what, err)
			return false
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if err != nil || resp.StatusCode != http.StatusOK {
			st.fail("%s: %s %v %.300s", what, resp.Status, err, body)
			return false
		}
		if v == nil {
			return true
		}
		if err := json.Unmarshal(body, v); err != nil {
			st.fail("%s: %v: %.300s", what, err, body)
			return false
		}
		return true
	}
}

// lokiRange runs one query_range and returns its entries, grouped by
// stream as answered, after checking each stream's order.
func (st *concState) lokiRange(what string, q concQuery, start, endExcl int64, limit int, backward bool, v func() concView) ([]concHit, bool) {
	dir := "forward"
	if backward {
		dir = "backward"
	}
	p := url.Values{"query": {q.logql}, "start": {strconv.FormatInt(start, 10)}, "end": {strconv.FormatInt(endExcl, 10)},
		"limit": {strconv.Itoa(limit)}, "direction": {dir}}
	var resp struct {
		Status string `json:"status"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Stream map[string]string `json:"stream"`
				Values [][2]string       `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if !st.get(what, "/loki/api/v1/query_range", p, &resp) {
		return nil, false
	}
	after := v()
	var hits []concHit
	for _, s := range resp.Data.Result {
		var prev *concHit
		for _, val := range s.Values {
			ts, err := strconv.ParseInt(val[0], 10, 64)
			if err != nil {
				st.fail("%s: time %q", what, val[0])
				return nil, false
			}
			h, ok := st.resolve(what, after, q, s.Stream, ts, val[1])
			if !ok {
				return nil, false
			}
			if h.ts < start || h.ts >= endExcl {
				st.fail("%s: entry s%d n=%d at %d outside [%d, %d)", what, h.e.stream, h.e.seq, h.ts, start, endExcl)
				return nil, false
			}
			// Within a stream: by time in the direction asked, and in
			// push order for equal times forward. Backward, equal times
			// come in push order too, not reversed as in Loki (a
			// difference internal/server/doc.go states): counted, not
			// failed.
			if prev != nil {
				c := concKey(prev.e, h.e)
				if backward {
					c = -c
				}
				if backward && c > 0 && prev.ts == h.ts && prev.e.seq < h.e.seq {
					st.backTies.Add(1)
				} else if c >= 0 {
					st.fail("%s: stream s%d: n=%d (at %d) after n=%d (at %d)", what, h.e.stream, h.e.seq, h.ts, prev.e.seq, prev.ts)
					return nil, false
				}
			}
			prev = &h
			hits = append(hits, h)
		}
	}
	if len(hits) > limit {
		st.fail("%s: %d entries over the limit", what, len(hits))
		return nil, false
	}
	return hits, true
}

// lokiRead runs one random Loki query: a query_range with a limit over
// everything so far, /series or /labels, or a paging run.
func (st *concState) lokiRead(r *rand.Rand, stats *concStats) {
	switch r.IntN(5) {
	case 0:
		st.lokiMeta(r, stats)
		return
	case 1:
		st.lokiPage(r, stats)
		return
	}
	q := concQueries[r.IntN(len(concQueries))]
	backward := r.IntN(2) == 0
	limit := []int{1, 10, 100, 1000}[r.IntN(4)]
	before := st.view()
	endExcl := time.Now().Add(time.Second).UnixNano()
	what := fmt.Sprintf("query_range %s limit %d backward %v", q.logql, limit, backward)
	hits, ok := st.lokiRange(what, q, st.start, endExcl, limit, backward, st.view)
	stats.loki.Add(1)
	if !ok {
		return
	}
	got := map[[2]int]bool{}
	worst := int64(math.MaxInt64)
	if !backward {
		worst = math.MinInt64
	}
	for _, h := range hits {
		if got[h.e.id()] {
			st.fail("%s: entry s%d n=%d twice", what, h.e.stream, h.e.seq)
			return
		}
		got[h.e.id()] = true
		if backward {
			worst = min(worst, h.ts)
		} else {
			worst = max(worst, h.ts)
		}
	}
	// The limit keeps the newest (oldest) entries: every acknowledged one
	// strictly better than the worst kept is there (ties at the cut may
	// go either way), and all of them when the answer is not full.
	missing := 0
	want := concExpected(before, q, true, st.start, endExcl-1)
	for _, e := range want {
		better := len(hits) < limit || backward && e.ts > worst || !backward && e.ts < worst
		if better && !got[e.id()] {
			missing++
		}
	}
	if missing > 0 {
		st.fail("%s: %d entries acknowledged before it missing (%d returned, %d acknowledged)", what, missing, len(hits), len(want))
	}
}

// lokiMeta checks /series and /labels: every stream pushed to before the
// request (all of them, after the setup) and nothing else.
func (st *concState) lokiMeta(r *rand.Rand, stats *concStats) {
	stats.meta.Add(1)
	p := url.Values{"start": {strconv.FormatInt(st.start, 10)}, "end": {strconv.FormatInt(time.Now().Add(time.Second).UnixNano(), 10)}}
	n := len(st.view().sent)
	if r.IntN(2) == 0 {
		p.Set("match[]", `{app="conc"}`)
		var resp struct {
			Data []map[string]string `json:"data"`
		}
		if !st.get("series", "/loki/api/v1/series", p, &resp) {
			return
		}
		var want, got []string
		for s := range n {
			want = append(want, fmt.Sprint(concStored(s)))
		}
		for _, m := range resp.Data {
			got = append(got, fmt.Sprint(m))
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			st.fail("series: %v, want %v", got, want)
		}
		return
	}
	var resp struct {
		Data []string `json:"data"`
	}
	if !st.get("labels", "/loki/api/v1/labels", p, &resp) {
		return
	}
	if !slices.Equal(resp.Data, []string{"app", "s", "service_name"}) {
		st.fail("labels: %v, want [app s service_name]", resp.Data)
	}
}

// pageCheck compares the entries a paging run collected over a settled
// range with the entries sent there: each exactly once, ordered by time.
func (st *concState) pageCheck(what string, got []concHit, want []*concEntry, backward bool) {
	seen := map[[2]int]int{}
	for i, h := range got {
		if j, ok := seen[h.e.id()]; ok {
			st.fail("%s: entry s%d n=%d (at %d) at positions %d and %d", what, h.e.stream, h.e.seq, h.ts, j, i)
			return
		}
		seen[h.e.id()] = i
		if i > 0 && (backward && h.ts > got[i-1].ts || !backward && h.ts < got[i-1].ts) {
			st.fail("%s: position %d at %d after %d: out of time order", what, i, h.ts, got[i-1].ts)
			return
		}
	}
	missing := 0
	var first *concEntry
	for _, e := range want {
		if _, ok := seen[e.id()]; !ok {
			missing++
			if first == nil {
				first = e
			}
		}
	}
	if missing > 0 || len(got) != len(want) {
		desc := ""
		if first != nil {
			ties := 0
			for _, e := range want {
				if e.ts == first.ts {
					ties++
				}
			}
			desc = fmt.Sprintf(", first missing s%d n=%d at %d (%d entries at that time)", first.stream, first.seq, first.ts, ties)
		}
		st.fail("%s: %d entries in all, %d sent in the range, %d missing%s", what, len(got), len(want), missing, desc)
	}
}

// concMaxPages bounds a paging run: the page size grows with the entries
// in range, so that one run ends soon after the pushers stop.
const concMaxPages = 150

// lokiPage pages through a settled range with query_range as logcli does:
// the next page ends at (backward) or starts at (forward) the last time
// seen, asks for the page size plus the entries already seen at that
// time, and drops those (by content).
func (st *concState) lokiPage(r *rand.Rand, stats *concStats) {
	q := concQueries[r.IntN(len(concQueries))]
	backward := r.IntN(2) == 0
	page := []int{5, 20, 100}[r.IntN(3)]
	end, v := st.settled()
	start := st.start
	want := concExpected(v, q, false, start, end)
	page = max(page, len(want)/concMaxPages) // bounds the run's time
	what := fmt.Sprintf("Loki paging %s page %d backward %v over [%d, %d]", q.logql, page, backward, start, end)
	var all []concHit
	lo, hiExcl := start, end+1
	var atT map[[2]int]bool // entries already taken at the bound's time
	bound := int64(0)
	for pages := 0; ; pages++ {
		if pages > 10000 {
			st.fail("%s: no end after %d pages", what, pages)
			return
		}
		limit := page + len(atT)
		hits, ok := st.lokiRange(fmt.Sprintf("%s, page %d", what, pages), q, lo, hiExcl, limit, backward, func() concView { return v })
		stats.lokiPages.Add(1)
		if !ok {
			return
		}
		slices.SortStableFunc(hits, func(a, b concHit) int {
			if backward {
				return cmp.Compare(b.ts, a.ts)
			}
			return cmp.Compare(a.ts, b.ts)
		})
		var fresh []concHit
		for _, h := range hits {
			if h.ts == bound && atT[h.e.id()] {
				continue
			}
			fresh = append(fresh, h)
		}
		all = append(all, fresh...)
		if len(hits) < limit {
			break
		}
		if len(fresh) == 0 {
			st.fail("%s: page %d brought nothing new", what, pages)
			return
		}
		last := fresh[len(fresh)-1].ts
		if last != bound {
			bound, atT = last, map[[2]int]bool{}
		}
		for _, h := range fresh {
			if h.ts == bound {
				atT[h.e.id()] = true
			}
		}
		if backward {
			hiExcl = bound + 1
		} else {
			lo = bound
		}
	}
	st.pageCheck(what, all, want, backward)
}

// nativeRead pages /api/v1/search or checks /api/v1/hits.
func (st *concState) nativeRead(r *rand.Rand, stats *concStats) {
	if r.IntN(4) == 0 {
		q := concQueries[r.IntN(len(concQueries))]
		end, v := st.settled()
		want := concExpected(v, q, false, st.start, end)
		var resp struct {
			Total int `json:"total"`
		}
		p := url.Values{"q": {q.native}, "start": {strconv.FormatInt(st.start, 10)}, "end": {strconv.FormatInt(end, 10)}}
		stats.hits.Add(1)
		if st.get("hits "+q.native, "/api/v1/hits", p, &resp) && resp.Total != len(want) {
			st.fail("hits %s over [%d, %d]: total %d, %d entries sent there", q.native, st.start, end, resp.Total, len(want))
		}
		return
	}
	st.nativePage(r, stats)
}

// nativePage pages /api/v1/search over a settled range exactly as the web
// UI's "load more" does (API.md): after a page whose last row has time T,
// ask again with end=T (forward: start=T) and limit=page+k, where k rows
// at T were shown, and drop the first k rows at T of the answer.
func (st *concState) nativePage(r *rand.Rand, stats *concStats) {
	q := concQueries[r.IntN(len(concQueries))]
	backward := r.IntN(2) == 0
	page := []int{5, 20, 100, 500}[r.IntN(4)]
	end, v := st.settled()
	start := st.start
	want := concExpected(v, q, false, start, end)
	page = max(page, len(want)/concMaxPages) // bounds the run's time
	dir := "forward"
	if backward {
		dir = "backward"
	}
	what := fmt.Sprintf("native paging q=%s page %d %s over [%d, %d]", q.native, page, dir, start, end)
	var all []concHit
	lo, hi := start, end
	k := 0
	bound := int64(0)
	for pages := 0; ; pages++ {
		if pages > 10000 {
			st.fail("%s: no end after %d pages", what, pages)
			return
		}
		limit := page + k
		pwhat := fmt.Sprintf("%s, page %d (limit %d, bound %d, k %d)", what, pages, limit, bound, k)
		p := url.Values{"q": {q.native}, "start": {strconv.FormatInt(lo, 10)}, "end": {strconv.FormatInt(hi, 10)},
			"limit": {strconv.Itoa(limit)}, "direction": {dir}}
		rows, limited, ok := st.nativeSearch(pwhat, q, p, v)
		stats.nativePages.Add(1)
		if !ok {
			return
		}
		if len(rows) > limit {
			st.fail("%s: %d rows", pwhat, len(rows))
			return
		}
		for i := range rows {
			if i > 0 && (backward && rows[i].ts > rows[i-1].ts || !backward && rows[i].ts < rows[i-1].ts) {
				st.fail("%s: row %d at %d after %d", pwhat, i, rows[i].ts, rows[i-1].ts)
				return
			}
		}
		if pages > 0 {
			// The first k rows are those at T already shown.
			for i := range k {
				if i >= len(rows) || rows[i].ts != bound {
					st.fail("%s: fewer than %d rows at the bound", pwhat, k)
					return
				}
			}
			rows = rows[k:]
		}
		all = append(all, rows...)
		if !limited {
			break
		}
		if len(rows) == 0 {
			st.fail("%s: limited, but nothing new", pwhat)
			return
		}
		last := rows[len(rows)-1].ts
		if last != bound {
			bound, k = last, 0
		}
		for _, h := range rows {
			if h.ts == bound {
				k++
			}
		}
		if backward {
			hi = bound
		} else {
			lo = bound
		}
	}
	st.pageCheck(what, all, want, backward)
}

// nativeSearch runs one /api/v1/search and returns its rows and the
// trailer's "limited".
func (st *concState) nativeSearch(what string, q concQuery, p url.Values, v concView) ([]concHit, bool, bool) {
	for {
		resp, err := st.client.Get(st.base + "/api/v1/search?" + p.Encode())
		if err != nil {
			st.fail("%s: %v", what, err)
			return nil, false, false
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if err != nil || resp.StatusCode != http.StatusOK {
			st.fail("%s: %s %v %.300s", what, resp.Status, err, body)
			return nil, false, false
		}
		var rows []concHit
		lines := bytes.Split(bytes.TrimSuffix(body, []byte("\n")), []byte("\n"))
		for i, l := range lines {
			var j struct {
				TS      string            `json:"ts"`
				Labels  map[string]string `json:"labels"`
				Line    string            `json:"line"`
				Done    bool              `json:"done"`
				Count   int               `json:"count"`
				Limited bool              `json:"limited"`
				Error   *string           `json:"error"`
			}
			if err := json.Unmarshal(l, &j); err != nil {
				st.fail("%s: line %d: %v: %.200q", what, i, err, l)
				return nil, false, false
			}
			if j.Error != nil {
				st.fail("%s: error trailer %q", what, *j.Error)
				return nil, false, false
			}
			if j.Done {
				if i != len(lines)-1 || j.Count != len(rows) {
					st.fail("%s: trailer %s at line %d with %d rows", what, l, i, len(rows))
					return nil, false, false
				}
				return rows, j.Limited, true
			}
			ts, err := strconv.ParseInt(j.TS, 10, 64)
			if err != nil {
				st.fail("%s: ts %q", what, j.TS)
				return nil, false, false
			}
			h, ok := st.resolve(what, v, q, j.Labels, ts, j.Line)
			if !ok {
				return nil, false, false
			}
			if lo, _ := strconv.ParseInt(p.Get("start"), 10, 64); ts < lo {
				st.fail("%s: row at %d before start", what, ts)
				return nil, false, false
			}
			if hi, _ := strconv.ParseInt(p.Get("end"), 10, 64); ts > hi {
				st.fail("%s: row at %d after end", what, ts)
				return nil, false, false
			}
			rows = append(rows, h)
		}
		st.fail("%s: no trailer", what)
		return nil, false, false
	}
}
