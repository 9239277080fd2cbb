package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"
)

// entry is one log entry of the fake store.
type entry struct {
	ts     int64 // unix ns
	labels map[string]string
	line   string
}

// The hostile lines: each contains "hostile" so one query finds them all.
const (
	lineScript = `hostile <script>alert(1)</script> after`
	lineImg    = `hostile <img src=x onerror="window.__xss=1"> img`
	lineEntity = `hostile &lt;b&gt;bold&lt;/b&gt; &amp; &#60;i&#62;`
	lineEsc    = "hostile \x1b[31mred\x1b[0m plain"
	lineBidi   = "hostile bidi \u202egnp.exe"
	labelXSS   = `<svg onload=window.__xss=2>`
)

// fakeStore builds the fixed corpus: ordinary lines over the 24 hours
// before now, some with "timeout" in several cases and counts, groups of
// "tick" lines sharing timestamps (to page across ties), hostile lines and
// one very long line.
func fakeStore(now time.Time) []entry {
	base := now.Truncate(time.Second).Add(-23 * time.Hour).UnixNano()
	apps := []string{"api", "auth", "web", "db"}
	levels := []string{"info", "info", "info", "warn", "error"}
	var es []entry
	const n = 2000
	step := int64(23*time.Hour) / n
	for i := range n {
		app := apps[i%len(apps)]
		lv := levels[i%len(levels)]
		line := fmt.Sprintf("GET /users/%d 200 %dms", i*7%1000, i%97)
		switch {
		case i%41 == 0:
			line = fmt.Sprintf("upstream timeout after %ds, retry timeout budget %d", i%30, i)
		case i%37 == 0:
			line = fmt.Sprintf("request %d: timeout talking to db", i)
		case i%53 == 0:
			line = fmt.Sprintf("Timeout: worker %d stalled (TIMEOUT code %d)", i, i%7)
		case i%59 == 0:
			line = fmt.Sprintf("timeouttimeout glued %d", i)
		}
		es = append(es, entry{ts: base + int64(i)*step, labels: map[string]string{"app": app, "level": lv}, line: line})
	}
	// 120 tick lines in the last two hours, three per timestamp.
	tickBase := now.Truncate(time.Second).Add(-2 * time.Hour).UnixNano()
	for i := range 120 {
		es = append(es, entry{ts: tickBase + int64(i/3)*int64(time.Second), labels: map[string]string{"app": "cron", "level": "info"}, line: fmt.Sprintf("tick %03d", i)})
	}
	hb := now.Truncate(time.Second).Add(-3 * time.Hour).UnixNano()
	es = append(es,
		entry{ts: hb + 1, labels: map[string]string{"app": "web", "level": "warn"}, line: lineScript},
		entry{ts: hb + 2, labels: map[string]string{"app": "web", "level": "warn"}, line: lineImg},
		entry{ts: hb + 3, labels: map[string]string{"app": labelXSS, "level": "warn"}, line: lineEntity},
		entry{ts: hb + 4, labels: map[string]string{"app": "web", "level": "error"}, line: lineEsc},
		entry{ts: hb + 5, labels: map[string]string{"app": "web", "level": "error"}, line: lineBidi},
		entry{ts: hb + 6, labels: map[string]string{"app": "api", "level": "info"}, line: "longline " + strings.Repeat("abcdefghij", 600) + " end-of-long-line"},
	)
	es = append(es, edgeEntries(now)...)
	// Two stored entries for the live-tail tests' search.
	for i := range 2 {
		es = append(es, entry{ts: now.Truncate(time.Second).Add(-time.Duration(10-i) * time.Minute).UnixNano(), labels: map[string]string{"app": "live", "level": "info"}, line: fmt.Sprintf("tailctl stored %d", i+1)})
	}
	sort.SliceStable(es, func(i, j int) bool { return es[i].ts < es[j].ts })
	return es
}

// edgeStep is the histogram step the fake chooses for 24 hours (hits).
const edgeStep = int64(30 * time.Minute / time.Millisecond)

