package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path string, hdr map[string]string) *http.Response {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

func TestHandler(t *testing.T) {
	h := Handler()
	index, err := os.ReadFile("index.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, ctype string
		file        string
	}{
		{"/", "text/html; charset=utf-8", "index.html"},
		{"/?q=timeout&from=now-1h", "text/html; charset=utf-8", "index.html"},
		{"/static/app.js", "text/javascript; charset=utf-8", "static/app.js"},
		{"/static/app.css", "text/css; charset=utf-8", "static/app.css"},
		{"/static/favicon.svg", "image/svg+xml", "static/favicon.svg"},
	} {
		res := get(t, h, "GET", tc.path, nil)
		body, _ := io.ReadAll(res.Body)
		want, err := os.ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != 200 || string(body) != string(want) {
			t.Errorf("GET %s: %d, %d bytes; want 200 and %s (%d bytes)", tc.path, res.StatusCode, len(body), tc.file, len(want))
		}
		if ct := res.Header.Get("Content-Type"); ct != tc.ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", tc.path, ct, tc.ctype)
		}
		if res.Header.Get("X-Content-Type-Options") != "nosniff" || res.Header.Get("ETag") == "" {
			t.Errorf("GET %s: headers %v", tc.path, res.Header)
		}
		csp := res.Header.Get("Content-Security-Policy")
		if (tc.file == "index.html") != (csp != "") {
			t.Errorf("GET %s: Content-Security-Policy %q", tc.path, csp)
		}
		if tc.file == "index.html" && (!strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe")) {
			t.Errorf("CSP %q must allow only the page's own script", csp)
		}

		// Revalidation: the ETag answers 304 without a body; HEAD has no body.
		etag := res.Header.Get("ETag")
		res = get(t, h, "GET", tc.path, map[string]string{"If-None-Match": `"nope", W/` + etag})
		body, _ = io.ReadAll(res.Body)
		if res.StatusCode != http.StatusNotModified || len(body) != 0 {
			t.Errorf("GET %s with its ETag: %d, %d bytes", tc.path, res.StatusCode, len(body))
		}
		res = get(t, h, "HEAD", tc.path, nil)
		body, _ = io.ReadAll(res.Body)
		if res.StatusCode != 200 || len(body) != 0 || res.Header.Get("Content-Length") != strconv.Itoa(len(want)) {
			t.Errorf("HEAD %s: %d, %d bytes, Content-Length %q", tc.path, res.StatusCode, len(body), res.Header.Get("Content-Length"))
		}
	}
	for _, p := range []string{"/index.html", "/static/", "/static", "/static/nope.js", "/static/../index.html", "/api/v1/search", "/x", "/static/app.js/", "/web.go", "/API.md"} {
		if res := get(t, h, "GET", p, nil); res.StatusCode != 404 {
			t.Errorf("GET %s: %d, want 404", p, res.StatusCode)
		}
	}
	for _, m := range []string{"POST", "PUT", "DELETE"} {
		res := get(t, h, m, "/", nil)
		if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s /: %d, Allow %q", m, res.StatusCode, res.Header.Get("Allow"))
		}
	}
	// Every asset index.html refers to is served.
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(string(index), -1) {
		ref := m[1]
		if ref == "./" {
			continue
		}
		if res := get(t, h, "GET", "/"+ref, nil); res.StatusCode != 200 {
			t.Errorf("index.html refers to %s, which answers %d", ref, res.StatusCode)
		}
	}
}

func TestETagMatch(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   bool
	}{
		{`"abc"`, true},
		{`W/"abc"`, true},
		{`"x", "abc"`, true},
		{` "x" ,W/"abc" `, true},
		{`*`, true},
		{`"abcd"`, false},
		{`abc`, false},
		{``, false},
		{`,`, false},
	} {
		if got := etagMatch(tc.header, `"abc"`); got != tc.want {
			t.Errorf("etagMatch(%q) = %v, want %v", tc.header, got, tc.want)
		}
	}
}

// TestScriptNeverParsesHTML is a lint: log data must never reach an HTML
// parser, so the script may not use the APIs that parse strings as markup or
// code at all, even for constant strings.
func TestScriptNeverParsesHTML(t *testing.T) {
	src, err := os.ReadFile("static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "DOMParser", "createContextualFragment", "setHTML", "srcdoc", ".style."} {
		if strings.Contains(string(src), bad) {
			t.Errorf("static/app.js uses %s", bad)
		}
	}
	// No inline script or handler in the page (the CSP would block them).
	html, err := os.ReadFile("index.html")
	if err != nil {
		t.Fatal(err)
	}
	if regexp.MustCompile(`(?i)<script[^>]*>[^<]|\son[a-z]+=`).Match(html) {
		t.Error("index.html has an inline script or event handler")
	}
}
