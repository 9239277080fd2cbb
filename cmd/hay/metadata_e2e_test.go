package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// metaEntry is one pushed entry and the structured metadata sent with it.
type metaEntry struct {
	app  string
	ts   int64
	line string
	meta map[string]string // nil: sent without a third element
}

// TestStructuredMetadataEndToEnd pushes entries with structured metadata
// (Loki's third value element) to a real `hay serve`, then reads every
// entry back through the Loki API after each way the entries can be
// stored: in the WAL after kill -9 (replayed at start), flushed to a
// segment by a graceful stop, and compacted by `hay compact`. Each time
// the metadata must come back exactly, in both of Loki's response
// encodings, and a filter on a trace id must find exactly its entry.
func TestStructuredMetadataEndToEnd(t *testing.T) {
	seed := envSeed(t, "HAY_META_SEED")
	r := rand.New(rand.NewPCG(seed, 71))
	dir := t.TempDir()
	base := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).UnixNano()
	apps := []string{"api", "db", "web"}
	var sent []metaEntry
	for i := range 600 {
		e := metaEntry{app: apps[r.IntN(len(apps))], ts: base + int64(i)*int64(time.Millisecond), line: fmt.Sprintf("meta-e2e line %d level=info", i)}
		if i%5 != 0 { // every fifth entry has none
			e.meta = map[string]string{
				"trace_id": fmt.Sprintf("%016x%016x", r.Uint64(), r.Uint64()),
				"span_id":  fmt.Sprintf("%016x", r.Uint64()),
			}
			if i%3 == 0 {
				e.meta["user"] = "h\u00e9llo \u2713 \"quoted\" \\ tab\t" + strconv.Itoa(i)
			}
			if i%7 == 0 {
				e.meta["app_version"] = "1." + strconv.Itoa(r.IntN(50))
			}
		}
		sent = append(sent, e)
	}

	// hay serve's default adds detected_level=info to every entry (the
	// lines say level=info): the oracle is the metadata sent plus that.
	srv := startCrashServe(t, dir, "--compact-interval", "0")
	half := len(sent) / 2
	for start := 0; start < half; start += 100 {
		metaPush(t, srv.url, sent[start:start+100])
	}
	metaCheck(t, "before any restart", srv.url, sent[:half], r)

	srv.kill()
	srv = startCrashServe(t, dir, "--compact-interval", "0")
	metaCheck(t, "after kill -9 (WAL replay)", srv.url, sent[:half], r)
	stop := func() {
		srv.cmd.Process.Signal(syscall.SIGTERM)
		if err := srv.wait(); err != nil {
			t.Fatalf("hay serve after SIGTERM: %v\n%s", err, srv.logs())
		}
	}
	stop() // flushes the replayed half to a segment
	srv = startCrashServe(t, dir, "--compact-interval", "0")
	for start := half; start < len(sent); start += 100 {
		metaPush(t, srv.url, sent[start:start+100])
	}
	metaCheck(t, "one segment and the head", srv.url, sent, r)
	stop()
	segs, _ := filepath.Glob(filepath.Join(dir, "fake", "segments", "*.seg"))
	if len(segs) < 2 {
		t.Fatalf("after two graceful stops: segments %q, want two or more", segs)
	}
	srv = startCrashServe(t, dir, "--compact-interval", "0")
	metaCheck(t, "after two graceful stops (flushed)", srv.url, sent, r)
	srv.kill()

	if out, err := hayCommand("compact", "--data", filepath.Join(dir, "fake")).CombinedOutput(); err != nil {
		t.Fatalf("hay compact: %v\n%s", err, out)
	}
	// Every segment was rewritten (new file numbers): the metadata
	// below went through compaction, not around it.
	after, _ := filepath.Glob(filepath.Join(dir, "fake", "segments", "*.seg"))
	if len(after) == 0 || slices.ContainsFunc(after, func(s string) bool { return slices.Contains(segs, s) }) {
		t.Fatalf("hay compact left segments %q (before %q): want every one rewritten", after, segs)
	}
	srv = startCrashServe(t, dir, "--compact-interval", "0")
	metaCheck(t, "after hay compact", srv.url, sent, r)
	srv.kill()
}

// metaPush sends entries as one Loki JSON push and requires a 204.
func metaPush(t *testing.T, base string, entries []metaEntry) {
	t.Helper()
	type stream struct {
		Stream map[string]string `json:"stream"`
		Values [][]any           `json:"values"`
	}
	byApp := map[string]*stream{}
	var streams []*stream
	for _, e := range entries {
		s := byApp[e.app]
		if s == nil {
			s = &stream{Stream: map[string]string{"app": e.app}}
			byApp[e.app] = s
			streams = append(streams, s)
		}
		v := []any{strconv.FormatInt(e.ts, 10), e.line}
		if e.meta != nil {
			v = append(v, e.meta)
		}
		s.Values = append(s.Values, v)
	}
	body, err := json.Marshal(map[string]any{"streams": streams})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(base+"/loki/api/v1/push", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("push: %s: %s", resp.Status, msg)
	}
}

