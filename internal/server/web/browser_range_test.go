package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
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

// The tests of the histogram bar click, the custom time range and the live
// tail's reconnects and errors (subtests of TestBrowser).

// pageTZ is the time zone the range tests give the page: not UTC, and half
// an hour off, so that a range read as UTC or cut to whole hours shows.
const pageTZ = "Asia/Kolkata"

var pageLoc = time.FixedZone("IST", 5*3600+1800)

// setTZ makes the tab's local time pageTZ.
func setTZ(t *testing.T, ctx context.Context) {
	t.Helper()
	if _, err := chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: pageTZ}); err != nil {
		t.Fatal(err)
	}
}

// localInput is what a datetime-local input holds for ms in pageTZ.
func localInput(ms int64) string {
	return time.UnixMilli(ms).In(pageLoc).Format("2006-01-02T15:04:05")
}

// inputMs parses a datetime-local value in pageTZ (the browser leaves
// out :00 seconds) to unix ms.
func inputMs(t *testing.T, v string) int64 {
	t.Helper()
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if tm, err := time.ParseInLocation(layout, v, pageLoc); err == nil {
			return tm.UnixMilli()
		}
	}
	t.Fatalf("datetime-local value %q", v)
	return 0
}

// checkControls fails t unless the range select shows Custom… and the
// From and To inputs show from and to (ms, to the second) in pageTZ.
func checkControls(t *testing.T, ctx context.Context, from, to int64) {
	t.Helper()
	got := browsertest.Eval[[]any](t, ctx, `[document.getElementById('range').value, document.getElementById('custom').hidden, document.getElementById('from').value, document.getElementById('to').value]`)
	if len(got) != 4 || got[0] != "custom" || got[1] != false ||
		inputMs(t, fmt.Sprint(got[2])) != from/1000*1000 || inputMs(t, fmt.Sprint(got[3])) != to/1000*1000 {
		t.Fatalf("controls %q, want [custom false %s %s]", got, localInput(from), localInput(to))
	}
}

// edgeB is the start (unix ms) of the bucket that holds the bucketedge
// entries, read back from the fake's store.
func (env *browserEnv) edgeB(t *testing.T) int64 {
	t.Helper()
	for _, e := range env.api.entries {
		if strings.HasPrefix(e.line, "bucketedge 1 ") {
			return e.ts / 1e6
		}
	}
	t.Fatal("test corpus: no bucketedge entries")
	return 0
}

// entriesIn is the oracle of a range: the store's entries containing word
// with startNs <= ts <= endNs, newest first (the page's default order),
// worked out here rather than by the fake's search.
func (env *browserEnv) entriesIn(word string, startNs, endNs int64) []entry {
	var out []entry
	for _, e := range env.api.entries {
		if strings.Contains(e.line, word) && e.ts >= startNs && e.ts <= endNs {
			out = append(out, e)
		}
	}
	slices.Reverse(out) // the store is sorted by time, ties in store order
	return out
}

// lines are the entries' lines, for messages.
func lines(es []entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.line)
	}
	return out
}

// checkReq fails t unless the request has these parameters, exactly.
func checkReq(t *testing.T, name string, got map[string][]string, want map[string]string) {
	t.Helper()
	flat := map[string]string{}
	for k, v := range got {
		flat[k] = strings.Join(v, ",")
	}
	if fmt.Sprint(flat) != fmt.Sprint(want) {
		t.Fatalf("%s request %v, want %v", name, flat, want)
	}
}

func text(t *testing.T, ctx context.Context, id string) string {
	t.Helper()
	return browsertest.Eval[string](t, ctx, `document.getElementById(`+strconv.Quote(id)+`).textContent`)
}

// setValue sets an input's value and fires input and change, as a person
// editing it does.
func setValue(id, v string) chromedp.Action[chromedp.Void] {
	return js(`(() => { const e = document.getElementById(` + strconv.Quote(id) + `); e.value = ` + strconv.Quote(v) +
		`; e.dispatchEvent(new Event('input', {bubbles: true})); e.dispatchEvent(new Event('change', {bubbles: true})); })()`)
}

