package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"haystack/internal/server"
)

// remoteServer starts an in-process hay serve on dir and pushes entries:
// three streams, 12,000 entries, 6,000 of them at one timestamp (more
// than a page of 5,000, so paging must skip within one time), lines that
// start with "{" and one that is not UTF-8.
func remoteServer(t *testing.T, dir string) (*httptest.Server, int64) {
	t.Helper()
	return remoteServerWith(t, server.Config{DataDir: dir})
}

// remoteServerWith is remoteServer with a configuration (its DataDir).
func remoteServerWith(t *testing.T, cfg server.Config) (*httptest.Server, int64) {
	t.Helper()
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() { hs.Close(); s.Close() })
	base := time.Now().Add(-time.Hour).UnixNano()
	type stream struct {
		Stream map[string]string `json:"stream"`
		Values [][2]string       `json:"values"`
	}
	var streams []stream
	for si, app := range []string{"api", "web", "db"} {
		st := stream{Stream: map[string]string{"app": app}}
		for i := range 4000 {
			ts := base + int64(i)*1000 + int64(si) // streams never tie, but:
			if i >= 1000 && i < 3000 {
				ts = base + 999_000 // 2,000 a stream, 6,000 in all, at one time
			}
			line := fmt.Sprintf("%s entry %d level=%s", app, i, []string{"info", "error", "warn"}[(i+si)%3])
			if i%500 == 7 {
				line = `{"level":"error","app":"` + app + `"}`
			}
			st.Values = append(st.Values, [2]string{fmt.Sprint(ts), line})
		}
		streams = append(streams, st)
	}
	body, _ := json.Marshal(map[string]any{"streams": streams})
	resp, err := http.Post(hs.URL+"/loki/api/v1/push", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("push: %s", resp.Status)
	}
	return hs, base
}

