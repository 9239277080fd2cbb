package server

// Paging through equal-time entries while background compaction merges
// segments. The web UI pages /api/v1/search by time (API.md, "Order and
// ties"): "load more" asks again with end=T (start=T forward) and
// limit=page+k, and drops the first k entries at T, k being the rows at T
// it shows already. That is right only if entries with equal times come in
// the same order in both requests. Compaction re-cuts blocks and merges
// segments between two such requests; the data is the same, so the order
// must be too. logcli pages query_range differently (end = the last time
// + 1 ns, or start = it, dropping the entries equal to the last batch's at
// that time), which needs no tie order but must still see every entry once.
//
// Every run draws a seed (printed on failure); HAY_PAGING_SEED=N replays
// its data and choices (the moments compaction runs are up to the clock).

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"haystack/internal/segment"
	"haystack/internal/store"
)

// pgEntry is one pushed entry as the test keeps it.
type pgEntry struct {
	id     int // unique, in the line
	ts     int64
	stream int
	line   string
}

// pgRow is one entry as a client shows it.
type pgRow struct {
	ts   int64
	id   int
	page int // the request that brought it (0: the first)
}

// pgStreams are the streams' labels; every one has app="pg".
var pgStreams = []string{
	`{app="pg", s="0"}`, `{app="pg", s="1"}`, `{app="pg", s="2"}`, `{app="pg", s="3"}`,
}

// pgGen draws about n entries: times from t0 on in small steps, most of
// them in bursts of 5 to 50 entries at one nanosecond spread over one to
// four streams; lines are padded to 80-340 bytes, so that small heads
// and blocks make many of each.
func pgGen(r *rand.Rand, t0 int64, n int, firstID int) []pgEntry {
	var es []pgEntry
	t := t0
	id := firstID
	for len(es) < n {
		t += 1 + r.Int64N(2_000_000)
		size := 1 + r.IntN(3)
		if r.IntN(10) < 6 {
			size = 5 + r.IntN(46)
		}
		streams := r.Perm(len(pgStreams))[:1+r.IntN(len(pgStreams))]
		for range size {
			s := streams[r.IntN(len(streams))]
			line := fmt.Sprintf("id=%05d s=%d t=%d %s", id, s, t, strings.Repeat("x", 40+r.IntN(260)))
			es = append(es, pgEntry{id: id, ts: t, stream: s, line: line})
			id++
		}
	}
	return es
}

// pgPush pushes es, each stream's entries in their order, in chunks of 1
// to 30 entries of a stream chosen at random each time: streams overtake
// each other, so a later push often holds older times than an earlier one
// of another stream (Loki's rule is per stream).
func pgPush(e *testEnv, r *rand.Rand, tenant string, es []pgEntry) {
	queues := make([][]pgEntry, len(pgStreams))
	for _, en := range es {
		queues[en.stream] = append(queues[en.stream], en)
	}
	for {
		var live []int
		for s, q := range queues {
			if len(q) > 0 {
				live = append(live, s)
			}
		}
		if len(live) == 0 {
			return
		}
		var req []PushStream
		for _, s := range live {
			if len(req) > 0 && r.IntN(3) != 0 {
				continue
			}
			n := min(len(queues[s]), 1+r.IntN(30))
			ps := PushStream{Labels: pgStreams[s]}
			for _, en := range queues[s][:n] {
				ps.Entries = append(ps.Entries, PushEntry{Time: en.ts, Line: en.line})
			}
			queues[s] = queues[s][n:]
			req = append(req, ps)
		}
		e.mustPush("/loki/api/v1/push", protoBody(req), "Content-Type", "application/x-protobuf", "X-Scope-OrgID", tenant)
	}
}

// pgManifest reads a tenant's MANIFEST as a client of the directory would.
func pgManifest(t *testing.T, e *testEnv, tenant string) *store.Manifest {
	t.Helper()
	for range 100 {
		b, err := os.ReadFile(filepath.Join(e.srv.cfg.DataDir, tenant, "MANIFEST"))
		if err != nil {
			t.Fatal(err)
		}
		_, body, ok := bytes.Cut(b, []byte("\n"))
		var m store.Manifest
		if ok && json.Unmarshal(body, &m) == nil {
			return &m
		}
		time.Sleep(time.Millisecond) // replaced while read: read again
	}
	t.Fatalf("tenant %s: MANIFEST unreadable", tenant)
	return nil
}

