package web_test

// Security tests of the web UI against the real server (server.New, the
// same handler `hay serve` mounts), in headless Chromium: log lines and
// label values are attacker-controlled, so every place the page shows
// data gets lines built to run script, and the page must show them as
// text and run nothing. The canary is layered, so that a payload the CSP
// blocks still counts as an injection: (1) window.__pwned and
// document.title (what the payloads set), (2) JavaScript dialogs, (3)
// securitypolicyviolation events recorded from before the page's own
// script runs (an injected inline handler or script that the CSP stopped
// fires one), (4) the elements and attributes inside the data areas, which
// must all be ones app.js makes.
//
// The tests in package web (browser_test.go) run the same UI against a
// fake API; these are in the external package web_test because they
// import internal/server, which imports web.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"haystack/internal/browsertest"
	"haystack/internal/server"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/klauspost/compress/snappy"
)

// The page's constants (app.js) these tests depend on.
const (
	secTrunc   = 1000 // characters of a line shown before "expand"
	secTailCap = 1000 // rows the live tail keeps
)

// secEnv is one real server, one "attacker" origin (another listener, so
// another origin) and one headless Chromium.
type secEnv struct {
	hay     *httptest.Server
	evil    *httptest.Server
	evilSrc atomic.Value // string: the HTML the attacker origin serves at /
	browser context.Context
	// framed counts the searches for "framemark": the UI's, when a
	// page showing it runs.
	framed atomic.Int32
	// slowEnded receives the query of each "slowmark" search whose
	// client went away.
	slowEnded chan string
}

func newSecEnv(t *testing.T) *secEnv {
	t.Helper()
	s, err := server.New(server.Config{
		DataDir: t.TempDir(),
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		// The rows' chips the tests expect are the metadata pushed; the
		// detected_level hay adds at push has its own tests
		// (internal/server/levels_test.go).
		NoLogLevelDiscovery: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	env := &secEnv{slowEnded: make(chan string, 16)}
	h := s.Handler()
	env.hay = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/search" && strings.Contains(r.URL.Query().Get("q"), "framemark") {
			env.framed.Add(1)
		}
		// A search for "failmark" fails after two entries, as the server
		// reports an error once lines are out (native.go): the error is
		// the last line. One for "cutmark" loses its connection instead.
		if r.URL.Path == "/api/v1/search" && (strings.Contains(r.URL.Query().Get("q"), "failmark") || strings.Contains(r.URL.Query().Get("q"), "cutmark")) {
			w.Header().Set("Content-Type", "application/x-ndjson")
			now := time.Now()
			for i := range 2 {
				fmt.Fprintf(w, "{\"ts\":\"%d\",\"time\":%q,\"labels\":{\"app\":\"fail\"},\"line\":\"failmark row %d\"}\n", now.UnixNano()-int64(i), now.Add(-time.Duration(i)).UTC().Format(time.RFC3339Nano), i)
			}
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Millisecond) // the rows reach the page first
			if strings.Contains(r.URL.Query().Get("q"), "cutmark") {
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					conn.Close()
				}
				return
			}
			io.WriteString(w, `{"error":"<img src=x onerror=\"window.__pwned=60\"> scan failed: context deadline exceeded"}`+"\n")
			return
		}
		// A search for "slowmark" is a search that takes forever: it is
		// answered only when the client goes away.
		if r.URL.Path == "/api/v1/search" && strings.Contains(r.URL.Query().Get("q"), "slowmark") {
			<-r.Context().Done()
			env.slowEnded <- r.URL.Query().Get("q")
			return
		}
		h.ServeHTTP(w, r)
	}))
	env.evilSrc.Store("")
	env.evil = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, env.evilSrc.Load().(string))
	}))
	t.Cleanup(func() {
		env.evil.Close()
		env.hay.Close()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	env.browser = browsertest.New(t)
	return env
}

// pushEntry is one entry to push: its stream's labels and its raw bytes.
type pushEntry struct {
	labels map[string]string
	ts     int64
	line   string // any bytes, invalid UTF-8 included
}

// labelString writes labels in Loki's push form, {a="b", ...}.
func labelString(l map[string]string) string {
	names := make([]string, 0, len(l))
	for k := range l {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k + "=" + strconv.Quote(l[k]))
	}
	b.WriteByte('}')
	return b.String()
}

// push stores es through Loki's protobuf push (the only push format
// that carries invalid UTF-8 as is).
func (env *secEnv) push(t *testing.T, es []pushEntry) {
	t.Helper()
	var streams []server.PushStream
	idx := map[string]int{}
	for _, e := range es {
		k := labelString(e.labels)
		i, ok := idx[k]
		if !ok {
			i = len(streams)
			idx[k] = i
			streams = append(streams, server.PushStream{Labels: k})
		}
		streams[i].Entries = append(streams[i].Entries, server.PushEntry{Time: e.ts, Line: e.line})
	}
	body := snappy.Encode(nil, server.EncodePushProto(streams))
	res, err := http.Post(env.hay.URL+"/loki/api/v1/push", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("push: %s: %s", res.Status, b)
	}
}

// apiLine is one entry of /api/v1/search as the server sends it.
type apiLine struct {
	TS     string            `json:"ts"`
	Labels map[string]string `json:"labels"`
	Line   string            `json:"line"`
	Done   bool              `json:"done"`
	Count  int               `json:"count"`
	Error  string            `json:"error"`
}

