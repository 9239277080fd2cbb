package web

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
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

	"haystack/internal/browsertest"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// The page's constants (app.js) that the tests depend on.
const (
	pageTrunc   = 1000
	pageTailCap = 1000
)

// browserEnv is one headless Chromium and one server (web.Handler plus the
// fake API) shared by the subtests; each subtest opens its own tab.
type browserEnv struct {
	srv     *httptest.Server
	api     *fakeAPI
	browser context.Context
}

func newBrowserEnv(t *testing.T) *browserEnv {
	api := newFakeAPI(fakeStore(time.Now()))
	mux := http.NewServeMux()
	mux.Handle("/api/", api)
	mux.Handle("/loki/", api)
	mux.Handle("/", Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	browser := browsertest.New(t)
	return &browserEnv{srv: srv, api: api, browser: browser}
}

// tab opens a new tab that closes when the subtest ends.
func (env *browserEnv) tab(t *testing.T) context.Context {
	tab, cancelTab := chromedp.NewContext(env.browser)
	ctx, cancel := context.WithTimeout(tab, 10*time.Second)
	t.Cleanup(func() { cancel(); cancelTab() })
	return ctx
}

func do(t *testing.T, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

func (env *browserEnv) open(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	do(t, ctx, chromedp.Navigate(env.srv.URL+path))
	browsertest.Wait(t, ctx, browsertest.Settled)
}

// act runs actions that start a new search inside the page, and waits for
// it to settle. The marker set first tells the new run from the old one.
func act(t *testing.T, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	browsertest.Eval[any](t, ctx, `document.getElementById('status').dataset.state = 'test-pending'; null`)
	do(t, ctx, actions...)
	browsertest.Wait(t, ctx, browsertest.Settled)
}

// js is an action that runs expr in the page for its effect.
func js(expr string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Evaluate[any](expr)(ctx, t)
		return chromedp.Void{}, err
	}
}

// typeKey presses a printable key the way a keyboard does: one keyDown that
// carries the text, so that preventDefault on keydown stops the character,
// as it does for a person typing. (chromedp.KeyEvent sends the character as
// a separate event that keydown cannot cancel.)
func typeKey(key, code string, vk int64) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		for _, typ := range []input.DispatchKeyEventType{input.DispatchKeyEventTypeKeyDown, input.DispatchKeyEventTypeKeyUp} {
			p := input.DispatchKeyEventParams{Type: typ, Key: key, Code: code, WindowsVirtualKeyCode: vk, NativeVirtualKeyCode: vk}
			if typ == input.DispatchKeyEventTypeKeyDown {
				p.Text, p.UnmodifiedText = key, key
			}
			if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, p); err != nil {
				return chromedp.Void{}, err
			}
		}
		return chromedp.Void{}, nil
	}
}

func rows(t *testing.T, ctx context.Context) []browsertest.Row {
	t.Helper()
	return browsertest.Eval[[]browsertest.Row](t, ctx, browsertest.RowsJS)
}

// checkRows compares the rendered rows with the entries the API sent.
func checkRows(t *testing.T, got []browsertest.Row, want []entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("page shows %d rows, API sent %d", len(got), len(want))
	}
	for i, e := range want {
		g := got[i]
		if g.TS != strconv.FormatInt(e.ts, 10) {
			t.Fatalf("row %d: ts %s, want %d", i, g.TS, e.ts)
		}
		if w := browsertest.Display(e.line, pageTrunc); g.Line != w {
			t.Fatalf("row %d: line %q, want %q", i, g.Line, w)
		}
		var labels []string
		for k, v := range e.labels {
			labels = append(labels, k+"="+v)
		}
		sort.Strings(labels)
		if !slices.Equal(g.Labels, labels) {
			t.Fatalf("row %d: labels %q, want %q", i, g.Labels, labels)
		}
	}
}

// TestBrowser drives the UI in headless Chromium against the fake API.
func TestBrowser(t *testing.T) {
	env := newBrowserEnv(t)
	t.Run("search", env.testSearch)
	t.Run("ignore case", env.testFold)
	t.Run("inert log text", env.testInert)
	t.Run("long line", env.testLongLine)
	t.Run("url state", env.testURLState)
	t.Run("facet click", env.testFacet)
	t.Run("load more", env.testLoadMore)
	t.Run("load more after a byte cut", env.testLoadMoreBytes)
	t.Run("drag zoom", env.testDragZoom)
	t.Run("keyboard", env.testKeyboard)
	t.Run("escape stops", env.testEscape)
	t.Run("live tail", env.testTail)
	t.Run("bar click", env.testBarClick)
	t.Run("custom range", env.testCustomRange)
	t.Run("tail reconnect", env.testTailReconnect)
	t.Run("tail error", env.testTailError)
	t.Run("bad query", env.testBadQuery)
	t.Run("query helpers", env.testHelpers)
	t.Run("screenshot", env.testScreenshot)
}