type histBar struct {
	T     int64   `json:"t"`
	Count int     `json:"count"`
	X     float64 `json:"x"`
	Y     float64 `json:"y"`
	W     float64 `json:"w"`
	H     float64 `json:"h"`
}

const barsJS = `[...document.querySelectorAll('#hist rect.bar')].map(r => {
	const b = r.getBoundingClientRect();
	return {t: Number(r.dataset.t), count: Number(r.dataset.count), x: b.left, y: b.top, w: b.width, h: b.height};
})`

// testBarClick clicks one histogram bar: the page must narrow the range
// to exactly that bucket, [t, t+step) in ms, search it once more, and
// show exactly the entries inside, with the counts to match.
func (env *browserEnv) testBarClick(t *testing.T) {
	ctx := env.tab(t)
	setTZ(t, ctx)
	env.open(t, ctx, "/?q=bucketedge")
	b := env.edgeB(t)
	h, err := env.api.hits(env.api.last("hits"))
	if err != nil {
		t.Fatal(err)
	}
	if h.StepMs != edgeStep {
		t.Fatalf("test corpus: the fake's step for 24 hours is %d ms, want %d", h.StepMs, edgeStep)
	}
	step := h.StepMs
	bars := browsertest.Eval[[]histBar](t, ctx, barsJS)
	var got []string
	for _, r := range bars {
		got = append(got, fmt.Sprintf("%d:%d", r.T, r.Count))
	}
	// The bucketedge entries: 1 in the bucket before B, 5 in B, 1 after.
	want := []string{fmt.Sprintf("%d:1", b-step), fmt.Sprintf("%d:5", b), fmt.Sprintf("%d:1", b+step)}
	if !slices.Equal(got, want) {
		t.Fatalf("bars %q, want %q", got, want)
	}
	bar := bars[1]
	if bar.W < 4 || bar.H < 4 {
		t.Fatalf("bar too small to click: %+v", bar)
	}
	before := env.api.count("search")
	// In the bar's right half: a page that rounds to the nearest bucket
	// instead of taking the one under the pointer zooms to the next.
	x, y := bar.X+bar.W*0.75, bar.Y+bar.H/2
	act(t, ctx,
		chromedp.MouseEvent(chromedp.MousePressed, x, y, chromedp.ButtonLeft, chromedp.ClickCount(1)),
		chromedp.MouseEvent(chromedp.MouseReleased, x, y, chromedp.ButtonLeft, chromedp.ClickCount(1)),
	)
	if n := env.api.count("search") - before; n != 1 {
		t.Fatalf("%d searches after the click, want 1", n)
	}
	// from and to are the bucket's first and last millisecond.
	from, to := b, b+step-1
	if s := browsertest.Eval[string](t, ctx, `location.search`); s != fmt.Sprintf("?q=bucketedge&from=%d&to=%d", from, to) {
		t.Fatalf("URL after the click %q, want from=%d to=%d", s, from, to)
	}
	startNs, endNs := from*1e6, (b+step)*1e6-1
	start, end := strconv.FormatInt(startNs, 10), strconv.FormatInt(endNs, 10)
	checkReq(t, "search", env.api.last("search"), map[string]string{"q": "bucketedge", "start": start, "end": end, "limit": "500", "direction": "backward"})
	checkReq(t, "hits", env.api.last("hits"), map[string]string{"q": "bucketedge", "start": start, "end": end})
	checkReq(t, "facets", env.api.last("facets"), map[string]string{"q": "bucketedge", "start": start, "end": end})

	wantRows := env.entriesIn("bucketedge", startNs, endNs)
	if len(wantRows) != 5 || wantRows[0].ts != endNs || wantRows[4].ts != startNs {
		t.Fatalf("test corpus: bucket [%d, %d] holds %q", startNs, endNs, lines(wantRows))
	}
	checkRows(t, rows(t, ctx), wantRows)
	if s := text(t, ctx, "status"); !strings.HasPrefix(s, "5 results · ") {
		t.Fatalf("status %q, want 5 results", s)
	}
	wantHits := "5 hits · " + time.UnixMilli(from).In(pageLoc).Format("2006-01-02 15:04:05.000") + " – " + time.UnixMilli(to).In(pageLoc).Format("2006-01-02 15:04:05.000")
	// Then the zone the times are in (its name as the browser's ICU spells it).
	if s := text(t, ctx, "hits"); !strings.HasPrefix(s, wantHits+" ") || !strings.HasSuffix(s, " (UTC+05:30)") {
		t.Fatalf("hits %q, want %q", s, wantHits)
	}
	if sum := browsertest.Eval[int](t, ctx, `[...document.querySelectorAll('#hist rect.bar')].reduce((s, r) => s + Number(r.dataset.count), 0)`); sum != 5 {
		t.Fatalf("the narrowed histogram's bars sum to %d, want 5", sum)
	}
	// The controls show the new range: custom, from and to in local time.
	checkControls(t, ctx, from, to)
	// Back returns to the whole day.
	act(t, ctx, chromedp.NavigateBack())
	if s := browsertest.Eval[string](t, ctx, `location.search + ' ' + document.querySelectorAll('#hist rect.bar').length`); s != "?q=bucketedge 3" {
		t.Fatalf("after back: %q, want the 3 bars of the day again", s)
	}
}