// search asks the server directly (the oracle for what the page shows).
func (env *secEnv) search(t *testing.T, params url.Values) []apiLine {
	t.Helper()
	res, err := http.Get(env.hay.URL + "/api/v1/search?" + params.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("search %v: %s: %s", params, res.Status, b)
	}
	var out []apiLine
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var a apiLine
		if err := json.Unmarshal(l, &a); err != nil {
			t.Fatalf("search answer line %q: %v", l, err)
		}
		if a.Error != "" {
			t.Fatalf("search %v: %s", params, a.Error)
		}
		if !a.Done {
			out = append(out, a)
		}
	}
	return out
}

// canaryJS runs in every document of the tab before its own scripts:
// it records CSP violations and keeps a hand on the canary globals.
const canaryJS = `(() => {
	window.__csp = [];
	document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI + ' ' + (e.sample || '')));
})()`

// tab opens a tab that records dialogs and CSP violations; it closes at
// the end of the subtest.
func (env *secEnv) tab(t *testing.T) (context.Context, *atomic.Int32) {
	t.Helper()
	tab, cancelTab := chromedp.NewContext(env.browser)
	ctx, cancel := context.WithTimeout(tab, 15*time.Second)
	t.Cleanup(func() { cancel(); cancelTab() })
	var dialogs atomic.Int32
	if err := chromedp.Listen(ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			dialogs.Add(1)
			go chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: canaryJS}); err != nil {
		t.Fatal(err)
	}
	return ctx, &dialogs
}