// edgeBucket is the start (unix ms) of the histogram bucket that holds the
// "bucketedge" entries: the 30-minute bucket six hours before now.
func edgeBucket(now time.Time) int64 {
	return (now.Add(-6*time.Hour).UnixMilli() / edgeStep) * edgeStep
}

// edgeEntries are the "bucketedge" lines, at the nanoseconds that tell an
// off-by-one range from a right one: the last ns of the bucket before B,
// the first and last ns of B's first millisecond, the last ns of the
// second before B's end and the first ns after it (a custom range ending
// there), the last ns of B, and the first ns of the next bucket.
func edgeEntries(now time.Time) []entry {
	b := edgeBucket(now) * 1e6
	end := b + edgeStep*1e6 // the next bucket's first ns
	ts := []int64{b - 1, b, b + 999_999, end - 1e9 + 999_999, end - 1e9 + 1e6, end - 1, end}
	var es []entry
	for i, t := range ts {
		lv := []string{"info", "warn", "error"}[i%3]
		es = append(es, entry{ts: t, labels: map[string]string{"app": "edge", "level": lv}, line: fmt.Sprintf("bucketedge %d at %d", i, t)})
	}
	return es
}

// matcher is the fake's query: a plain literal or a small LogQL subset
// (a selector of label="value" matchers, then |= "lit" and |~ "re" filters).
type matcher struct {
	labels map[string]string
	lits   []string
	res    []*regexp.Regexp
	fold   bool
}

func parseQuery(q string, fold bool) (*matcher, error) {
	m := &matcher{labels: map[string]string{}}
	t := strings.TrimSpace(q)
	if !strings.HasPrefix(t, "{") {
		if q != "" {
			m.lits = []string{q}
		}
		m.fold = fold
		return m, nil
	}
	t = t[1:]
	for {
		t = strings.TrimLeft(t, " ,")
		if strings.HasPrefix(t, "}") {
			t = t[1:]
			break
		}
		eq := strings.Index(t, "=")
		if eq < 0 {
			return nil, fmt.Errorf("bad selector at %q", t)
		}
		name := strings.TrimSpace(t[:eq])
		t = strings.TrimSpace(t[eq+1:])
		qs, err := strconv.QuotedPrefix(t)
		if err != nil {
			return nil, fmt.Errorf("bad value at %q: %w", t, err)
		}
		v, _ := strconv.Unquote(qs)
		m.labels[name] = v
		t = t[len(qs):]
	}
	for {
		t = strings.TrimSpace(t)
		if t == "" {
			return m, nil
		}
		if len(t) < 2 || (t[:2] != "|=" && t[:2] != "|~") {
			return nil, fmt.Errorf("bad filter at %q", t)
		}
		op := t[:2]
		t = strings.TrimSpace(t[2:])
		qs, err := strconv.QuotedPrefix(t)
		if err != nil {
			return nil, fmt.Errorf("bad filter string at %q: %w", t, err)
		}
		v, _ := strconv.Unquote(qs)
		t = t[len(qs):]
		if op == "|=" {
			m.lits = append(m.lits, v)
		} else {
			re, err := regexp.Compile(v)
			if err != nil {
				return nil, fmt.Errorf("bad regex: %w", err)
			}
			m.res = append(m.res, re)
		}
	}
}

func (m *matcher) match(e entry) bool {
	for k, v := range m.labels {
		if e.labels[k] != v {
			return false
		}
	}
	for _, l := range m.lits {
		if m.fold {
			if !strings.Contains(strings.ToLower(e.line), strings.ToLower(l)) {
				return false
			}
		} else if !strings.Contains(e.line, l) {
			return false
		}
	}
	for _, re := range m.res {
		if !re.MatchString(e.line) {
			return false
		}
	}
	return true
}