// testCustomRange enters an absolute range in the From and To inputs: each
// change searches exactly that range (the inputs are local time, to the
// second; from is inclusive, to includes its whole millisecond), and input
// the page cannot use is handled as app.js means to.
func (env *browserEnv) testCustomRange(t *testing.T) {
	ctx := env.tab(t)
	setTZ(t, ctx)
	env.open(t, ctx, "/?q=bucketedge")
	b := env.edgeB(t)
	before := env.api.count("search")

	// Custom… shows the inputs filled with the range on screen (the last 24
	// hours, in local time) and searches nothing yet.
	do(t, ctx, setValue("range", "custom"))
	vis := browsertest.Eval[[]any](t, ctx, `[document.getElementById('custom').hidden, document.activeElement.id]`)
	if fmt.Sprint(vis) != "[false from]" {
		t.Fatalf("after Custom…: [custom hidden, focus] = %v", vis)
	}
	in := browsertest.Eval[[]string](t, ctx, `[document.getElementById('from').value, document.getElementById('to').value]`)
	now := time.Now()
	for i, want := range []time.Time{now.Add(-24 * time.Hour), now} {
		if got := time.UnixMilli(inputMs(t, in[i])); got.Sub(want).Abs() > 10*time.Second {
			t.Fatalf("input %d shows %q, want %v in %s", i, in[i], want.In(pageLoc), pageTZ)
		}
	}
	toShown := time.UnixMilli(inputMs(t, in[1]))

	search := func(from, toNs int64, wantN int) {
		t.Helper()
		startNs := from * 1e6
		checkReq(t, "search", env.api.last("search"), map[string]string{"q": "bucketedge", "start": strconv.FormatInt(startNs, 10), "end": strconv.FormatInt(toNs, 10), "limit": "500", "direction": "backward"})
		want := env.entriesIn("bucketedge", startNs, toNs)
		if len(want) != wantN {
			t.Fatalf("test corpus: %d bucketedge entries in [%d, %d], want %d", len(want), startNs, toNs, wantN)
		}
		checkRows(t, rows(t, ctx), want)
		if s := text(t, ctx, "status"); !strings.HasPrefix(s, fmt.Sprintf("%d results · ", wantN)) {
			t.Fatalf("status %q, want %d results", s, wantN)
		}
	}

	// From: B, to the second: all but the entry 1 ns before B. To is the
	// instant it showed (now, cut to the second); or, since the user did
	// not edit it, still "now" (no to= in the URL): both are right.
	asked := time.Now()
	act(t, ctx, setValue("from", localInput(b)))
	if n := env.api.count("search") - before; n != 1 {
		t.Fatalf("%d searches after Custom… and a From, want 1", n)
	}
	switch s := browsertest.Eval[string](t, ctx, `location.search`); s {
	case fmt.Sprintf("?q=bucketedge&from=%d&to=%d", b, toShown.UnixMilli()):
		search(b, toShown.UnixMilli()*1e6+999_999, 6)
	case fmt.Sprintf("?q=bucketedge&from=%d", b):
		end, _ := strconv.ParseInt(env.api.last("search").Get("end"), 10, 64)
		if end%1e6 != 999_999 || end < asked.UnixMilli()*1e6 || end > time.Now().UnixNano() {
			t.Fatalf("To still now: end %d, want the end of a millisecond in [%v, now]", end, asked)
		}
		search(b, end, 6)
	default:
		t.Fatalf("URL %q, want from=%d and to=%d or none", s, b, toShown.UnixMilli())
	}

	// To: the second before B's bucket ends. The range ends with that
	// second's first millisecond: the entry at its last ns is in, the one
	// 1 ns later is not.
	to := b + edgeStep - 1000
	act(t, ctx, setValue("to", localInput(to)))
	search(b, to*1e6+999_999, 3)
	wantURL := fmt.Sprintf("?q=bucketedge&from=%d&to=%d", b, to)
	if s := browsertest.Eval[string](t, ctx, `location.search`); s != wantURL {
		t.Fatalf("URL %q, want %q", s, wantURL)
	}
	if p := browsertest.Eval[string](t, ctx, `document.getElementById('permalink').getAttribute('href')`); p != wantURL {
		t.Fatalf("permalink %q, want %q", p, wantURL)
	}

	// The URL alone gives the same search and the same inputs.
	do(t, ctx, chromedp.Reload())
	browsertest.Wait(t, ctx, browsertest.Settled)
	search(b, to*1e6+999_999, 3)
	checkControls(t, ctx, b, to)

	// A From the input cannot parse (emptied) keeps the range it had: the
	// same search again, and the input shows the old value.
	act(t, ctx, setValue("from", ""))
	search(b, to*1e6+999_999, 3)
	checkControls(t, ctx, b, to)

	// From after To: the page sends it, the server refuses it (API.md) and
	// the page shows the server's message, with no rows.
	bad := b + edgeStep
	do(t, ctx, setValue("from", localInput(bad)))
	browsertest.Wait(t, ctx, `document.getElementById('status').dataset.state === 'error' && document.getElementById('hits').textContent !== '' && !document.getElementById('facet-list').hasAttribute('aria-busy')`)
	msg := fmt.Sprintf("start (%d) is after end (%d)", bad*1e6, to*1e6+999_999)
	if s := text(t, ctx, "status"); s != "Error: "+msg {
		t.Fatalf("status %q, want %q", s, "Error: "+msg)
	}
	if s := text(t, ctx, "hits"); s != "Histogram: "+msg {
		t.Fatalf("hits %q", s)
	}
	if n := len(rows(t, ctx)); n != 0 {
		t.Fatalf("%d rows for a range that ends before it starts", n)
	}

	// A URL time that is not one (a word, 17 digits) falls back to the
	// default: exactly 24 hours to now.
	env.open(t, ctx, "/?q=bucketedge&from=yesterday&to=12345678901234567")
	req := env.api.last("search")
	s0, _ := strconv.ParseInt(req.Get("start"), 10, 64)
	e0, _ := strconv.ParseInt(req.Get("end"), 10, 64)
	if e0-s0 != int64(24*time.Hour)+999_999 || time.Since(time.Unix(0, e0)).Abs() > 10*time.Second {
		t.Fatalf("bad URL times: searched [%d, %d], want the last 24 hours", s0, e0)
	}
	if v := browsertest.Eval[string](t, ctx, `document.getElementById('range').value`); v != "24h" {
		t.Fatalf("bad URL times: range shows %q, want 24h", v)
	}
}

