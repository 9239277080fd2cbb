package server

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// bigQuery rewrites each line of {app="big"} to itself, a space and n
// x's: a 7-byte stored line becomes an answer's n-byte line.
func bigQuery(n int) string {
	return fmt.Sprintf(`{app="big"} | line_format "{{ __line__ }} {{ repeat %d \"x\" }}"`, n)
}

// bigTime is the time of entry i of pushBig: three entries share each
// time, so that cuts fall between entries of one time.
func bigTime(i int) int64 { return base - int64(i/3)*1e9 }

// pushBig pushes n entries "id=<i>" to {app="big"} at bigTime(i), in
// two pushes each out of time order (the store order is not the
// answer's), and a few to another stream the query does not select.
func pushBig(e *testEnv, n int) {
	e.t.Helper()
	ids := make([]int, n)
	for i := range ids {
		ids[i] = i
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	for _, part := range [][]int{ids[:n/2], ids[n/2:]} {
		var b strings.Builder
		b.WriteString(`{"streams":[{"stream":{"app":"big"},"values":[`)
		for k, i := range part {
			if k > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `["%d","id=%d"]`, bigTime(i), i)
		}
		b.WriteString(`]},{"stream":{"app":"other"},"values":[["` + strconv.FormatInt(base, 10) + `","id=x"]]}]}`)
		e.mustPush("/loki/api/v1/push", []byte(b.String()), "Content-Type", "application/json")
	}
}

// checkAllOnce fails unless got holds "id=0" ... "id=<n-1>" (each
// followed by the rewrite's x's) exactly once each.
func checkAllOnce(t *testing.T, desc string, got []string, n, xs int) {
	t.Helper()
	seen := map[string]int{}
	for _, l := range got {
		id, rest, _ := strings.Cut(l, " ")
		if len(rest) != xs || strings.Trim(rest, "x") != "" {
			t.Fatalf("%s: line %.40q... of %d bytes is not the rewrite", desc, l, len(l))
		}
		seen[id]++
	}
	for i := range n {
		if c := seen[fmt.Sprintf("id=%d", i)]; c != 1 {
			t.Errorf("%s: id=%d returned %d times over all pages, want once", desc, i, c)
		}
	}
	if len(got) != n {
		t.Errorf("%s: %d entries over all pages, want %d", desc, len(got), n)
	}
}

