package server

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
)

// storedCount is how many entries the default tenant holds.
func (e *testEnv) storedCount(tenant string) int {
	e.t.Helper()
	ts, err := e.srv.openTenant(tenant, false)
	if err != nil {
		e.t.Fatal(err)
	}
	hits, _, err := collect(e.t.Context(), ts, &selection{start: -1 << 63, end: 1<<63 - 1}, answerLimit{entries: 1 << 30})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(hits)
}

func jsonPush(labels string, ts int64, lines ...string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"streams":[{"stream":%s,"values":[`, labels)
	for i, l := range lines {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `["%d",%q]`, ts+int64(i), l)
	}
	b.WriteString("]}]}")
	return []byte(b.String())
}

func TestLimits(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.MaxBody = 4096
		c.MaxLine = 100
		c.MaxLabels = 3
		c.RejectOlderThan = time.Hour
		c.RejectNewerThan = time.Minute
	})
	good := jsonPush(`{"app":"x"}`, base, "kept")
	e.mustPush("/loki/api/v1/push", good)

	cases := []struct {
		name string
		body []byte
		hdr  []string
		code int
		msg  string
	}{
		{"body too large", jsonPush(`{"app":"x"}`, base, strings.Repeat("a", 90), strings.Repeat("b", 5000)), nil, 413, "request body exceeds"},
		{"gzip bomb", gzipBytes(bytes.Repeat([]byte(" "), 20000)), []string{"Content-Encoding", "gzip"}, 413, "decompressed body exceeds"},
		{"snappy bomb", snappy.Encode(nil, bytes.Repeat([]byte{0}, 20000)), []string{"Content-Type", "application/x-protobuf"}, 413, "decompressed body"},
		{"bad gzip", []byte("not gzip"), []string{"Content-Encoding", "gzip"}, 400, "gzip"},
		{"bad encoding", good, []string{"Content-Encoding", "br"}, 415, "Content-Encoding"},
		{"line too long", jsonPush(`{"app":"x"}`, base, "short", strings.Repeat("z", 101)), nil, 400, "entry 1: line of 101 bytes exceeds the limit of 100"},
		{"malformed json", []byte(`{"streams":[{"stream":{"app":"x"},"values":[["1","a"]`), nil, 400, "nothing was stored"},
		{"bad ts", []byte(`{"streams":[{"stream":{"app":"x"},"values":[["soon","a"]]}]}`), nil, 400, "not Unix nanoseconds"},
		{"malformed protobuf", snappy.Encode(nil, []byte{0x0a, 0x10, 0x01}), []string{"Content-Type", "application/x-protobuf"}, 400, "truncated protobuf"},
		{"too old", jsonPush(`{"app":"x"}`, base-2*int64(time.Hour), "old"), nil, 400, "older than 1h0m0s"},
		{"too new", jsonPush(`{"app":"x"}`, base+2*int64(time.Minute), "new"), nil, 400, "in the future"},
		{"too many labels", jsonPush(`{"a":"1","b":"2","c":"3","d":"4"}`, base, "x"), nil, 400, "4 labels, more than the limit of 3"},
		{"no labels", jsonPush(`{}`, base, "x"), nil, 400, "at least one label"},
		{"bad label name", jsonPush(`{"1a":"x"}`, base, "x"), nil, 400, "invalid label name"},
		{"jsonl no line", []byte(`{"labels":{"a":"b"}}`), nil, 400, "line 1: missing"},
	}
	for _, c := range cases {
		path := "/loki/api/v1/push"
		if strings.HasPrefix(c.name, "jsonl") {
			path = "/api/v1/push/jsonl"
		}
		code, body := e.do("POST", path, c.body, c.hdr...)
		if code != c.code || !strings.Contains(body, c.msg) {
			t.Errorf("%s: got %d %s, want %d containing %q", c.name, code, body, c.code, c.msg)
		}
	}
	// As in Loki, a request with bad entries stores the good ones and
	// names the bad: "line too long" above stored "short", and here
	// stream 0 and stream 2's second entry are stored.
	mixed := []byte(fmt.Sprintf(`{"streams":[{"stream":{"app":"y"},"values":[["%d","fine"]]},{"stream":{"app":"y"},"values":[["%d","%s"]]},`+
		`{"stream":{"app":"z"},"values":[["%d","too old"],["%d","fine too"]]},{"stream":{"app":"%s"},"values":[["%d","long label"]]}]}`,
		base, base, strings.Repeat("q", 200), base-2*int64(time.Hour), base, strings.Repeat("v", 2049), base))
	if code, body := e.do("POST", "/loki/api/v1/push", mixed); code != 400 || !strings.Contains(body, "stream 1 {app=") ||
		!strings.Contains(body, "entry 0: line of 200 bytes") || !strings.Contains(body, "stream 2 {app=") ||
		!strings.Contains(body, "entry 0: timestamp") || !strings.Contains(body, "stream 3: label app: value of 2049 bytes exceeds the limit of 2048") ||
		!strings.Contains(body, "3 entries refused, the other 2 stored") {
		t.Errorf("mixed: %d %s", code, body)
	}
	if code, body := e.do("POST", "/loki/api/v1/push", jsonPush(`{"`+strings.Repeat("n", 1025)+`":"x"}`, base, "x")); code != 400 ||
		!strings.Contains(body, "of 1025 bytes exceeds the limit of 1024; nothing was stored") {
		t.Errorf("long label name: %d %s", code, body)
	}
	_, body := e.get(fmt.Sprintf("/api/v1/search?direction=forward&end=%d", base+10))
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(body), "\n") {
		var m struct{ Line string }
		if err := json.Unmarshal([]byte(l), &m); err == nil && m.Line != "" {
			got = append(got, m.Line)
		}
	}
	slices.Sort(got)
	if want := []string{"fine", "fine too", "kept", "short"}; !slices.Equal(got, want) {
		t.Errorf("stored %q, want %q", got, want)
	}
	_, body = e.get("/metrics")
	for _, r := range []string{"label_too_long", "body_too_large", "decompressed_too_large", "line_too_long", "malformed", "too_old", "too_new", "too_many_labels"} {
		if !strings.Contains(body, `hay_rejected_total{reason="`+r+`"}`) {
			t.Errorf("/metrics lacks rejected reason %s", r)
		}
	}
}

func gzipBytes(b []byte) []byte {
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	w.Write(b)
	w.Close()
	return out.Bytes()
}

func TestTruncateLines(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxLine = 64; c.TruncateLines = true })
	long := strings.Repeat("é", 40) // 80 bytes
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, base, long, "short"))
	_, body := e.get(fmt.Sprintf("/api/v1/search?direction=forward&end=%d", base+10))
	lines := strings.Split(body, "\n")
	// 64 - len(marker) = 50 bytes, cut back to a rune start: 25 runes.
	want := strings.Repeat("é", 25) + truncMarker
	if !strings.Contains(lines[0], fmt.Sprintf("%q", want)) || len(want) > 64 {
		t.Errorf("truncated line: %s (want %q)", lines[0], want)
	}
	if !strings.Contains(lines[1], `"short"`) {
		t.Errorf("second line: %s", lines[1])
	}
}

func TestQueryCapAndTimeout(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxConcurrentQueries = 2; c.QueryQueueWait = 50 * time.Millisecond })
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, base, "a"))
	e.srv.sem <- struct{}{}
	e.srv.sem <- struct{}{}
	req := fmt.Sprintf("/loki/api/v1/query_range?query=%s&start=%d&end=%d", q(`{app="x"}`), base-1, base+10)
	code, body := e.get(req)
	if code != 429 || !strings.Contains(body, "too many concurrent queries") {
		t.Errorf("full: %d %s", code, body)
	}
	<-e.srv.sem
	<-e.srv.sem
	if code, body := e.get(req); code != 200 {
		t.Errorf("after release: %d %s", code, body)
	}

	e2 := newEnv(t, func(c *Config) { c.QueryTimeout = time.Nanosecond })
	e2.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, base, "a"))
	if code, body := e2.get(req); code != 504 || !strings.Contains(body, "timed out") {
		t.Errorf("timeout: %d %s", code, body)
	}
}

func TestTenantsAndAuth(t *testing.T) {
	e := newEnv(t, nil)
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, base, "for a"), "X-Scope-OrgID", "team-a")
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, base, "for b"), "X-Scope-OrgID", "team-b")
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, base, "for default"))
	for tenant, want := range map[string]string{"team-a": "for a", "team-b": "for b", "": "for default", "team-c": ""} {
		_, body := e.get(fmt.Sprintf("/api/v1/search?end=%d", base+10), "X-Scope-OrgID", tenant)
		lines := strings.Split(strings.TrimSpace(body), "\n")
		if want == "" {
			if len(lines) != 1 {
				t.Errorf("tenant %q sees %s", tenant, body)
			}
			continue
		}
		if len(lines) != 2 || !strings.Contains(lines[0], `"line":"`+want+`"`) {
			t.Errorf("tenant %q: %s", tenant, body)
		}
	}
	for _, bad := range []string{"..", ".", "a/b", strings.Repeat("x", 65), "a b"} {
		if code, _ := e.do("POST", "/loki/api/v1/push", jsonPush(`{"app":"x"}`, base, "x"), "X-Scope-OrgID", bad); code != 400 {
			t.Errorf("tenant %q: %d", bad, code)
		}
	}

	auth, err := ParseAuth(strings.NewReader("# creds\ntoken s3cret\ntoken bound-secret team-a\nbasic alice pw\nbasic bob sha256:" +
		"5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8 team-b\n"))
	if err != nil {
		t.Fatal(err)
	}
	ea := newEnv(t, func(c *Config) { c.Auth = auth })
	push := jsonPush(`{"app":"x"}`, base, "x")
	if code, _ := ea.do("POST", "/loki/api/v1/push", push); code != 401 {
		t.Errorf("no creds: %d", code)
	}
	if code, _ := ea.do("POST", "/loki/api/v1/push", push, "Authorization", "Bearer wrong"); code != 401 {
		t.Errorf("bad token: %d", code)
	}
	ea.mustPush("/loki/api/v1/push", push, "Authorization", "Bearer s3cret", "X-Scope-OrgID", "team-z")
	ea.mustPush("/loki/api/v1/push", push, "Authorization", "Bearer bound-secret")
	if code, _ := ea.do("POST", "/loki/api/v1/push", push, "Authorization", "Bearer bound-secret", "X-Scope-OrgID", "team-z"); code != 403 {
		t.Errorf("bound token, other tenant: %d", code)
	}
	basic := func(u, p string) string {
		req, _ := httpNewRequest(u, p)
		return req
	}
	ea.mustPush("/loki/api/v1/push", push, "Authorization", basic("alice", "pw"))
	if code, _ := ea.do("POST", "/loki/api/v1/push", push, "Authorization", basic("alice", "wrong")); code != 401 {
		t.Errorf("bad password: %d", code)
	}
	ea.mustPush("/loki/api/v1/push", push, "Authorization", basic("bob", "password"))
	if n := ea.storedCount("team-b"); n != 1 {
		t.Errorf("team-b has %d entries", n)
	}
	if n := ea.storedCount("team-a"); n != 1 {
		t.Errorf("team-a has %d entries", n)
	}
	if code, _ := ea.get("/loki/api/v1/labels"); code != 401 {
		t.Errorf("query without creds: %d", code)
	}
	if code, _ := ea.get("/ready"); code != 200 {
		t.Errorf("/ready needs no creds: %d", code)
	}
	for _, bad := range []string{"token", "basic a", "secret x", "token a bad/tenant", "basic a sha256:zz"} {
		if _, err := ParseAuth(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseAuth(%q) accepted", bad)
		}
	}
}

func httpNewRequest(user, pass string) (string, error) {
	req, err := http.NewRequest("GET", "http://x/", nil)
	if err != nil {
		return "", err
	}
	req.SetBasicAuth(user, pass)
	return req.Header.Get("Authorization"), nil
}

// TestQueryQueue: a query over the concurrency cap waits for a slot (as
// Loki queues a dashboard's burst) and runs when one frees; past the
// queue's length it is answered 429 at once, without waiting.
func TestQueryQueue(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.MaxConcurrentQueries = 1
		c.QueryQueueWait = 10 * time.Second
		c.MaxQueuedQueries = 1
	})
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, base, "a"))
	req := fmt.Sprintf("/loki/api/v1/query_range?query=%s&start=%d&end=%d", q(`{app="x"}`), base-1, base+10)
	e.srv.sem <- struct{}{} // the one slot is busy
	done := make(chan int)
	go func() {
		code, _ := e.get(req)
		done <- code
	}()
	// Wait until that query is queued, then a second one finds the queue
	// full.
	for deadline := time.Now().Add(5 * time.Second); e.srv.queued.Load() != 1; {
		if time.Now().After(deadline) {
			t.Fatal("the first query never queued")
		}
		time.Sleep(time.Millisecond)
	}
	t0 := time.Now()
	if code, body := e.get(req); code != 429 || !strings.Contains(body, "too many concurrent queries") {
		t.Errorf("queue full: %d %s, want 429", code, body)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("queue full: answered after %s, want at once", d)
	}
	select {
	case code := <-done:
		t.Fatalf("queued query answered %d while the slot was still busy", code)
	case <-time.After(50 * time.Millisecond):
	}
	<-e.srv.sem // the slot frees: the queued query runs
	if code := <-done; code != 200 {
		t.Errorf("queued query: %d, want 200", code)
	}
	if n := e.srv.queued.Load(); n != 0 {
		t.Errorf("%d queries still counted as queued", n)
	}
}