func pgSegNames(m *store.Manifest) string {
	var b strings.Builder
	for _, sm := range m.Segments {
		b.WriteString(sm.Name)
		if sm.Compacted {
			b.WriteString("c")
		}
		b.WriteByte(' ')
	}
	return b.String()
}

// pgWatch follows a tenant's manifest between requests: before which
// requests it changed, and before which segments were merged. Nothing is
// pushed while it watches, so fewer segments than before is a merge.
type pgWatch struct {
	t       *testing.T
	e       *testEnv
	tenant  string
	last    *store.Manifest
	changed []int // the requests the manifest changed before
	merged  []int // ... with fewer segments than before
}

func newPgWatch(t *testing.T, e *testEnv, tenant string) *pgWatch {
	return &pgWatch{t: t, e: e, tenant: tenant, last: pgManifest(t, e, tenant)}
}

// check is called before request n.
func (w *pgWatch) check(n int) {
	m := pgManifest(w.t, w.e, w.tenant)
	if pgSegNames(m) != pgSegNames(w.last) {
		w.changed = append(w.changed, n)
		if len(m.Segments) < len(w.last.Segments) {
			w.merged = append(w.merged, n)
		}
	}
	w.last = m
}

// pgSearchLine is a line of /api/v1/search.
type pgSearchLine struct {
	TS      string `json:"ts"`
	Line    string `json:"line"`
	Done    bool   `json:"done"`
	Limited bool   `json:"limited"`
	Error   *string
}

func pgID(t *testing.T, line string) int {
	t.Helper()
	v, _, _ := strings.Cut(strings.TrimPrefix(line, "id="), " ")
	id, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("line without id: %q", line)
	}
	return id
}

// uiPage pages /api/v1/search as internal/server/web/static/app.js does
// (searchPage and loadMore): the first request with [start, end] and
// limit=page; each "load more" after a limited answer whose last shown
// row has time T asks with end=T (forward: start=T) and skip=k, k being
// the rows at T at the end of everything shown so far, which the server
// drops. A page that shows no row
// ends the paging (the UI then offers no "load more"). before(n) runs
// before the n-th request.
func uiPage(t *testing.T, e *testEnv, tenant, qs string, forward bool, page int, start, end int64, before func(int)) ([]pgRow, int) {
	t.Helper()
	dir := "backward"
	if forward {
		dir = "forward"
	}
	var rows []pgRow
	skip := 0
	reqs := 0
	for {
		if reqs > 20000 {
			t.Fatalf("paging does not end after %d requests", reqs)
		}
		if before != nil {
			before(reqs)
		}
		p := url.Values{}
		if qs != "" {
			p.Set("q", qs)
		}
		p.Set("start", strconv.FormatInt(start, 10))
		p.Set("end", strconv.FormatInt(end, 10))
		p.Set("limit", strconv.Itoa(page))
		if skip > 0 {
			p.Set("skip", strconv.Itoa(skip))
		}
		p.Set("direction", dir)
		code, body := e.get("/api/v1/search?"+p.Encode(), "X-Scope-OrgID", tenant)
		if code != 200 {
			t.Fatalf("search %s: %d %s", p.Encode(), code, body)
		}
		lastTs, ended, limited := "", false, false
		sc := bufio.NewScanner(strings.NewReader(body))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			text := strings.TrimSpace(sc.Text())
			if text == "" {
				continue
			}
			var o pgSearchLine
			if err := json.Unmarshal([]byte(text), &o); err != nil {
				t.Fatalf("search %s: bad line %q: %v", p.Encode(), text, err)
			}
			if o.Error != nil {
				t.Fatalf("search %s: error %s", p.Encode(), *o.Error)
			}
			if o.Done {
				ended, limited = true, o.Limited
				continue
			}
			lastTs = o.TS
			ts, err := strconv.ParseInt(o.TS, 10, 64)
			if err != nil {
				t.Fatalf("search: ts %q", o.TS)
			}
			rows = append(rows, pgRow{ts: ts, id: pgID(t, o.Line), page: reqs})
		}
		reqs++
		if !ended {
			t.Fatalf("search %s: no trailer: %q", p.Encode(), body)
		}
		if limited && lastTs == "" {
			limited = false
		}
		if !limited {
			return rows, reqs
		}
		same := 0
		for i := len(rows) - 1; i >= 0 && strconv.FormatInt(rows[i].ts, 10) == lastTs; i-- {
			same++
		}
		skip = same
		if forward {
			start, _ = strconv.ParseInt(lastTs, 10, 64)
		} else {
			end, _ = strconv.ParseInt(lastTs, 10, 64)
		}
	}
}

