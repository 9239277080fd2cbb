package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"haystack/internal/browsertest"
	"haystack/internal/testseed"

	"github.com/chromedp/chromedp"
)

// The real-server browser test: `hay demo`'s own code (generation, ingest,
// the server with the embedded UI) in headless Chromium. The UI's detailed
// tests run against a fake API in internal/server/web; this one checks
// that the page and the real server agree.
//
// HAY_DEMO_BROWSER_LINES sets the corpus size (default 200,000, to keep
// CI fast); HAY_DEMO_BROWSER_LOADS the number of page loads timed (default
// 5); HAY_DEMO_BROWSER_NEEDLE the needle (default OutOfMemoryError). The
// time to the first painted row is logged, never asserted:
//
//	HAY_DEMO_BROWSER_LINES=1000000 HAY_DEMO_BROWSER_LOADS=15 go test -count=1 -run TestDemoBrowser -v ./cmd/hay

// pageTrunc is where the page (app.js) cuts a displayed line, in UTF-16
// code units.
const pageTrunc = 1000

// hostileLine is pushed before the last page load; it holds the needle,
// so it is the newest row of the page.
func hostileLine(needle string) string {
	return `<script>window.__xss=1</script><img src=x onerror="window.__xss=2"> &lt;b&gt; ` + needle + " \x1b[31mred\x1b[0m"
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// envSeed is a randomized test's seed (testseed.Seed): the one the
// environment variable name gives, to replay a failure, else one derived
// from HAY_TEST_SEED (CI), else a new one.
func envSeed(t *testing.T, name string) uint64 {
	t.Helper()
	return testseed.Seed(t, name)
}

// pageRequest returns the URL (relative to the server) of the page's
// request to the API endpoint ep ("search", "hits", "facets"), from the
// Performance API's resource entries.
func pageRequest(t *testing.T, ctx context.Context, ep string) string {
	t.Helper()
	u := browsertest.Eval[string](t, ctx, `(performance.getEntriesByType('resource').find(e => e.name.includes('/api/v1/`+ep+`?')) || {}).name || ''`)
	if u == "" {
		t.Fatalf("the page made no /api/v1/%s request", ep)
	}
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p.RequestURI()
}

// TestDemoBrowser opens /?q=<rare needle> on `hay demo`'s data in
// headless Chromium and checks the page against the real server's API:
// the rows (order, times, labels, text), the highlighting, the histogram
// and an inert pushed <script> line; saves artifacts/ui-demo.png; and
// logs when the first row was painted.
func TestDemoBrowser(t *testing.T) {
	lines := envInt(t, "HAY_DEMO_BROWSER_LINES", 200_000)
	loads := envInt(t, "HAY_DEMO_BROWSER_LOADS", 5)
	demoNeedle := "OutOfMemoryError" // a rare needle
	if v := os.Getenv("HAY_DEMO_BROWSER_NEEDLE"); v != "" {
		demoNeedle = v
	}
	dir := filepath.Join(t.TempDir(), "demo")
	t0 := time.Now()
	d := startDemo(t, "--lines", strconv.Itoa(lines), "--data", dir)
	t.Logf("demo: %d lines generated and stored, serving at %s, in %v", lines, d.base, time.Since(t0).Round(time.Millisecond))

	browser := browsertest.New(t)
	tab, cancelTab := chromedp.NewContext(browser)
	defer cancelTab()
	ctx, cancel := context.WithTimeout(tab, 2*time.Minute)
	defer cancel()
	load := func() {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Navigate(d.base+"/?q="+url.QueryEscape(demoNeedle))); err != nil {
			t.Fatal(err)
		}
		browsertest.Wait(t, ctx, browsertest.Settled)
	}

	// Timed loads on the demo's data alone (each a fresh navigation, as a
	// user opening the link). From the page's own clock, ms after
	// navigation start: the first row painted (app.js records it), the
	// search's first byte and end, and the end of the last request.
	const timingJS = `(() => {
		const n = performance.getEntriesByType('navigation')[0], r = {html: n.responseEnd, dcl: n.domContentLoadedEventEnd, first: window.__firstRowMs ?? -1};
		for (const p of performance.getEntriesByType('paint')) r[p.name] = p.startTime;
		for (const e of performance.getEntriesByType('resource')) {
			const k = e.name.includes('/api/v1/search') ? 'search' : e.name.includes('/api/v1/hits') ? 'hits' : e.name.includes('/api/v1/facets') ? 'facets' : '';
			if (k && !(k + 'Start' in r)) { r[k + 'Start'] = e.startTime; r[k + 'First'] = e.responseStart; r[k + 'End'] = e.responseEnd; }
		}
		r.settled = Math.max(r.searchEnd ?? 0, r.hitsEnd ?? 0, r.facetsEnd ?? 0);
		return r;
	})()`
	var timings []map[string]float64
	for range loads {
		load()
		tm := browsertest.Eval[map[string]float64](t, ctx, timingJS)
		if tm["first"] < 0 {
			t.Fatal("the first row time was not recorded")
		}
		timings = append(timings, tm)
	}
	median := func(k string) float64 {
		var v []float64
		for _, tm := range timings {
			v = append(v, tm[k])
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	var firsts []string
	for _, tm := range timings {
		firsts = append(firsts, strconv.FormatFloat(tm["first"], 'f', 1, 64))
	}
	t.Logf("first row painted, ms after navigation start, %d loads of /?q=%s on %d lines: median %.1f (all %s)",
		loads, demoNeedle, lines, median("first"), strings.Join(firsts, " "))
	t.Logf("medians: HTML in %.1f ms, DOMContentLoaded %.1f, search requested %.1f, its first byte %.1f, its end %.1f; hits requested %.1f, end %.1f; facets requested %.1f, end %.1f; first contentful paint %.1f; last request done %.1f",
		median("html"), median("dcl"), median("searchStart"), median("searchFirst"), median("searchEnd"),
		median("hitsStart"), median("hitsEnd"), median("facetsStart"), median("facetsEnd"), median("first-contentful-paint"), median("settled"))

	// A hostile line, pushed the way an agent would. It holds the
	// needle, so it becomes the newest row.
	body, err := json.Marshal(map[string]any{"streams": []any{map[string]any{
		"stream": map[string]string{"app": "web", "source": "push"},
		"values": [][]string{{strconv.FormatInt(time.Now().UnixNano(), 10), hostileLine(demoNeedle)}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(d.base+"/loki/api/v1/push", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("push: %s", resp.Status)
	}
	load()

	// The rows are the API's answer to the page's own request.
	searchURL := pageRequest(t, ctx, "search")
	su, _ := url.Parse(searchURL)
	if q := su.Query(); q.Get("q") != demoNeedle || q.Get("direction") != "backward" || q.Get("start") == "" || q.Get("end") == "" {
		t.Fatalf("the page's search request %s", searchURL)
	}
	want, trailer := searchLines(t, d.base, su.Query())
	if trailer["done"] != true || trailer["limited"] != false {
		t.Fatalf("search trailer %v: want a complete answer", trailer)
	}
	if len(want) < 3 {
		t.Fatalf("test corpus: %d matches of %s in the last 24 hours; want a few", len(want), demoNeedle)
	}
	got := browsertest.Eval[[]browsertest.Row](t, ctx, browsertest.RowsJS)
	if len(got) != len(want) {
		t.Fatalf("the page shows %d rows, the API sends %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.TS != w["ts"] {
			t.Fatalf("row %d: ts %s, API %v", i, g.TS, w["ts"])
		}
		line := w["line"].(string)
		if g.Line != browsertest.Display(line, pageTrunc) {
			t.Fatalf("row %d: line %q, API %q", i, g.Line, line)
		}
		var labels []string
		for k, v := range w["labels"].(map[string]any) {
			labels = append(labels, k+"="+v.(string))
		}
		sort.Strings(labels)
		// Then the entry's metadata, in name order, as the row shows it
		// (the lines pushed here have detected_level).
		var meta []string
		if m, ok := w["metadata"].(map[string]any); ok {
			for k, v := range m {
				meta = append(meta, k+"="+v.(string))
			}
		}
		sort.Strings(meta)
		labels = append(labels, meta...)
		if !slices.Equal(g.Labels, labels) {
			t.Fatalf("row %d: labels %q, API %q", i, g.Labels, labels)
		}
		// Highlighting marks each occurrence of the needle, and only it.
		if n := strings.Count(g.Line, demoNeedle); n == 0 || len(g.Marks) != n {
			t.Fatalf("row %d %q: %d marks for %d occurrences", i, g.Line, len(g.Marks), n)
		}
		for _, m := range g.Marks {
			if m != demoNeedle {
				t.Fatalf("row %d: mark %q", i, m)
			}
		}
	}
	status := browsertest.Eval[string](t, ctx, `document.getElementById('status').textContent`)
	if !strings.HasPrefix(status, fmt.Sprintf("%d results", len(want))) {
		t.Errorf("status %q, want %d results", status, len(want))
	}

	// The histogram: its bars are the API's buckets, summing to the total
	// (every match in the range: the same number as the rows here).
	var h struct {
		StepMS  int64 `json:"step_ms"`
		Buckets []struct {
			T     int64 `json:"t"`
			Count int64 `json:"count"`
		} `json:"buckets"`
		Total int64 `json:"total"`
	}
	getJSON(t, d.base+pageRequest(t, ctx, "hits"), &h)
	bars := browsertest.Eval[[]int64](t, ctx, `[...document.querySelectorAll('#hist rect.bar')].map(r => Number(r.dataset.count))`)
	var wantBars []int64
	for _, b := range h.Buckets {
		if b.Count > 0 {
			wantBars = append(wantBars, b.Count)
		}
	}
	var sum int64
	for _, b := range bars {
		sum += b
	}
	if !slices.Equal(bars, wantBars) || sum != h.Total || h.Total != int64(len(want)) {
		t.Fatalf("histogram bars %v (sum %d); API buckets %v, total %d; %d rows", bars, sum, wantBars, h.Total, len(want))
	}
	if txt := browsertest.Eval[string](t, ctx, `document.getElementById('hits').textContent`); !strings.HasPrefix(txt, fmt.Sprintf("%d hits", h.Total)) {
		t.Errorf("hit count %q, want %d hits", txt, h.Total)
	}

	// The pushed line is the newest match: shown as its text, inert.
	if got[0].Line != browsertest.Display(hostileLine(demoNeedle), pageTrunc) || !slices.Contains(got[0].Labels, "app=web") {
		t.Fatalf("first row %q %q, want the pushed line", got[0].Line, got[0].Labels)
	}
	if v := browsertest.Eval[string](t, ctx, `typeof window.__xss`); v != "undefined" {
		t.Fatalf("window.__xss is %s: the pushed markup ran", v)
	}
	if n := browsertest.Eval[int](t, ctx, `document.querySelectorAll('#rows script, #rows img, #rows [onerror], #rows [style], #rows b').length`); n != 0 {
		t.Fatalf("%d elements made from log text", n)
	}

	// The screenshot a user would see.
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	browsertest.SaveArtifact(t, "ui-demo.png", png)
	d.stop(t)
}
