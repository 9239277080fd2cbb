package server

// Tests of the bound on open tenant stores (Config.MaxOpenTenants,
// extremes finding E3): every tenant's store used to stay open for the
// life of the process, 2 descriptors each (3 since the store writes through its directory handle), so a server with more tenant
// directories than its descriptor limit could not start, and a push to a
// new tenant past the limit got a 500 "may or may not be stored" and left
// a directory behind.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tbEntry is one pushed entry as a query answers it.
type tbEntry struct {
	labels string // the stream's labels as JSON, keys sorted
	ts     int64
	line   string
}

// tbLabels is the labels an answer gives an entry with line pushed to
// service_name=app: with the detected_level wantLevel expects (the
// servers of these tests add it, the default).
func tbLabels(app, line string) string {
	return fmt.Sprintf(`{"detected_level":%q,"service_name":%q}`, wantLevel(map[string]string{"service_name": app}, nil, line), app)
}

// tbPush pushes lines to tenant's stream service_name=app, the i-th at ts+i, and
// records them in want.
func tbPush(e *testEnv, want map[string][]tbEntry, tenant, app string, ts int64, lines ...string) {
	e.t.Helper()
	e.mustPush("/loki/api/v1/push", jsonPush(fmt.Sprintf(`{"service_name":%q}`, app), ts, lines...), "X-Scope-OrgID", tenant)
	for i, l := range lines {
		want[tenant] = append(want[tenant], tbEntry{tbLabels(app, l), ts + int64(i), l})
	}
}