// lokiPage pages query_range as logcli does with --limit=limit
// --batch=batch: each batch asks for batch entries (the last one for what
// is left plus the entries it will drop), sorts the answer's entries by
// time, drops those equal (time and line) to one of the previous batch's
// entries at its last time, and moves end to that time + 1 ns (end is
// exclusive; forward: start to that time). It stops at a batch that adds
// nothing or when limit entries are shown. fatal is logcli's refusal
// ("Invalid batch size") when a batch ends in as many entries at one time
// as the batch size.
func lokiPage(t *testing.T, e *testEnv, tenant, qs string, forward bool, limit, batch int, start, end int64, before func(int)) (rows []pgRow, reqs int, fatal string) {
	t.Helper()
	dir := "backward"
	if forward {
		dir = "forward"
	}
	type lent struct {
		ts   int64
		line string
	}
	var lastEntry []lent
	total := 0
	for total < limit {
		if reqs > 20000 {
			t.Fatalf("logcli paging does not end after %d requests", reqs)
		}
		if before != nil {
			before(reqs)
		}
		bs := batch
		if limit-total < batch {
			bs = limit - total + len(lastEntry)
		}
		p := url.Values{}
		p.Set("query", qs)
		p.Set("limit", strconv.Itoa(bs))
		p.Set("start", strconv.FormatInt(start, 10))
		p.Set("end", strconv.FormatInt(end, 10))
		p.Set("direction", dir)
		code, body := e.get("/loki/api/v1/query_range?"+p.Encode(), "X-Scope-OrgID", tenant)
		if code != 200 {
			t.Fatalf("query_range %s: %d %s", p.Encode(), code, body)
		}
		var resp dtStreamsResp
		if err := json.Unmarshal([]byte(body), &resp); err != nil || resp.Status != "success" || resp.Data.ResultType != "streams" {
			t.Fatalf("query_range %s: %v %q", p.Encode(), err, body)
		}
		var all []lent
		for _, s := range resp.Data.Result {
			for _, v := range s.Values {
				ts, err := strconv.ParseInt(v[0], 10, 64)
				if err != nil {
					t.Fatalf("query_range: ts %q", v[0])
				}
				all = append(all, lent{ts, v[1]})
			}
		}
		slices.SortStableFunc(all, func(a, b lent) int {
			if forward {
				return cmp.Compare(a.ts, b.ts)
			}
			return cmp.Compare(b.ts, a.ts)
		})
		printed := 0
		for _, en := range all {
			if slices.Contains(lastEntry, en) {
				continue
			}
			rows = append(rows, pgRow{ts: en.ts, id: pgID(t, en.line), page: reqs})
			printed++
		}
		reqs++
		lastEntry = nil
		if len(all) > 0 {
			lt := all[len(all)-1].ts
			for _, en := range all {
				if en.ts == lt {
					lastEntry = append(lastEntry, en)
				}
			}
		}
		if printed <= 0 || len(lastEntry) == 0 || printed == limit {
			break
		}
		if len(lastEntry) >= batch {
			return rows, reqs, fmt.Sprintf("batch %d ends in %d entries at %d", batch, len(lastEntry), lastEntry[0].ts)
		}
		total += printed
		if forward {
			start = lastEntry[0].ts
		} else {
			end = lastEntry[0].ts + 1
		}
	}
	return rows, reqs, ""
}