// TestAnswerBytesLokiPaging: a log query whose line_format makes each of
// 60 entries 300 KB (18 MB in all, limit 5000) is answered within
// --max-query-bytes (2 MiB here), as entries that fit in the query's
// order with a warning, ending between two times; paging on from the
// last time, as a client of Loki's API does (end = that time, exclusive;
// forward, start = that time + 1), returns every entry exactly once.
// Before the bound, the one answer held all 18 MB.
func TestAnswerBytesLokiPaging(t *testing.T) {
	const n, xs, maxBytes = 60, 300_000, 2 << 20
	e := newEnv(t, func(c *Config) { c.MaxQueryBytes = maxBytes })
	pushBig(e, n)
	for _, backward := range []bool{true, false} {
		desc := fmt.Sprintf("backward=%v", backward)
		start, end := base-int64(n)*1e9, base+1
		var got []string
		pages, warned := 0, 0
		for {
			pages++
			if pages > n+2 {
				t.Fatalf("%s: paging does not end", desc)
			}
			p := url.Values{"query": {bigQuery(xs)}, "limit": {"5000"}, "start": {strconv.FormatInt(start, 10)}, "end": {strconv.FormatInt(end, 10)}, "direction": {"forward"}}
			if backward {
				p.Set("direction", "backward")
			}
			code, body := e.get("/loki/api/v1/query_range?" + p.Encode())
			if code != 200 {
				t.Fatalf("%s: %d %.200s", desc, code, body)
			}
			if len(body) > maxBytes+64<<10 {
				t.Fatalf("%s page %d: answer of %d bytes, over --max-query-bytes %d", desc, pages, len(body), maxBytes)
			}
			var r struct {
				Data struct {
					Result []struct {
						Values [][2]string `json:"values"`
					} `json:"result"`
				} `json:"data"`
				Warnings []string `json:"warnings"`
			}
			if err := json.Unmarshal([]byte(body), &r); err != nil {
				t.Fatalf("%s: %v", desc, err)
			}
			type ent struct {
				ts   int64
				line string
			}
			var page []ent
			for _, st := range r.Data.Result {
				for _, v := range st.Values {
					ts, _ := strconv.ParseInt(v[0], 10, 64)
					page = append(page, ent{ts, v[1]})
				}
			}
			if len(page) == 0 {
				if len(r.Warnings) > 0 {
					t.Fatalf("%s: an empty answer with warnings %q", desc, r.Warnings)
				}
				break
			}
			for _, x := range page {
				got = append(got, x.line)
			}
			if len(r.Warnings) == 0 {
				break // not cut, and under the limit: the last page
			}
			warned++
			if !strings.Contains(r.Warnings[0], "--max-query-bytes") {
				t.Errorf("%s: warning %q does not name the limit", desc, r.Warnings[0])
			}
			if backward {
				end = slices.MinFunc(page, func(a, b ent) int { return cmp.Compare(a.ts, b.ts) }).ts
			} else {
				start = slices.MaxFunc(page, func(a, b ent) int { return cmp.Compare(a.ts, b.ts) }).ts + 1
			}
		}
		checkAllOnce(t, desc, got, n, xs)
		if warned < 5 {
			t.Errorf("%s: %d pages with a warning, want at least 5 (18 MB in 2 MiB answers)", desc, warned)
		}
	}
	_, metrics := e.get("/metrics")
	if !strings.Contains(metrics, `hay_query_answers_cut_total{endpoint="loki"}`) {
		t.Errorf("no hay_query_answers_cut_total{endpoint=\"loki\"} in /metrics")
	}
}

// TestAnswerBytesNativePaging: /api/v1/search pages past answers cut by
// bytes with skip, as hay search --server and the UI do, and returns
// every entry exactly once: with a bound that holds two entries of a
// time of three (so cuts fall inside a time, and the first time of an
// answer is partly skipped), and with one smaller than an entry (each
// answer is that one entry). Before the bound, one answer held all.
func TestAnswerBytesNativePaging(t *testing.T) {
	const n, xs = 45, 300_000
	for _, maxBytes := range []int64{700 << 10, 200 << 10} {
		e := newEnv(t, func(c *Config) { c.MaxQueryBytes = maxBytes })
		pushBig(e, n)
		for _, backward := range []bool{true, false} {
			desc := fmt.Sprintf("max %d backward=%v", maxBytes, backward)
			var got []string
			var last int64
			atLast, pages := 0, 0
			for {
				pages++
				if pages > n+2 {
					t.Fatalf("%s: paging does not end", desc)
				}
				p := url.Values{"q": {bigQuery(xs)}, "limit": {"5000"}, "start": {strconv.FormatInt(base-int64(n)*1e9, 10)}, "end": {strconv.FormatInt(base, 10)}, "direction": {"forward"}}
				if backward {
					p.Set("direction", "backward")
				}
				if len(got) > 0 {
					if backward {
						p.Set("end", strconv.FormatInt(last, 10))
					} else {
						p.Set("start", strconv.FormatInt(last, 10))
					}
					p.Set("skip", strconv.Itoa(atLast))
				}
				code, body := e.get("/api/v1/search?" + p.Encode())
				if code != 200 {
					t.Fatalf("%s: %d %.200s", desc, code, body)
				}
				if limit := max(maxBytes, xs+1000) + 4<<10; int64(len(body)) > limit {
					t.Fatalf("%s page %d: answer of %d bytes, over %d", desc, pages, len(body), limit)
				}
				var trailer struct {
					Done      bool   `json:"done"`
					Count     int    `json:"count"`
					Limited   bool   `json:"limited"`
					LimitedBy string `json:"limited_by"`
				}
				count := 0
				sc := bufio.NewScanner(strings.NewReader(body))
				sc.Buffer(nil, 4<<20)
				for sc.Scan() {
					var l struct {
						Ts   string `json:"ts"`
						Line string `json:"line"`
						Done bool   `json:"done"`
					}
					if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
						t.Fatal(err)
					}
					if l.Done {
						json.Unmarshal(sc.Bytes(), &trailer)
						break
					}
					ts, _ := strconv.ParseInt(l.Ts, 10, 64)
					// As hay search --server counts (remote.go readPage).
					if atLast > 0 && ts == last {
						atLast++
					} else {
						last, atLast = ts, 1
					}
					got = append(got, l.Line)
					count++
				}
				if !trailer.Done || trailer.Count != count {
					t.Fatalf("%s: trailer %+v after %d entries", desc, trailer, count)
				}
				if maxBytes < xs && count > 1 {
					t.Fatalf("%s: %d entries in an answer of at most %d bytes, each entry %d", desc, count, maxBytes, xs)
				}
				if !trailer.Limited || count == 0 {
					break
				}
				if trailer.LimitedBy != "bytes" {
					t.Fatalf("%s: limited at %d of 5000 entries, limited_by %q", desc, count, trailer.LimitedBy)
				}
			}
			checkAllOnce(t, desc, got, n, xs)
			if pages < n*xs/int(max(maxBytes, xs)) {
				t.Errorf("%s: %d pages", desc, pages)
			}
		}
	}
}

