package web_test

// Incident use of the UI against the real server, in headless Chromium:
// a shared permalink restores every state it holds, the histogram counts
// entries at the range's first and last nanosecond and no others, the
// times shown are the browser's local time (the UTC instant in the
// tooltip), a copied line is the line, Escape really ends a live tail, and
// a tail storm keeps the newest rows within the cap, and a slow search
// shows that it runs and stops on Escape.

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"haystack/internal/browsertest"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// incidentTZ is the page's zone here: not UTC and half an hour off, so a
// time shown in UTC, or cut to whole hours, shows.
const incidentTZ = "Asia/Kolkata"

var incidentLoc = time.FixedZone("IST", 5*3600+1800)

func setZone(t *testing.T, ctx context.Context) {
	t.Helper()
	if _, err := chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: incidentTZ}); err != nil {
		t.Fatal(err)
	}
}

// pageRequest is the query of the page's first request to /api/v1/<ep>.
func pageRequest(t *testing.T, ctx context.Context, ep string) url.Values {
	t.Helper()
	u := browsertest.Eval[string](t, ctx, `(performance.getEntriesByType('resource').find(e => e.name.includes('/api/v1/`+ep+`?')) || {}).name || ''`)
	if u == "" {
		t.Fatalf("the page made no /api/v1/%s request", ep)
	}
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p.Query()
}

