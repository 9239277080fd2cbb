package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/klauspost/compress/snappy"

	"haystack/internal/metrics/metricstest"
	"haystack/internal/store"
)

// The metrics oracle: a random sequence of pushes (every format, every
// documented rejection), queries of every endpoint (good, bad, over the
// concurrency cap, timed out), flushes and compactions, against two
// servers, with our own count of what each hay_ metric must have moved by
// between two scrapes of /metrics. Operators alert on these numbers, so
// the deltas are compared exactly; histograms by their _count (their _sum
// is a latency: bounded by the wall time of the round). Every scrape is
// also checked as exposition text: valid, HELP and TYPE on every family,
// label values escaped, and no counter, histogram bucket or summary
// count going down from one scrape to the next.
//
// HAY_METRICS_SEED=<n> replays a run; a failure prints its seed.

// mModel is what the hay_ metrics of one server must have moved by since
// the last scrape (segments: its absolute value, checked separately).
type mModel struct {
	lines, bytes float64
	push         map[string]float64 // hay_push_duration_seconds_count{format}
	query        map[string]float64 // hay_query_duration_seconds_count{endpoint}
	fsync        float64            // at most (one per push)
	burstPushes  float64            // pushes of fsync made concurrently: they may share
	fsyncMin     float64            // fsyncs the bursts must have made at least
	burstQueries float64            // queries made concurrently
	rejected     map[string]float64 // hay_rejected_total{reason}
}

func newMModel() *mModel {
	return &mModel{push: map[string]float64{}, query: map[string]float64{}, rejected: map[string]float64{}}
}

// oEnv is one server under test with its model.
type oEnv struct {
	*testEnv
	name     string
	m        *mModel
	auth     []string       // headers that authenticate as any tenant
	tenants  []string       // valid tenants used
	unsynced map[string]int // entries in each tenant's head (not yet in a segment)
	prev     map[string]float64
}

// scrape is one parsed /metrics body.
type scrape struct {
	fams   []metricstest.Family
	series map[string]float64 // "name{l=v,...}" (labels sorted) → value
	types  map[string]string  // sample name → family type
}

func seriesKey(s metricstest.Sample) string {
	ls := slices.Clone(s.Labels)
	slices.SortFunc(ls, func(a, b metricstest.Label) int { return strings.Compare(a.Name, b.Name) })
	var b strings.Builder
	b.WriteString(s.Name)
	b.WriteByte('{')
	for i, l := range ls {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", l.Name, l.Value)
	}
	b.WriteByte('}')
	return b.String()
}

// escLabel is a label value as the exposition format must write it.
func escLabel(v string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(v)
}

func (e *oEnv) scrape(t *testing.T) scrape {
	t.Helper()
	code, body := e.get("/metrics")
	if code != 200 {
		t.Fatalf("%s: /metrics: %d %s", e.name, code, body)
	}
	fams, err := metricstest.Parse(body)
	if err != nil {
		t.Fatalf("%s: /metrics is not valid exposition text: %v\n%s", e.name, err, body)
	}
	sc := scrape{fams: fams, series: map[string]float64{}, types: map[string]string{}}
	for _, f := range fams {
		if !f.HasHelp || f.Help == "" || !f.HasType {
			t.Errorf("%s: family %s lacks HELP or TYPE (help %q)", e.name, f.Name, f.Help)
		}
		for _, s := range f.Samples {
			sc.series[seriesKey(s)] = s.Value
			// Counters and counts: never negative or NaN; counts whole.
			isCount := f.Type == "histogram" && !strings.HasSuffix(s.Name, "_sum") || f.Type == "summary" && strings.HasSuffix(s.Name, "_count")
			if (f.Type == "counter" || isCount) && !(s.Value >= 0) || isCount && s.Value != math.Trunc(s.Value) {
				t.Errorf("%s: %s = %v", e.name, seriesKey(s), s.Value)
			}
			sc.types[s.Name] = f.Type
			// Each label value is in the body as written escaped.
			for _, l := range s.Labels {
				if !strings.Contains(body, l.Name+`="`+escLabel(l.Value)+`"`) {
					t.Errorf("%s: label %s=%q of %s not written escaped", e.name, l.Name, l.Value, s.Name)
				}
			}
		}
	}
	return sc
}