func run(t *testing.T, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

// open navigates to path on the server and waits for the page to settle.
func (env *secEnv) open(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	run(t, ctx, chromedp.Navigate(env.hay.URL+path))
	browsertest.Wait(t, ctx, browsertest.Settled)
}

// foreignJS lists every element in the page's data areas that app.js
// would not have made there, and every attribute it would not have set.
const foreignJS = `(() => {
	const bad = [];
	const check = (sel, okTags, okAttrs) => {
		for (const root of document.querySelectorAll(sel)) for (const e of root.querySelectorAll('*')) {
			const k = e.tagName.toLowerCase() + '.' + (typeof e.className === 'string' ? e.className : e.getAttribute('class') || '');
			if (!okTags.has(k)) bad.push(sel + ' ' + k);
			for (const a of e.attributes) if (!okAttrs.has(a.name)) bad.push(sel + ' ' + k + '@' + a.name);
		}
	};
	check('#rows', new Set(['div.row', 'time.ts', 'span.labels', 'span.lbl', 'span.line', 'mark.', 'span.ctl', 'button.expand']),
		new Set(['class', 'title', 'datetime', 'data-ts', 'type', 'aria-label']));
	check('#facet-list', new Set(['section.facet', 'h3.', 'ul.', 'li.', 'button.', 'span.v', 'span.n', 'span.ctl', 'div.none']),
		new Set(['class', 'type', 'data-label', 'data-value', 'aria-pressed', 'title']));
	check('#hist', new Set(['svg.', 'rect.bar', 'title.', 'line.base', 'text.axis', 'rect.sel']),
		new Set(['width', 'height', 'viewBox', 'role', 'aria-label', 'class', 'x', 'y', 'x1', 'x2', 'y1', 'y2', 'data-count', 'data-t', 'text-anchor']));
	check('#status, #hits, #status-bar, #hist-bar', new Set(['span.', 'span.error', 'button.']), new Set(['id', 'role', 'aria-live', 'class', 'data-state', 'data-tail', 'title', 'type', 'hidden']));
	if (document.querySelectorAll('script').length !== 1) bad.push(document.querySelectorAll('script').length + ' scripts');
	if (document.querySelectorAll('iframe, object, embed, img, style, base, meta[http-equiv], link:not([rel=icon]):not([rel=stylesheet])').length) bad.push('injected iframe/img/style/base/meta/link');
	for (const a of document.querySelectorAll('a[href]')) if (!/^https?:$/.test(new URL(a.href).protocol) || new URL(a.href).origin !== location.origin) bad.push('link to ' + a.href);
	return bad;
})()`

// clean fails t if anything shows that a payload ran or altered the page.
func clean(t *testing.T, ctx context.Context, dialogs *atomic.Int32, where string) {
	t.Helper()
	time.Sleep(50 * time.Millisecond) // an injected onerror fires after the image fails
	st := browsertest.Eval[map[string]any](t, ctx, `({pwned: typeof window.__pwned, title: document.title, csp: window.__csp, foreign: `+foreignJS+`})`)
	if st["pwned"] != "undefined" {
		t.Errorf("%s: window.__pwned is set: a payload ran", where)
	}
	// (A title that names the search, "q — Haystack", is fine; the
	// payloads set it to exactly PWNED.)
	if title, _ := st["title"].(string); title == "PWNED" || !strings.HasSuffix(title, "Haystack") {
		t.Errorf("%s: document.title is %q", where, title)
	}
	if v, _ := st["csp"].([]any); len(v) > 0 {
		t.Errorf("%s: the CSP blocked %d injected things: %v", where, len(v), v)
	}
	if v, _ := st["foreign"].([]any); len(v) > 0 {
		t.Errorf("%s: foreign elements or attributes: %v", where, v)
	}
	if n := dialogs.Load(); n > 0 {
		t.Errorf("%s: %d JavaScript dialogs opened", where, n)
	}
}

// hostile payloads, each on its own line. Every one would set the
// canary or the title if it reached an HTML parser, a URL, eval or a
// template.
var payloads = []string{
	`<script>window.__pwned=1;document.title='PWNED'</script>`,
	`<img src=x onerror="window.__pwned=2;document.title='PWNED'">`,
	`<svg onload=window.__pwned=3><animate onbegin=window.__pwned=3 attributeName=x dur=1s>`,
	`<a href="javascript:window.__pwned=4">click</a> javascript:window.__pwned=4`,
	`</textarea></title></style></noscript><script>window.__pwned=5</script>`,
	"${window.__pwned=6}`;window.__pwned=6;`",
	`"><iframe srcdoc="<script>parent.__pwned=7</script>"></iframe>`,
	`{{constructor.constructor('window.__pwned=8')()}}`,
	`<base href="//evil.example/"><meta http-equiv="refresh" content="0;url=javascript:window.__pwned=9"><style>body{display:none}</style>`,
	`' onmouseover='window.__pwned=10' x='`,
	"\x1b[31mred\x1b[0m \x1b]0;PWNED\x07 \x1b[2J\x1b[H ansi",
	"bidi \u202egnp.exe \u2066x\u2069 \u200f",
	"nul \x00 byte \x7f del \r\n crlf \u2028 \u2029 ls ps",
	"bad utf8 \xff\xfe\xc3( <script>window.__pwned=11</script>",
	"&lt;img src=x onerror=window.__pwned=12&gt; &#60;script&#62;",
}

// hostileLabels are the streams' label values: as attacker-controlled
// as the lines (a pod name, a user agent turned into a label).
var hostileLabels = []map[string]string{
	{"app": `<img src=x onerror="window.__pwned=20">`, "env": "prod"},
	{"app": `x"} |= "hidden`, "env": `\"}<script>window.__pwned=21</script>`},
	{"app": "esc\x1b[31m \u202eevil", "env": "javascript:window.__pwned=22"},
}

// mark is the word every hostile line holds, so one search finds them.
const mark = "pwnmark"

// hostileEntries are the entries the tests push: every payload in every
// hostile stream, one second apart and within the last minute; plus a
// long line whose payload lies past the cut (it shows on expand).
func hostileEntries(base time.Time, tag string) []pushEntry {
	var es []pushEntry
	ts := base.Add(-30 * time.Second).UnixNano()
	for i, p := range payloads {
		l := hostileLabels[i%len(hostileLabels)]
		es = append(es, pushEntry{labels: l, ts: ts + int64(i)*1e6, line: fmt.Sprintf("%s %s %02d %s", mark, tag, i, p)})
	}
	long := mark + " " + tag + " long " + strings.Repeat("a", 1200) + payloads[1] + strings.Repeat("b", 190_000) + payloads[0]
	es = append(es, pushEntry{labels: hostileLabels[0], ts: ts + int64(len(payloads))*1e6, line: long})
	return es
}

// display is what the page shows for a line the server sent (JSON turns
// each invalid byte into U+FFFD, as encoding/json does).
func display(line string, limit int) string {
	var b strings.Builder
	for i := 0; i < len(line); {
		r, n := utf8.DecodeRuneInString(line[i:])
		b.WriteRune(r) // RuneError for each invalid byte
		i += n
	}
	return browsertest.Display(b.String(), limit)
}

// rowsJS is browsertest.RowsJS: the rendered rows.
func pageRows(t *testing.T, ctx context.Context) []browsertest.Row {
	t.Helper()
	return browsertest.Eval[[]browsertest.Row](t, ctx, browsertest.RowsJS)
}

// servedLabels is the label set the server stores for pushed labels l:
// with service_name added as Loki's discovery does (the first of these
// labels present, else unknown_service), since it is on by default.
func servedLabels(l map[string]string) map[string]string {
	if _, ok := l["service_name"]; ok {
		return l
	}
	out := map[string]string{"service_name": "unknown_service"}
	for _, src := range []string{"service", "app", "application", "app_name", "name", "app_kubernetes_io_name",
		"container", "container_name", "k8s_container_name", "component", "workload", "job", "k8s_job_name"} {
		if v := l[src]; v != "" {
			out["service_name"] = v
			break
		}
	}
	for k, v := range l {
		out[k] = v
	}
	return out
}

// wantLabels is what a row shows for pushed labels: the served set
// (servedLabels), sorted name=value, each through the page's
// control-character display.
func wantLabels(l map[string]string) []string {
	var out []string
	for k, v := range servedLabels(l) {
		out = append(out, display(k+"="+v, 1<<30))
	}
	sort.Strings(out)
	return out
}

// checkShown compares rows with entries (newest first when ordered; as
// a set otherwise).
func checkShown(t *testing.T, where string, got []browsertest.Row, want []pushEntry, ordered bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", where, len(got), len(want))
	}
	key := func(line string, labels []string) string { return line + "\x00" + strings.Join(labels, "\x00") }
	var g, w []string
	for i := range want {
		g = append(g, key(got[i].Line, got[i].Labels))
		w = append(w, key(display(want[i].line, secTrunc), wantLabels(want[i].labels)))
		if ordered && got[i].TS != strconv.FormatInt(want[i].ts, 10) {
			t.Errorf("%s: row %d has ts %s, want %d", where, i, got[i].TS, want[i].ts)
		}
	}
	if !ordered {
		sort.Strings(g)
		sort.Strings(w)
	}
	for i := range g {
		if g[i] != w[i] {
			t.Errorf("%s: row %d shows\n%q\nwant\n%q", where, i, g[i], w[i])
		}
	}
}