// TestUIIncident: see the file comment.
func TestUIIncident(t *testing.T) {
	env := newSecEnv(t)
	// A whole-second range a minute long, ten minutes ago, and entries at
	// its first and last nanosecond and one nanosecond outside each.
	fromMs := time.Now().Add(-10 * time.Minute).Truncate(time.Second).UnixMilli()
	toMs := fromMs + 60_000 - 1
	first, last := fromMs*1e6, toMs*1e6+999_999
	edge := map[string]string{"app": "edge"}
	env.push(t, []pushEntry{
		{labels: edge, ts: first - 1, line: "edgemark before"},
		{labels: edge, ts: first, line: "edgemark first"},
		{labels: edge, ts: first + 30e9, line: "edgemark middle"},
		{labels: edge, ts: last, line: "edgemark last"},
		{labels: edge, ts: last + 1, line: "edgemark after"},
	})

	t.Run("permalink round trip", func(t *testing.T) {
		ctx, _ := env.tab(t)
		setZone(t, ctx)
		if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: browsertest.TailTraceJS}); err != nil {
			t.Fatal(err)
		}
		search := fmt.Sprintf("?q=%s&from=%d&to=%d&case=1&dir=forward&live=1&limit=7", url.QueryEscape("EDGEMARK"), fromMs, toMs)
		env.open(t, ctx, "/"+search)
		check := func(when string) {
			t.Helper()
			got := browsertest.Eval[[]string](t, ctx, `[location.search, document.getElementById('permalink').getAttribute('href'), document.getElementById('q').value,
				document.getElementById('range').value, document.getElementById('from').value, document.getElementById('to').value,
				String(document.getElementById('fold').checked), document.getElementById('dir').value, String(document.getElementById('live').checked)]`)
			want := []string{search, search, "EDGEMARK", "custom",
				localInputValue(time.UnixMilli(fromMs)), localInputValue(time.UnixMilli(toMs)),
				"true", "forward", "true"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: page state\n%q\nwant\n%q", when, got, want)
			}
			req := pageRequest(t, ctx, "search")
			wantReq := url.Values{"q": {"EDGEMARK"}, "fold": {"1"}, "start": {strconv.FormatInt(first, 10)}, "end": {strconv.FormatInt(last, 10)}, "limit": {"7"}, "direction": {"forward"}}
			if req.Encode() != wantReq.Encode() {
				t.Errorf("%s: search request %v, want %v", when, req, wantReq)
			}
			tu, _ := url.Parse(browsertest.Eval[string](t, ctx, `(window.__tails.at(-1) || {}).url || ''`))
			if tail := tu.Query(); tu.Path != "api/v1/tail" || tail.Encode() != (url.Values{"q": {"EDGEMARK"}, "fold": {"1"}}).Encode() {
				t.Errorf("%s: tail request %v", when, tail)
			}
			var lines []string
			for _, r := range pageRows(t, ctx) {
				lines = append(lines, r.Line)
			}
			if fmt.Sprint(lines) != "[edgemark first edgemark middle edgemark last]" {
				t.Errorf("%s: rows %q", when, lines)
			}
		}
		check("opened")
		run(t, ctx, chromedp.Reload())
		browsertest.Wait(t, ctx, browsertest.Settled)
		check("reloaded")

		// A relative range that is not a preset stays relative in the link.
		env.open(t, ctx, "/?q=edgemark&from=now-3h")
		if got := browsertest.Eval[[]string](t, ctx, `[document.getElementById('range').value, document.getElementById('permalink').getAttribute('href')]`); fmt.Sprint(got) != "[custom ?q=edgemark&from=now-3h]" {
			t.Errorf("from=now-3h: range and permalink %q", got)
		}
	})

	t.Run("histogram edges", func(t *testing.T) {
		ctx, _ := env.tab(t)
		hist := func(q string) (string, []map[string]float64) {
			t.Helper()
			env.open(t, ctx, fmt.Sprintf("/?q=%s&from=%d&to=%d", url.QueryEscape(q), fromMs, toMs))
			bars := browsertest.Eval[[]map[string]float64](t, ctx, `[...document.querySelectorAll('#hist rect.bar')].map(r => ({x: +r.getAttribute('x'), w: +r.getAttribute('width'), n: +r.dataset.count, t: +r.dataset.t, W: document.querySelector('#hist svg').width.baseVal.value}))`)
			return browsertest.Eval[string](t, ctx, `document.getElementById('hits').textContent`), bars
		}
		// Both edges count, one nanosecond outside does not; and each
		// edge's bar is drawn inside the chart.
		hits, bars := hist("edgemark")
		sum := 0.0
		for _, b := range bars {
			sum += b["n"]
			if b["x"] < -0.5 || b["x"]+b["w"] > b["W"]+0.5 || b["w"] <= 0 {
				t.Errorf("bar %v is drawn outside the chart", b)
			}
		}
		if !strings.HasPrefix(hits, "3 hits · ") || sum != 3 || len(bars) != 3 {
			t.Errorf("edges: %q, %d bars summing to %v; want 3 hits in 3 bars", hits, len(bars), sum)
		} else if bars[0]["x"] > 1 || bars[2]["x"]+bars[2]["w"] < bars[2]["W"]-1 || bars[0]["t"] > float64(fromMs) || bars[2]["t"] > float64(toMs) {
			t.Errorf("edge bars %v: the first should start at the left edge, the last end at the right", bars)
		}
		if rows := pageRows(t, ctx); len(rows) != 3 || rows[0].Line != "edgemark last" || rows[2].Line != "edgemark first" {
			t.Errorf("edges: rows %+v", rows)
		}
		// One entry.
		hits, bars = hist(`{app="edge"} |= "edgemark last"`)
		if !strings.HasPrefix(hits, "1 hit · ") || len(bars) != 1 || bars[0]["n"] != 1 {
			t.Errorf("one entry: %q, bars %v", hits, bars)
		}
		// None: the chart is there, empty, and says so.
		hits, bars = hist("edgemark nowhere")
		status := browsertest.Eval[string](t, ctx, `document.getElementById('status').textContent`)
		if !strings.HasPrefix(hits, "0 hits · ") || len(bars) != 0 || !strings.HasPrefix(status, "0 results") {
			t.Errorf("no entries: %q, %d bars, status %q", hits, len(bars), status)
		}
	})

	t.Run("local time shown", func(t *testing.T) {
		ctx, _ := env.tab(t)
		setZone(t, ctx)
		env.open(t, ctx, fmt.Sprintf("/?q=edgemark+first&from=%d&to=%d", fromMs, toMs))
		got := browsertest.Eval[[]string](t, ctx, `(() => { const e = document.querySelector('#rows .ts'); return [e.textContent, e.title, e.dateTime]; })()`)
		ts := time.Unix(0, first)
		want := []string{ts.In(incidentLoc).Format("2006-01-02 15:04:05.000"), ts.UTC().Format(time.RFC3339Nano), ts.UTC().Format(time.RFC3339Nano)}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("row time (text, tooltip, datetime) %q, want %q", got, want)
		}
	})

	t.Run("copy a line", func(t *testing.T) {
		line := "copyplain GET /api/v1/users?id=42&x=\"y\" took 1.5s αβγ 😀 <b>not bold</b>\tcol2  two  spaces"
		env.push(t, []pushEntry{{labels: map[string]string{"app": "copy"}, ts: time.Now().Add(-time.Minute).UnixNano(), line: line}})
		ctx, _ := env.tab(t)
		env.open(t, ctx, "/?q=copyplain")
		if got := browsertest.Eval[string](t, ctx, copyLineJS); got != line {
			t.Errorf("copying the line gives %q, want %q", got, line)
		}
	})

	t.Run("escape ends the tail", func(t *testing.T) {
		ctx, _ := env.tab(t)
		env.open(t, ctx, "/?q=escmark&live=1")
		browsertest.Wait(t, ctx, `document.getElementById('status').textContent.startsWith('Live: ')`)
		time.Sleep(200 * time.Millisecond)
		tag := map[string]string{"app": "esc"}
		env.push(t, []pushEntry{{labels: tag, ts: time.Now().UnixNano(), line: "escmark one"}})
		browsertest.Wait(t, ctx, `document.querySelectorAll('#rows .row').length === 1`)
		run(t, ctx, chromedp.KeyEvent(kb.Escape))
		browsertest.Wait(t, ctx, `!document.getElementById('live').checked && location.search === '?q=escmark'`)
		env.push(t, []pushEntry{{labels: tag, ts: time.Now().UnixNano(), line: "escmark two"}})
		time.Sleep(500 * time.Millisecond)
		if n := browsertest.Eval[int](t, ctx, `document.querySelectorAll('#rows .row').length`); n != 1 {
			t.Errorf("%d rows after Escape and another push: the tail still runs", n)
		}
		if s := browsertest.Eval[string](t, ctx, `document.getElementById('status').textContent`); strings.HasPrefix(s, "Live") {
			t.Errorf("status after Escape: %q", s)
		}
		// Enter in the query box runs the typed search.
		run(t, ctx, chromedp.Focus(chromedp.ID("q")))
		browsertest.Eval[any](t, ctx, `document.getElementById('q').select(); document.getElementById('status').dataset.state = 'test'; null`)
		run(t, ctx, chromedp.KeyEvent("escmark"), chromedp.KeyEvent(kb.Enter))
		browsertest.Wait(t, ctx, browsertest.Settled)
		if n := browsertest.Eval[int](t, ctx, `document.querySelectorAll('#rows .row').length`); n != 2 {
			t.Errorf("after Enter: %d rows, want both pushed", n)
		}
	})

	t.Run("slow search", env.testSlowSearch)
	t.Run("hidden tab tail", env.testHiddenTail)

	t.Run("tail storm", func(t *testing.T) {
		ctx, _ := env.tab(t)
		env.open(t, ctx, "/?q=stormmark&live=1")
		browsertest.Wait(t, ctx, `document.getElementById('status').textContent.startsWith('Live: ')`)
		browsertest.Eval[any](t, ctx, `window.__long = 0; new PerformanceObserver(l => { for (const e of l.getEntries()) window.__long = Math.max(window.__long, e.duration); }).observe({type: 'longtask'}); null`)
		time.Sleep(200 * time.Millisecond)
		// 6,000 entries in 12 pushes as fast as the server takes them.
		const batches, per = 12, 500
		var all []pushEntry
		base := time.Now().UnixNano()
		t0 := time.Now()
		for b := range batches {
			var es []pushEntry
			for i := range per {
				n := b*per + i
				es = append(es, pushEntry{labels: map[string]string{"app": "storm"}, ts: base + int64(n), line: fmt.Sprintf("stormmark %05d %s", n, strings.Repeat("x", n%300))})
			}
			env.push(t, es)
			all = append(all, es...)
		}
		pushed := time.Since(t0)
		lastLine := all[len(all)-1].line
		browsertest.Wait(t, ctx, `(document.querySelector('#rows .row .line') || {}).textContent === `+strconv.Quote(lastLine))
		t.Logf("%d tailed entries pushed in %v, all shown %v after the first push; longest task %.0f ms",
			len(all), pushed.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond), browsertest.Eval[float64](t, ctx, `window.__long`))
		// The newest TAIL_CAP, newest first (one stream: its entries arrive
		// in push order), and the status counts what is kept.
		got := pageRows(t, ctx)
		if len(got) != secTailCap {
			t.Fatalf("%d rows kept, want %d", len(got), secTailCap)
		}
		for i, r := range got {
			if w := all[len(all)-1-i]; r.Line != w.line || r.TS != strconv.FormatInt(w.ts, 10) {
				t.Fatalf("row %d: %q at %s, want %q at %d", i, r.Line, r.TS, w.line, w.ts)
			}
		}
		if s := browsertest.Eval[string](t, ctx, `document.getElementById('status').textContent`); s != "Live: "+strconv.Itoa(secTailCap)+" rows" {
			t.Errorf("status %q", s)
		}
	})
}