// monotonic checks that nothing cumulative went down, and no series
// vanished, since the previous scrape.
func (e *oEnv) monotonic(t *testing.T, sc scrape) {
	t.Helper()
	for k, old := range e.prev {
		name := k[:strings.IndexByte(k, '{')]
		typ := sc.types[name]
		cumulative := typ == "counter" || typ == "histogram" ||
			typ == "summary" && (strings.HasSuffix(name, "_count") || strings.HasSuffix(name, "_sum"))
		v, ok := sc.series[k]
		if !ok {
			if strings.HasPrefix(name, "hay_") || typ == "counter" || typ == "histogram" {
				t.Errorf("%s: series %s vanished between scrapes", e.name, k)
			}
			continue
		}
		if cumulative && v < old {
			t.Errorf("%s: %s went down from %v to %v", e.name, k, old, v)
		}
	}
	e.prev = sc.series
}

// compare checks the deltas of the hay_ metrics between two scrapes
// against the model, then resets the model.
func (e *oEnv) compare(t *testing.T, before, after scrape, elapsed time.Duration) {
	t.Helper()
	delta := func(k string) float64 { return after.series[k] - before.series[k] }
	check := func(k string, want float64) {
		t.Helper()
		if got := delta(k); got != want {
			t.Errorf("%s: %s moved by %v, want %v", e.name, k, got, want)
		}
	}
	check("hay_ingested_lines_total{}", e.m.lines)
	check("hay_ingested_bytes_total{}", e.m.bytes)
	// Sequential pushes fsync once each; a burst's pushes may share.
	if got, seq := delta("hay_wal_fsync_duration_seconds_count{}"), e.m.fsync-e.m.burstPushes; got < seq+e.m.fsyncMin || got > e.m.fsync {
		t.Errorf("%s: hay_wal_fsync_duration_seconds_count moved by %v, want %v to %v", e.name, got, seq+e.m.fsyncMin, e.m.fsync)
	}
	// Every labelled series, in the model or on the page.
	vecs := []struct {
		name, label string
		want        map[string]float64
	}{
		{"hay_push_duration_seconds_count", "format", e.m.push},
		{"hay_query_duration_seconds_count", "endpoint", e.m.query},
		{"hay_rejected_total", "reason", e.m.rejected},
	}
	for _, v := range vecs {
		keys := map[string]float64{}
		for lv, n := range v.want {
			keys[fmt.Sprintf("%s{%s=%q}", v.name, v.label, lv)] = n
		}
		for _, sc := range []scrape{before, after} {
			for k := range sc.series {
				if strings.HasPrefix(k, v.name+"{") {
					if _, ok := keys[k]; !ok {
						keys[k] = 0
					}
				}
			}
		}
		for k, n := range keys {
			check(k, n)
		}
	}
	// Latency sums: each request is timed inside the round.
	for _, k := range []string{"hay_push_duration_seconds_sum", "hay_query_duration_seconds_sum", "hay_wal_fsync_duration_seconds_sum"} {
		var d float64
		for s := range after.series {
			if strings.HasPrefix(s, k+"{") {
				d += delta(s)
			}
		}
		// Requests of a burst run at once: their latencies add up to
		// as much as the wall time each.
		if d < 0 || d > elapsed.Seconds()*(1+e.m.burstPushes+e.m.burstQueries) {
			t.Errorf("%s: %s moved by %v in a round of %v", e.name, k, d, elapsed)
		}
	}
	// hay_segments: the segments the open tenants' manifests name.
	want := 0
	for _, tn := range e.tenants {
		m, err := os.ReadFile(filepath.Join(e.srv.cfg.DataDir, tn, "MANIFEST"))
		if err == nil {
			want += strings.Count(string(m), `"name"`)
		}
	}
	if got := after.series["hay_segments{}"]; got != float64(want) {
		t.Errorf("%s: hay_segments %v, want %d (segments in the manifests)", e.name, got, want)
	}
	e.m = newMModel()
}

// oGen generates the random pushes.
type oGen struct{ r *rand.Rand }