// newestFirst is es sorted by time, newest first.
func newestFirst(es []pushEntry) []pushEntry {
	out := slices.Clone(es)
	slices.SortStableFunc(out, func(a, b pushEntry) int { return int(b.ts - a.ts) })
	return out
}

// TestUISecurity pushes hostile lines and labels into the real server
// and checks every place the page shows data, crafted permalinks, the
// API's answers opened as pages, the response headers, and what another
// origin can do with the server through a browser.
func TestUISecurity(t *testing.T) {
	env := newSecEnv(t)
	es := hostileEntries(time.Now(), "stored")
	env.push(t, es)
	// The server is the oracle's source for what was stored: every
	// hostile entry, and nothing else.
	if got := env.search(t, url.Values{"q": {mark}}); len(got) != len(es) {
		t.Fatalf("the server finds %d of the %d hostile entries", len(got), len(es))
	}

	t.Run("rows", func(t *testing.T) {
		ctx, dialogs := env.tab(t)
		env.open(t, ctx, "/?q="+mark)
		got := pageRows(t, ctx)
		checkShown(t, "rows", got, newestFirst(es), true)
		for i, r := range got {
			// Marks hold the needle only, and there is one per occurrence.
			if n := strings.Count(r.Line, mark); len(r.Marks) != n || slices.ContainsFunc(r.Marks, func(m string) bool { return m != mark }) {
				t.Errorf("row %d: marks %q in %q", i, r.Marks, r.Line)
			}
		}
		// Visible symbols for the invisible: ESC, NUL, DEL, CR and the bidi
		// controls each have their own span.
		ctl := browsertest.Eval[[]string](t, ctx, `[...new Set([...document.querySelectorAll('#rows .line .ctl')].map(e => e.textContent))].sort()`)
		for _, w := range []string{"␛", "␀", "␡", "␍", "␇", "<U+202E>", "<U+2066>", "<U+2069>"} {
			if !slices.Contains(ctl, w) {
				t.Errorf("no %s symbol among the control characters shown: %q", w, ctl)
			}
		}
		clean(t, ctx, dialogs, "result rows")
	})

	t.Run("expanded row", func(t *testing.T) {
		ctx, dialogs := env.tab(t)
		env.open(t, ctx, "/?q="+mark+"+stored+long")
		got := pageRows(t, ctx)
		if len(got) != 1 || !got[0].Expand {
			t.Fatalf("long line: %+v", got)
		}
		run(t, ctx, chromedp.Click(chromedp.CSS("#rows button.expand")))
		got = pageRows(t, ctx)
		full := es[len(es)-1].line
		if got[0].Expand || got[0].Line != display(full, 1<<30) {
			t.Fatalf("expanded: %d characters shown (want %d), button still there: %v", len(got[0].Line), len(full), got[0].Expand)
		}
		clean(t, ctx, dialogs, "expanded row")
	})

	t.Run("facets", func(t *testing.T) {
		ctx, dialogs := env.tab(t)
		env.open(t, ctx, "/?q="+mark)
		type fb struct{ Label, Value, Shown, Count string }
		got := browsertest.Eval[[]fb](t, ctx, `[...document.querySelectorAll('#facet-list button')].map(b => ({Label: b.dataset.label, Value: b.dataset.value, Shown: b.querySelector('.v').textContent, Count: b.querySelector('.n').textContent}))`)
		want := map[string]int{}
		for _, e := range es {
			for k, v := range servedLabels(e.labels) {
				want[k+"\x00"+v]++
			}
		}
		if len(got) != len(want) {
			t.Errorf("%d facet values, want %d: %+v", len(got), len(want), got)
		}
		for _, b := range got {
			n, ok := want[b.Label+"\x00"+b.Value]
			if !ok || b.Count != strconv.Itoa(n) || b.Shown != display(b.Value, 1<<30) {
				t.Errorf("facet %q=%q shows %q count %s; want count %d (known %v)", b.Label, b.Value, b.Shown, b.Count, n, ok)
			}
		}
		clean(t, ctx, dialogs, "facets")

		// Clicking a value with quotes and LogQL in it narrows to exactly
		// that stream: the value is quoted, not spliced into the query.
		v := hostileLabels[1]["app"]
		sel := `#facet-list button[data-label="app"][data-value=` + strconv.Quote(v) + `]`
		browsertest.Eval[any](t, ctx, `document.getElementById('status').dataset.state = 'test'; null`)
		run(t, ctx, chromedp.Click(chromedp.CSS(sel)))
		browsertest.Wait(t, ctx, browsertest.Settled)
		q := browsertest.Eval[string](t, ctx, `document.getElementById('q').value`)
		if wantQ := `{app=` + strconv.Quote(v) + `} |= "` + mark + `"`; q != wantQ {
			t.Errorf("query after the facet click %q, want %q", q, wantQ)
		}
		var stream []pushEntry
		for _, e := range es {
			if e.labels["app"] == v {
				stream = append(stream, e)
			}
		}
		checkShown(t, "after the facet click", pageRows(t, ctx), newestFirst(stream), true)
		if p := browsertest.Eval[string](t, ctx, `document.querySelector(`+strconv.Quote(sel)+`).getAttribute('aria-pressed')`); p != "true" {
			t.Errorf("the clicked facet is not pressed (%s)", p)
		}
		clean(t, ctx, dialogs, "facet click")
	})

	t.Run("histogram", func(t *testing.T) {
		ctx, dialogs := env.tab(t)
		env.open(t, ctx, "/?q="+mark)
		h := browsertest.Eval[map[string]any](t, ctx, `({sum: [...document.querySelectorAll('#hist rect.bar')].reduce((s, r) => s + Number(r.dataset.count), 0),
			titles: [...document.querySelectorAll('#hist title')].map(e => e.textContent), hits: document.getElementById('hits').textContent})`)
		if h["sum"] != float64(len(es)) || !strings.HasPrefix(h["hits"].(string), strconv.Itoa(len(es))+" hits · ") {
			t.Errorf("histogram: bars sum to %v, header %q; want %d", h["sum"], h["hits"], len(es))
		}
		for _, ti := range h["titles"].([]any) {
			s := ti.(string)
			if len(s) < 25 || s[4] != '-' || s[10] != ' ' || !strings.Contains(s, ": ") {
				t.Errorf("bar tooltip %q is not 'time: count'", s)
			}
		}
		clean(t, ctx, dialogs, "histogram")
	})

	t.Run("error messages", func(t *testing.T) {
		ctx, dialogs := env.tab(t)
		for i, q := range []string{
			`{app="<img src=x onerror=window.__pwned=30>"`,
			`{app="a"} |~ "<script>window.__pwned=31</script>(("`,
			`{app="a"} | json | <svg onload=window.__pwned=32>`,
			`{<img src=x onerror=window.__pwned=33>="x"}`,
		} {
			run(t, ctx, chromedp.Navigate(env.hay.URL+"/?q="+url.QueryEscape(q)))
			browsertest.Wait(t, ctx, `document.getElementById('status').dataset.state === 'error' && document.getElementById('hits').textContent !== '' && !document.getElementById('facet-list').hasAttribute('aria-busy')`)
			st := browsertest.Eval[[]string](t, ctx, `[document.getElementById('status').textContent, document.getElementById('hits').textContent, document.getElementById('q').value]`)
			if !strings.HasPrefix(st[0], "Error: ") || !strings.HasPrefix(st[1], "Histogram: ") || st[2] != q {
				t.Errorf("query %d %q: status %q, histogram %q, query box %q", i, q, st[0], st[1], st[2])
			}
			clean(t, ctx, dialogs, fmt.Sprintf("error message of query %d", i))
		}
		// A search that fails after its first rows keeps them, says why,
		// offers no "load more", and the message is text. (A "cutmark"
		// search, whose connection drops, is in the uifindings tests.)
		for _, c := range []struct{ q, status string }{
			{"failmark", `Error: <img src=x onerror="window.__pwned=60"> scan failed: context deadline exceeded`},
		} {
			run(t, ctx, chromedp.Navigate(env.hay.URL+"/?q="+c.q))
			browsertest.Wait(t, ctx, `document.getElementById('status').dataset.state === 'error'`)
			time.Sleep(100 * time.Millisecond) // rows still queued are painted
			st := browsertest.Eval[[]any](t, ctx, `[document.getElementById('status').textContent, document.getElementById('status').className, document.querySelectorAll('#rows .row').length, document.getElementById('more').hidden]`)
			if fmt.Sprint(st) != fmt.Sprint([]any{c.status, "error", 2.0, true}) {
				t.Errorf("%s: status, class, rows, load more hidden: %q", c.q, st)
			}
			clean(t, ctx, dialogs, c.q+" mid-stream")
		}
		// The live tail's own error message (the tail of a bad query
		// answers it as an event).
		q := `{app="<img src=x onerror=window.__pwned=34>"`
		run(t, ctx, chromedp.Navigate(env.hay.URL+"/?live=1&q="+url.QueryEscape(q)))
		browsertest.Wait(t, ctx, `document.getElementById('status').dataset.state === 'error' && !document.getElementById('live').checked`)
		clean(t, ctx, dialogs, "live tail error")
	})

	t.Run("live tail", func(t *testing.T) {
		ctx, dialogs := env.tab(t)
		env.open(t, ctx, "/?q="+mark+"&live=1")
		browsertest.Wait(t, ctx, `document.getElementById('status').textContent.startsWith('Live: ')`)
		time.Sleep(200 * time.Millisecond) // the tail's subscription is made
		tail := hostileEntries(time.Now(), "tailed")
		env.push(t, tail)
		browsertest.Wait(t, ctx, `document.querySelectorAll('#rows .row').length === `+strconv.Itoa(len(es)+len(tail)))
		got := pageRows(t, ctx)
		checkShown(t, "tailed rows", got[:len(tail)], tail, false)
		checkShown(t, "searched rows under the tail", got[len(tail):], newestFirst(es), true)
		clean(t, ctx, dialogs, "live tail")
	})

	t.Run("crafted permalink", func(t *testing.T) {
		ctx, dialogs := env.tab(t)
		q := payloads[1]
		bad := `<svg onload=window.__pwned=40>`
		path := "/?q=" + url.QueryEscape(q) + "&from=" + url.QueryEscape("javascript:window.__pwned=41") + "&to=" + url.QueryEscape(bad) +
			"&case=" + url.QueryEscape(bad) + "&dir=" + url.QueryEscape(bad) + "&live=" + url.QueryEscape(bad) + "&limit=" + url.QueryEscape(bad)
		env.open(t, ctx, path)
		st := browsertest.Eval[[]string](t, ctx, `[document.getElementById('q').value, document.getElementById('range').value, document.getElementById('permalink').getAttribute('href'), document.getElementById('permalink').href]`)
		wantHref := "?" + url.Values{"q": {q}}.Encode()
		if st[0] != q || st[1] != "24h" || st[2] != wantHref || st[3] != env.hay.URL+"/"+wantHref {
			t.Errorf("crafted permalink: query box %q, range %q, permalink %q (%s); want %q, 24h, %q", st[0], st[1], st[2], st[3], q, wantHref)
		}
		if req := browsertest.Eval[string](t, ctx, `(performance.getEntriesByType('resource').find(e => e.name.includes('/api/v1/search?')) || {}).name`); !strings.Contains(req, "direction=backward") || !strings.Contains(req, "limit=500") || strings.Contains(req, "fold=") {
			t.Errorf("search request %s: the hostile parameters leaked into it", req)
		}
		clean(t, ctx, dialogs, "crafted permalink")

		// A javascript: query stays a query: the permalink is relative to
		// the page, and following it runs the same search.
		env.open(t, ctx, "/?q="+url.QueryEscape("javascript:window.__pwned=42//"))
		href := browsertest.Eval[string](t, ctx, `document.getElementById('permalink').href`)
		if !strings.HasPrefix(href, env.hay.URL+"/?q=javascript") {
			t.Errorf("permalink %q", href)
		}
		browsertest.Eval[any](t, ctx, `document.getElementById('status').dataset.state = 'test'; null`)
		run(t, ctx, chromedp.Click(chromedp.ID("permalink")))
		// A new document: wait for it to have the page again.
		time.Sleep(100 * time.Millisecond)
		browsertest.Wait(t, ctx, `document.getElementById('status') && document.getElementById('status').dataset.state !== 'test' && (`+browsertest.Settled+`)`)
		if v := browsertest.Eval[string](t, ctx, `document.getElementById('q').value`); v != "javascript:window.__pwned=42//" {
			t.Errorf("after following the permalink the query is %q", v)
		}
		clean(t, ctx, dialogs, "followed permalink")
	})

	t.Run("api answers opened as pages", env.testAPIPages)
	t.Run("headers", env.testHeaders)
	t.Run("other origin", env.testOtherOrigin)
	t.Run("other origin push", env.testCSRFPush)
	t.Run("crafted regex", env.testReDoS)
}