func (env *browserEnv) testSearch(t *testing.T) {
	ctx := env.tab(t)
	env.open(t, ctx, "/?q=timeout")

	first := browsertest.Eval[float64](t, ctx, `window.__firstRowMs ?? -1`)
	mark := browsertest.Eval[float64](t, ctx, `performance.getEntriesByName('haystack-first-row')[0]?.startTime ?? -1`)
	if first < 0 || mark < 0 {
		t.Fatalf("first row time not recorded: __firstRowMs=%v mark=%v", first, mark)
	}
	// Where the time goes, from the page's own clock (ms since navigation start).
	tm := browsertest.Eval[map[string]float64](t, ctx, `(() => {
		const n = performance.getEntriesByType('navigation')[0], r = {html: n.responseEnd, dcl: n.domContentLoadedEventEnd};
		for (const p of performance.getEntriesByType('paint')) r[p.name] = p.startTime;
		for (const e of performance.getEntriesByType('resource')) {
			const k = e.name.includes('/static/app.js') ? 'js' : e.name.includes('/api/v1/search') ? 'search' : e.name.includes('/api/v1/hits') ? 'hits' : e.name.includes('/api/v1/facets') ? 'facets' : '';
			if (k && !(k + 'Start' in r)) { r[k + 'Start'] = e.startTime; r[k + 'First'] = e.responseStart; }
		}
		return r;
	})()`)
	t.Logf("first row painted %.1f ms after navigation start: HTML in at %.1f ms, app.js requested %.1f, DOMContentLoaded %.1f, search requested %.1f, first byte %.1f; hits requested %.1f, facets %.1f; first contentful paint %.1f",
		first, tm["html"], tm["jsStart"], tm["dcl"], tm["searchStart"], tm["searchFirst"], tm["hitsStart"], tm["facetsStart"], tm["first-contentful-paint"])
	// The search goes out first; the histogram and the facets follow it.
	if !(tm["searchStart"] > 0 && tm["searchStart"] <= tm["hitsStart"] && tm["searchStart"] <= tm["facetsStart"]) {
		t.Errorf("request order: search at %v ms, hits %v, facets %v", tm["searchStart"], tm["hitsStart"], tm["facetsStart"])
	}

	req := env.api.last("search")
	if req.Get("q") != "timeout" || req.Get("fold") != "" || req.Get("direction") != "backward" || req.Get("limit") != "500" {
		t.Fatalf("search request %v", req)
	}
	want, limited, err := env.api.search(req)
	if err != nil {
		t.Fatal(err)
	}
	if limited || len(want) < 50 {
		t.Fatalf("test corpus: want 50..500 matches of timeout, got %d (limited %v)", len(want), limited)
	}
	got := rows(t, ctx)
	checkRows(t, got, want)
	for i, r := range got {
		for _, m := range r.Marks {
			if m != "timeout" {
				t.Fatalf("row %d %q: mark %q", i, r.Line, m)
			}
		}
		if n := strings.Count(r.Line, "timeout"); len(r.Marks) != n {
			t.Fatalf("row %d %q: %d marks, %d occurrences", i, r.Line, len(r.Marks), n)
		}
	}
	status := browsertest.Eval[string](t, ctx, `document.getElementById('status').textContent`)
	if !strings.HasPrefix(status, fmt.Sprintf("%d results", len(want))) {
		t.Errorf("status %q, want %d results", status, len(want))
	}

	// The histogram: bars sum to the API's total, which is every match in range.
	h, err := env.api.hits(env.api.last("hits"))
	if err != nil {
		t.Fatal(err)
	}
	sum := browsertest.Eval[int](t, ctx, `[...document.querySelectorAll('#hist rect.bar')].reduce((s, r) => s + Number(r.dataset.count), 0)`)
	bars := browsertest.Eval[int](t, ctx, `document.querySelectorAll('#hist rect.bar').length`)
	if sum != h.Total || h.Total != len(want) || bars == 0 {
		t.Fatalf("histogram: %d bars summing to %d; API total %d; matches %d", bars, sum, h.Total, len(want))
	}
	// The facets: every value the API counted, with its count.
	facets := browsertest.Eval[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll('#facet-list button')].map(b => [b.dataset.label + '=' + b.dataset.value, b.querySelector('.n').textContent]))`)
	wantFacets := map[string]string{}
	for _, e := range want {
		for k, v := range e.labels {
			n, _ := strconv.Atoi(wantFacets[k+"="+v])
			wantFacets[k+"="+v] = strconv.Itoa(n + 1)
		}
	}
	if fmt.Sprint(facets) != fmt.Sprint(wantFacets) {
		t.Fatalf("facets %v, want %v", facets, wantFacets)
	}
}

func (env *browserEnv) testFold(t *testing.T) {
	ctx := env.tab(t)
	env.open(t, ctx, "/?q=TIMEOUT&case=1")
	req := env.api.last("search")
	if req.Get("fold") != "1" {
		t.Fatalf("search request %v lacks fold=1", req)
	}
	want, _, err := env.api.search(req)
	if err != nil {
		t.Fatal(err)
	}
	got := rows(t, ctx)
	checkRows(t, got, want)
	exact := 0
	for i, r := range got {
		for _, m := range r.Marks {
			if !strings.EqualFold(m, "timeout") {
				t.Fatalf("row %d %q: mark %q", i, r.Line, m)
			}
		}
		if n := strings.Count(strings.ToLower(r.Line), "timeout"); len(r.Marks) != n {
			t.Fatalf("row %d %q: %d marks, %d occurrences", i, r.Line, len(r.Marks), n)
		}
		if strings.Contains(r.Line, "Timeout") {
			exact++
		}
	}
	if exact == 0 {
		t.Fatal("test corpus: no mixed-case match")
	}
	if !browsertest.Eval[bool](t, ctx, `document.getElementById('fold').checked`) {
		t.Fatal("Ignore case is not checked")
	}
}

// rowElementsJS lists every element inside the rows that the page's own
// code would not have made, and every attribute it would not have set.
const rowElementsJS = `(() => {
	const ok = new Set(['TIME.ts', 'SPAN.labels', 'SPAN.lbl', 'SPAN.line', 'MARK.', 'SPAN.ctl', 'BUTTON.expand']);
	const attrs = new Set(['class', 'title', 'datetime', 'data-ts', 'type', 'aria-label']);
	const bad = [];
	for (const r of document.querySelectorAll('#rows .row')) {
		for (const e of r.querySelectorAll('*')) {
			const k = e.tagName + '.' + e.className;
			if (!ok.has(k)) bad.push(k);
			for (const a of e.attributes) if (!attrs.has(a.name)) bad.push(k + '@' + a.name);
		}
	}
	const fok = new Set(['SECTION.facet', 'H3.', 'UL.', 'LI.', 'BUTTON.', 'SPAN.v', 'SPAN.n', 'SPAN.ctl', 'DIV.none']);
	const fattrs = new Set(['class', 'type', 'data-label', 'data-value', 'aria-pressed', 'title']);
	for (const e of document.querySelectorAll('#facet-list *')) {
		const k = e.tagName + '.' + e.className;
		if (!fok.has(k)) bad.push('facet ' + k);
		for (const a of e.attributes) if (!fattrs.has(a.name)) bad.push('facet ' + k + '@' + a.name);
	}
	return bad;
})()`

func (env *browserEnv) testInert(t *testing.T) {
	ctx := env.tab(t)
	var dialogs atomic.Int32
	err := chromedp.Listen(ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			dialogs.Add(1)
			go chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	env.open(t, ctx, "/?q=hostile")
	want, _, err := env.api.search(env.api.last("search"))
	if err != nil {
		t.Fatal(err)
	}
	got := rows(t, ctx)
	checkRows(t, got, want)
	if len(got) != 5 {
		t.Fatalf("%d hostile rows, want 5", len(got))
	}
	byLine := map[string]browsertest.Row{}
	for _, r := range got {
		byLine[r.Line] = r
	}
	// Markup and entities show as the raw text, character for character.
	for _, l := range []string{lineScript, lineImg, lineEntity} {
		if _, ok := byLine[l]; !ok {
			t.Errorf("no row shows %q literally", l)
		}
	}
	// ESC shows as ␛, and nothing interprets the color code.
	escShown := "hostile ␛[31mred␛[0m plain"
	if _, ok := byLine[escShown]; !ok {
		t.Errorf("no row shows %q", escShown)
	}
	if n := browsertest.Eval[int](t, ctx, `[...document.querySelectorAll('#rows .ctl')].filter(e => e.textContent === '\u241b').length`); n != 2 {
		t.Errorf("%d ␛ symbols, want 2", n)
	}
	if _, ok := byLine["hostile bidi <U+202E>gnp.exe"]; !ok {
		t.Errorf("the bidi override is not shown as <U+202E>")
	}
	if bad := browsertest.Eval[[]string](t, ctx, rowElementsJS); len(bad) > 0 {
		t.Errorf("foreign elements or attributes in rows or facets: %q", bad)
	}
	if n := browsertest.Eval[int](t, ctx, `document.querySelectorAll('#rows [style], #rows script, #rows img, #rows svg, #facet-list svg').length`); n != 0 {
		t.Errorf("%d styled or injected elements", n)
	}
	// The label value with markup shows as text in the row and the sidebar.
	if n := browsertest.Eval[int](t, ctx, `[...document.querySelectorAll('#rows .lbl')].filter(e => e.textContent === 'app=' + `+strconv.Quote(labelXSS)+`).length`); n != 1 {
		t.Errorf("%d rows show the label app=%s as text, want 1", n, labelXSS)
	}
	if n := browsertest.Eval[int](t, ctx, `[...document.querySelectorAll('#facet-list button')].filter(b => b.dataset.value === `+strconv.Quote(labelXSS)+` && b.querySelector('.v').textContent === `+strconv.Quote(labelXSS)+`).length`); n != 1 {
		t.Errorf("%d facet buttons show %s as text, want 1", n, labelXSS)
	}

	// A hostile query is as inert as hostile lines.
	q := `<img src=x onerror=window.__xss=3>`
	env.open(t, ctx, "/?q="+url.QueryEscape(q))
	if v := browsertest.Eval[string](t, ctx, `document.getElementById('q').value`); v != q {
		t.Errorf("query box shows %q, want %q", v, q)
	}
	time.Sleep(100 * time.Millisecond) // give an injected handler time to fire
	if v := browsertest.Eval[string](t, ctx, `typeof window.__xss`); v != "undefined" {
		t.Fatalf("window.__xss is %s: a payload ran", v)
	}
	if n := dialogs.Load(); n != 0 {
		t.Fatalf("%d dialogs opened", n)
	}
	// The dialog listener itself works: a real alert is seen.
	browsertest.Eval[any](t, ctx, `setTimeout(() => alert('control'), 0); null`)
	deadline := time.Now().Add(5 * time.Second)
	for dialogs.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if dialogs.Load() != 1 {
		t.Fatal("the control alert was not seen: the dialog check cannot fail")
	}
}

func (env *browserEnv) testLongLine(t *testing.T) {
	ctx := env.tab(t)
	env.open(t, ctx, "/?q=longline")
	want, _, _ := env.api.search(env.api.last("search"))
	got := rows(t, ctx)
	checkRows(t, got, want)
	if len(got) != 1 || !got[0].Expand || len(got[0].Line) != pageTrunc {
		t.Fatalf("long line: %d rows, expand %v, %d characters shown", len(got), got[0].Expand, len(got[0].Line))
	}
	if !slices.Equal(got[0].Marks, []string{"longline"}) {
		t.Fatalf("marks %q", got[0].Marks)
	}
	do(t, ctx, chromedp.Click(chromedp.CSS("#rows button.expand")))
	got = rows(t, ctx)
	if got[0].Line != want[0].line || got[0].Expand {
		t.Fatalf("expanded line: %d characters (want %d), expand button still there: %v", len(got[0].Line), len(want[0].line), got[0].Expand)
	}
}

func (env *browserEnv) testURLState(t *testing.T) {
	ctx := env.tab(t)
	env.open(t, ctx, "/?q=timeout")
	if v := browsertest.Eval[string](t, ctx, `document.getElementById('range').value`); v != "24h" {
		t.Fatalf("range %q, want the default 24h", v)
	}
	act(t, ctx, js(`(() => { const r = document.getElementById('range'); r.value = '1h'; r.dispatchEvent(new Event('change')); })()`))
	act(t, ctx, chromedp.Click(chromedp.ID("fold")))
	search := browsertest.Eval[string](t, ctx, `location.search`)
	if search != "?q=timeout&from=now-1h&case=1" {
		t.Fatalf("URL %q", search)
	}
	checkReq := func(fold string, span time.Duration) {
		t.Helper()
		req := env.api.last("search")
		start, _ := strconv.ParseInt(req.Get("start"), 10, 64)
		end, _ := strconv.ParseInt(req.Get("end"), 10, 64)
		if req.Get("q") != "timeout" || req.Get("fold") != fold || time.Duration(end-start) < span || time.Duration(end-start) > span+time.Millisecond {
			t.Fatalf("search request %v: span %v, want %v with fold=%q", req, time.Duration(end-start), span, fold)
		}
	}
	checkReq("1", time.Hour)

	do(t, ctx, chromedp.Reload())
	browsertest.Wait(t, ctx, browsertest.Settled)
	state := browsertest.Eval[[]any](t, ctx, `[document.getElementById('q').value, document.getElementById('range').value, document.getElementById('fold').checked]`)
	if fmt.Sprint(state) != "[timeout 1h true]" {
		t.Fatalf("after reload: %v", state)
	}
	checkReq("1", time.Hour)

	// Back: the case toggle goes off again; back once more: 24 hours.
	act(t, ctx, chromedp.NavigateBack())
	if s := browsertest.Eval[string](t, ctx, `location.search`); s != "?q=timeout&from=now-1h" {
		t.Fatalf("after back: URL %q", s)
	}
	if browsertest.Eval[bool](t, ctx, `document.getElementById('fold').checked`) {
		t.Fatal("after back: Ignore case still checked")
	}
	checkReq("", time.Hour)
	act(t, ctx, chromedp.NavigateBack())
	if v := browsertest.Eval[string](t, ctx, `document.getElementById('range').value`); v != "24h" {
		t.Fatalf("after second back: range %q", v)
	}
	checkReq("", 24*time.Hour)
	if p := browsertest.Eval[string](t, ctx, `document.getElementById('permalink').getAttribute('href')`); p != "?q=timeout" {
		t.Fatalf("permalink %q", p)
	}
}

func (env *browserEnv) testFacet(t *testing.T) {
	ctx := env.tab(t)
	env.open(t, ctx, "/?q=timeout")
	act(t, ctx, chromedp.Click(chromedp.CSS(`#facet-list button[data-label="app"][data-value="api"]`)))
	wantQ := `{app="api"} |= "timeout"`
	if v := browsertest.Eval[string](t, ctx, `document.getElementById('q').value`); v != wantQ {
		t.Fatalf("query after facet click %q, want %q", v, wantQ)
	}
	if v := browsertest.Eval[string](t, ctx, `new URLSearchParams(location.search).get('q')`); v != wantQ {
		t.Fatalf("URL q %q", v)
	}
	req := env.api.last("search")
	if req.Get("q") != wantQ {
		t.Fatalf("search request q %q", req.Get("q"))
	}
	want, _, err := env.api.search(req)
	if err != nil {
		t.Fatal(err)
	}
	got := rows(t, ctx)
	checkRows(t, got, want)
	for i, r := range got {
		if !slices.Contains(r.Labels, "app=api") {
			t.Fatalf("row %d has labels %q", i, r.Labels)
		}
		if n := strings.Count(r.Line, "timeout"); len(r.Marks) != n {
			t.Fatalf("row %d %q: %d marks, %d occurrences of the |= literal", i, r.Line, len(r.Marks), n)
		}
	}
	if !browsertest.Eval[bool](t, ctx, `document.querySelector('#facet-list button[data-label="app"][data-value="api"]').getAttribute('aria-pressed') === 'true'`) {
		t.Fatal("the applied facet is not shown as pressed")
	}
	// A second value of another label narrows further; clicking a pressed
	// value removes it again.
	act(t, ctx, chromedp.Click(chromedp.CSS(`#facet-list button[data-label="level"][data-value="error"]`)))
	if v := browsertest.Eval[string](t, ctx, `document.getElementById('q').value`); v != `{app="api", level="error"} |= "timeout"` {
		t.Fatalf("query %q", v)
	}
	act(t, ctx, chromedp.Click(chromedp.CSS(`#facet-list button[data-label="app"][data-value="api"]`)))
	act(t, ctx, chromedp.Click(chromedp.CSS(`#facet-list button[data-label="level"][data-value="error"]`)))
	if v := browsertest.Eval[string](t, ctx, `document.getElementById('q').value`); v != "timeout" {
		t.Fatalf("after removing both facets the query is %q, want timeout", v)
	}
}