// fakeAPI implements API.md over a fixed slice of entries and records the
// requests it got, so tests can compute what the page should show.
type fakeAPI struct {
	entries []entry
	mu      sync.Mutex
	reqs    map[string][]url.Values
	// cancelled receives the query of each search whose client went away.
	cancelled chan string
	// tailConns receives each live tail whose query contains "tailctl",
	// for the test to drive (tailConn).
	tailConns chan *tailConn
	// bytesCut makes a limited search's trailer say the server's byte
	// bound cut it, as hay serve's does (limited_by, warning).
	bytesCut atomic.Bool
}

func newFakeAPI(es []entry) *fakeAPI {
	return &fakeAPI{entries: es, reqs: map[string][]url.Values{}, cancelled: make(chan string, 16), tailConns: make(chan *tailConn, 8)}
}

// count returns how many requests the named endpoint got.
func (f *fakeAPI) count(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs[name])
}

func (f *fakeAPI) record(name string, v url.Values) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs[name] = append(f.reqs[name], v)
}

// last returns the most recent request to the named endpoint.
func (f *fakeAPI) last(name string) url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.reqs[name]
	if len(r) == 0 {
		return nil
	}
	return r[len(r)-1]
}

func jsonError(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

// params parses the common parameters.
func params(v url.Values) (*matcher, int64, int64, error) {
	m, err := parseQuery(v.Get("q"), v.Get("fold") == "1")
	if err != nil {
		// The raw query in the message, as a careless server would echo it.
		return nil, 0, 0, fmt.Errorf("bad query %s: %w", v.Get("q"), err)
	}
	start, end := int64(0), int64(1)<<62
	if s := v.Get("start"); s != "" {
		if start, err = strconv.ParseInt(s, 10, 64); err != nil {
			return nil, 0, 0, fmt.Errorf("bad start: %w", err)
		}
	}
	if s := v.Get("end"); s != "" {
		if end, err = strconv.ParseInt(s, 10, 64); err != nil {
			return nil, 0, 0, fmt.Errorf("bad end: %w", err)
		}
	}
	if start > end {
		// As the server does (API.md: start > end is a 400).
		return nil, 0, 0, fmt.Errorf("start (%d) is after end (%d)", start, end)
	}
	return m, start, end, nil
}

// search is the oracle: the entries the API returns for v, in order.
func (f *fakeAPI) search(v url.Values) ([]entry, bool, error) {
	m, start, end, err := params(v)
	if err != nil {
		return nil, false, err
	}
	limit := 1000
	if s := v.Get("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil {
			return nil, false, fmt.Errorf("bad limit: %w", err)
		}
	}
	var out []entry
	for _, e := range f.entries {
		if e.ts >= start && e.ts <= end && m.match(e) {
			out = append(out, e)
		}
	}
	boundary := start
	if v.Get("direction") != "forward" {
		// Newest first; ties keep their store order, as API.md asks.
		sort.SliceStable(out, func(i, j int) bool { return out[i].ts > out[j].ts })
		boundary = end
	}
	// skip: leading entries at the boundary time, already shown.
	if s := v.Get("skip"); s != "" {
		skip, err := strconv.Atoi(s)
		if err != nil {
			return nil, false, fmt.Errorf("bad skip: %w", err)
		}
		for skip > 0 && len(out) > 0 && out[0].ts == boundary {
			out, skip = out[1:], skip-1
		}
	}
	limited := len(out) > limit
	if limited {
		out = out[:limit]
	}
	return out, limited, nil
}