// pgCheck compares the rows a client showed with the entries: each exactly
// once, in time order. It returns a description of what is wrong ("" if
// nothing).
func pgCheck(es []pgEntry, rows []pgRow, forward bool) string {
	byID := map[int]*pgEntry{}
	for i := range es {
		byID[es[i].id] = &es[i]
	}
	var b strings.Builder
	seen := map[int][]int{} // id -> indexes in rows
	bad := 0
	for i, r := range rows {
		en := byID[r.id]
		if en == nil || en.ts != r.ts {
			fmt.Fprintf(&b, "  row %d (page %d): id %d at %d is no pushed entry\n", i, r.page, r.id, r.ts)
			bad++
			continue
		}
		seen[r.id] = append(seen[r.id], i)
		if i > 0 && (forward && r.ts < rows[i-1].ts || !forward && r.ts > rows[i-1].ts) {
			fmt.Fprintf(&b, "  row %d (page %d): time %d after %d\n", i, r.page, r.ts, rows[i-1].ts)
			bad++
		}
	}
	var dups, missing []string
	for _, en := range es {
		switch at := seen[en.id]; {
		case len(at) == 0:
			missing = append(missing, fmt.Sprintf("id %d (stream %d, ts %d)", en.id, en.stream, en.ts))
		case len(at) > 1:
			var where []string
			for _, i := range at {
				where = append(where, fmt.Sprintf("row %d page %d", i, rows[i].page))
			}
			dups = append(dups, fmt.Sprintf("id %d (stream %d, ts %d) at %s", en.id, en.stream, en.ts, strings.Join(where, ", ")))
		}
	}
	if len(dups) == 0 && len(missing) == 0 && bad == 0 {
		return ""
	}
	const show = 12
	fmt.Fprintf(&b, "  %d rows shown for %d entries: %d shown twice or more, %d missing\n", len(rows), len(es), len(dups), len(missing))
	for i, d := range dups {
		if i == show {
			fmt.Fprintf(&b, "    ... %d more\n", len(dups)-show)
			break
		}
		fmt.Fprintf(&b, "    dup: %s\n", d)
	}
	for i, m := range missing {
		if i == show {
			fmt.Fprintf(&b, "    ... %d more\n", len(missing)-show)
			break
		}
		fmt.Fprintf(&b, "    missing: %s\n", m)
	}
	return b.String()
}