// testLoadMoreBytes: a page the server cut for its size (hay serve
// --max-query-bytes: the trailer's limited_by "bytes" and warning) says
// so in the status, with the server's warning as its title, and still
// offers the next page (review 13 R13-3: it said "Stopped at N" alone).
func (env *browserEnv) testLoadMoreBytes(t *testing.T) {
	env.api.bytesCut.Store(true)
	defer env.api.bytesCut.Store(false)
	ctx := env.tab(t)
	env.open(t, ctx, "/?q=tick&limit=50")
	status := browsertest.Eval[string](t, ctx, `document.getElementById('status').textContent`)
	title := browsertest.Eval[string](t, ctx, `document.getElementById('status').title`)
	if status != "Stopped at 50 (the server's answer size limit) — load more" || title != fakeCutWarning {
		t.Fatalf("status %q, title %q", status, title)
	}
	if browsertest.Eval[bool](t, ctx, `document.getElementById('more').hidden`) {
		t.Fatal("load more hidden after a byte cut")
	}
	env.api.bytesCut.Store(false)
	act(t, ctx, chromedp.Click(chromedp.ID("more")))
	status = browsertest.Eval[string](t, ctx, `document.getElementById('status').textContent`)
	title = browsertest.Eval[string](t, ctx, `document.getElementById('status').title`)
	if status != "Stopped at 100 — load more" || title != "" {
		t.Fatalf("after a page the server did not cut: status %q, title %q", status, title)
	}
}

