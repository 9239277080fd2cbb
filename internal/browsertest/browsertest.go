// Package browsertest starts headless Chromium for the web UI's browser
// tests (internal/server/web against a fake API, cmd/hay against `hay
// demo`'s real server), so both drive the same browser the same way:
// the flags, a fresh profile per test, polling the page, and saving
// screenshots to artifacts/ at the repository root.
//
// No browser is a test failure, not a skip: scripts/test installs
// Debian's chromium, and CI must run these tests.
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/chromedp/chromedp"
)

// Settled is true in the page when the search, the histogram and the
// facets are done.
const Settled = `document.getElementById('status').dataset.state === 'done' &&
	document.querySelector('#hist svg') !== null &&
	!document.getElementById('facet-list').hasAttribute('aria-busy') &&
	document.getElementById('facet-list').childElementCount > 0`

// Row is a rendered result row as the page shows it (RowsJS).
type Row struct {
	TS     string   `json:"ts"`
	Labels []string `json:"labels"`
	Line   string   `json:"line"` // the line's visible text, without the expand button
	Marks  []string `json:"marks"`
	Expand bool     `json:"expand"`
}

// RowsJS evaluates in the page to its result rows, as []Row.
const RowsJS = `[...document.querySelectorAll('#rows .row')].map(r => {
	const l = r.querySelector('.line');
	return {
		ts: r.dataset.ts,
		labels: [...r.querySelectorAll('.lbl')].map(x => x.textContent),
		line: [...l.childNodes].filter(n => !(n.nodeType === 1 && n.tagName === 'BUTTON')).map(n => n.textContent).join(''),
		marks: [...l.querySelectorAll('mark')].map(m => m.textContent),
		expand: l.querySelector('button.expand') !== null,
	};
})`

// TailTraceJS, run in a page before its own script (as
// page.AddScriptToEvaluateOnNewDocument), records the page's live-tail
// requests (fetches of api/v1/tail) in window.__tails, oldest first: each
// {url, status, state, events}, state "connecting", "open" (the answer
// is being read) or "closed" (the page aborted it, or it failed or
// ended), and events the server-sent events with data that reached the
// page. window.__msgs counts those of all tails.
const TailTraceJS = `window.__tails = []; window.__msgs = 0;
(() => {
	const realFetch = window.fetch;
	window.fetch = async function (input, init) {
		const u = String(input);
		if (!u.includes('api/v1/tail')) return realFetch.apply(this, arguments);
		const t = { url: u, status: 0, state: 'connecting', events: 0 };
		window.__tails.push(t);
		const sig = init && init.signal;
		if (sig) sig.addEventListener('abort', () => { t.state = 'closed'; });
		let res;
		try { res = await realFetch.apply(this, arguments); } catch (e) { t.state = 'closed'; throw e; }
		t.status = res.status;
		if (!res.ok || !res.body) { t.state = 'closed'; return res; }
		if (t.state !== 'closed') t.state = 'open';
		const rd = res.body.getReader(), dec = new TextDecoder();
		let carry = '';
		const body = new ReadableStream({
			async pull(ctl) {
				let r;
				try { r = await rd.read(); } catch (e) { t.state = 'closed'; ctl.error(e); return; }
				if (r.done) { t.state = 'closed'; ctl.close(); return; }
				carry += dec.decode(r.value, { stream: true });
				const parts = carry.split('\n\n');
				carry = parts.pop();
				for (const p of parts) if (/^data:/m.test(p)) { t.events++; window.__msgs++; }
				ctl.enqueue(r.value);
			},
			cancel(reason) { t.state = 'closed'; return rd.cancel(reason); },
		});
		return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
	};
})();`

// Display is what the page (app.js) shows for a raw line: control
// characters as visible symbols, bidi controls and invisible characters
// named, cut after limit UTF-16 code units.
func Display(line string, limit int) string {
	u := utf16.Encode([]rune(line))
	if len(u) > limit {
		line = string(utf16.Decode(u[:limit]))
	}
	var b strings.Builder
	for _, r := range line {
		switch {
		case r < 0x20 && r != '\t' && r != '\n':
			b.WriteRune(0x2400 + r)
		case r == 0x7f:
			b.WriteRune('\u2421')
		case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069,
			r == 0xad, r == 0x61c, r >= 0x200b && r <= 0x200f, r >= 0x2060 && r <= 0x2064, r == 0xfeff:
			fmt.Fprintf(&b, "<U+%04X>", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Chromium finds the browser on PATH, failing t when there is none.
func Chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: install it (apt-get install chromium; scripts/test does)")
	return ""
}

// New starts headless Chromium with a fresh user-data-dir (under
// t.TempDir) and a 1280×800 window, and returns its context; tabs are
// chromedp.NewContext of it. The browser stops when the test ends.
func New(t testing.TB) context.Context {
	t.Helper()
	exe := Chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		// No traffic of its own: the tests' requests are the only ones.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	return browser
}

// Eval evaluates expr in the page and returns its value, failing t on an
// error.
func Eval[T any](t testing.TB, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// Wait polls until expr is truthy in the page, failing t when ctx ends
// first.
func Wait(t testing.TB, ctx context.Context, expr string) {
	t.Helper()
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		if err != nil {
			t.Fatalf("waiting for %s: %v", expr, err)
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", expr, ctx.Err())
		case <-time.After(15 * time.Millisecond):
		}
	}
}

// SaveArtifact writes b to artifacts/name at the repository root (the
// directory of go.mod above the test's; git-ignored).
func SaveArtifact(t testing.TB, name string, b []byte) {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(root, "artifacts", name)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", out, len(b))
}

// repoRoot is the directory of go.mod above the working directory (a
// test's package directory).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the test's directory")
		}
		dir = parent
	}
}