// copyLineJS copies the first row's line as a browser does: selects it
// and fires copy; what a copy handler put in clipboardData, or else the
// selection's text, is what the clipboard gets.
const copyLineJS = `(() => {
	const line = document.querySelector('#rows .row .line');
	const r = document.createRange();
	r.selectNodeContents(line);
	getSelection().removeAllRanges();
	getSelection().addRange(r);
	const dt = new DataTransfer();
	const ev = new ClipboardEvent('copy', {clipboardData: dt, bubbles: true, cancelable: true});
	line.dispatchEvent(ev);
	return ev.defaultPrevented ? dt.getData('text/plain') : getSelection().toString();
})()`

// testSlowSearch: a search the server has not answered yet says so, and
// Escape stops it: the page says where it stopped and the server sees the
// request end (so it stops searching).
func (env *secEnv) testSlowSearch(t *testing.T) {
	ctx, _ := env.tab(t)
	run(t, ctx, chromedp.Navigate(env.hay.URL+"/?q=slowmark"))
	browsertest.Wait(t, ctx, `document.getElementById('status').dataset.state === 'running'`)
	time.Sleep(400 * time.Millisecond) // past SIDE_DELAY: the histogram and facets are asked too
	if s := browsertest.Eval[string](t, ctx, `document.getElementById('status').textContent`); s != "Searching… 0" {
		t.Errorf("status of a running search: %q", s)
	}
	run(t, ctx, chromedp.KeyEvent(kb.Escape))
	browsertest.Wait(t, ctx, `document.getElementById('status').dataset.state === 'stopped'`)
	select {
	case q := <-env.slowEnded:
		if q != "slowmark" {
			t.Errorf("ended %q", q)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the server never saw the search end after Escape")
	}
	if s := browsertest.Eval[string](t, ctx, `document.getElementById('status').textContent`); s != "Stopped at 0 (Escape)" {
		t.Errorf("status after Escape: %q", s)
	}
}

// pausedFrames models a hidden tab: browsers do not run
// requestAnimationFrame callbacks for a hidden document; here they wait
// in window.__raf until the test "shows" the tab. It also counts the
// tail's messages as they reach the page (window.__msgs).
const pausedFrames = `window.__raf = [];
window.requestAnimationFrame = cb => { window.__raf.push(cb); return window.__raf.length; };
` + browsertest.TailTraceJS

// testHiddenTail: in a background tab no frame paints the live tail's
// queue; it must still keep only the newest TAIL_CAP entries (it held
// every entry of a storm before a1de384, and the first frame once the tab
// was shown built a row for each).
func (env *secEnv) testHiddenTail(t *testing.T) {
	ctx, _ := env.tab(t)
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: pausedFrames}); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, chromedp.Navigate(env.hay.URL+"/?q=hiddenmark&live=1"))
	browsertest.Wait(t, ctx, `document.getElementById('status').textContent.startsWith('Live: ')`)
	time.Sleep(200 * time.Millisecond)
	const n = 5000
	var es []pushEntry
	base := time.Now().UnixNano()
	for i := range n {
		es = append(es, pushEntry{labels: map[string]string{"app": "storm"}, ts: base + int64(i), line: fmt.Sprintf("hiddenmark %05d %s", i, strings.Repeat("z", 200))})
	}
	env.push(t, es)
	browsertest.Wait(t, ctx, `window.__msgs === `+strconv.Itoa(n))
	// Show the tab: run the frame callbacks, counting the rows built.
	r := browsertest.Eval[map[string]float64](t, ctx, `(() => {
		let added = 0;
		const mo = new MutationObserver(ms => { for (const m of ms) added += m.addedNodes.length; });
		mo.observe(document.getElementById('rows'), {childList: true});
		const t0 = performance.now();
		for (const f of window.__raf.splice(0)) f(t0);
		const ms = performance.now() - t0;
		const recs = mo.takeRecords();
		for (const m of recs) added += m.addedNodes.length;
		mo.disconnect();
		return {added, ms, rows: document.querySelectorAll('#rows .row').length};
	})()`)
	t.Logf("shown again after %d tailed entries: first frame built %v rows in %.0f ms; %v rows kept", n, r["added"], r["ms"], r["rows"])
	if r["rows"] != secTailCap {
		t.Errorf("%v rows kept, want %d", r["rows"], secTailCap)
	}
	if r["added"] > secTailCap {
		t.Errorf("the hidden tab held all %d entries and built %v rows in one frame (%.0f ms) to keep %d", n, r["added"], r["ms"], secTailCap)
	}
}

// localInputValue is what a datetime-local input with a seconds step
// reads back for t in the test's zone: HTML's normalized value leaves the
// seconds out when they are zero ("…T21:54", not "…T21:54:00"), which
// failed this test in the runs whose range ended on a whole minute.
func localInputValue(t time.Time) string {
	return strings.TrimSuffix(t.In(incidentLoc).Format("2006-01-02T15:04:05"), ":00")
}