func (env *browserEnv) testLoadMore(t *testing.T) {
	ctx := env.tab(t)
	env.open(t, ctx, "/?q=tick&limit=50")
	first := env.api.last("search")
	all := url.Values{}
	for k, v := range first {
		all[k] = v
	}
	all.Set("limit", "100000")
	want, _, err := env.api.search(all)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 120 {
		t.Fatalf("test corpus: %d tick lines", len(want))
	}
	checkRows(t, rows(t, ctx), want[:50])
	status := browsertest.Eval[string](t, ctx, `document.getElementById('status').textContent`)
	if status != "Stopped at 50 — load more" || browsertest.Eval[bool](t, ctx, `document.getElementById('more').hidden`) {
		t.Fatalf("status %q, load more hidden: %v", status, browsertest.Eval[bool](t, ctx, `document.getElementById('more').hidden`))
	}
	// The 50th and 51st entries share a timestamp: the next page must start
	// at the 51st, neither losing nor repeating any.
	if want[49].ts != want[50].ts {
		t.Fatal("test corpus: no tie at the page boundary")
	}
	act(t, ctx, chromedp.Click(chromedp.ID("more")))
	checkRows(t, rows(t, ctx), want[:100])
	act(t, ctx, chromedp.Click(chromedp.ID("more-foot")))
	checkRows(t, rows(t, ctx), want)
	if !browsertest.Eval[bool](t, ctx, `document.getElementById('more').hidden`) {
		t.Fatal("load more still offered after the last page")
	}
	if s := browsertest.Eval[string](t, ctx, `document.getElementById('status').textContent`); !strings.HasPrefix(s, "120 results") {
		t.Fatalf("status %q", s)
	}

	// Oldest first pages forward from the last row's time.
	env.open(t, ctx, "/?q=tick&dir=forward&limit=50")
	all = url.Values{}
	for k, v := range env.api.last("search") {
		all[k] = v
	}
	if all.Get("direction") != "forward" {
		t.Fatalf("search request %v", all)
	}
	all.Set("limit", "100000")
	want, _, _ = env.api.search(all)
	checkRows(t, rows(t, ctx), want[:50])
	act(t, ctx, chromedp.Click(chromedp.ID("more")))
	act(t, ctx, chromedp.Click(chromedp.ID("more")))
	checkRows(t, rows(t, ctx), want)
}