// TestTopKBytesOracle: topK with a byte bound keeps exactly the oracle's
// answer (all hits sorted; the first limit of them, then the longest run
// from the first whose sizes fit maxBytes, at least one, ending before a
// time whose hits are left out unless it is the first time), and never
// holds more than 1.5 x maxBytes (or x its largest hit) plus one hit
// between compactions.
func TestTopKBytesOracle(t *testing.T) {
	seed := envSeed(t, "HAY_TOPK_SEED")
	t.Logf("seed %d (rerun with HAY_TOPK_SEED=%d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 11))
	for round := range 200 {
		limit := 1 + r.IntN(200)
		n := r.IntN(3 * limit)
		backward := r.IntN(2) == 0
		maxBytes := int64(1 + r.IntN(1<<16))
		k := &topK{limit: limit, maxBytes: maxBytes, backward: backward}
		var all []topKRec
		biggest := int64(0)
		for i := range n {
			size := r.IntN(int(maxBytes)/4 + 1)
			if r.IntN(8) == 0 {
				size = r.IntN(2 * int(maxBytes))
			}
			h := hit{Time: int64(r.IntN(30)), Ord: int64(i*7919) % 1009, Line: bytes.Repeat([]byte{'a' + byte(i%26)}, size)}
			all = append(all, topKRec{h, i})
			k.add(&h)
			biggest = max(biggest, hitSize(&h))
			if bound := max(maxBytes, biggest)*3/2 + biggest; k.bytes > bound {
				t.Fatalf("round %d: topK holds %d bytes after %d hits, bound %d", round, k.bytes, i+1, bound)
			}
		}
		sortTopKOracle(all, backward)
		want := all[:min(limit, len(all))]
		var sum int64
		for i := range want {
			if s := hitSize(&want[i].h); i > 0 && sum+s > maxBytes {
				m := i
				for m > 0 && want[m-1].h.Time == want[i].h.Time {
					m--
				}
				if m > 0 {
					i = m
				}
				want = want[:i]
				break
			} else {
				sum += s
			}
		}
		got, more := k.result()
		if len(got) != len(want) || more != (n > len(want)) {
			t.Fatalf("round %d (limit %d, n %d, max %d, backward %v): %d hits, more %v; want %d, %v", round, limit, n, maxBytes, backward, len(got), more, len(want), n > len(want))
		}
		for i := range got {
			if got[i].Time != want[i].h.Time || got[i].Ord != want[i].h.Ord || !bytes.Equal(got[i].Line, want[i].h.Line) {
				t.Fatalf("round %d: hit %d is (%d, %d, %d bytes), want (%d, %d, %d bytes)", round, i,
					got[i].Time, got[i].Ord, len(got[i].Line), want[i].h.Time, want[i].h.Ord, len(want[i].h.Line))
			}
		}
	}
}

// TestLokiTailBytes: a Loki tail's replay is bounded like a query's
// answer (the newest entries that fit), and what it sends comes in
// messages of about tailMessageBytes, live entries too, whatever one
// push holds; every live entry arrives exactly once.
func TestLokiTailBytes(t *testing.T) {
	const n, xs, maxBytes = 30, 300_000, 2 << 20
	e := newEnv(t, func(c *Config) { c.MaxQueryBytes = maxBytes })
	pushBig(e, n)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(e.ts.URL, "http") + "/loki/api/v1/tail?" + url.Values{"query": {bigQuery(xs)}, "limit": {"5000"}, "start": {strconv.FormatInt(base-int64(n)*1e9, 10)}}.Encode()
	c, _, err := websocket.Dial(ctx, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(64 << 20)
	// read returns the lines of one message.
	read := func() []string {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > tailMessageBytes+xs+4<<10 {
			t.Fatalf("a tail message of %d bytes", len(b))
		}
		var m struct {
			Streams []struct {
				Values [][2]string `json:"values"`
			} `json:"streams"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, st := range m.Streams {
			for _, v := range st.Values {
				out = append(out, v[1])
			}
		}
		return out
	}
	// The replay: the newest entries within 2 MiB, in whole times: 6 of
	// 300 KB entries (ids 0-5, two times of three).
	var replay []string
	for len(replay) < 6 {
		replay = append(replay, read()...)
	}
	slices.Sort(replay)
	var ids []string
	for _, l := range replay {
		id, _, _ := strings.Cut(l, " ")
		ids = append(ids, id)
	}
	if want := []string{"id=0", "id=1", "id=2", "id=3", "id=4", "id=5"}; !slices.Equal(ids, want) {
		t.Fatalf("replay %q, want %q", ids, want)
	}
	// One push of 20 entries: 6 MB once rewritten, sent in pieces.
	var b strings.Builder
	b.WriteString(`{"streams":[{"stream":{"app":"big"},"values":[`)
	for i := range 20 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `["%d","id=%d"]`, base+1+int64(i), 100+i)
	}
	b.WriteString(`]}]}`)
	e.mustPush("/loki/api/v1/push", []byte(b.String()), "Content-Type", "application/json")
	var live []string
	msgs := 0
	for len(live) < 20 {
		live = append(live, read()...)
		msgs++
	}
	if msgs < 4 {
		t.Errorf("20 entries of 300 KB in %d messages, want pieces of about %d bytes", msgs, tailMessageBytes)
	}
	seen := map[string]int{}
	for _, l := range live {
		id, _, _ := strings.Cut(l, " ")
		seen[id]++
	}
	for i := range 20 {
		if seen[fmt.Sprintf("id=%d", 100+i)] != 1 {
			t.Errorf("live id=%d arrived %d times", 100+i, seen[fmt.Sprintf("id=%d", 100+i)])
		}
	}
}

// TestTailDelayBytes: a delayed tail holds back at most maxBytes; past
// it the oldest entries go out before their delay is over, in order.
func TestTailDelayBytes(t *testing.T) {
	now := time.Unix(0, base)
	d := &tailDelay{delay: 5 * time.Second, maxBytes: 1000}
	var es []tailEntry
	for i := range 10 {
		es = append(es, tailEntry{labels: `{a="b"}`, time: base + int64(i), line: bytes.Repeat([]byte{'x'}, 200)})
	}
	d.add(es, now)
	out := d.take(now)
	held := int64(0)
	for _, p := range d.pending {
		held += p.e.size()
	}
	if held > 1000 || held != d.bytes {
		t.Fatalf("holds %d bytes (counted %d), bound 1000", held, d.bytes)
	}
	if len(out)+len(d.pending) != 10 || len(out) == 0 {
		t.Fatalf("took %d, holds %d", len(out), len(d.pending))
	}
	for i, e := range out {
		if e.time != base+int64(i) {
			t.Fatalf("entry %d out early is at %d, want the oldest first", i, e.time)
		}
	}
	rest := d.take(now.Add(time.Minute))
	if len(out)+len(rest) != 10 || d.bytes != 0 {
		t.Fatalf("took %d then %d of 10; %d bytes counted", len(out), len(rest), d.bytes)
	}
}

// TestScanDeferredPipeline: past scanKeepBytes of rewritten lines a
// block's task leaves the pipeline to the delivering goroutine; what it
// selects and makes must not change. 300 entries made 20 KB each (6 MB,
// one block), a line filter after line_format keeping the 150 odd ones
// (3 MB): the log query's entries, and count_over_time and
// bytes_over_time over them (two streams selected: the server's own
// scan), are exactly those.
func TestScanDeferredPipeline(t *testing.T) {
	const n, xs = 300, 20_000
	e := newEnv(t, nil)
	pushBig(e, n)
	sel := `{app=~"big|other"} | line_format "{{ __line__ }} {{ repeat 20000 \"x\" }}" |~ "^id=[0-9]*[13579] "`
	var want []string
	wantBytes := 0
	for i := range n {
		if i%2 == 1 {
			want = append(want, fmt.Sprintf("id=%d", i))
			wantBytes += len(fmt.Sprintf("id=%d ", i)) + xs
		}
	}
	p := url.Values{"query": {sel}, "limit": {"5000"}, "start": {strconv.FormatInt(base-int64(n)*1e9, 10)}, "end": {strconv.FormatInt(base+1, 10)}}
	code, body := e.get("/loki/api/v1/query_range?" + p.Encode())
	if code != 200 {
		t.Fatalf("%d %.200s", code, body)
	}
	var r struct {
		Data struct {
			Result []struct {
				Values [][2]string `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, st := range r.Data.Result {
		for _, v := range st.Values {
			id, rest, _ := strings.Cut(v[1], " ")
			if len(rest) != xs {
				t.Fatalf("line %.30q of %d bytes", v[1], len(v[1]))
			}
			got = append(got, id)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("entries %q, want %q", got, want)
	}
	for fn, w := range map[string]int{"count_over_time": len(want), "bytes_over_time": wantBytes} {
		q := url.Values{"query": {fmt.Sprintf("sum(%s(%s [%ds]))", fn, sel, n+10)}, "time": {strconv.FormatInt(base+1, 10)}}
		code, body := e.get("/loki/api/v1/query?" + q.Encode())
		if code != 200 {
			t.Fatalf("%s: %d %.200s", fn, code, body)
		}
		if !strings.Contains(body, fmt.Sprintf(`"%d"]`, w)) {
			t.Errorf("%s: %s, want %d", fn, body, w)
		}
	}
}

// TestWriteLokiStreamsOracle: the Loki answer written entry by entry is
// byte for byte what writeJSON made of a lokiResponse of groupStreams
// (HTML characters escaped, invalid UTF-8 as U+FFFD, categorize-labels'
// third elements, encoding flags, streams in order of first appearance),
// plus "warnings" beside "data" when there are some.
func TestWriteLokiStreamsOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	labelSets := []struct{ labels, meta, parsed string }{
		{`{app="a"}`, "", ""},
		{`{app="b", x="<&>"}`, "", ""},
		{`{app="a", trace_id="t1"}`, `{trace_id="t1"}`, ""},
		{`{app="a", level="warn", trace_id="t2"}`, `{trace_id="t2"}`, `{level="warn"}`},
	}
	lines := []string{"", "plain", "<b>&amp;</b>", "bad \xff\xfe utf8", "tab\tnl\nquote\"back\\", "\u2028\u2029 é 日本", strings.Repeat("z", 3000)}
	for round := range 50 {
		var hits []hit
		for range r.IntN(40) {
			ls := labelSets[r.IntN(len(labelSets))]
			hits = append(hits, hit{Time: base + int64(r.IntN(1000)), Labels: ls.labels, Meta: ls.meta, Parsed: ls.parsed, Line: []byte(lines[r.IntN(len(lines))])})
		}
		categorize := round%2 == 1
		var flags []string
		if round%4 == 3 {
			flags = []string{"categorize-labels"}
		}
		stats := lokiStats(int64(len(hits)), 0, time.Second)
		for _, warnings := range [][]string{nil, {"cut <here> & there"}} {
			old := httptest.NewRecorder()
			writeJSON(old, lokiResponse{Status: "success", Data: lokiData{ResultType: "streams", EncodingFlags: flags, Result: groupStreams(hits, categorize), Stats: stats}})
			want := old.Body.String()
			if warnings != nil {
				w, _ := json.Marshal(warnings)
				want = strings.TrimSuffix(strings.TrimSuffix(want, "\n"), "}") + `,"warnings":` + string(w) + "}\n"
			}
			got := httptest.NewRecorder()
			writeLokiStreams(got, hits, categorize, flags, stats, warnings)
			if got.Body.String() != want {
				t.Fatalf("round %d (categorize %v, warnings %q):\n got %.400q\nwant %.400q", round, categorize, warnings, got.Body.String(), want)
			}
			if ct := got.Header().Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q", ct)
			}
		}
	}
}

// TestPatternsBytes: /loki/api/v1/patterns tracks patterns holding at
// most --max-query-bytes (a pattern is as long as its line): 100 lines
// of 10 KB with no digit, each its own pattern (1 MB), answer patterns of
// at most 256 KiB in all. Before, all 100 (up to 10,000 patterns of up
// to 16 MiB each were held).
func TestPatternsBytes(t *testing.T) {
	const maxBytes = 256 << 10
	e := newEnv(t, func(c *Config) { c.MaxQueryBytes = maxBytes })
	var b strings.Builder
	b.WriteString(`{"streams":[{"stream":{"app":"pat"},"values":[`)
	for i := range 100 {
		if i > 0 {
			b.WriteByte(',')
		}
		// A letter name per entry: no digit, so each line is its own pattern.
		name := string(rune('a'+i/26)) + string(rune('a'+i%26))
		fmt.Fprintf(&b, `["%d","%s %s"]`, base-int64(i)*1e9, name, strings.Repeat("q", 10_000))
	}
	b.WriteString(`]}]}`)
	e.mustPush("/loki/api/v1/push", []byte(b.String()), "Content-Type", "application/json")
	code, body := e.get("/loki/api/v1/patterns?" + url.Values{"query": {`{app="pat"}`}, "start": {strconv.FormatInt(base-200e9, 10)}, "end": {strconv.FormatInt(base+1, 10)}}.Encode())
	if code != 200 {
		t.Fatalf("%d %.200s", code, body)
	}
	var r struct {
		Data []struct {
			Pattern string `json:"pattern"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, p := range r.Data {
		total += len(p.Pattern)
	}
	if total > maxBytes || len(r.Data) < 20 {
		t.Fatalf("%d patterns of %d bytes in all; want at most %d bytes, and the patterns that fit (about 25)", len(r.Data), total, maxBytes)
	}
}