// testAPIPages opens the API's answers to hostile requests as top-level
// pages (a victim clicking a link to them): none may be rendered as HTML.
func (env *secEnv) testAPIPages(t *testing.T) {
	badQ := url.QueryEscape(`{app="<img src=x onerror=window.__pwned=50>"`)
	ctx, dialogs := env.tab(t)
	for _, path := range []string{
		"/api/v1/hits?q=" + badQ,
		"/api/v1/facets?q=" + badQ,
		"/api/v1/search?q=" + badQ,
		"/api/v1/hits?q=" + mark,
		"/api/v1/facets?q=" + mark,
		"/loki/api/v1/query_range?query=" + badQ,
		"/loki/api/v1/query_range?query=" + url.QueryEscape(`{env="prod"}`),
		"/loki/api/v1/label/" + url.PathEscape(`<img src=x onerror=window.__pwned=51>`) + "/values",
		"/loki/api/v1/labels?start=" + url.QueryEscape(`<img src=x onerror=window.__pwned=52>`),
		"/static/" + url.PathEscape(`<img src=x onerror=window.__pwned=53>`),
		"/" + url.PathEscape(`<script>window.__pwned=54</script>`),
	} {
		if _, err := chromedp.Run(ctx, chromedp.Navigate(env.hay.URL+path)); err != nil {
			// A download (net::ERR_ABORTED) renders nothing either.
			if strings.Contains(err.Error(), "ERR_ABORTED") {
				t.Logf("%s: downloaded, not shown (%v)", path, err)
				continue
			}
			t.Fatalf("%s: %v", path, err)
		}
		time.Sleep(50 * time.Millisecond)
		st := browsertest.Eval[map[string]any](t, ctx, `({ct: document.contentType, pwned: typeof window.__pwned, title: document.title, csp: window.__csp, els: document.querySelectorAll('img, script, svg, iframe, a').length})`)
		if ct := st["ct"].(string); strings.Contains(ct, "html") || st["pwned"] != "undefined" || st["els"] != float64(0) || len(st["csp"].([]any)) > 0 || dialogs.Load() > 0 {
			t.Errorf("%s opened as a page: %v, %d dialogs", path, st, dialogs.Load())
		}
	}
}