func (env *browserEnv) testDragZoom(t *testing.T) {
	ctx := env.tab(t)
	env.open(t, ctx, "/?q=timeout")
	before := env.api.last("search")
	s0, _ := strconv.ParseInt(before.Get("start"), 10, 64)
	e0, _ := strconv.ParseInt(before.Get("end"), 10, 64)
	box := browsertest.Eval[map[string]float64](t, ctx, `(() => { const r = document.getElementById('hist').getBoundingClientRect(); return {x: r.left, y: r.top, w: r.width, h: r.height}; })()`)
	y := box["y"] + box["h"]/2
	x0, x1 := box["x"]+0.25*box["w"], box["x"]+0.75*box["w"]
	held := func(p *input.DispatchMouseEventParams) {
		p.Button = input.MouseButtonLeft
		p.Buttons = 1
		p.ClickCount = 1
	}
	act(t, ctx,
		chromedp.MouseEvent(chromedp.MousePressed, x0, y, held),
		chromedp.MouseEvent(chromedp.MouseMoved, (x0+x1)/2, y, held),
		chromedp.MouseEvent(chromedp.MouseMoved, x1, y, held),
		chromedp.MouseEvent(chromedp.MouseReleased, x1, y, chromedp.ButtonLeft, chromedp.ClickCount(1)),
	)
	p := browsertest.Eval[map[string]string](t, ctx, `Object.fromEntries(new URLSearchParams(location.search))`)
	from, err1 := strconv.ParseInt(p["from"], 10, 64)
	to, err2 := strconv.ParseInt(p["to"], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("URL after drag: %v", p)
	}
	mid := (s0 + e0) / 2 / 1e6
	half := (e0 - s0) / 2 / 1e6
	if math.Abs(float64(to-from-half)) > 0.02*float64(half) || math.Abs(float64((from+to)/2-mid)) > 0.02*float64(half) {
		t.Fatalf("zoomed to [%d, %d] ms, want the middle half of [%d, %d] ns", from, to, s0, e0)
	}
	req := env.api.last("search")
	if req.Get("start") != strconv.FormatInt(from*1e6, 10) || req.Get("end") != strconv.FormatInt(to*1e6+999999, 10) {
		t.Fatalf("search after zoom: start %s end %s; URL from %d to %d", req.Get("start"), req.Get("end"), from, to)
	}
	want, _, _ := env.api.search(req)
	checkRows(t, rows(t, ctx), want)
	if v := browsertest.Eval[string](t, ctx, `document.getElementById('range').value`); v != "custom" {
		t.Fatalf("range select shows %q after zoom", v)
	}

	// Zoom out: three times the span around the same middle, but not past
	// now (here the middle half of the last 24 hours: it ends at now).
	act(t, ctx, chromedp.Click(chromedp.ID("zoomout")))
	p = browsertest.Eval[map[string]string](t, ctx, `Object.fromEntries(new URLSearchParams(location.search))`)
	from2, _ := strconv.ParseInt(p["from"], 10, 64)
	nowMs := time.Now().UnixMilli()
	if _, ok := p["to"]; ok || math.Abs(float64(nowMs-3*(to-from)-from2)) > 2000 {
		t.Fatalf("zoom out of [%d, %d] at %d gave %v", from, to, nowMs, p)
	}
}