// pgSettle waits until every segment of the tenant is compacted and the
// manifest has not changed for 200 compaction intervals.
func pgSettle(t *testing.T, e *testEnv, tenant string) *store.Manifest {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	last, since := "", time.Now()
	for {
		m := pgManifest(t, e, tenant)
		names := pgSegNames(m)
		compacted := !slices.ContainsFunc(m.Segments, func(sm store.SegmentMeta) bool { return !sm.Compacted })
		if names != last || !compacted {
			last, since = names, time.Now()
		} else if time.Since(since) > 200*time.Millisecond {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("tenant %s: compaction does not settle: %s", tenant, names)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// countHandler counts the server's "compacted" log records.
type countHandler struct{ n *atomic.Int64 }

func (h countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "compacted" {
		h.n.Add(1)
	}
	return nil
}
func (h countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countHandler) WithGroup(string) slog.Handler      { return h }

// pgPace returns a before-request hook that records the manifest (w)
// and, while compaction is busy, waits for it to change before each
// request but the first, so that compaction steps land between requests.
// Once it has waited twice in a row in vain it stops waiting.
func pgPace(w *pgWatch) func(int) {
	idle := 0
	return func(n int) {
		if n > 0 && idle < 2 {
			before := pgSegNames(w.last)
			deadline := time.Now().Add(10 * time.Millisecond)
			for pgSegNames(pgManifest(w.t, w.e, w.tenant)) == before && time.Now().Before(deadline) {
				time.Sleep(200 * time.Microsecond)
			}
		}
		k := len(w.changed)
		w.check(n)
		if n > 0 {
			if len(w.changed) == k {
				idle++
			} else {
				idle = 0
			}
		}
	}
}

// TestPagingWhileMerging: several tenants get bursts of equal-time entries
// in many small segments from a server without compaction; a server with
// background compaction (every millisecond, merging up to 32 KiB) then
// opens the same data, and each tenant is paged right away, as the UI
// does (random direction, page size 1-50; one tenant as logcli does),
// while its compaction rewrites and merges the segments between the
// requests (pgPace). Once compaction has settled both clients page every
// tenant again in both directions, as the control. Before that, on the
// server without compaction, one more tenant is paged while a push before
// each request flushes the head (entries outside the window).
func TestPagingWhileMerging(t *testing.T) {
	seed := envSeed(t, "HAY_PAGING_SEED")
	t.Logf("seed %d (rerun with HAY_PAGING_SEED=%d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 0x70a61e))
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("seed %d (rerun with HAY_PAGING_SEED=%d): %s", seed, seed, fmt.Sprintf(format, args...))
	}
	const mergeBytes = 32 << 10
	dir := t.TempDir()
	layout := store.Options{HeadBytes: 2 << 10, Segment: segment.Options{BlockSize: 1 << 10}}

	// The data, pushed without compaction: every flushed head stays a
	// segment of its own.
	type tenantData struct {
		name    string
		es      []pgEntry
		flushed int // segments before compaction
		largest int64
	}
	// The UI's window: [from, to] in ms, to + 999999 ns (app.js run()).
	start := base - int64(time.Hour)
	end := base/1e6*1e6 + 999_999
	queries := []string{"", "id=", `{app="pg"}`, `{app=~"p.*"} |= "s="`}

	var tenants []*tenantData
	a := newEnv(t, func(c *Config) { c.DataDir, c.Store = dir, layout })
	id := 0
	for k := range 8 {
		td := &tenantData{name: fmt.Sprintf("pg%d", k)}
		td.es = pgGen(r, base-int64(30*time.Minute)+int64(k)*int64(time.Minute), 200+r.IntN(200), id)
		id += len(td.es)
		pgPush(a, r, td.name, td.es)
		tenants = append(tenants, td)
	}

	// Flushes between pages, without compaction: before each request a
	// push of entries two hours old (outside the window) fills the head,
	// which is flushed with the tail of the paged entries in it.
	{
		es := pgGen(r, base-int64(20*time.Minute), 200+r.IntN(200), id)
		id += len(es)
		pgPush(a, r, "pgflush", es)
		forward := r.IntN(2) == 0
		page := 1 + r.IntN(50)
		qs := queries[r.IntN(len(queries))]
		noise := 0
		w := newPgWatch(t, a, "pgflush")
		rows, n := uiPage(t, a, "pgflush", qs, forward, page, start, end, func(n int) {
			var ps []PushEntry
			for range 8 {
				ps = append(ps, PushEntry{Time: base - int64(2*time.Hour) + int64(noise), Line: fmt.Sprintf("noise %d %s", noise, strings.Repeat("n", 300))})
				noise++
			}
			a.mustPush("/loki/api/v1/push", protoBody([]PushStream{{Labels: `{app="pg", s="noise"}`, Entries: ps}}), "Content-Type", "application/x-protobuf", "X-Scope-OrgID", "pgflush")
			w.check(n)
		})
		desc := fmt.Sprintf("tenant pgflush: UI paging while heads are flushed, q=%q forward=%v page=%d: %d requests, the manifest changed before %d of them", qs, forward, page, n, len(w.changed))
		t.Log(desc)
		if msg := pgCheck(es, rows, forward); msg != "" {
			fail("%s:\n%s", desc, msg)
		}
	}
	a.ts.Close()
	if err := a.srv.Close(); err != nil {
		t.Fatal(err)
	}
	for _, td := range tenants {
		m := pgManifest(t, a, td.name)
		td.flushed = len(m.Segments)
		for _, sm := range m.Segments {
			td.largest = max(td.largest, sm.Entries)
			if sm.Compacted {
				t.Fatalf("tenant %s: compacted without compaction: %s", td.name, pgSegNames(m))
			}
		}
	}

	var compactions atomic.Int64
	e := newEnv(t, func(c *Config) {
		c.DataDir, c.Store = dir, layout
		c.CompactInterval = time.Millisecond
		c.CompactMergeBytes = mergeBytes
		c.Logger = slog.New(countHandler{&compactions})
	})
	var reqs, changed, merged int
	for k, td := range tenants {
		// The tenant's store opens, and its compaction starts, at the
		// first request.
		w := newPgWatch(t, e, td.name)
		forward := r.IntN(2) == 0
		var rows []pgRow
		var n int
		var desc string
		if k < len(tenants)-1 {
			page := 1 + r.IntN(50)
			if r.IntN(3) == 0 {
				page = 1 + r.IntN(5)
			}
			qs := queries[r.IntN(len(queries))]
			rows, n = uiPage(t, e, td.name, qs, forward, page, start, end, pgPace(w))
			desc = fmt.Sprintf("tenant %s: UI paging during compaction, q=%q forward=%v page=%d", td.name, qs, forward, page)
		} else {
			batch := 51 + r.IntN(150)
			var fatal string
			rows, n, fatal = lokiPage(t, e, td.name, `{app="pg"}`, forward, len(td.es), batch, start, end, pgPace(w))
			desc = fmt.Sprintf("tenant %s: logcli paging during compaction, forward=%v batch=%d", td.name, forward, batch)
			if fatal != "" {
				fail("%s: logcli would stop: %s", desc, fatal)
			}
		}
		desc += fmt.Sprintf(": %d requests; the manifest changed before %d of them, segments merged before %d", n, len(w.changed), len(w.merged))
		t.Log(desc)
		if msg := pgCheck(td.es, rows, forward); msg != "" {
			fail("%s:\n%s  changes before requests %v, merges before %v", desc, msg, w.changed, w.merged)
		}
		reqs += n
		changed += len(w.changed)
		merged += len(w.merged)
	}
	t.Logf("during compaction: %d requests, the manifest changed before %d of them, segments merged before %d; %d background compactions logged", reqs, changed, merged, compactions.Load())

	// Compaction did merge: fewer, larger segments.
	for _, td := range tenants {
		m := pgSettle(t, e, td.name)
		var largest int64
		for _, sm := range m.Segments {
			largest = max(largest, sm.Entries)
		}
		t.Logf("tenant %s: %d entries; %d segments before compaction (the largest %d entries), %d after (the largest %d)", td.name, len(td.es), td.flushed, td.largest, len(m.Segments), largest)
		if len(m.Segments) >= td.flushed || largest <= td.largest {
			fail("tenant %s: no merges: %d segments before compaction (the largest %d entries), %d after (the largest %d)", td.name, td.flushed, td.largest, len(m.Segments), largest)
		}
	}
	if merged == 0 {
		fail("no merge landed between two page requests")
	}

	// The control: compaction has settled; both clients, both directions.
	for _, td := range tenants {
		for _, forward := range []bool{false, true} {
			page := 1 + r.IntN(50)
			qs := queries[r.IntN(len(queries))]
			rows, n := uiPage(t, e, td.name, qs, forward, page, start, end, nil)
			if msg := pgCheck(td.es, rows, forward); msg != "" {
				fail("tenant %s: UI paging after compaction, q=%q forward=%v page=%d (%d requests):\n%s", td.name, qs, forward, page, n, msg)
			}
			batch := 51 + r.IntN(150)
			rows, n, fatal := lokiPage(t, e, td.name, `{app="pg"}`, forward, len(td.es), batch, start, end, nil)
			if fatal != "" {
				fail("tenant %s: logcli paging after compaction, forward=%v batch=%d: logcli would stop: %s", td.name, forward, batch, fatal)
			} else if msg := pgCheck(td.es, rows, forward); msg != "" {
				fail("tenant %s: logcli paging after compaction, forward=%v batch=%d (%d requests):\n%s", td.name, forward, batch, n, msg)
			}
		}
	}
}