// metaCheck reads all entries back in both response encodings and looks
// one trace id up.
func metaCheck(t *testing.T, when, base string, sent []metaEntry, r *rand.Rand) {
	t.Helper()
	want := map[string]metaEntry{}
	for _, e := range sent {
		// Every line says level=info: the server adds its detected_level.
		e.meta = maps.Clone(e.meta)
		if e.meta == nil {
			e.meta = map[string]string{}
		}
		e.meta["detected_level"] = "info"
		want[e.line] = e
	}
	for _, categorize := range []bool{true, false} {
		got := metaQuery(t, when, base, `{app=~".+"} |= "meta-e2e"`, categorize)
		if len(got) != len(sent) {
			t.Errorf("%s (categorize-labels %v): %d entries, want %d", when, categorize, len(got), len(sent))
		}
		bad := 0
		for _, g := range got {
			if bad == 10 {
				t.Fatalf("%s: more differences not shown", when)
			}
			w, ok := want[g.line]
			if !ok {
				t.Errorf("%s: unexpected line %q", when, g.line)
				bad++
				continue
			}
			if g.ts != w.ts || g.app != w.app || !maps.Equal(g.meta, w.meta) {
				t.Errorf("%s (categorize-labels %v): line %q came back as app %q ts %d metadata %q; sent app %q ts %d metadata %q",
					when, categorize, g.line, g.app, g.ts, g.meta, w.app, w.ts, w.meta)
				bad++
			}
		}
	}
	// A trace id finds its entry and only it.
	var pick metaEntry
	for pick.meta["trace_id"] == "" {
		pick = sent[r.IntN(len(sent))]
	}
	got := metaQuery(t, when, base, fmt.Sprintf(`{app=~".+"} | trace_id=%q`, pick.meta["trace_id"]), true)
	if len(got) != 1 || got[0].line != pick.line {
		var lines []string
		for _, g := range got {
			lines = append(lines, g.line)
		}
		t.Errorf("%s: trace_id=%q found %q, want [%q]", when, pick.meta["trace_id"], lines, pick.line)
	}
}

// metaQuery runs a log query over the whole time range and returns its
// entries with their metadata: from the third value element with
// categorize-labels, else from the stream labels other than app.
func metaQuery(t *testing.T, when, base, query string, categorize bool) []metaEntry {
	t.Helper()
	q := url.Values{"query": {query}, "start": {"0"}, "end": {strconv.FormatInt(time.Now().Add(time.Hour).UnixNano(), 10)}, "limit": {"5000"}, "direction": {"forward"}}
	req, err := http.NewRequest("GET", base+"/loki/api/v1/query_range?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if categorize {
		req.Header.Set("X-Loki-Response-Encoding-Flags", "categorize-labels")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: query %q: %s: %s", when, query, resp.Status, body)
	}
	var out struct {
		Data struct {
			ResultType    string   `json:"resultType"`
			EncodingFlags []string `json:"encodingFlags"`
			Result        []struct {
				Stream map[string]string   `json:"stream"`
				Values [][]json.RawMessage `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("%s: query %q: %v: %s", when, query, err, body)
	}
	if categorize != slices.Contains(out.Data.EncodingFlags, "categorize-labels") {
		t.Errorf("%s: categorize-labels asked %v, encodingFlags %q", when, categorize, out.Data.EncodingFlags)
	}
	var got []metaEntry
	for _, st := range out.Data.Result {
		for _, v := range st.Values {
			var e metaEntry
			var tss string
			if len(v) < 2 || json.Unmarshal(v[0], &tss) != nil || json.Unmarshal(v[1], &e.line) != nil {
				t.Fatalf("%s: bad value %s", when, v)
			}
			e.ts, _ = strconv.ParseInt(tss, 10, 64)
			e.app = st.Stream["app"]
			if categorize {
				if !maps.Equal(st.Stream, map[string]string{"app": e.app, "service_name": e.app}) {
					t.Fatalf("%s: categorized stream labels %q, want app and the service_name derived from it", when, st.Stream)
				}
				if len(v) == 3 {
					var cat struct {
						StructuredMetadata map[string]string `json:"structuredMetadata"`
					}
					if err := json.Unmarshal(v[2], &cat); err != nil {
						t.Fatalf("%s: third element %s: %v", when, v[2], err)
					}
					if len(cat.StructuredMetadata) > 0 {
						e.meta = cat.StructuredMetadata
					}
				}
			} else {
				if len(v) != 2 {
					t.Errorf("%s: uncategorized value with %d elements: %s", when, len(v), v)
				}
				for k, val := range st.Stream {
					if k != "app" && k != "service_name" {
						if e.meta == nil {
							e.meta = map[string]string{}
						}
						e.meta[k] = val
					}
				}
			}
			got = append(got, e)
		}
	}
	return got
}