// testHeaders checks the headers that keep the page's own protections
// on: the CSP (no inline script, no framing), nosniff, and no CORS grant
// to another origin on any API endpoint.
func (env *secEnv) testHeaders(t *testing.T) {
	get := func(method, path string, hdr map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, env.hay.URL+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	res := get("GET", "/", nil)
	csp := map[string]string{}
	for _, d := range strings.Split(res.Header.Get("Content-Security-Policy"), ";") {
		f := strings.Fields(d)
		if len(f) > 0 {
			csp[f[0]] = strings.Join(f[1:], " ")
		}
	}
	for k, v := range map[string]string{"default-src": "'none'", "script-src": "'self'", "frame-ancestors": "'none'", "base-uri": "'none'", "form-action": "'self'", "connect-src": "'self'"} {
		if csp[k] != v {
			t.Errorf("CSP %s is %q, want %q (policy %q)", k, csp[k], v, res.Header.Get("Content-Security-Policy"))
		}
	}
	if _, ok := csp["object-src"]; ok {
		t.Errorf("CSP names object-src: %q (default-src 'none' covers it)", csp["object-src"])
	}
	for _, p := range []string{"/", "/static/app.js", "/static/app.css", "/api/v1/search?q=x"} {
		if v := get("GET", p, nil).Header.Get("X-Content-Type-Options"); v != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options %q", p, v)
		}
	}
	origin := map[string]string{"Origin": env.evil.URL}
	for _, p := range []string{"/api/v1/search?q=" + mark, "/api/v1/hits?q=" + mark, "/api/v1/facets?q=" + mark, "/loki/api/v1/labels", "/loki/api/v1/query_range?query=" + url.QueryEscape(`{env="prod"}`)} {
		h := get("GET", p, origin).Header
		if v := h.Get("Access-Control-Allow-Origin") + h.Get("Access-Control-Allow-Credentials"); v != "" {
			t.Errorf("GET %s from %s: CORS grant %q", p, env.evil.URL, v)
		}
	}
	for _, p := range []string{"/loki/api/v1/push", "/api/v1/push/jsonl", "/otlp/v1/logs", "/api/v1/search"} {
		h := get("OPTIONS", p, map[string]string{"Origin": env.evil.URL, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}).Header
		if v := h.Get("Access-Control-Allow-Origin") + h.Get("Access-Control-Allow-Methods") + h.Get("Access-Control-Allow-Headers"); v != "" {
			t.Errorf("preflight of %s from %s: CORS grant %q", p, env.evil.URL, v)
		}
	}
}