// TestSearchServer checks hay search --server against hay search --data
// on the same store (the server's tenant directory): the same entries in
// the same order, page after page, in both orders, with limits that cut
// inside the 6,000 entries of one timestamp, -i, -c, --since/--until,
// --query and a PATTERN that starts with "{".
func TestSearchServer(t *testing.T) {
	dir := t.TempDir()
	hs, base := remoteServer(t, dir)
	tenantDir := filepath.Join(dir, "fake")
	run := func(args ...string) (string, int) {
		t.Helper()
		out, code := hayInProcess(t, append([]string{"search"}, args...)...)
		return string(out), code
	}
	ts := func(off int64) string { return time.Unix(0, base+off).UTC().Format(time.RFC3339Nano) }
	cases := [][]string{
		{"entry"},
		{"--order", "oldest", "entry"},
		{"--order", "newest", "--json", "entry"},
		{"--order", "newest", "--json", "--limit", "2000", "entry"}, // stops before the 5,988 entries of one time: their order differs (see below)
		{"--order", "oldest", "--limit", "7001", "level=error"},
		{"-i", "LEVEL=ERROR"},
		{"-c", "level=warn"},
		{"-c", "-i", "LEVEL=WARN"},
		{`{"level":"error"`},
		{"--query", `{app="web"} |= "error"`},
		{"--query", `{app=~"api|db"} | logfmt | level="warn"`, "--order", "newest", "--json"},
		{"--since", ts(999_000), "--until", ts(1_500_000), "--order", "oldest", "entry"},
		{"--until", ts(999_000), "-c", "entry"},
		{"absent-needle"},
		{"--json", "--limit", "3", "entry 7"},
		// Review cli8: an --until before 1677 wrapped to no bound (F1);
		// -c ignored -m (F2).
		{"--until", "1600-01-01", "-c", "entry"},
		{"--until", "99999999d", "entry"},
		{"-c", "-m", "5", "entry"},
	}
	for _, c := range cases {
		local := append([]string{"--data", tenantDir}, c...)
		if !slices.Contains(c, "--order") && !slices.Contains(c, "-c") {
			// The server pages by time: compare with the local time order.
			local = append(local, "--order", "oldest")
		}
		want, wcode := run(local...)
		got, gcode := run(append([]string{"--server", hs.URL}, c...)...)
		if slices.Contains(c, "newest") {
			// Entries of one time come in the server's order (by
			// stream, then position: API.md), not reversed as
			// --order newest reverses them locally: compare the
			// entries and check that time never goes up.
			got, want = sortedLines(t, got, true), sortedLines(t, want, false)
		}
		if got != want || gcode != wcode {
			t.Errorf("hay search --server %q: exit %d, %d lines; --data: exit %d, %d lines; first diff at line %d",
				c, gcode, strings.Count(got, "\n"), wcode, strings.Count(want, "\n"), firstDiffLine([]byte(got), []byte(want)))
		}
	}
	// 8 lines a stream are JSON, without "entry".
	if out, _ := run("--server", hs.URL, "-c", "entry"); out != "11976\n" {
		t.Errorf("-c entry: %q, want 11976", out)
	}
	// -q: exit status only.
	if out, code := run("--server", hs.URL, "-q", "entry"); out != "" || code != 0 {
		t.Errorf("-q entry: exit %d, %q", code, out)
	}
	// -H names each entry's stream by its labels.
	out, _ := run("--server", hs.URL, "-H", "--query", `{app="db"} |= "entry 3999"`)
	if want := `{app="db", service_name="db"}:db entry 3999 level=warn` + "\n"; out != want {
		t.Errorf("-H: %q, want %q", out, want)
	}
	// Errors: a bad URL and flags a server cannot honour are usage
	// errors; a missing tenant answers nothing; a dead server is exit 2.
	for _, bad := range [][]string{{"--server", "ftp://x", "a"}, {"--server", hs.URL, "-C", "1", "a"}, {"--server", hs.URL, "-e", "a"}, {"--server", hs.URL, "--data", dir, "a"}, {"--server", hs.URL, "-c", "-H", "a"}} {
		if _, code := run(append([]string{}, bad...)...); code != 2 {
			t.Errorf("search %q: exit %d, want 2", bad, code)
		}
	}
	if _, code := run("--server", hs.URL, "--tenant", "nobody", "entry"); code != 1 {
		t.Errorf("--tenant nobody: exit %d, want 1 (no entries)", code)
	}
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	if _, code := run("--server", dead.URL, "entry"); code != 2 {
		t.Errorf("a server that is gone: exit %d, want 2", code)
	}
}