func (env *browserEnv) testKeyboard(t *testing.T) {
	ctx := env.tab(t)
	env.open(t, ctx, "/")
	// Every control has a name a screen reader can say.
	unnamed := browsertest.Eval[[]string](t, ctx, `[...document.querySelectorAll('input, select, button')].filter(e =>
		!(e.labels && e.labels.length) && !e.getAttribute('aria-label') && !e.textContent.trim()).map(e => e.id || e.outerHTML)`)
	if len(unnamed) > 0 {
		t.Fatalf("controls without a label: %q", unnamed)
	}
	do(t, ctx, typeKey("/", "Slash", 191))
	if id := browsertest.Eval[string](t, ctx, `document.activeElement.id`); id != "q" {
		t.Fatalf("after /, focus is on %q", id)
	}
	do(t, ctx, chromedp.KeyEvent("request"))
	act(t, ctx, chromedp.KeyEvent(kb.Enter))
	if s := browsertest.Eval[string](t, ctx, `location.search`); s != "?q=request" {
		t.Fatalf("URL after typing and Enter: %q", s)
	}
	want, _, _ := env.api.search(env.api.last("search"))
	checkRows(t, rows(t, ctx), want)
	// Tab moves from the query box to the next control.
	do(t, ctx, chromedp.KeyEvent(kb.Tab))
	if id := browsertest.Eval[string](t, ctx, `document.activeElement.id`); id != "range" {
		t.Fatalf("Tab from the query box goes to %q", id)
	}
}