// tbQuery returns every entry of tenant, oldest first, by query_range.
func tbQuery(t *testing.T, e *testEnv, tenant string) []tbEntry {
	t.Helper()
	path := fmt.Sprintf("/loki/api/v1/query_range?query=%s&start=%d&end=%d&limit=5000&direction=forward",
		q(`{service_name=~".+"}`), base-int64(time.Hour), base+int64(time.Hour))
	code, body := e.get(path, "X-Scope-OrgID", tenant)
	if code != 200 {
		t.Fatalf("query tenant %s: %d %s", tenant, code, body)
	}
	var resp struct {
		Data struct {
			Result []struct {
				Stream map[string]string `json:"stream"`
				Values [][2]string       `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatalf("query tenant %s: %v: %s", tenant, err, body)
	}
	var out []tbEntry
	for _, r := range resp.Data.Result {
		lb, _ := json.Marshal(r.Stream) // map keys come out sorted
		for _, v := range r.Values {
			ts, err := strconv.ParseInt(v[0], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, tbEntry{string(lb), ts, v[1]})
		}
	}
	slices.SortFunc(out, func(a, b tbEntry) int {
		if a.ts != b.ts {
			return int(a.ts - b.ts)
		}
		return strings.Compare(a.line, b.line)
	})
	return out
}

// tbCheckAll compares every tenant's entries with what was pushed.
func tbCheckAll(t *testing.T, e *testEnv, want map[string][]tbEntry, tenants []string) {
	t.Helper()
	for _, tn := range tenants {
		w := slices.Clone(want[tn])
		slices.SortFunc(w, func(a, b tbEntry) int { return int(a.ts - b.ts) })
		if got := tbQuery(t, e, tn); !slices.Equal(got, w) {
			t.Errorf("tenant %s: got %d entries %v\nwant %d %v", tn, len(got), got, len(w), w)
		}
	}
}

// fdsUnder counts this process's descriptors open on files under dir
// but segment files: the ones tenant stores hold themselves (3 each, see
// tenantDescriptors). Segment readers keep descriptors to read blocks
// with pread, bounded over the process by package segment, not per
// tenant: fdsUnderBoth counts them apart.
func fdsUnder(t *testing.T, dir string) int {
	n, _ := fdsUnderBoth(t, dir)
	return n
}

// fdsUnderBoth counts this process's descriptors open under dir: on
// segment files, and on the rest.
func fdsUnderBoth(t *testing.T, dir string) (stores, segments int) {
	t.Helper()
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(target, dir+"/") {
			if strings.HasSuffix(target, ".seg") {
				segments++
			} else {
				stores++
			}
		}
	}
	return stores, segments
}

// openNames lists the tenants whose stores are open (or opening or
// closing: every one that holds descriptors).
func openNames(s *Server) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for name := range s.tenants {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// tbServe starts a server on cfg (with detected_level, the default:
// tbLabels models it), closed at the test's end unless the
// test closes it first (stop).
func tbServe(t *testing.T, cfg Config, openExisting bool) (e *testEnv, stop func()) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if openExisting {
		if err := s.OpenExisting(); err != nil {
			t.Fatal(err)
		}
	}
	hs := httptest.NewServer(s.Handler())
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		hs.Close()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(stop)
	return &testEnv{t: t, srv: s, ts: hs}, stop
}

// TestTenantsBoundLRU: 10 tenants through a bound of 3. Never more than 3
// stores (6 descriptors) are open; the least recently used idle tenant is
// the one closed; every entry of every tenant is answered exactly after
// its tenant was closed and reopened (by a push or by a query), and after
// a restart, which opens at most 3 of the 10.
func TestTenantsBoundLRU(t *testing.T) {
	const bound, nTenants = 3, 10
	cfg := Config{DataDir: t.TempDir(), Now: func() time.Time { return time.Unix(0, base) }, MaxOpenTenants: bound}
	e, stop := tbServe(t, cfg, false)
	var tenants []string
	for i := range nTenants {
		tenants = append(tenants, fmt.Sprintf("t%d", i))
	}
	want := map[string][]tbEntry{}
	check := func(when string) {
		t.Helper()
		if open := openNames(e.srv); len(open) > bound {
			t.Fatalf("%s: %d tenants open %v, bound %d", when, len(open), open, bound)
		}
		if n := fdsUnder(t, cfg.DataDir); n > tenantDescriptors*bound {
			t.Fatalf("%s: %d descriptors open under the data directory, want at most %d", when, n, tenantDescriptors*bound)
		}
	}
	for round := range 3 {
		for i, tn := range tenants {
			app := []string{"api", "db"}[(i+round)%2]
			tbPush(e, want, tn, app, base+int64(round*1000+i*10), fmt.Sprintf("%s round %d a", tn, round), fmt.Sprintf("%s round %d b", tn, round))
			check(fmt.Sprintf("round %d after %s", round, tn))
		}
	}
	if open := openNames(e.srv); !slices.Equal(open, []string{"t7", "t8", "t9"}) {
		t.Errorf("open after pushing t0..t9: %v, want the last three", open)
	}
	// A push to an open tenant makes it the most recently used: t7 stays
	// open when t0 is opened, t8 (now the least recent) is closed.
	tbPush(e, want, "t7", "api", base+5000, "t7 again")
	tbPush(e, want, "t0", "api", base+5001, "t0 again")
	if open := openNames(e.srv); !slices.Equal(open, []string{"t0", "t7", "t9"}) {
		t.Errorf("open after pushing t7 then t0: %v, want t0 t7 t9", open)
	}
	// Queries reopen closed tenants (and close others to do it).
	tbCheckAll(t, e, want, tenants)
	check("after the queries")
	if open := openNames(e.srv); !slices.Equal(open, []string{"t7", "t8", "t9"}) {
		t.Errorf("open after querying t0..t9: %v, want the last three", open)
	}
	// A query to a tenant without data creates nothing and closes nothing.
	if got := tbQuery(t, e, "ghost"); len(got) != 0 {
		t.Errorf("ghost: %v", got)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "ghost")); !os.IsNotExist(err) {
		t.Errorf("a query made the directory of a tenant without data: %v", err)
	}
	if code, body := e.get("/ready"); code != 200 {
		t.Errorf("/ready: %d %s", code, body)
	}
	if _, body := e.get("/metrics"); !strings.Contains(body, "\nhay_open_tenants 3\n") {
		t.Errorf("/metrics has no hay_open_tenants 3")
	}

	// A restart opens at most the bound, and answers every tenant.
	stop()
	if n, segs := fdsUnderBoth(t, cfg.DataDir); n+segs != 0 {
		t.Fatalf("%d descriptors (%d on segments) still open under the data directory after Close", n+segs, segs)
	}
	e, _ = tbServe(t, cfg, true)
	check("after OpenExisting")
	if open := openNames(e.srv); len(open) != bound {
		t.Errorf("OpenExisting opened %v, want %d tenants", open, bound)
	}
	tbCheckAll(t, e, want, tenants)
	check("after the queries of the restarted server")
}

// TestTenantsBoundTails: a tenant with a live tail is never closed to
// make room, and its tail keeps receiving; when every open tenant has a
// tail, a push to a new tenant is a 503 naming the limit (not a 500 "may
// or may not be stored") and leaves no directory; once a tail ends, the
// push succeeds.
func TestTenantsBoundTails(t *testing.T) {
	cfg := Config{DataDir: t.TempDir(), Now: func() time.Time { return time.Unix(0, base) }, MaxOpenTenants: 2}
	e, _ := tbServe(t, cfg, false)
	want := map[string][]tbEntry{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tail := func(ctx context.Context, tenant string) (*bufio.Reader, func()) {
		t.Helper()
		ctx, cancel := context.WithCancel(ctx)
		req, _ := http.NewRequestWithContext(ctx, "GET", e.ts.URL+"/api/v1/tail?q=live", nil)
		req.Header.Set("X-Scope-OrgID", tenant)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("tail %s: %d", tenant, resp.StatusCode)
		}
		// The handler subscribes before it sends anything, so the
		// answer's headers mean the tail is live.
		for deadline := time.Now().Add(5 * time.Second); ; {
			e.srv.mu.Lock()
			ts := e.srv.tenants[tenant]
			e.srv.mu.Unlock()
			if ts != nil && ts.hub.tails() > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("tail on %s not subscribed", tenant)
			}
			time.Sleep(5 * time.Millisecond)
		}
		return bufio.NewReader(resp.Body), func() { cancel(); resp.Body.Close() }
	}
	next := func(br *bufio.Reader) string {
		t.Helper()
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if d, ok := strings.CutPrefix(l, "data: "); ok {
				var got nativeLine
				if err := json.Unmarshal([]byte(d), &got); err != nil {
					t.Fatal(err)
				}
				return got.Line
			}
		}
	}
	brA, _ := tail(ctx, "A")
	for i, tn := range []string{"B", "C", "D", "E"} {
		tbPush(e, want, tn, "api", base+int64(i), tn+" live")
		if open := openNames(e.srv); !slices.Contains(open, "A") || len(open) > 2 {
			t.Fatalf("after pushing to %s: open %v, want A (it has a tail) and at most 2", tn, open)
		}
	}
	tbPush(e, want, "A", "api", base+10, "A live 1")
	if got := next(brA); got != "A live 1" {
		t.Fatalf("A's tail got %q", got)
	}

	_, stopB := tail(ctx, "B")
	start := time.Now()
	code, body := e.do("POST", "/loki/api/v1/push", jsonPush(`{"service_name":"api"}`, base+20, "F live"), "X-Scope-OrgID", "F")
	t.Logf("push to F with every open tenant tailed: %d after %v: %s", code, time.Since(start).Round(time.Millisecond), strings.TrimSpace(body))
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "--max-open-tenants 2") || !strings.Contains(body, "nothing was stored") || strings.Contains(body, "may or may not") {
		t.Errorf("push to F with both open tenants tailed: %d %s; want 503 naming --max-open-tenants 2 and saying nothing was stored", code, body)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "F")); !os.IsNotExist(err) {
		t.Errorf("the refused push left F's directory: %v", err)
	}
	stopB()
	for deadline := time.Now().Add(5 * time.Second); ; {
		code, body := e.do("POST", "/loki/api/v1/push", jsonPush(`{"service_name":"api"}`, base+20, "F live"), "X-Scope-OrgID", "F")
		if code == 204 {
			want["F"] = append(want["F"], tbEntry{tbLabels("api", "F live"), base + 20, "F live"})
			break
		}
		if code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("push to F after B's tail ended: %d %s", code, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	tbPush(e, want, "A", "api", base+11, "A live 2")
	if got := next(brA); got != "A live 2" {
		t.Fatalf("A's tail got %q", got)
	}
	tbCheckAll(t, e, want, []string{"A", "B", "C", "D", "E", "F"})
}

// TestTenantsBoundWaitsForInFlight: at the bound, opening a new tenant
// waits for the in-flight request pinning the only open tenant to end,
// then closes that tenant: the request on the closed tenant is not cut
// short and the new one is not refused.
func TestTenantsBoundWaitsForInFlight(t *testing.T) {
	cfg := Config{DataDir: t.TempDir(), Now: func() time.Time { return time.Unix(0, base) }, MaxOpenTenants: 1}
	e, _ := tbServe(t, cfg, false)
	want := map[string][]tbEntry{}
	tbPush(e, want, "A", "api", base, "A first")

	// A push to A whose body is still coming: A is pinned.
	pr, pw := io.Pipe()
	defer pw.Close() // a failed check below must not leave the push (and the server's Close) hanging
	req, _ := http.NewRequest("POST", e.ts.URL+"/loki/api/v1/push", pr)
	req.Header.Set("X-Scope-OrgID", "A")
	req.Header.Set("Content-Type", "application/json")
	slow := make(chan int, 1)
	go func() {
		// A connection of its own: a kept-alive one the server just
		// closed would fail the request without reading the pipe.
		resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
		if err != nil {
			pr.CloseWithError(err) // the writes below fail instead of blocking
			slow <- -1
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		slow <- resp.StatusCode
	}()
	body := jsonPush(`{"service_name":"api"}`, base+1, "A second")
	if _, err := pw.Write(body[:10]); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Second); ; {
		e.srv.mu.Lock()
		pinned := e.srv.pins["A"]
		e.srv.mu.Unlock()
		if pinned == 1 {
			break
		}
		if time.Now().After(deadline) {
			// The check on B below decides.
			t.Log("the slow push to A does not show as pinned")
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	fast := make(chan string, 1)
	go func() {
		code, msg := e.do("POST", "/loki/api/v1/push", jsonPush(`{"service_name":"api"}`, base+2, "B first"), "X-Scope-OrgID", "B")
		fast <- fmt.Sprint(code, " ", msg)
	}()
	select {
	case r := <-fast:
		t.Fatalf("the push to B answered %q while A (the only open tenant, bound 1) had a push in flight", r)
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := pw.Write(body[10:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if code := <-slow; code != 204 {
		t.Fatalf("the slow push to A: %d", code)
	}
	want["A"] = append(want["A"], tbEntry{tbLabels("api", "A second"), base + 1, "A second"})
	if r := <-fast; r != "204 " {
		t.Fatalf("the push to B: %q", r)
	}
	want["B"] = append(want["B"], tbEntry{tbLabels("api", "B first"), base + 2, "B first"})
	if open := openNames(e.srv); !slices.Equal(open, []string{"B"}) {
		t.Errorf("open: %v, want B", open)
	}
	tbCheckAll(t, e, want, []string{"A", "B"})
}

// TestTenantsBoundFailedOpenNoDir: a push to a new tenant whose store
// cannot be opened (no descriptor free) is a 503 saying nothing was
// stored, not a 500 "may or may not be stored", and leaves no directory
// once descriptors are free again; the same push then succeeds.
func TestTenantsBoundFailedOpenNoDir(t *testing.T) {
	cfg := Config{DataDir: t.TempDir(), Now: func() time.Time { return time.Unix(0, base) }}
	e, _ := tbServe(t, cfg, false)
	want := map[string][]tbEntry{}
	tbPush(e, want, "old", "api", base, "before") // and a kept-alive connection

	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir("/proc/self/fd")
	lim := orig
	lim.Cur = min(orig.Cur, uint64(len(ents)+256))
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	var fill []*os.File
	release := func() {
		for _, f := range fill {
			f.Close()
		}
		fill = nil
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig)
	}
	defer release()
	for {
		f, err := os.Open("/dev/null")
		if err != nil {
			break
		}
		fill = append(fill, f)
	}
	code, body := e.do("POST", "/loki/api/v1/push", jsonPush(`{"service_name":"api"}`, base+1, "fresh one"), "X-Scope-OrgID", "fresh")
	release()
	t.Logf("push to a new tenant without a free descriptor: %d %s", code, strings.TrimSpace(body))
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "nothing was stored") || strings.Contains(body, "may or may not") {
		t.Errorf("push to a new tenant without a free descriptor: %d %s; want 503 saying nothing was stored", code, body)
	}
	// Any later request that opens a tenant (here a query of one that
	// has no data) removes what the failed open left.
	if got := tbQuery(t, e, "nobody"); len(got) != 0 {
		t.Errorf("nobody: %v", got)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "fresh")); !os.IsNotExist(err) {
		t.Errorf("the failed open left fresh's directory: %v", err)
	}
	if code, body := e.get("/ready"); code != 200 {
		t.Errorf("/ready: %d %s", code, body)
	}
	tbPush(e, want, "fresh", "api", base+1, "fresh one")
	tbPush(e, want, "old", "api", base+2, "after")
	tbCheckAll(t, e, want, []string{"old", "fresh"})
}

// TestTenantsBoundDefaultFromRlimit: with the default bound and a
// descriptor limit of 96 more than the test process has open, pushes to
// 80 new tenants all succeed (each tenant takes 3 descriptors; with 2, unbounded,
// the opens failed with EMFILE from about the 48th tenant on), a restart
// over the 80 directories starts, and every tenant answers all its
// entries.
func TestTenantsBoundDefaultFromRlimit(t *testing.T) {
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	http.DefaultTransport.(*http.Transport).CloseIdleConnections() // earlier tests' connections
	ents, _ := os.ReadDir("/proc/self/fd")
	lim := orig
	lim.Cur = uint64(len(ents) + 96)
	if orig.Cur < lim.Cur {
		t.Fatalf("descriptor limit %d, %d open: the test needs %d", orig.Cur, len(ents), lim.Cur)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig) })
	if got, want := DefaultMaxOpenTenants(), int(lim.Cur/6); got != want {
		t.Errorf("DefaultMaxOpenTenants with a limit of %d: %d, want %d", lim.Cur, got, want)
	}
	cfg := Config{DataDir: t.TempDir(), Now: func() time.Time { return time.Unix(0, base) }}
	e, stop := tbServe(t, cfg, false)
	want := map[string][]tbEntry{}
	var tenants []string
	for i := range 80 {
		tn := fmt.Sprintf("t%02d", i)
		tenants = append(tenants, tn)
		tbPush(e, want, tn, "api", base+int64(i), tn+" one", tn+" two")
	}
	if n, most := fdsUnder(t, cfg.DataDir), tenantDescriptors*int(lim.Cur/6); n > most {
		t.Errorf("%d descriptors open under the data directory, want at most %d", n, most)
	}
	stop()
	e, _ = tbServe(t, cfg, true)
	tbCheckAll(t, e, want, tenants)
}