// sortedLines returns the --json lines of out sorted; with descending it
// first checks that their times never go up.
func sortedLines(t *testing.T, out string, descending bool) string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	prev := ""
	for i, l := range lines {
		var e struct {
			Time time.Time `json:"time"`
		}
		if l == "" {
			continue
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("line %d is not JSON: %q", i+1, l)
		}
		ts := e.Time.UTC().Format("2006-01-02T15:04:05.000000000")
		if descending && prev != "" && ts > prev {
			t.Fatalf("line %d: time %s after %s, want newest first", i+1, ts, prev)
		}
		prev = ts
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestSearchServerFollow checks --server -f: the entries pushed after it
// starts, as they arrive, named by their stream (-H), a PATTERN that
// starts with "{" read as a literal, and --limit ending it.
func TestSearchServerFollow(t *testing.T) {
	dir := t.TempDir()
	hs, _ := remoteServer(t, dir)
	type result struct {
		out  string
		code int
	}
	done := make(chan result, 1)
	go func() {
		out, code := hayInProcess(t, "search", "--server", hs.URL, "-f", "-H", "--limit", "3", `{"follow":`)
		done <- result{string(out), code}
	}()
	var got result
	deadline := time.After(20 * time.Second)
	for i := 0; ; i++ {
		select {
		case got = <-done:
		case <-deadline:
			t.Fatal("hay search -f did not end after --limit 3 entries")
		case <-time.After(50 * time.Millisecond):
			// Lines that do not match, then one that does.
			body := fmt.Sprintf(`{"streams":[{"stream":{"app":"f"},"values":[["%d","follow %d"],["%d","{\"follow\":%d}"]]}]}`,
				time.Now().UnixNano(), i, time.Now().UnixNano()+1, i)
			resp, err := http.Post(hs.URL+"/loki/api/v1/push", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			continue
		}
		break
	}
	lines := strings.Split(strings.TrimSuffix(got.out, "\n"), "\n")
	if got.code != 0 || len(lines) != 3 {
		t.Fatalf("-f --limit 3: exit %d, %q", got.code, got.out)
	}
	var first int
	for k, l := range lines {
		var n int
		if _, err := fmt.Sscanf(l, `{app="f", service_name="f"}:{"follow":%d}`, &n); err != nil {
			t.Fatalf("line %d: %q: %v", k+1, l, err)
		}
		if k == 0 {
			first = n
		} else if n != first+k {
			t.Errorf("line %d: entry %d after %d: entries missed or repeated: %q", k+1, n, first+k-1, got.out)
		}
	}
	for _, bad := range [][]string{{"-f", "x"}, {"--server", hs.URL, "-f", "-c", "x"}, {"--server", hs.URL, "-f", "--since", "1h", "x"}} {
		if _, code := hayInProcess(t, append([]string{"search"}, bad...)...); code != 2 {
			t.Errorf("search %q: exit %d, want 2", bad, code)
		}
	}
}

// TestSearchServerRetry: a 429 with Retry-After on a later page is waited
// out, not the end of the search (review cli8, F11); a server's error
// text reaches the terminal escaped (F10).
func TestSearchServerRetry(t *testing.T) {
	dir := t.TempDir()
	hs, _ := remoteServer(t, dir)
	var calls atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n := calls.Add(1); {
		case n == 2: // the second page
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"error":"busy","message":"too many queries"}`, http.StatusTooManyRequests)
			return
		case r.URL.Query().Get("q") == "evil":
			http.Error(w, "{\"message\":\"no \u001b[31mway\"}", http.StatusBadRequest)
			return
		}
		u, _ := url.Parse(hs.URL)
		httputil.NewSingleHostReverseProxy(u).ServeHTTP(w, r)
	}))
	defer proxy.Close()
	want, _ := hayInProcess(t, "search", "--data", filepath.Join(dir, "fake"), "--order", "oldest", "entry")
	got, code := hayInProcess(t, "search", "--server", proxy.URL, "entry")
	if code != 0 || !bytes.Equal(got, want) || calls.Load() < 4 {
		t.Errorf("a 429 on the second page: exit %d, %d of %d lines, %d requests", code, bytes.Count(got, []byte("\n")), bytes.Count(want, []byte("\n")), calls.Load())
	}
	_, code, stderr := hayInProcessStderr(t, "search", "--server", proxy.URL, "evil")
	if code != 2 || strings.Contains(stderr, "\x1b") || !strings.Contains(stderr, `no \x1b[31mway`) {
		t.Errorf("an error with an escape code: exit %d, %q", code, stderr)
	}
}

// TestSearchServerCredentials: HAY_TOKEN is sent as a bearer token; a
// user and password in the URL win over it, and the user is told
// (review cli8, F15).
func TestSearchServerCredentials(t *testing.T) {
	var auth atomic.Value
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/x-ndjson")
		fmt.Fprintln(w, `{"done":true,"count":0,"limited":false}`)
	}))
	defer hs.Close()
	t.Setenv("HAY_TOKEN", "tok")
	if _, code := hayInProcess(t, "search", "--server", hs.URL, "x"); code != 1 || auth.Load() != "Bearer tok" {
		t.Errorf("HAY_TOKEN: exit %d, Authorization %q", code, auth.Load())
	}
	u, _ := url.Parse(hs.URL)
	u.User = url.UserPassword("ann", "pw")
	_, code, stderr := hayInProcessStderr(t, "search", "--server", u.String(), "x")
	if code != 1 || auth.Load() != "Basic YW5uOnB3" || !strings.Contains(stderr, "HAY_TOKEN is not sent") {
		t.Errorf("user:pass and HAY_TOKEN: exit %d, Authorization %q, stderr %q", code, auth.Load(), stderr)
	}
}