func entryJSON(e entry) map[string]any {
	return map[string]any{
		"ts":     strconv.FormatInt(e.ts, 10),
		"time":   time.Unix(0, e.ts).UTC().Format(time.RFC3339Nano),
		"labels": e.labels,
		"line":   e.line,
	}
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	switch r.URL.Path {
	case "/api/v1/search":
		f.record("search", v)
		f.serveSearch(w, r, v)
	case "/api/v1/hits":
		f.record("hits", v)
		h, err := f.hits(v)
		if err != nil {
			jsonError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(h)
	case "/api/v1/facets":
		f.record("facets", v)
		m, start, end, err := params(v)
		if err != nil {
			jsonError(w, err)
			return
		}
		labels := map[string]map[string]int{}
		for _, e := range f.entries {
			if e.ts >= start && e.ts <= end && m.match(e) {
				for k, val := range e.labels {
					if labels[k] == nil {
						labels[k] = map[string]int{}
					}
					labels[k][val]++
				}
			}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"labels": labels})
	case "/api/v1/tail":
		f.record("tail", v)
		f.serveTail(w, r, v)
	case "/loki/api/v1/labels":
		f.record("labels", v)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"success","data":["app","level"]}`)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeAPI) serveSearch(w http.ResponseWriter, r *http.Request, v url.Values) {
	started := time.Now()
	if strings.Contains(v.Get("q"), "slowquery") {
		// One row, then nothing until the client goes away.
		w.Header().Set("Content-Type", "application/x-ndjson")
		e := entry{ts: time.Now().UnixNano(), labels: map[string]string{"app": "slow"}, line: "slowquery first row"}
		json.NewEncoder(w).Encode(entryJSON(e))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		f.cancelled <- v.Get("q")
		return
	}
	out, limited, err := f.search(v)
	if err != nil {
		jsonError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	for i, e := range out {
		b, _ := json.Marshal(entryJSON(e))
		b = append(b, '\n')
		// Every 16th line, and every line with a multi-byte character, is
		// sent in two chunks: cut in the middle, or inside that character,
		// so the page must join lines and characters across reads.
		cut, pause := -1, 2*time.Millisecond
		if i%16 == 15 {
			cut = len(b) / 2
		}
		if k := bytes.IndexFunc(b, func(r rune) bool { return r >= utf8.RuneSelf }); k >= 0 {
			// Long enough for the page to read the first part on its own.
			cut, pause = k+1, 50*time.Millisecond
		}
		if cut < 0 {
			w.Write(b)
			continue
		}
		w.Write(b[:cut])
		w.(http.Flusher).Flush()
		time.Sleep(pause)
		w.Write(b[cut:])
	}
	trailer := map[string]any{"done": true, "count": len(out), "limited": limited, "elapsed_ms": time.Since(started).Milliseconds()}
	if limited && f.bytesCut.Load() {
		trailer["limited_by"] = "bytes"
		trailer["warning"] = fakeCutWarning
	}
	json.NewEncoder(w).Encode(trailer)
}

// fakeCutWarning is the warning of a search the fake API says it cut by
// bytes.
const fakeCutWarning = "the answer was cut at 50 entries: they hold about 64MiB, the server's --max-query-bytes"

type hitsAnswer struct {
	StepMs  int64    `json:"step_ms"`
	Buckets []bucket `json:"buckets"`
	Total   int      `json:"total"`
}

type bucket struct {
	T     int64 `json:"t"`
	Count int   `json:"count"`
}

func (f *fakeAPI) hits(v url.Values) (hitsAnswer, error) {
	m, start, end, err := params(v)
	if err != nil {
		return hitsAnswer{}, err
	}
	step := int64(0)
	if s := v.Get("step"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil || sec <= 0 {
			return hitsAnswer{}, fmt.Errorf("bad step %q", s)
		}
		step = sec * 1000
	} else {
		span := (end - start) / 1e6
		for _, s := range []int64{1e3, 5e3, 10e3, 30e3, 60e3, 300e3, 600e3, 1800e3, 3600e3, 3 * 3600e3, 6 * 3600e3, 86400e3} {
			step = s
			if span/s <= 100 {
				break
			}
		}
	}
	counts := map[int64]int{}
	h := hitsAnswer{StepMs: step, Buckets: []bucket{}}
	for _, e := range f.entries {
		if e.ts >= start && e.ts <= end && m.match(e) {
			ms := e.ts / 1e6
			counts[ms/step*step]++
			h.Total++
		}
	}
	for t, c := range counts {
		h.Buckets = append(h.Buckets, bucket{t, c})
	}
	sort.Slice(h.Buckets, func(i, j int) bool { return h.Buckets[i].T < h.Buckets[j].T })
	return h, nil
}

// tailBurst is how many entries the fake tail sends at once: more than the
// page's cap, to check the cap.
const tailBurst = 1010

// tailRetry is the reconnection delay (ms) the fake's tails ask for (an
// EventSource's retry: field; the page reconnects on its own schedule),
// so that a tests' wait for a wrong reconnect can be short.
const tailRetry = 100

// tailConn is one live-tail connection the test drives: each command sent
// on cmds is done before the next is taken; gone is closed when the
// handler returns, after the client went away or "end"/"cut". (Tests see
// the page close a tail in the page: browsertest.TailTraceJS.)
type tailConn struct {
	req  url.Values
	cmds chan tailCmd
	gone chan struct{}
}

// tailCmd is what a tailConn does next: "open" (status 200, headers, a
// retry hint and a comment, as the server's first bytes), "data" (one
// event with data), "end" (end the response: the stream ends cleanly),
// "cut" (close the TCP connection mid-stream) or "status" (answer code
// instead of opening, with data as a JSON body if any).
type tailCmd struct {
	op   string
	data string
	code int
}

func (c *tailConn) do(t testing.TB, cmd tailCmd) {
	t.Helper()
	select {
	case c.cmds <- cmd:
	case <-c.gone:
		t.Fatalf("tail %v: the connection ended before %q", c.req, cmd.op)
	case <-time.After(5 * time.Second):
		t.Fatalf("tail %v: %q not taken", c.req, cmd.op)
	}
}

func (f *fakeAPI) serveTailCtl(w http.ResponseWriter, r *http.Request, v url.Values) {
	c := &tailConn{req: v, cmds: make(chan tailCmd), gone: make(chan struct{})}
	defer close(c.gone)
	select {
	case f.tailConns <- c:
	case <-r.Context().Done():
		return
	}
	for {
		var cmd tailCmd
		select {
		case cmd = <-c.cmds:
		case <-r.Context().Done():
			return
		}
		switch cmd.op {
		case "open":
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
			fmt.Fprintf(w, "retry: %d\n: tail started\n\n", tailRetry)
		case "data":
			fmt.Fprintf(w, "data: %s\n\n", cmd.data)
		case "status":
			if cmd.data != "" {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(cmd.code)
				fmt.Fprint(w, cmd.data)
				return
			}
			http.Error(w, "tail unavailable", cmd.code)
			return
		case "end":
			return
		case "cut":
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		w.(http.Flusher).Flush()
	}
}

func (f *fakeAPI) serveTail(w http.ResponseWriter, r *http.Request, v url.Values) {
	if _, err := parseQuery(v.Get("q"), v.Get("fold") == "1"); err != nil {
		// As the server does: an EventSource cannot read a 400's body, so the
		// error is an event (API.md). The retry hint makes a page that does
		// not close the stream reconnect at once, for the test to see.
		w.Header().Set("Content-Type", "text/event-stream")
		b, _ := json.Marshal(map[string]string{"error": fmt.Sprintf("bad query %s: %v", v.Get("q"), err)})
		fmt.Fprintf(w, "retry: %d\ndata: %s\n\n", tailRetry, b)
		return
	}
	if strings.Contains(v.Get("q"), "tailctl") {
		f.serveTailCtl(w, r, v)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	now := time.Now().UnixNano()
	for i := range tailBurst {
		e := entry{ts: now + int64(i), labels: map[string]string{"app": "tail"}, line: fmt.Sprintf("tail event %04d <b>x</b>", i)}
		b, _ := json.Marshal(entryJSON(e))
		fmt.Fprintf(w, "data: %s\n\n", b)
		if i%100 == 99 {
			w.(http.Flusher).Flush()
		}
	}
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}