// wsTailJS defines wsTail(base): a promise of "data" when a WebSocket to
// base's Loki tail receives a message, "refused" when it is closed
// without one.
const wsTailJS = `function wsTail(base) {
	return new Promise(res => {
		let got = 0;
		const ws = new WebSocket(base + '/loki/api/v1/tail?query=' + encodeURIComponent('{env="prod"}'));
		ws.onmessage = () => { got++; ws.close(); res('data'); };
		ws.onclose = () => res(got ? 'data' : 'refused');
		setTimeout(() => { ws.close(); res(got ? 'data' : 'open, no data'); }, 3000);
	});
}`

// otherOriginJS is the attacker's page: it tries to read the API with
// fetch, to read the Loki tail over a WebSocket (not covered by CORS, so
// only an Origin check stops it) and the native tail with EventSource,
// and frames the UI (clickjacking). It reports into window.__r.
const otherOriginJS = `<!doctype html><title>evil</title><script>
window.__r = {};
(async () => {
	try { const r = await fetch(HAY + '/api/v1/search?q=pwnmark'); window.__r.read = 'read ' + (await r.text()).length; } catch (e) { window.__r.read = 'blocked'; }
	window.__r.ws = await wsTail(WS);
	window.__r.sse = await new Promise(res => {
		let got = 0;
		const es = new EventSource(HAY + '/api/v1/tail?q=');
		es.onmessage = () => { got++; };
		es.onerror = () => { es.close(); res(got ? 'data' : 'refused'); };
		setTimeout(() => { es.close(); res(got ? 'data' : 'open, no data'); }, 3000);
	});
	window.__r.done = true;
})();
` + wsTailJS + `
</script>
<iframe id="f" src="FRAME" width="800" height="400"></iframe>`

// testOtherOrigin opens the attacker's page from another origin in the
// browser: it may neither read the API, nor the tail over a WebSocket,
// nor show the UI in a frame. Each has a control that the same action
// from the UI's own origin (or at top level) works, so the checks can
// fail.
func (env *secEnv) testOtherOrigin(t *testing.T) {
	ws := "ws" + strings.TrimPrefix(env.hay.URL, "http")
	src := strings.NewReplacer("HAY +", strconv.Quote(env.hay.URL)+" +", "wsTail(WS)", "wsTail("+strconv.Quote(ws)+")", "FRAME", env.hay.URL+"/?q=framemark").Replace(otherOriginJS)
	env.evilSrc.Store(src)
	before := env.framed.Load()
	ctx, dialogs := env.tab(t)
	run(t, ctx, chromedp.Navigate(env.evil.URL+"/"))
	browsertest.Wait(t, ctx, `window.__r && window.__r.done`)
	r := browsertest.Eval[map[string]any](t, ctx, `window.__r`)
	if r["read"] != "blocked" {
		t.Errorf("another origin read /api/v1/search: %v", r["read"])
	}
	if r["ws"] != "refused" {
		t.Errorf("another origin's WebSocket to /loki/api/v1/tail: %v", r["ws"])
	}
	if r["sse"] != "refused" {
		t.Errorf("another origin's EventSource on /api/v1/tail: %v", r["sse"])
	}
	time.Sleep(300 * time.Millisecond)
	if n := env.framed.Load() - before; n != 0 {
		t.Errorf("the UI ran inside another origin's frame (%d searches from it)", n)
	}
	if n := dialogs.Load(); n > 0 {
		t.Errorf("%d dialogs", n)
	}

	// Controls: at top level the same URL runs its search, and from the
	// UI's own origin the same WebSocket gets the entries.
	ctx2, _ := env.tab(t)
	env.open(t, ctx2, "/?q=framemark")
	if n := env.framed.Load() - before; n != 1 {
		t.Errorf("control: the UI at top level made %d searches for framemark, want 1", n)
	}
	browsertest.Eval[any](t, ctx2, `(() => { `+wsTailJS+`; wsTail(`+strconv.Quote(ws)+`).then(v => { window.__wsres = v; }); })(); null`)
	browsertest.Wait(t, ctx2, `window.__wsres`)
	if got := browsertest.Eval[string](t, ctx2, `window.__wsres`); got != "data" {
		t.Errorf("control: the same-origin WebSocket tail got %q, want data", got)
	}
}