func (env *browserEnv) testEscape(t *testing.T) {
	ctx := env.tab(t)
	do(t, ctx, chromedp.Navigate(env.srv.URL+"/?q=slowquery"))
	browsertest.Wait(t, ctx, `document.querySelectorAll('#rows .row').length === 1 && document.getElementById('status').dataset.state === 'running'`)
	do(t, ctx, chromedp.KeyEvent(kb.Escape))
	browsertest.Wait(t, ctx, `document.getElementById('status').dataset.state === 'stopped'`)
	select {
	case q := <-env.api.cancelled:
		if q != "slowquery" {
			t.Fatalf("cancelled %q", q)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the server never saw the search end after Escape")
	}
	if s := browsertest.Eval[string](t, ctx, `document.getElementById('status').textContent`); s != "Stopped at 1 (Escape)" {
		t.Fatalf("status %q", s)
	}
}

func (env *browserEnv) testTail(t *testing.T) {
	ctx := env.tab(t)
	env.open(t, ctx, "/?q=tail+event&live=1")
	browsertest.Wait(t, ctx, `document.querySelectorAll('#rows .row').length === `+strconv.Itoa(pageTailCap)+` && document.querySelector('#rows .row .line').textContent === 'tail event 1009 <b>x</b>'`)
	if req := env.api.last("tail"); req.Get("q") != "tail event" {
		t.Fatalf("tail request %v", req)
	}
	got := rows(t, ctx)
	for i, r := range got {
		if w := fmt.Sprintf("tail event %04d <b>x</b>", tailBurst-1-i); r.Line != w {
			t.Fatalf("tail row %d: %q, want %q (newest first, capped at %d)", i, r.Line, w, pageTailCap)
		}
	}
	if !browsertest.Eval[bool](t, ctx, `document.getElementById('live').checked`) {
		t.Fatal("live toggle off")
	}
	do(t, ctx, chromedp.KeyEvent(kb.Escape))
	browsertest.Wait(t, ctx, `!document.getElementById('live').checked && location.search === '?q=tail+event'`)
}

func (env *browserEnv) testScreenshot(t *testing.T) {
	ctx := env.tab(t)
	env.open(t, ctx, "/?q=timeout")
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	browsertest.SaveArtifact(t, "ui-screenshot.png", png)

	// The hostile lines in the dark theme.
	_, err = chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	env.open(t, ctx, "/?q=hostile")
	if bg := browsertest.Eval[string](t, ctx, `getComputedStyle(document.body).backgroundColor`); bg != "rgb(22, 23, 26)" {
		t.Fatalf("dark theme: body background %s", bg)
	}
	png, err = chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	browsertest.SaveArtifact(t, "ui-screenshot-dark.png", png)
}

// helperCase is what the page's query helpers made of one string.
type helperCase struct {
	Plain   string   `json:"plain"`   // withLabel(s, fold=false, app, v)
	Fold    string   `json:"fold"`    // withLabel(s, fold=true, app, v)
	Removed string   `json:"removed"` // withLabel(Plain, false, app, v): the facet clicked again
	Lits    []string `json:"lits"`    // the |= literals highlighters finds in Plain
}

// testHelpers checks the page's LogQL quoting against Go's strconv and
// regexp (what the server parses with), over random strings full of quotes,
// backslashes, control characters and non-ASCII text; and its match ranges
// against a strings.Index scan.
func (env *browserEnv) testHelpers(t *testing.T) {
	ctx := env.tab(t)
	env.open(t, ctx, "/?q=longline")
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "Z", " ", `"`, `\`, "`", "\n", "\t", "\x00", "\x1b", "\x7f", "{", "}", "|=", "~", "'", "or", "é", "ß", "İ", "😀", "\u2028", "(?i)", ".", "*", "$"}
	inputs := []string{"a", `"`, `\`, `\\"`, "`x`", "x\ny", "(?i)", "a.b*", " lead", "trail ", "😀😀", `|= "x"`}
	for range 300 {
		var b strings.Builder
		for range rng.IntN(10) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		inputs = append(inputs, b.String())
	}
	var kept []string
	for _, s := range inputs {
		// A string that starts with { is LogQL, not plain text.
		if s != "" && !strings.HasPrefix(strings.TrimLeft(s, " \t\n\u2028"), "{") {
			kept = append(kept, s)
		}
	}
	in, _ := json.Marshal(kept)
	label := `v "q" \ é`
	lab, _ := json.Marshal(label)
	got := browsertest.Eval[[]helperCase](t, ctx, `(() => { const H = window.__haystack, L = `+string(lab)+`; return `+string(in)+`.map(s => {
		const plain = H.withLabel(s, false, 'app', L);
		return {plain, fold: H.withLabel(s, true, 'app', L), removed: H.withLabel(plain, false, 'app', L),
			lits: H.highlighters(plain, false).filter(h => h.lit !== undefined).map(h => h.lit)};
	}); })()`)
	if len(got) != len(kept) {
		t.Fatalf("%d answers for %d strings", len(got), len(kept))
	}
	for i, s := range kept {
		g := got[i]
		m, err := parseQuery(g.Plain, false)
		if err != nil || m.labels["app"] != label || len(m.labels) != 1 || !slices.Equal(m.lits, []string{s}) {
			t.Errorf("%q: facet query %q parses to %+v, %v", s, g.Plain, m, err)
			continue
		}
		if !slices.Equal(g.Lits, []string{s}) {
			t.Errorf("%q: highlighted literals of %q are %q", s, g.Plain, g.Lits)
		}
		if g.Removed != s {
			t.Errorf("%q: removing the facet again gives %q", s, g.Removed)
		}
		m, err = parseQuery(g.Fold, false)
		if err != nil || len(m.res) != 1 || m.labels["app"] != label {
			t.Errorf("%q: case-folded facet query %q: %+v, %v", s, g.Fold, m, err)
			continue
		}
		if f := m.res[0].FindString(s); f != s {
			t.Errorf("%q: regex of %q finds %q in the literal itself", s, g.Fold, f)
		}
		if up := strings.ToUpper(s); len(up) == len(s) && !m.res[0].MatchString(up) {
			t.Errorf("%q: regex of %q misses the upper-case %q", s, g.Fold, up)
		}
	}

	// Match ranges: the page's marks are a left-to-right scan for
	// non-overlapping occurrences, like strings.Index (ASCII here, so byte
	// and UTF-16 offsets agree).
	type rangeCase struct {
		Line, Needle string
		Fold         bool
	}
	var cases []rangeCase
	for range 300 {
		var line, needle strings.Builder
		for range rng.IntN(20) {
			line.WriteByte("aAbB"[rng.IntN(4)])
		}
		for range 1 + rng.IntN(3) {
			needle.WriteByte("aAb"[rng.IntN(3)])
		}
		cases = append(cases, rangeCase{line.String(), needle.String(), rng.IntN(2) == 0})
	}
	cj, _ := json.Marshal(cases)
	ranges := browsertest.Eval[[][][2]int](t, ctx, `(() => { const H = window.__haystack; return `+string(cj)+`.map(c => H.ranges(c.Line, H.highlighters(c.Needle, c.Fold))); })()`)
	for i, c := range cases {
		line, needle := c.Line, c.Needle
		if c.Fold {
			line, needle = strings.ToLower(line), strings.ToLower(needle)
		}
		var want [][2]int
		for off := 0; ; {
			j := strings.Index(line[off:], needle)
			if j < 0 {
				break
			}
			want = append(want, [2]int{off + j, off + j + len(needle)})
			off += j + len(needle)
		}
		if fmt.Sprint(ranges[i]) != fmt.Sprint(want) {
			t.Errorf("ranges(%q, %q, fold %v) = %v, want %v", c.Line, c.Needle, c.Fold, ranges[i], want)
		}
	}
}

func (env *browserEnv) testBadQuery(t *testing.T) {
	ctx := env.tab(t)
	q := `{app="<img src=x onerror=window.__xss=4>"`
	do(t, ctx, chromedp.Navigate(env.srv.URL+"/?q="+url.QueryEscape(q)))
	browsertest.Wait(t, ctx, `document.getElementById('status').dataset.state === 'error' && document.getElementById('hits').textContent !== '' && !document.getElementById('facet-list').hasAttribute('aria-busy')`)
	status := browsertest.Eval[string](t, ctx, `document.getElementById('status').textContent`)
	if want := "Error: bad query " + q + ": "; !strings.HasPrefix(status, want) {
		t.Fatalf("status %q, want it to start with %q", status, want)
	}
	if hits := browsertest.Eval[string](t, ctx, `document.getElementById('hits').textContent`); !strings.HasPrefix(hits, "Histogram: bad query "+q) {
		t.Fatalf("histogram message %q", hits)
	}
	time.Sleep(100 * time.Millisecond) // give an injected handler time to fire
	if n := browsertest.Eval[int](t, ctx, `document.querySelectorAll('#status *, #hits *, #facet-list *, #rows *').length`); n != 0 {
		t.Fatalf("%d elements made from the error messages", n)
	}
	if v := browsertest.Eval[string](t, ctx, `typeof window.__xss`); v != "undefined" {
		t.Fatalf("window.__xss is %s: a payload in an error message ran", v)
	}
}
