package web_test

// Regression tests from the UI security and usability audit: each failed
// before its fix (DNS rebinding, backtracking highlight regexes, the
// zone, copy, Stop, titles, a dropped connection, invisible characters,
// long label chips).

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"haystack/internal/browsertest"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

func TestUIAuditRegressions(t *testing.T) {
	env := newSecEnv(t)
	t.Run("time zone not shown", env.testZoneShown)
	t.Run("copy is not the line", env.testCopyRaw)
	t.Run("any host name served", env.testHostCheck)
	t.Run("no stop control", env.testStopControl)
	t.Run("title says nothing", env.testTitle)
	t.Run("dropped connection", env.testDropped)
	t.Run("invisible characters", env.testInvisible)
	t.Run("polynomial regex", env.testPolyReDoS)
	t.Run("long label overflows", env.testLongLabel)
}

// testLongLabel: a long label value (up to 2 KiB is accepted) is one
// unbreakable chip (.lbl is white-space: nowrap) that runs out of its row
// and past the right edge of the page, under the other rows' text, and
// gives the page a horizontal scroll bar.
func (env *secEnv) testLongLabel(t *testing.T) {
	env.push(t, []pushEntry{{labels: map[string]string{"app": "lbl", "pod": strings.Repeat("W", 300)}, ts: time.Now().Add(-time.Minute).UnixNano(), line: "lblmark line"}})
	ctx, _ := env.tab(t)
	env.open(t, ctx, "/?q=lblmark")
	r := browsertest.Eval[map[string]float64](t, ctx, `(() => { const row = document.querySelector('#rows .row').getBoundingClientRect(); return {row: row.right, chip: Math.max(...[...document.querySelectorAll('#rows .lbl')].map(e => e.getBoundingClientRect().right)), page: document.documentElement.scrollWidth, view: document.documentElement.clientWidth}; })()`)
	if r["chip"] > r["row"] || r["page"] > r["view"] {
		t.Errorf("a 300-character label: chip ends at x=%v, its row at %v; page %v wide in a %v viewport", r["chip"], r["row"], r["page"], r["view"])
	}
}

// testPolyReDoS: 455c300 stops highlighting regexes with a repeated group
// that holds a repetition, but the browser's engine also backtracks
// polynomially on flat patterns, and the page runs the regex over the
// whole line (up to --max-line, 256 KiB), not only the 1,000 characters
// it shows. An ordinary responder's regex such as user.*id.*error over a
// 24 KB line (a stack trace, a JSON blob) takes over a minute in
// Chromium (node: 8 KB 3 s, 16 KB 24 s), and x*x*x*x*x*x*y over 80 x's
// 57 s (Chromium: 5 s at 80, so 120 here); the server's RE2 answers both at once. Each hangs the tab past
// its 15 s deadline here.
func (env *secEnv) testPolyReDoS(t *testing.T) {
	long := "flatmark " + strings.Repeat("user id ", 3000)
	xs := "flatmark " + strings.Repeat("x", 120) + "z"
	ts := time.Now().Add(-time.Minute).UnixNano()
	env.push(t, []pushEntry{
		{labels: map[string]string{"app": "flat1"}, ts: ts, line: long},
		{labels: map[string]string{"app": "flat2"}, ts: ts, line: xs},
	})
	for _, c := range []struct{ app, re, line string }{
		{"flat1", "user.*id.*error|flatmark", long},
		{"flat2", "x*x*x*x*x*x*y|z", xs},
	} {
		t.Run(c.app, func(t *testing.T) {
			q := `{app="` + c.app + `"} |~ "` + c.re + `"`
			t0 := time.Now()
			if got := env.search(t, url.Values{"q": {q}}); len(got) != 1 {
				t.Fatalf("the server finds %d entries for %s", len(got), q)
			}
			t.Logf("the server answers %s in %v", q, time.Since(t0))
			ctx, _ := env.tab(t)
			env.open(t, ctx, "/?q="+url.QueryEscape(q)) // fails at the tab's deadline when the tab hangs
			if got := pageRows(t, ctx); len(got) != 1 {
				t.Errorf("%d rows", len(got))
			}
		})
	}
}

// testInvisible: the page shows C0 controls, DEL and the bidi overrides
// and isolates as symbols, but not the other characters that render as
// nothing or reorder text: zero-width space and joiners, the bidi marks
// (LRM, RLM, ALM), the word joiner, the BOM, the soft hyphen. A line
// "pass\u200bword=..." reads as "password=..." yet a search for
// "password" does not find it; an RLM reorders neutral characters.
func (env *secEnv) testInvisible(t *testing.T) {
	chars := []rune{0x00ad, 0x061c, 0x200b, 0x200c, 0x200d, 0x200e, 0x200f, 0x2060, 0xfeff}
	line := "invismark"
	for _, r := range chars {
		line += " a" + string(r) + "b"
	}
	env.push(t, []pushEntry{{labels: map[string]string{"app": "invis"}, ts: time.Now().Add(-time.Minute).UnixNano(), line: line}})
	ctx, _ := env.tab(t)
	env.open(t, ctx, "/?q=invismark")
	shown := browsertest.Eval[[]string](t, ctx, `[...document.querySelectorAll('#rows .line .ctl')].map(e => e.title)`)
	if len(shown) != len(chars) {
		t.Errorf("%d of the %d invisible characters are shown as symbols (%q)", len(shown), len(chars), shown)
	}
}