// testCSRFPush: a web page of another origin open in the on-call
// engineer's browser must not write log lines into their hay serve (no
// auth, the default on 127.0.0.1:3100): a no-cors fetch with a text/plain
// body, or a plain HTML form with enctype=text/plain, is a "simple"
// request that needs no CORS preflight, and the push endpoints read a
// body that starts with '{' as JSON whatever its Content-Type. The
// control: the same fetch from the server's own origin stores its line.
func (env *secEnv) testCSRFPush(t *testing.T) {
	now := strconv.FormatInt(time.Now().UnixNano(), 10)
	src := `<!doctype html><title>evil</title>
<form id="f" method="POST" action="HAY/loki/api/v1/push" enctype="text/plain" target="sink"><input type="hidden" name='{"streams":[{"stream":{"app":"csrf"},"values":[["NOW","csrfmark forged by a form' value='"]]}]}'></form>
<iframe name="sink"></iframe>
<script>
fetch("HAY/loki/api/v1/push", {method: 'POST', mode: 'no-cors', body: JSON.stringify({streams: [{stream: {app: 'csrf'}, values: [["NOW", 'csrfmark forged by fetch']]}]})})
	.then(() => fetch("HAY/api/v1/push/jsonl", {method: 'POST', mode: 'no-cors', body: '{"labels":{"app":"csrf"},"line":"csrfmark forged jsonl"}'}))
	.finally(() => { document.getElementById('f').submit(); window.__sent = true; });
</script>`
	env.evilSrc.Store(strings.NewReplacer("HAY", env.hay.URL, "NOW", now).Replace(src))
	ctx, _ := env.tab(t)
	run(t, ctx, chromedp.Navigate(env.evil.URL+"/"))
	browsertest.Wait(t, ctx, `window.__sent`)
	time.Sleep(500 * time.Millisecond) // the form's POST
	if got := env.search(t, url.Values{"q": {"csrfmark"}}); len(got) != 0 {
		var lines []string
		for _, g := range got {
			lines = append(lines, g.Line)
		}
		t.Errorf("a page from %s pushed %d entries into the server: %q", env.evil.URL, len(got), lines)
	}
	ctx2, _ := env.tab(t)
	env.open(t, ctx2, "/?q=csrfmark")
	browsertest.Eval[any](t, ctx2, `fetch('loki/api/v1/push', {method: 'POST', body: JSON.stringify({streams: [{stream: {app: 'same'}, values: [["`+now+`", 'csrfmark same origin']]}]})}).then(r => { window.__pushStatus = r.status; }); null`)
	browsertest.Wait(t, ctx2, `window.__pushStatus`)
	status := browsertest.Eval[float64](t, ctx2, `window.__pushStatus`)
	if got := env.search(t, url.Values{"q": {"csrfmark"}}); status != 204 || len(got) != 1 || got[0].Line != "csrfmark same origin" {
		t.Errorf("control: a push from the server's own origin: status %v, stored %+v", status, got)
	}
}

// testReDoS: the page highlights |~ matches with the query's regex run by
// the browser's backtracking engine, while the server matches with RE2
// (linear). A permalink whose regex backtracks exponentially over a line
// an attacker logged froze the victim's tab (29 x's: 5 s; 40 would take
// hours) before 455c300; now such a pattern is not highlighted, so the
// page settles (a hang fails at the tab's deadline), while a harmless
// regex still is.
func (env *secEnv) testReDoS(t *testing.T) {
	line := "redosmark " + strings.Repeat("x", 40) + "z"
	env.push(t, []pushEntry{{labels: map[string]string{"app": "redos"}, ts: time.Now().Add(-time.Minute).UnixNano(), line: line}})
	ctx, _ := env.tab(t)
	for _, c := range []struct {
		q     string
		marks []string
	}{
		{`{app="redos"} |~ "(x+x+)+y|z"`, nil},
		{`{app="redos"} |~ "(a|xx)*z"`, nil},
		{`{app="redos"} |~ "x+z"`, []string{strings.Repeat("x", 40) + "z"}},
	} {
		env.open(t, ctx, "/?q="+url.QueryEscape(c.q))
		got := pageRows(t, ctx)
		if len(got) != 1 || got[0].Line != line || !slices.Equal(got[0].Marks, c.marks) {
			t.Errorf("%s: rows %+v, want the line with marks %q", c.q, got, c.marks)
		}
	}
}