// nextTail returns the next tailctl connection the fake got.
func (env *browserEnv) nextTail(t *testing.T) *tailConn {
	t.Helper()
	select {
	case c := <-env.api.tailConns:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no live tail request")
		return nil
	}
}

// drainTails forgets tail connections an earlier subtest left.
func (env *browserEnv) drainTails() {
	for {
		select {
		case <-env.api.tailConns:
		default:
			return
		}
	}
}

// liveEntry is the i-th entry the controlled tail sends.
func liveEntry(i int) entry {
	return entry{ts: time.Now().UnixNano(), labels: map[string]string{"app": "live", "level": "info"}, line: fmt.Sprintf("tailctl live %d", i)}
}

func sendEntry(t *testing.T, c *tailConn, e entry) {
	t.Helper()
	b, err := json.Marshal(entryJSON(e))
	if err != nil {
		t.Fatal(err)
	}
	c.do(t, tailCmd{op: "data", data: string(b)})
}

// waitStatus waits until the status line reads want.
func waitStatus(t *testing.T, ctx context.Context, want string) {
	t.Helper()
	browsertest.Wait(t, ctx, `document.getElementById('status').textContent === `+strconv.Quote(want))
}

// traceTails makes the tab's pages list their live-tail requests in
// window.__tails (browsertest.TailTraceJS), so a test can see which the
// page closed.
func traceTails(t *testing.T, ctx context.Context) {
	t.Helper()
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: browsertest.TailTraceJS}); err != nil {
		t.Fatal(err)
	}
}

