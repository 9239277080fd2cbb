// Package web is Haystack's browser UI: one small HTML page, a style sheet
// and a script, embedded in the binary so that `hay serve` works offline and
// needs no front-end build.
//
// The page talks to the server only through the HTTP API written down in
// API.md (search streamed as NDJSON, hits over time, label facets, live tail
// as server-sent events, Loki's label list). All of its state lives in the
// page URL, so a search can be shared as a link.
//
// Log lines are untrusted input: the script builds every row from text nodes
// (never innerHTML), shows control characters such as ESC as visible symbols,
// and the page is served with a Content-Security-Policy that allows no inline
// script, so even a mistake in the script would not run a line's markup.
// browser_test.go checks this in headless Chromium against a fake API.
//
// First rows: the search request goes out as soon as the deferred script
// runs; the histogram and facet requests wait until the search answers (or
// 250 ms), because on a small machine three scans at once delay the first
// rows. Rows are painted in batches, one per animation frame. Measured
// (2-core machine shared with other jobs, load 4-5): against the fake API
// the first row is painted 150-250 ms after navigation starts, of which
// ~70-140 ms is the page and script loading (the browser's own first
// contentful paint lands at the same time); against `hay serve` on 200k
// generated lines, a rare needle paints at 150-300 ms, and on 1M lines
// (load 8) at 460-1350 ms: nearly all of it the server's search (340-1210
// ms elapsed, sent only when complete); the page adds 5-40 ms after the
// first byte. Since the server streams rows as soon as they are final and
// its multi-stream scan asks the skip index, the same 1M-line page paints
// its first row at a median of 100 ms, and is complete (rows, histogram,
// facets) at 105 ms (cmd/hay TestDemoBrowser; docs/BENCHMARKS.md, "Web
// UI (issue 8)").
package web

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
)

//go:embed index.html static
var files embed.FS

// contentTypes is set by hand rather than by mime.TypeByExtension, whose
// answer depends on the machine's /etc/mime.types.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// csp allows the page's own script, style and API only: no inline script,
// no inline event handlers, no plugins, no framing.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

type asset struct {
	body        []byte
	contentType string
	etag        string
}

// Handler serves the UI: index.html at exactly "/" and the files of the
// static directory under "/static/". Any other path is 404, so the server
// can mount Handler at "/" beneath its API routes.
func Handler() http.Handler {
	assets := map[string]asset{}
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		url := "/" + p
		if p == "index.html" {
			url = "/"
		}
		assets[url] = asset{
			body:        b,
			contentType: contentTypes[path.Ext(p)],
			etag:        `"` + hex.EncodeToString(sum[:8]) + `"`,
		}
		return nil
	})
	if err != nil {
		// The files are compiled in; failing to read them is a broken build.
		panic("web: reading embedded files: " + err.Error())
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := assets[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.contentType)
		h.Set("X-Content-Type-Options", "nosniff")
		// Revalidate every time: the files carry no version in their names,
		// and a 304 costs one round trip on loopback.
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		h.Set("Content-Length", strconv.Itoa(len(a.body)))
		if r.URL.Path == "/" {
			h.Set("Content-Security-Policy", csp)
			h.Set("Referrer-Policy", "no-referrer")
		}
		if match := r.Header.Get("If-None-Match"); match != "" && etagMatch(match, a.etag) {
			h.Del("Content-Length")
			w.WriteHeader(http.StatusNotModified)
			return
		}
		// http.ServeContent would add Range support, which three small text
		// files do not need.
		if r.Method == http.MethodHead {
			return
		}
		w.Write(a.body)
	})
}

// etagMatch reports whether an If-None-Match header lists etag (or "*").
func etagMatch(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		t = strings.TrimPrefix(t, "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}