// line is a random line of n bytes at most, valid UTF-8, with characters
// JSON and the exposition must escape.
func (g *oGen) line(n int) string {
	var b strings.Builder
	pieces := []string{"a", "b", "z", " ", "é", `"`, `\`, "\n", "\t", "timeout", "GET /x", "☃"}
	for {
		p := pieces[g.r.IntN(len(pieces))]
		if b.Len()+len(p) > n {
			return b.String()
		}
		b.WriteString(p)
	}
}

type oStream struct {
	labels  map[string]string
	entries []PushEntry
}

func (s oStream) lokiLabels() string {
	var parts []string
	for k, v := range s.labels {
		parts = append(parts, fmt.Sprintf("%s=%q", k, v))
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, ", ") + "}"
}

func jsonStr(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func pushJSON(streams []oStream) []byte {
	var b strings.Builder
	b.WriteString(`{"streams":[`)
	for i, s := range streams {
		if i > 0 {
			b.WriteByte(',')
		}
		lb, _ := json.Marshal(s.labels)
		fmt.Fprintf(&b, `{"stream":%s,"values":[`, lb)
		for j, e := range s.entries {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `["%d",%s]`, e.Time, jsonStr(e.Line))
		}
		b.WriteString("]}")
	}
	b.WriteString("]}")
	return []byte(b.String())
}

func pushProto(streams []oStream) []byte {
	var ps []PushStream
	for _, s := range streams {
		ps = append(ps, PushStream{Labels: s.lokiLabels(), Entries: s.entries})
	}
	return protoBody(ps)
}

func pushJSONL(streams []oStream, r *rand.Rand) []byte {
	var b strings.Builder
	for _, s := range streams {
		for _, e := range s.entries {
			lb, _ := json.Marshal(s.labels)
			labels := string(lb)
			if r.IntN(2) == 0 {
				labels = jsonStr(s.lokiLabels())
			}
			var ts string
			switch r.IntN(4) {
			case 0:
				ts = fmt.Sprintf(`,"ts":"%d"`, e.Time)
			case 1:
				ts = fmt.Sprintf(`,"ts":%d`, e.Time)
			case 2:
				ts = fmt.Sprintf(`,"time":%q`, time.Unix(0, e.Time).UTC().Format(time.RFC3339Nano))
			default:
				if e.Time != base {
					ts = fmt.Sprintf(`,"ts":"%d"`, e.Time)
				} // else: no ts is now (base)
			}
			fmt.Fprintf(&b, "{\"labels\":%s%s,\"line\":%s}\n", labels, ts, jsonStr(e.Line))
			if r.IntN(5) == 0 {
				b.WriteString("\n") // blank lines are skipped
			}
		}
	}
	return []byte(b.String())
}

// streams returns 1 to 2 streams of 0 to 4 entries with lines of at most
// maxLine bytes and times in [base-1h, base+1m] (both bounds included).
func (g *oGen) streams(maxLine int) []oStream {
	var out []oStream
	apps := []string{"api", "auth", "job"}
	for range 1 + g.r.IntN(2) {
		s := oStream{labels: map[string]string{"app": apps[g.r.IntN(len(apps))]}}
		if g.r.IntN(2) == 0 {
			s.labels["level"] = []string{"info", "error", `we"ird\`}[g.r.IntN(3)]
		}
		if g.r.IntN(4) == 0 {
			// Three labels: the limit, allowed.
			s.labels["host"] = "h1"
		}
		for range g.r.IntN(5) {
			ts := base - int64(g.r.IntN(3600))*1e9
			switch g.r.IntN(8) {
			case 0:
				ts = base - int64(time.Hour) // oldest allowed
			case 1:
				ts = base + int64(time.Minute) // newest allowed
			}
			s.entries = append(s.entries, PushEntry{Time: ts, Line: g.line(g.r.IntN(maxLine + 1))})
		}
		out = append(out, s)
	}
	return out
}

func count(streams []oStream) (n int, nbytes int) {
	for _, s := range streams {
		for _, e := range s.entries {
			n++
			nbytes += len(e.Line)
		}
	}
	return n, nbytes
}

// truncated is a line as --line-policy=truncate stores it (API doc: cut
// to the limit, not splitting a character, ending in the marker).
func truncated(line string, maxLine int) string {
	if len(line) <= maxLine {
		return line
	}
	cut := max(0, maxLine-len(truncMarker))
	for cut > 0 && !utf8.RuneStart(line[cut]) {
		cut--
	}
	return line[:cut] + truncMarker
}

func TestMetricsOracle(t *testing.T) {
	seed := envSeed(t, "HAY_METRICS_SEED")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("reproduce with HAY_METRICS_SEED=%d", seed)
		}
	})
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	g := &oGen{r: r}

	auth, err := ParseAuth(strings.NewReader("token s3cret\ntoken bound team-a\n"))
	if err != nil {
		t.Fatal(err)
	}
	// A: auth, rejecting limits. B: no auth, long lines truncated,
	// every query timing out.
	a := &oEnv{name: "A", testEnv: newEnv(t, func(c *Config) {
		c.Auth = auth
		c.MaxBody = 4096
		c.MaxLine = 100
		c.MaxLabels = 3
		c.RejectOlderThan = time.Hour
		c.RejectNewerThan = time.Minute
		c.MaxConcurrentQueries = 2
		c.QueryQueueWait = -1 // over the cap: 429 at once
	}), auth: []string{"Authorization", "Bearer s3cret"}, tenants: []string{DefaultTenant, "team-a", "t-2"}}
	b := &oEnv{name: "B", testEnv: newEnv(t, func(c *Config) {
		c.MaxBody = 8192
		c.MaxLabels = 3
		c.MaxLine = 64
		c.TruncateLines = true
		c.RejectOlderThan = time.Hour
		c.RejectNewerThan = time.Minute
		c.QueryTimeout = time.Nanosecond
	}), tenants: []string{DefaultTenant, "team-b"}}
	envs := []*oEnv{a, b}
	for _, e := range envs {
		e.m = newMModel()
		e.unsynced = map[string]int{}
	}

	// do sends one request and records it in the trace printed on failure.
	var trace []string
	do := func(e *oEnv, what, method, path string, body []byte, hdr ...string) (int, string) {
		t.Helper()
		code, resp := e.do(method, path, body, hdr...)
		trace = append(trace, fmt.Sprintf("%s %s: %s %s → %d", e.name, what, method, path, code))
		return code, resp
	}
	want := func(what string, code int, resp string, codes ...int) {
		t.Helper()
		if !slices.Contains(codes, code) {
			t.Fatalf("%s: status %d, want %v: %s\ntrace:\n%s", what, code, codes, resp, strings.Join(trace, "\n"))
		}
	}
	hdrs := func(e *oEnv, tenant string, more ...string) []string {
		h := slices.Clone(e.auth)
		if tenant != DefaultTenant || r.IntN(2) == 0 {
			h = append(h, "X-Scope-OrgID", tenant)
		}
		return append(h, more...)
	}

	// push sends streams in a random format; the server must store them
	// (every entry within the limits, long lines cut on a truncating server).
	push := func(e *oEnv, tenant string, streams []oStream) {
		t.Helper()
		var body []byte
		var format string
		var extra []string
		switch r.IntN(5) {
		case 0:
			format, body = "json", pushJSON(streams)
		case 1:
			format, body = "json", gzipBytes(pushJSON(streams))
			extra = []string{"Content-Type", "application/json", "Content-Encoding", "gzip"}
		case 2:
			format, body = "protobuf", pushProto(streams)
			extra = []string{"Content-Type", "application/x-protobuf"}
		case 3:
			format, body = "protobuf", gzipBytes(pushProto(streams))
			extra = []string{"Content-Type", "application/x-protobuf", "Content-Encoding", "gzip"}
		default:
			format, body = "jsonl", pushJSONL(streams, r)
		}
		path := "/loki/api/v1/push"
		if format == "jsonl" {
			path = "/api/v1/push/jsonl"
		}
		code, resp := do(e, "push "+format, "POST", path, body, hdrs(e, tenant, extra...)...)
		want("push "+format, code, resp, 204)
		n, nb := 0, 0
		for _, s := range streams {
			for _, en := range s.entries {
				l := truncated(en.Line, e.srv.cfg.MaxLine)
				if l != en.Line {
					e.m.rejected["line_truncated"]++
				}
				n++
				nb += len(l)
			}
		}
		e.m.push[format]++
		if n > 0 {
			e.m.lines += float64(n)
			e.m.bytes += float64(nb)
			e.m.fsync++ // requests are sequential: one group commit each
			e.unsynced[tenant] += n
		}
	}

	// reject sends a push that must be refused with code and counted
	// under reason.
	reject := func(e *oEnv, what, format, reason string, code int, body []byte, hdr ...string) {
		t.Helper()
		path := "/loki/api/v1/push"
		if format == "jsonl" {
			path = "/api/v1/push/jsonl"
		}
		if format == "protobuf" && !slices.Contains(hdr, "Content-Type") {
			hdr = append(hdr, "Content-Type", "application/x-protobuf")
		}
		if format == "json" && !slices.Contains(hdr, "Content-Type") {
			// (Without one, a body that is not JSON is read as protobuf.)
			hdr = append(hdr, "Content-Type", "application/json")
		}
		got, resp := do(e, "reject "+what, "POST", path, body, hdr...)
		want("reject "+what, got, resp, code)
		if !strings.Contains(resp, `"error"`) {
			t.Errorf("%s: %s: no JSON error body: %s", e.name, what, resp)
		}
		e.m.rejected[reason]++
		// Rejected by auth or tenant checks before the push handler: not
		// a push the latency histogram times (current behaviour; see
		// /work/notes/metrics-findings.md).
		if reason != "unauthorized" && reason != "forbidden_tenant" && reason != "bad_tenant" {
			e.m.push[format]++
		}
	}

	pushReject := func(e *oEnv) {
		t.Helper()
		tenant := e.tenants[r.IntN(len(e.tenants))]
		h := hdrs(e, tenant)
		one := func(labels map[string]string, ts int64, line string) []oStream {
			return []oStream{{labels: labels, entries: []PushEntry{{ts, line}}}}
		}
		app := map[string]string{"app": "x"}
		// The rejection comes in a random format where it can.
		send := func(what, reason string, code int, streams []oStream) {
			t.Helper()
			switch r.IntN(3) {
			case 0:
				reject(e, what, "json", reason, code, pushJSON(streams), h...)
			case 1:
				reject(e, what, "protobuf", reason, code, pushProto(streams), h...)
			default:
				reject(e, what, "jsonl", reason, code, pushJSONL(streams, r), h...)
			}
		}
		switch k := r.IntN(14); k {
		case 0:
			send("too old", "too_old", 400, one(app, base-int64(time.Hour)-1, "old"))
		case 1:
			send("too new", "too_new", 400, one(app, base+int64(time.Minute)+1, "new"))
		case 2:
			send("too many labels", "too_many_labels", 400, one(map[string]string{"a": "1", "b": "2", "c": "3", "d": "4"}, base, "x"))
		case 3:
			if e.srv.cfg.TruncateLines {
				if r.IntN(2) == 0 {
					send("bad label name", "bad_labels", 400, one(map[string]string{"1a": "x"}, base, "x"))
				} else {
					send("no labels", "bad_labels", 400, one(map[string]string{}, base, "x"))
				}
				return
			}
			send("line too long", "line_too_long", 400, one(app, base, strings.Repeat("é", e.srv.cfg.MaxLine/2)+"z"))
		case 4:
			reject(e, "malformed json", "json", "malformed", 400, []byte(`{"streams":[{"stream":{"app":"x"},"values":[["1","a"]`), h...)
		case 5:
			reject(e, "malformed protobuf", "protobuf", "malformed", 400, snappy.Encode(nil, []byte{0x0a, 0x10, 0x01}), h...)
		case 6:
			reject(e, "malformed jsonl", "jsonl", "malformed", 400, []byte(`{"labels":{"a":"b"}}`), h...)
		case 7:
			reject(e, "bad gzip", "json", "bad_gzip", 400, []byte("not gzip"), append(h, "Content-Encoding", "gzip")...)
		case 8:
			reject(e, "bad encoding", "jsonl", "bad_encoding", 415, []byte("{}"), append(h, "Content-Encoding", "br")...)
		case 9:
			reject(e, "bad snappy", "protobuf", "bad_snappy", 400, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, h...)
		case 10:
			md := int(e.srv.cfg.MaxDecompressed)
			switch r.IntN(4) {
			case 0:
				reject(e, "gzip bomb", "json", "decompressed_too_large", 413, gzipBytes([]byte(strings.Repeat(" ", md+1))), append(h, "Content-Encoding", "gzip")...)
			case 1:
				reject(e, "snappy bomb", "protobuf", "decompressed_too_large", 413, snappy.Encode(nil, make([]byte, md+1)), h...)
			case 2:
				reject(e, "gzipped snappy bomb", "protobuf", "decompressed_too_large", 413, gzipBytes(snappy.Encode(nil, make([]byte, md+1))), append(h, "Content-Encoding", "gzip")...)
			default:
				// Exactly the limit decompressed: within it, so the body
				// is read, and found to be no JSON.
				reject(e, "gzip at the limit", "json", "malformed", 400, gzipBytes([]byte(strings.Repeat(" ", md))), append(h, "Content-Encoding", "gzip")...)
			}
		case 11:
			if r.IntN(2) == 0 {
				reject(e, "body too large", "jsonl", "body_too_large", 413, []byte(strings.Repeat(" ", int(e.srv.cfg.MaxBody)+1)), h...)
				return
			}
			// Exactly --max-body of blank JSON lines: a push of nothing.
			code, resp := do(e, "body at the limit", "POST", "/api/v1/push/jsonl", []byte(strings.Repeat(" \n", int(e.srv.cfg.MaxBody)/2)), h...)
			want("body at the limit", code, resp, 204)
			e.m.push["jsonl"]++
		case 12:
			reject(e, "bad tenant", "json", "bad_tenant", 400, pushJSON(one(app, base, "x")), append(slices.Clone(e.auth), "X-Scope-OrgID", []string{"..", "a/b", "a b", strings.Repeat("x", 65)}[r.IntN(4)])...)
		case 13:
			if e.auth == nil || r.IntN(3) == 0 {
				// A push of nothing: accepted, timed, nothing stored.
				code, resp := do(e, "empty push", "POST", "/loki/api/v1/push", []byte(`{"streams":[{"stream":{"app":"x"},"values":[]}]}`), h...)
				want("empty push", code, resp, 204)
				e.m.push["json"]++
				return
			}
			switch r.IntN(3) {
			case 0:
				reject(e, "no credentials", "json", "unauthorized", 401, pushJSON(one(app, base, "x")))
			case 1:
				reject(e, "wrong token", "jsonl", "unauthorized", 401, pushJSONL(one(app, base, "x"), r), "Authorization", "Bearer wrong")
			default:
				reject(e, "forbidden tenant", "json", "forbidden_tenant", 403, pushJSON(one(app, base, "x")), "Authorization", "Bearer bound", "X-Scope-OrgID", "t-2")
			}
		}
	}

	// queries: endpoint name, path, whether it is a bad request.
	type qry struct {
		ep, path string
		bad      bool
	}
	queries := []qry{
		{"query_range", fmt.Sprintf("/loki/api/v1/query_range?query=%s&start=%d&end=%d&limit=50", q(`{app=~".+"} |= "timeout"`), base-int64(2*time.Hour), base+int64(time.Hour)), false},
		{"query_range", fmt.Sprintf("/loki/api/v1/query_range?query=%s&start=%d&end=%d&step=60", q(`sum by (level) (count_over_time({app="api"}[5m]))`), base-int64(time.Hour), base), false},
		{"query_range", "/loki/api/v1/query_range?query=" + q(`{app="api"`), true},
		{"query_range", fmt.Sprintf("/loki/api/v1/query_range?query=%s&start=%d&end=%d", q(`{app="api"}`), base, base-1), true},
		{"query", fmt.Sprintf("/loki/api/v1/query?query=%s&time=%d", q(`rate({app="auth"}[1h])`), base), false},
		{"query", "/loki/api/v1/query?query=" + q(`rate({app=}[1m])`), true},
		{"labels", "/loki/api/v1/labels", false},
		{"label_values", "/loki/api/v1/label/app/values", false},
		{"series", "/loki/api/v1/series?match[]=" + q(`{app="api"}`), false},
		{"index_stats", "/loki/api/v1/index/stats?query=" + q(`{app="api"}`), false},
		{"search", fmt.Sprintf("/api/v1/search?q=%s&limit=5&end=%d", q("timeout"), base+int64(time.Hour)), false},
		{"search", "/api/v1/search?start=x", true},
		{"hits", fmt.Sprintf("/api/v1/hits?q=%s&start=%d&end=%d&step=60", q("a"), base-int64(time.Hour), base+int64(time.Minute)), false},
		{"hits", "/api/v1/hits?step=-1s", true},
		{"facets", fmt.Sprintf("/api/v1/facets?q=%s&end=%d", q("e"), base+int64(time.Minute)), false},
	}
	timeouts := 0
	doQuery := func(e *oEnv) {
		t.Helper()
		qq := queries[r.IntN(len(queries))]
		tenant := e.tenants[r.IntN(len(e.tenants))]
		switch {
		case e.auth != nil && r.IntN(6) == 0:
			code, resp := do(e, "query without credentials", "GET", qq.path, nil)
			want("query without credentials", code, resp, 401)
			e.m.rejected["unauthorized"]++
			return
		case e.auth != nil && r.IntN(8) == 0:
			code, resp := do(e, "query of a forbidden tenant", "GET", qq.path, nil, "Authorization", "Bearer bound", "X-Scope-OrgID", "t-2")
			want("query of a forbidden tenant", code, resp, 403)
			e.m.rejected["forbidden_tenant"]++
			return
		case r.IntN(10) == 0:
			code, resp := do(e, "query of a bad tenant", "GET", qq.path, nil, append(slices.Clone(e.auth), "X-Scope-OrgID", "a/b")...)
			want("query of a bad tenant", code, resp, 400)
			e.m.rejected["bad_tenant"]++
			return
		case e.auth != nil && r.IntN(6) == 0:
			// Over the concurrency cap: answered 429, still timed.
			for range e.srv.cfg.MaxConcurrentQueries {
				e.srv.sem <- struct{}{}
			}
			code, resp := do(e, "query over the cap", "GET", qq.path, nil, hdrs(e, tenant)...)
			for range e.srv.cfg.MaxConcurrentQueries {
				<-e.srv.sem
			}
			want("query over the cap", code, resp, 429)
			e.m.rejected["too_many_queries"]++
			e.m.query[qq.ep]++
			return
		}
		code, resp := do(e, "query "+qq.ep, "GET", qq.path, nil, hdrs(e, tenant)...)
		e.m.query[qq.ep]++
		switch {
		case qq.bad:
			want("bad query", code, resp, 400)
		case e.srv.cfg.QueryTimeout < time.Millisecond:
			// A 1 ns timeout: whatever reads the store times out (504,
			// counted); a tenant without data or an endpoint that only
			// reads the index may answer first.
			want("query with a 1ns timeout", code, resp, 200, 504)
			if code == 504 {
				e.m.rejected["query_timeout"]++
			}
			if code == 504 {
				timeouts++
			}
		default:
			want("query", code, resp, 200)
		}
	}

	// flush writes a tenant's head into a segment; compact rewrites its
	// segments. Neither has an endpoint; hay_segments must follow.
	flush := func(e *oEnv) {
		t.Helper()
		tenant := e.tenants[r.IntN(len(e.tenants))]
		ts, err := e.srv.openTenant(tenant, false)
		if err != nil || ts == nil {
			return
		}
		if r.IntN(3) == 0 {
			if _, err := ts.w.Compact(t.Context(), store.CompactOptions{MergeBytes: int64(r.IntN(3) - 1)}); err != nil {
				t.Fatalf("%s: compact %s: %v", e.name, tenant, err)
			}
			trace = append(trace, fmt.Sprintf("%s compact %s", e.name, tenant))
			return
		}
		if err := ts.w.Flush(); err != nil {
			t.Fatalf("%s: flush %s: %v", e.name, tenant, err)
		}
		trace = append(trace, fmt.Sprintf("%s flush %s", e.name, tenant))
		e.unsynced[tenant] = 0
	}

	// burst runs pushes and queries at once, with scrapes racing them:
	// counts stay exact, pushes share fsyncs (at least one, at most one
	// each), and no scrape sees a counter go down (checked after).
	burst := func(e *oEnv) {
		t.Helper()
		type job struct {
			body   []byte
			n, nb  int
			tenant string
		}
		var jobs []job
		for range 2 + r.IntN(7) {
			st := g.streams(min(e.srv.cfg.MaxLine, 60))
			for len(st[0].entries) == 0 {
				st = g.streams(min(e.srv.cfg.MaxLine, 60))
			}
			n, nb := count(st)
			jobs = append(jobs, job{pushJSON(st), n, nb, e.tenants[r.IntN(len(e.tenants))]})
		}
		nq := r.IntN(4)
		errs := make(chan string, len(jobs)+nq+2)
		scrapes := make(chan string, 4)
		done := make(chan struct{})
		go func() { // scrapes while the burst runs
			defer close(scrapes)
			for {
				select {
				case <-done:
					return
				default:
				}
				code, body := e.goDo("GET", "/metrics", nil)
				if code != 200 {
					errs <- fmt.Sprintf("/metrics during the burst: %d", code)
					return
				}
				if _, err := metricstest.Parse(body); err != nil {
					errs <- fmt.Sprintf("/metrics during the burst: %v", err)
					return
				}
			}
		}()
		var wg sync.WaitGroup
		for _, j := range jobs {
			wg.Go(func() {
				if code, resp := e.goDo("POST", "/loki/api/v1/push", j.body, append(slices.Clone(e.auth), "X-Scope-OrgID", j.tenant)...); code != 204 {
					errs <- fmt.Sprintf("burst push: %d %s", code, resp)
				}
			})
		}
		for range nq {
			// Under the cap of A (2) only when there are at most 2 at once:
			// a label query answers 200 or, over the cap, 429.
			wg.Go(func() {
				code, resp := e.goDo("GET", "/loki/api/v1/labels", nil, e.auth...)
				switch code {
				case 200:
				case 429:
					errs <- "429"
				default:
					errs <- fmt.Sprintf("burst query: %d %s", code, resp)
				}
			})
		}
		wg.Wait()
		close(done)
		for range scrapes {
		}
		close(errs)
		for msg := range errs {
			if msg == "429" {
				e.m.rejected["too_many_queries"]++
				continue
			}
			t.Fatalf("%s: %s", e.name, msg)
		}
		trace = append(trace, fmt.Sprintf("%s burst of %d pushes and %d queries", e.name, len(jobs), nq))
		e.m.query["labels"] += float64(nq)
		tenants := map[string]bool{}
		for _, j := range jobs {
			e.m.push["json"]++
			e.m.lines += float64(j.n)
			e.m.bytes += float64(j.nb)
			e.unsynced[j.tenant] += j.n
			tenants[j.tenant] = true
		}
		// Each tenant's writer commits its own groups: at least one fsync
		// per tenant, at most one per push.
		e.m.fsyncMin += float64(len(tenants))
		e.m.fsync += float64(len(jobs))
		e.m.burstPushes += float64(len(jobs))
		e.m.burstQueries += float64(nq)
	}

	start := time.Now()
	rounds := 0
	for time.Since(start) < 2*time.Second && rounds < 40 {
		rounds++
		before := map[*oEnv]scrape{}
		for _, e := range envs {
			sc := e.scrape(t)
			e.monotonic(t, sc)
			before[e] = sc
		}
		t0 := time.Now()
		for range 5 + r.IntN(20) {
			e := envs[r.IntN(len(envs))]
			switch k := r.IntN(10); {
			case k < 3:
				tenant := e.tenants[r.IntN(len(e.tenants))]
				maxLine := e.srv.cfg.MaxLine
				if e.srv.cfg.TruncateLines {
					maxLine *= 2
				}
				push(e, tenant, g.streams(maxLine))
			case k < 6:
				pushReject(e)
			case k < 9:
				doQuery(e)
			default:
				if r.IntN(2) == 0 {
					burst(e)
				} else {
					flush(e)
				}
			}
		}
		elapsed := time.Since(t0)
		for _, e := range envs {
			after := e.scrape(t)
			e.monotonic(t, after)
			e.compare(t, before[e], after, elapsed)
		}
		if t.Failed() {
			t.Fatalf("round %d; trace:\n%s", rounds, strings.Join(trace, "\n"))
		}
		trace = trace[:0]
	}
	t.Logf("seed %d: %d rounds, %d queries timed out", seed, rounds, timeouts)
}

// goDo is testEnv.do for other goroutines than the test's: a transport
// error comes back as status 0 rather than through t.Fatal.
func (e *oEnv) goDo(method, path string, body []byte, hdr ...string) (int, string) {
	req, err := http.NewRequest(method, e.ts.URL+path, bytes.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err.Error()
	}
	return resp.StatusCode, string(b)
}