// closedTails waits until the page made exactly n tail requests (one and
// its reconnections) and none is open.
func closedTails(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	browsertest.Wait(t, ctx, `window.__tails.length === `+strconv.Itoa(n)+` && window.__tails.every(x => x.state === 'closed')`)
}

// testTailReconnect drops the live tail twice (the response ends; the TCP
// connection is cut): the page must say it is reconnecting, reconnect with
// the same query, and show what each connection sent, in order, newest on
// top, above the search's rows. After each reconnection the page searches
// for what arrived meanwhile (from a minute before the latest row shown):
// the fake stores none of the tail's entries, so it adds nothing, and the
// stored rows it finds are older than that minute.
func (env *browserEnv) testTailReconnect(t *testing.T) {
	env.drainTails()
	ctx := env.tab(t)
	traceTails(t, ctx)
	before := env.api.count("tail")
	env.open(t, ctx, "/?q=tailctl&live=1")
	stored := env.entriesIn("tailctl", 0, time.Now().UnixNano())
	if len(stored) != 2 {
		t.Fatalf("test corpus: %d stored tailctl entries", len(stored))
	}
	checkRows(t, rows(t, ctx), stored)
	c := env.nextTail(t)
	checkReq(t, "tail", c.req, map[string]string{"q": "tailctl"})
	c.do(t, tailCmd{op: "open"})
	waitStatus(t, ctx, "Live: 2 rows")

	var sent []entry // newest first, as shown
	send := func(c *tailConn, n int) {
		t.Helper()
		for range n {
			e := liveEntry(len(sent) + 1)
			sendEntry(t, c, e)
			sent = append([]entry{e}, sent...)
		}
		waitStatus(t, ctx, fmt.Sprintf("Live: %d rows", len(sent)+2))
		checkRows(t, rows(t, ctx), append(slices.Clone(sent), stored...))
	}
	send(c, 3)

	for i, drop := range []string{"cut", "end"} {
		c.do(t, tailCmd{op: drop})
		// The fake holds the reconnect until the test has looked.
		c = env.nextTail(t)
		checkReq(t, "tail", c.req, map[string]string{"q": "tailctl"})
		waitStatus(t, ctx, fmt.Sprintf("Live: %d rows (reconnecting…)", len(sent)+2))
		checkRows(t, rows(t, ctx), append(slices.Clone(sent), stored...))
		c.do(t, tailCmd{op: "open"})
		send(c, 2+i)
	}
	if n := env.api.count("tail") - before; n != 3 {
		t.Fatalf("%d tail requests, want 3 (one and two reconnects)", n)
	}
	if !browsertest.Eval[bool](t, ctx, `document.getElementById('live').checked`) {
		t.Fatal("live toggle off after reconnecting")
	}
	// Escape ends the tail: the page closes the stream.
	do(t, ctx, chromedp.KeyEvent(kb.Escape))
	closedTails(t, ctx, 3)
	browsertest.Wait(t, ctx, `!document.getElementById('live').checked && location.search === '?q=tailctl' && document.getElementById('status').textContent.startsWith('10 results')`)
	checkRows(t, rows(t, ctx), append(slices.Clone(sent), stored...))
}