// testDropped: when the search's connection drops after rows were shown
// (a proxy's idle timeout, the server restarting), API.md says the page
// shows "connection lost"; Chromium's fetch rejects the read with a
// TypeError and the page shows its message, "Error: network error",
// which does not say that the results on screen are incomplete.
func (env *secEnv) testDropped(t *testing.T) {
	ctx, _ := env.tab(t)
	run(t, ctx, chromedp.Navigate(env.hay.URL+"/?q=cutmark"))
	browsertest.Wait(t, ctx, `document.getElementById('status').dataset.state === 'error'`)
	time.Sleep(100 * time.Millisecond)
	st := browsertest.Eval[[]any](t, ctx, `[document.getElementById('status').textContent, document.querySelectorAll('#rows .row').length]`)
	// (The rows themselves: Chromium discards what the page had not read
	// yet when the stream errors, so 0 or 2 arrive, even 100 ms apart.)
	if s, _ := st[0].(string); !strings.Contains(s, "connection lost") {
		t.Errorf("status %q with %v rows after the connection dropped; want it to say the connection was lost", st[0], st[1])
	}
}

// testStopControl: a running search can be stopped only by the Escape
// key: there is no control to click (nor one a screen reader announces),
// and nothing on the page says Escape stops it until it has stopped.
func (env *secEnv) testStopControl(t *testing.T) {
	ctx, _ := env.tab(t)
	run(t, ctx, chromedp.Navigate(env.hay.URL+"/?q=slowmark"))
	browsertest.Wait(t, ctx, `document.getElementById('status').dataset.state === 'running'`)
	stop := browsertest.Eval[[]string](t, ctx, `[...document.querySelectorAll('button, [role=button], a')].filter(b => b.offsetParent !== null && /stop|cancel|escape/i.test(b.textContent + ' ' + (b.getAttribute('aria-label') || '') + ' ' + b.title)).map(b => b.textContent)`)
	if len(stop) == 0 {
		t.Errorf("a running search shows no control to stop it (status %q)", browsertest.Eval[string](t, ctx, `document.getElementById('status').textContent`))
	}
}

// testTitle: every tab of the UI is titled "Haystack", whatever it
// searches: during an incident with many tabs open (and in the browser's
// history) they cannot be told apart.
func (env *secEnv) testTitle(t *testing.T) {
	ctx, _ := env.tab(t)
	env.open(t, ctx, "/?q=timeout+db-7")
	if title := browsertest.Eval[string](t, ctx, `document.title`); !strings.Contains(title, "timeout db-7") {
		t.Errorf("title %q does not say what the tab searches", title)
	}
}

// testZoneShown: times are shown in the browser's zone with no zone
// named anywhere (rows, range header, axis): two responders in different
// zones reading the same permalink see different times for the same line,
// and nothing says which zone either is. (The UTC time is only in a
// row time's tooltip.)
func (env *secEnv) testZoneShown(t *testing.T) {
	env.push(t, []pushEntry{{labels: map[string]string{"app": "tz"}, ts: time.Now().Add(-time.Minute).UnixNano(), line: "tzmark"}})
	ctx, _ := env.tab(t)
	if _, err := chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Kolkata"}); err != nil {
		t.Fatal(err)
	}
	env.open(t, ctx, "/?q=tzmark")
	shown := browsertest.Eval[string](t, ctx, `[document.querySelector('#rows .ts').textContent, document.getElementById('hits').textContent, document.querySelector('header').innerText, document.getElementById('status-bar').innerText].join(' | ')`)
	if !regexp.MustCompile(`UTC|GMT|IST|Asia/Kolkata|[+]05:?30`).MatchString(shown) {
		t.Errorf("no time zone named in what the page shows: %q", shown)
	}
}

// testCopyRaw: copying a line with control characters copies the
// symbols shown for them (␛[31m), not the line: pasted into grep or a
// terminal it does not match the log it came from.
func (env *secEnv) testCopyRaw(t *testing.T) {
	raw := "copymark \x1b[31mERROR\x1b[0m\tdisk\x00full \u202eabc"
	line, err := strconv.Unquote(`"` + raw + `"`)
	if err != nil {
		t.Fatal(err)
	}
	env.push(t, []pushEntry{{labels: map[string]string{"app": "copy"}, ts: time.Now().Add(-time.Minute).UnixNano(), line: line}})
	ctx, _ := env.tab(t)
	env.open(t, ctx, "/?q=copymark")
	if got := browsertest.Eval[string](t, ctx, copyLineJS); got != line {
		t.Errorf("copying the line gives %q, want the line %q", got, line)
	}
}

// testHostCheck: the server answers any Host. Its default is no auth on
// 127.0.0.1, trusting that only local programs reach it; a web page can
// reach it by DNS rebinding (attacker.example resolving first to the
// attacker, then to 127.0.0.1: the page is then same-origin with the
// server and reads every log). A loopback server should answer only
// Host names that are loopback (localhost, 127.0.0.1, [::1]) unless
// configured otherwise.
func (env *secEnv) testHostCheck(t *testing.T) {
	env.push(t, []pushEntry{{labels: map[string]string{"app": "host"}, ts: time.Now().Add(-time.Minute).UnixNano(), line: "hostmark secret"}})
	req, _ := http.NewRequest("GET", env.hay.URL+"/api/v1/search?q=hostmark", nil)
	req.Host = "rebind.attacker.example:3100"
	// What the browser sends for the page's own fetch once the name
	// points at the server.
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Sec-Fetch-Mode", "cors")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode == http.StatusOK {
		t.Errorf("Host %s: %s: %s", req.Host, res.Status, b)
	}
}