// testTailError sends {"error":...} on the live tail: the page shows it,
// keeps the rows it has, closes the stream and does not reconnect. Then a
// bad query, which fails both the search and the tail (which, as the
// server does, sends the error as an event and ends the stream).
func (env *browserEnv) testTailError(t *testing.T) {
	env.drainTails()
	ctx := env.tab(t)
	traceTails(t, ctx)
	before := env.api.count("tail")
	env.open(t, ctx, "/?q=tailctl&live=1")
	c := env.nextTail(t)
	c.do(t, tailCmd{op: "open"})
	e := liveEntry(1)
	sendEntry(t, c, e)
	waitStatus(t, ctx, "Live: 3 rows")
	c.do(t, tailCmd{op: "data", data: `{"error":"server shutting down"}`})
	waitStatus(t, ctx, "Live tail: server shutting down")
	if s := browsertest.Eval[string](t, ctx, `document.getElementById('status').className`); s != "error" {
		t.Fatalf("status class %q, want error", s)
	}
	closedTails(t, ctx, 1)
	checkRows(t, rows(t, ctx), append([]entry{e}, env.entriesIn("tailctl", 0, time.Now().UnixNano())...))
	// No reconnect, though the fake asked for one after tailRetry ms.
	time.Sleep(3 * tailRetry * time.Millisecond)
	if n := env.api.count("tail") - before; n != 1 {
		t.Fatalf("%d tail requests after the error, want 1", n)
	}
	waitStatus(t, ctx, "Live tail: server shutting down")
	// The tail is over: Live is unticked and the URL no longer asks for it.
	if on := browsertest.Eval[bool](t, ctx, `document.getElementById('live').checked`); on {
		t.Fatal("Live still ticked after the tail's error")
	}
	if u := browsertest.Eval[string](t, ctx, `location.search`); strings.Contains(u, "live=1") {
		t.Fatalf("URL %q still asks for the live tail after its error", u)
	}

	// A bad query: the search answers 400, the tail an error event; the
	// page shows either message and closes the tail.
	q := `{app="tail`
	before = env.api.count("tail")
	do(t, ctx, chromedp.Navigate(env.srv.URL+"/?live=1&q="+url.QueryEscape(q)))
	browsertest.Wait(t, ctx, `document.getElementById('status').dataset.state === 'error'`)
	closedTails(t, ctx, 1)
	// The fake ended the stream and asked for a reconnect in tailRetry ms.
	time.Sleep(3 * tailRetry * time.Millisecond)
	if n := env.api.count("tail") - before; n != 1 {
		t.Fatalf("bad query: %d tail requests, want 1", n)
	}
	_, _, _, err := params(env.api.last("tail"))
	if err == nil {
		t.Fatal("test corpus: the bad query parses")
	}
	s := text(t, ctx, "status")
	if s != "Error: "+err.Error() && s != "Live tail: "+err.Error() {
		t.Fatalf("bad query: status %q, want the error %q", s, err)
	}
	if n := len(rows(t, ctx)); n != 0 {
		t.Fatalf("bad query: %d rows", n)
	}
}
