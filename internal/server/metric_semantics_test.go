package server

// An oracle for the numbers metric queries return, written from Loki's
// LogQL documentation (metric queries, query reference, HTTP API) and
// doc.go, independently of loki.go and metricq.go:
//
//   - a range function is evaluated at start, start+step, ... <= end
//     (query_range) or at time (query), each over the entries in
//     (t-range, t]; count_over_time counts them, rate divides the count by
//     the range in seconds, bytes_over_time sums the lines' bytes (UTF-8
//     bytes, not characters), bytes_rate divides that by the range;
//   - a series (one per label set after the pipeline: stream labels plus
//     extracted ones, an empty value being no label) has a point only where
//     its window holds an entry; a series without points is not answered;
//   - sum, count, min, max, avg aggregate the series present at a step,
//     grouped by the labels `by` lists (by (): one group) or by all labels
//     but those `without` lists (without (): each label set alone); a group
//     with no series at a step has no point; aggregations nest;
//   - arithmetic on vector(n) and numbers follows LogQL's precedence (the
//     expressions drawn here are fully parenthesized);
//   - | json and | logfmt as internal/query documents them (nested keys
//     joined by "_", arrays skipped, numbers keep their text, a key a
//     stream label has gets "_extracted"); a series still carrying
//     __error__ fails the query with Loki's pipeline error, which Loki
//     raises for series that have a point at some step;
//   - timestamps are seconds as a JSON number and values strings; no NaN
//     or Inf comes out of these queries.
//
// Entries are drawn on and one nanosecond off step and window boundaries,
// duplicated, at the same nanosecond in several streams, with lines of
// 1 to ~60 bytes mixing ASCII, multi-byte UTF-8 and emoji, pushed out of
// order in batches, with flushes and compactions in between.
//
// What this oracle does not assert, because Haystack differs from Loki
// there (notes/metric-findings.md): the order of the series, the exact
// text of a timestamp (within 1 µs of the step is accepted), a pipeline
// error from an entry that lies between two windows, and the precedence
// of unparenthesized arithmetic.
//
// HAY_METRICSEM_SEED=N reruns one seed.

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"math/rand/v2"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"haystack/internal/segment"
	"haystack/internal/store"
	"haystack/internal/testseed"
)

type msStream struct {
	labels map[string]string
}

type msEntry struct {
	stream int
	t      int64
	line   string
}

type msData struct {
	origin  int64
	streams []msStream
	es      []msEntry
	levels  bool // the server adds detected_level (wantLevel's)
}

// msLabelsText is a label set in Loki's push form.
func msLabelsText(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+strconv.Quote(m[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// msKey is a canonical key of a label set.
func msKey(m map[string]string) string {
	var ks []string
	for k, v := range m {
		ks = append(ks, strconv.Quote(k)+"="+strconv.Quote(v))
	}
	slices.Sort(ks)
	return strings.Join(ks, ",")
}

var msWords = []string{"ok", "err", "timeout", "é", "日本語", "🙂", "x1", "deadline exceeded"}

// msLine draws a line: plain words, a JSON object or a logfmt line (which
// always starts "fmt=1 ", so logfmt queries can select them).
func msLine(r *rand.Rand) string {
	switch r.IntN(3) {
	case 0:
		var w []string
		for range 1 + r.IntN(5) {
			w = append(w, msWords[r.IntN(len(msWords))])
		}
		if r.IntN(6) == 0 { // a stack trace pushed as one entry, CRLF
			w = append(w, "\r\n\tat x.Y(Z.java:1)")
		}
		if r.IntN(25) == 0 { // longer than a block
			w = append(w, strings.Repeat("日本語 ok ", 50+r.IntN(250)))
		}
		return strings.Join(w, " ")
	case 1:
		var kv []string
		if r.IntN(2) == 0 {
			kv = append(kv, fmt.Sprintf(`"level":%q`, []string{"info", "warn", "error"}[r.IntN(3)]))
		}
		if r.IntN(2) == 0 {
			kv = append(kv, fmt.Sprintf(`"n":%s`, []string{"1", "2", "3", "2.50", "-1"}[r.IntN(5)]))
		}
		if r.IntN(3) == 0 {
			kv = append(kv, fmt.Sprintf(`"app":%q`, []string{"j", "é"}[r.IntN(2)]))
		}
		if r.IntN(3) == 0 {
			kv = append(kv, fmt.Sprintf(`"req":{"id":%q,"tags":[1,2]}`, []string{"r1", "r2"}[r.IntN(2)]))
		}
		if r.IntN(4) == 0 {
			kv = append(kv, `"msg":""`, `"ok":true`, `"nil":null`)
		}
		if r.IntN(4) == 0 {
			kv = append(kv, fmt.Sprintf(`"text":%q`, msWords[r.IntN(len(msWords))]))
		}
		return "{" + strings.Join(kv, ",") + "}"
	default:
		kv := []string{"fmt=1"}
		if r.IntN(2) == 0 {
			kv = append(kv, "level="+[]string{"info", "warn", "error"}[r.IntN(3)])
		}
		if r.IntN(2) == 0 {
			kv = append(kv, "n="+[]string{"1", "2", "3"}[r.IntN(3)])
		}
		if r.IntN(3) == 0 {
			kv = append(kv, fmt.Sprintf("msg=%q", msWords[r.IntN(len(msWords))]))
		}
		if r.IntN(4) == 0 {
			kv = append(kv, "env=stage")
		}
		return strings.Join(kv, " ")
	}
}

func msGen(r *rand.Rand) *msData {
	d := &msData{origin: base - 3600e9 + 123_000_000}
	apps := []string{"a", "b", "a b", "é", `q"t`}
	seen := map[string]bool{}
	for len(d.streams) < 3+r.IntN(4) {
		m := map[string]string{"app": apps[r.IntN(len(apps))]}
		if v := []string{"", "prod", "dev"}[r.IntN(3)]; v != "" {
			m["env"] = v
		}
		if v := []string{"", "info", "error"}[r.IntN(3)]; v != "" {
			m["level"] = v
		}
		if k := msKey(m); !seen[k] {
			seen[k] = true
			d.streams = append(d.streams, msStream{labels: m})
		}
	}
	widths := []int64{1e6, 250e6, 1e9, 5e9, 10e9, 60e9}
	n := 40 + r.IntN(160)
	for range n {
		var t int64
		switch r.IntN(5) {
		case 0, 1: // on a boundary of some width
			w := widths[r.IntN(len(widths))]
			t = d.origin + r.Int64N(600e9)/w*w
		case 2: // one ns off it
			w := widths[r.IntN(len(widths))]
			t = d.origin + r.Int64N(600e9)/w*w + int64(r.IntN(2)*2-1)
		case 3: // the time of an entry already drawn (any stream)
			if len(d.es) > 0 {
				p := d.es[r.IntN(len(d.es))]
				if r.IntN(3) == 0 { // an exact duplicate
					d.es = append(d.es, p)
					continue
				}
				t = p.t
				break
			}
			fallthrough
		default:
			t = d.origin + r.Int64N(600e9)
		}
		d.es = append(d.es, msEntry{stream: r.IntN(len(d.streams)), t: t, line: msLine(r)})
	}
	return d
}

// msPush pushes the entries in random batches, out of time order, and
// flushes or compacts the store part way through.
func msPush(t *testing.T, env *testEnv, r *rand.Rand, d *msData) {
	t.Helper()
	perm := r.Perm(len(d.es))
	for i := 0; i < len(perm); {
		n := 1 + r.IntN(50)
		by := map[int][]PushEntry{}
		for _, j := range perm[i:min(i+n, len(perm))] {
			e := d.es[j]
			by[e.stream] = append(by[e.stream], PushEntry{e.t, e.line})
		}
		var ps []PushStream
		for s := range d.streams {
			if len(by[s]) > 0 {
				ps = append(ps, PushStream{Labels: msLabelsText(d.streams[s].labels), Entries: by[s]})
			}
		}
		env.mustPush("/loki/api/v1/push", protoBody(ps), "Content-Type", "application/x-protobuf")
		i += n
		if k := r.IntN(8); k < 3 {
			env.flushDefault(t, k == 0)
		}
	}
}

// ---- the log query part, re-implemented ----

// msSelectors are stream selectors with their meaning.
var msSelectors = []struct {
	text  string
	match func(map[string]string) bool
}{
	{`{app=~".+"}`, func(m map[string]string) bool { return true }},
	{`{app="a"}`, func(m map[string]string) bool { return m["app"] == "a" }},
	{`{env="prod"}`, func(m map[string]string) bool { return m["env"] == "prod" }},
	{`{app!="b", app=~".+"}`, func(m map[string]string) bool { return m["app"] != "b" }},
	{`{level=~"info|error"}`, func(m map[string]string) bool { return m["level"] == "info" || m["level"] == "error" }},
	{`{app=~"a.*|é"}`, func(m map[string]string) bool { return strings.HasPrefix(m["app"], "a") || m["app"] == "é" }},
}

var msFilters = []struct {
	text  string
	match func(string) bool
}{
	{``, func(string) bool { return true }},
	{` |= "e"`, func(l string) bool { return strings.Contains(l, "e") }},
	{` != "ok"`, func(l string) bool { return !strings.Contains(l, "ok") }},
	{` |~ "[0-9]"`, regexp.MustCompile(`[0-9]`).MatchString},
	{` |= "é"`, func(l string) bool { return strings.Contains(l, "é") }},
	{` |~ "(?i)ERR"`, func(l string) bool { return strings.Contains(strings.ToLower(l), "err") }},
	{` !~ "ok|err" |= "t"`, func(l string) bool {
		return !strings.Contains(l, "ok") && !strings.Contains(l, "err") && strings.Contains(l, "t")
	}},
}

// msParser is a pipeline after the line filters.
type msParser struct {
	text  string
	kind  string // "", "json", "logfmt"
	errOK bool   // __error__ may remain (the query may fail)
	dropE bool   // drop __error__, __error_details__ (failed lines count, unparsed)
	minN  bool   // | n >= 2 after the error filter
	drop  []string
	keep  []string // | keep: only these labels (none of the queries here errs)
}

var msParsers = []msParser{
	{text: ``},
	{text: ` | json | __error__=""`, kind: "json"},
	{text: ` | json | __error__="" | n >= 2`, kind: "json", minN: true},
	{text: ` | json | drop __error__, __error_details__`, kind: "json", dropE: true},
	{text: ` | drop env`, drop: []string{"env"}},
	{text: ` | keep app, level`, keep: []string{"app", "level"}},
	{text: ` | json | __error__="" | drop level, n`, kind: "json", drop: []string{"level", "n"}},
	{text: ` |= "fmt=1" | logfmt | keep level, fmt, env_extracted`, kind: "logfmt", keep: []string{"level", "fmt", "env_extracted"}},
	{text: ` | json`, kind: "json", errOK: true},
	{text: ` |= "fmt=1" | logfmt`, kind: "logfmt"},
	{text: ` |= "fmt=1" | logfmt | __error__=""`, kind: "logfmt"},
}

// msSanitize maps a key to a label name as LogQL does.
func msSanitize(k string) string {
	var b strings.Builder
	for i, c := range k {
		if i == 0 && c >= '0' && c <= '9' {
			b.WriteByte('_')
		}
		if c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// msExtract returns a line's extracted fields in order, and whether the
// parser failed.
func msExtract(kind, line string) (kv [][2]string, failed bool) {
	switch kind {
	case "json":
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		var top map[string]any
		if err := dec.Decode(&top); err != nil || dec.More() {
			return nil, true
		}
		var walk func(prefix string, m map[string]any)
		walk = func(prefix string, m map[string]any) {
			for _, k := range slices.Sorted(maps.Keys(m)) {
				switch v := m[k].(type) {
				case map[string]any:
					walk(prefix+k+"_", v)
				case []any:
				case string:
					kv = append(kv, [2]string{prefix + k, v})
				case json.Number:
					kv = append(kv, [2]string{prefix + k, string(v)})
				case bool:
					kv = append(kv, [2]string{prefix + k, strconv.FormatBool(v)})
				case nil:
					kv = append(kv, [2]string{prefix + k, ""})
				}
			}
		}
		walk("", top)
	case "logfmt":
		// The lines drawn are simple: key=value and key="quoted".
		for s := line; s != ""; {
			s = strings.TrimLeft(s, " ")
			eq := strings.IndexByte(s, '=')
			if eq < 0 {
				break
			}
			k := s[:eq]
			s = s[eq+1:]
			var v string
			if strings.HasPrefix(s, `"`) {
				end := strings.IndexByte(s[1:], '"') + 1
				v = s[1:end]
				s = s[end+1:]
			} else {
				sp := strings.IndexByte(s, ' ')
				if sp < 0 {
					sp = len(s)
				}
				v, s = s[:sp], s[sp:]
			}
			kv = append(kv, [2]string{k, v})
		}
	}
	return kv, false
}

// msQuery is a log query as the API reads it and as the oracle does.
type msQuery struct {
	text   string
	sel    func(map[string]string) bool
	filter func(string) bool
	p      msParser
}

// eval returns an entry's labels after the pipeline, whether it passes,
// and whether its labels carry __error__.
func (q *msQuery) eval(d *msData, e msEntry) (map[string]string, bool, bool) {
	// The stream's labels as stored: service_name discovered from app.
	st := withServiceName(d.streams[e.stream].labels)
	if !q.sel(st) || !q.filter(e.line) {
		return nil, false, false
	}
	if q.p.kind == "logfmt" && !strings.Contains(e.line, "fmt=1") {
		return nil, false, false
	}
	out := map[string]string{}
	for k, v := range st {
		out[k] = v
	}
	if d.levels {
		// The entry's metadata: the level its stream's labels or its
		// line gives (a label, as Loki 3 gives structured metadata).
		if l := wantLevel(st, nil, e.line); l != "" {
			out["detected_level"] = l
		}
	}
	if q.p.kind == "" {
		return q.p.dropKeep(out), true, false
	}
	kv, failed := msExtract(q.p.kind, e.line)
	if failed {
		if q.p.dropE {
			return out, true, false
		}
		if q.p.errOK {
			out["__error__"] = "JSONParserErr"
			return out, true, true
		}
		return nil, false, false // __error__="" drops it
	}
	for _, f := range kv {
		name := msSanitize(f[0])
		if _, ok := st[name]; ok {
			name += "_extracted"
		}
		if _, ok := out[name]; ok && name != "" {
			if _, stream := st[name]; !stream {
				continue // the first value wins
			}
		}
		if f[1] != "" {
			out[name] = f[1]
		}
	}
	if q.p.minN {
		n, ok := out["n"]
		if !ok {
			return nil, false, false
		}
		if f, err := strconv.ParseFloat(n, 64); err != nil || f < 2 {
			return nil, false, false
		}
	}
	return q.p.dropKeep(out), true, false
}

// dropKeep applies | drop and | keep of bare names.
func (p *msParser) dropKeep(ls map[string]string) map[string]string {
	for _, n := range p.drop {
		delete(ls, n)
	}
	if p.keep != nil {
		for n := range ls {
			if !slices.Contains(p.keep, n) {
				delete(ls, n)
			}
		}
	}
	return ls
}

// ---- the metric expression, re-implemented ----

type msExpr struct {
	kind    string // "range", "agg", "const", "binop"
	fn      string
	rng     int64
	rngText string
	q       *msQuery
	by      []string
	without bool
	grouped bool
	suffix  bool
	after   bool // range: written right after the selector
	inner   *msExpr
	val     float64
	op      byte
	l, r    *msExpr
}

func (x *msExpr) String() string {
	switch x.kind {
	case "range":
		if i := strings.IndexByte(x.q.text, '}') + 1; x.after && i < len(x.q.text) {
			// The range after the selector, the pipeline after it.
			return fmt.Sprintf("%s(%s[%s]%s)", x.fn, x.q.text[:i], x.rngText, x.q.text[i:])
		}
		return fmt.Sprintf("%s(%s [%s])", x.fn, x.q.text, x.rngText)
	case "agg":
		g := ""
		if x.grouped {
			w := "by"
			if x.without {
				w = "without"
			}
			g = fmt.Sprintf(" %s (%s)", w, strings.Join(x.by, ", "))
		}
		if x.suffix {
			return fmt.Sprintf("%s(%s)%s", x.fn, x.inner, g)
		}
		return fmt.Sprintf("%s%s (%s)", x.fn, g, x.inner)
	case "const":
		if x.fn == "vector" {
			return fmt.Sprintf("vector(%s)", strconv.FormatFloat(x.val, 'f', -1, 64))
		}
		return strconv.FormatFloat(x.val, 'f', -1, 64)
	}
	side := func(s *msExpr) string {
		if s.kind == "binop" {
			return "(" + s.String() + ")"
		}
		return s.String()
	}
	return side(x.l) + " " + string(x.op) + " " + side(x.r)
}

var msRanges = []struct {
	text string
	ns   int64
}{{"1ms", 1e6}, {"250ms", 250e6}, {"1s", 1e9}, {"10s", 10e9}, {"90s", 90e9}, {"1m", 60e9}, {"5m", 300e9}, {"1h", 3600e9}}

var msGroupLabels = []string{"app", "env", "level", "level_extracted", "app_extracted", "n", "req_id", "fmt", "nope"}

func msRandRange(r *rand.Rand) *msExpr {
	rg := msRanges[r.IntN(len(msRanges))]
	s := msSelectors[r.IntN(len(msSelectors))]
	f := msFilters[r.IntN(len(msFilters))]
	p := msParsers[r.IntN(len(msParsers))]
	q := &msQuery{text: s.text + f.text + p.text, sel: s.match, filter: f.match, p: p}
	return &msExpr{kind: "range", fn: []string{"count_over_time", "rate", "bytes_over_time", "bytes_rate"}[r.IntN(4)], rng: rg.ns, rngText: rg.text, q: q, after: r.IntN(3) == 0}
}

func msRandAgg(r *rand.Rand, inner *msExpr) *msExpr {
	x := &msExpr{kind: "agg", fn: []string{"sum", "count", "min", "max", "avg"}[r.IntN(5)], inner: inner, suffix: r.IntN(3) == 0}
	switch r.IntN(5) {
	case 0: // no grouping
	case 1:
		x.grouped, x.by = true, []string{}
	case 2:
		x.grouped, x.without, x.by = true, true, []string{}
	default:
		x.grouped, x.without = true, r.IntN(3) == 0
		for _, l := range msGroupLabels {
			if r.IntN(3) == 0 {
				x.by = append(x.by, l)
			}
		}
	}
	return x
}

// msRandExpr draws a metric expression: a range function, under zero to
// two aggregations.
func msRandExpr(r *rand.Rand) *msExpr {
	x := msRandRange(r)
	for range r.IntN(3) {
		x = msRandAgg(r, x)
	}
	return x
}

// msRandConst draws fully parenthesized arithmetic over vector(n) and
// numbers, with at least one vector(n) (vector op scalar is a vector).
func msRandConst(r *rand.Rand, depth int) *msExpr {
	if depth == 0 || r.IntN(3) == 0 {
		v := float64(r.IntN(21)-5) / []float64{1, 2, 4}[r.IntN(3)]
		return &msExpr{kind: "const", fn: []string{"", "vector"}[r.IntN(2)], val: v}
	}
	x := &msExpr{kind: "binop", op: "+-*/"[r.IntN(4)], l: msRandConst(r, depth-1), r: msRandConst(r, depth-1)}
	return x
}

func (x *msExpr) hasVector() bool {
	switch x.kind {
	case "const":
		return x.fn == "vector"
	case "binop":
		return x.l.hasVector() || x.r.hasVector()
	}
	return false
}

// constVal evaluates arithmetic; ok is false on a division by zero
// (which Loki and Haystack answer differently; not drawn).
func (x *msExpr) constVal() (float64, bool) {
	if x.kind == "const" {
		return x.val, true
	}
	a, ok1 := x.l.constVal()
	b, ok2 := x.r.constVal()
	if !ok1 || !ok2 {
		return 0, false
	}
	switch x.op {
	case '+':
		return a + b, true
	case '-':
		return a - b, true
	case '*':
		return a * b, true
	}
	if b == 0 {
		return 0, false
	}
	return a / b, true
}

// msSeries is an evaluated series: labels and a point per step time.
type msSeries struct {
	labels map[string]string
	pts    map[int64]float64
}

// errPipeline says the query must fail with a pipeline error (Loki:
// a series carrying __error__ has a point); errBetween that an errored
// entry is read but lies in no window (Haystack fails, Loki does not).
type msEvalErr struct {
	pipeline, between bool
	end               int64 // query_range's end (Haystack reads up to it)
}

func (x *msExpr) eval(d *msData, steps []int64, ee *msEvalErr) map[string]*msSeries {
	out := map[string]*msSeries{}
	switch x.kind {
	case "range":
		type acc struct {
			labels map[string]string
			ts, sz []int64
			err    bool
		}
		groups := map[string]*acc{}
		for _, e := range d.es {
			ls, ok, errd := x.q.eval(d, e)
			if !ok {
				continue
			}
			k := msKey(ls)
			if groups[k] == nil {
				groups[k] = &acc{labels: ls, err: errd}
			}
			groups[k].ts = append(groups[k].ts, e.t)
			groups[k].sz = append(groups[k].sz, int64(len(e.line)))
		}
		for k, a := range groups {
			se := &msSeries{labels: a.labels, pts: map[int64]float64{}}
			for _, t := range steps {
				var n, b int64
				for i, et := range a.ts {
					if et > t-x.rng && et <= t {
						n++
						b += a.sz[i]
					}
				}
				if n == 0 {
					continue
				}
				sec := float64(x.rng) / 1e9
				switch x.fn {
				case "count_over_time":
					se.pts[t] = float64(n)
				case "rate":
					se.pts[t] = float64(n) / sec
				case "bytes_over_time":
					se.pts[t] = float64(b)
				case "bytes_rate":
					se.pts[t] = float64(b) / sec
				}
			}
			if a.err {
				if len(se.pts) > 0 {
					ee.pipeline = true
				} else {
					for _, et := range a.ts {
						if et > steps[0]-x.rng && et <= max(steps[len(steps)-1], ee.end) {
							ee.between = true
						}
					}
				}
			}
			if len(se.pts) > 0 {
				out[k] = se
			}
		}
	case "agg":
		in := x.inner.eval(d, steps, ee)
		groups := map[string]map[int64][]float64{}
		glabels := map[string]map[string]string{}
		for _, se := range in {
			g := map[string]string{}
			for k, v := range se.labels {
				if slices.Contains(x.by, k) != x.without {
					g[k] = v
				}
			}
			gk := msKey(g)
			glabels[gk] = g
			if groups[gk] == nil {
				groups[gk] = map[int64][]float64{}
			}
			for t, v := range se.pts {
				groups[gk][t] = append(groups[gk][t], v)
			}
		}
		for gk, pts := range groups {
			se := &msSeries{labels: glabels[gk], pts: map[int64]float64{}}
			for t, vs := range pts {
				var v float64
				switch x.fn {
				case "sum", "avg":
					for _, f := range vs {
						v += f
					}
					if x.fn == "avg" {
						v /= float64(len(vs))
					}
				case "count":
					v = float64(len(vs))
				case "min":
					v = slices.Min(vs)
				case "max":
					v = slices.Max(vs)
				}
				se.pts[t] = v
			}
			out[gk] = se
		}
	default: // constant arithmetic
		v, _ := x.constVal()
		se := &msSeries{labels: map[string]string{}, pts: map[int64]float64{}}
		for _, t := range steps {
			se.pts[t] = v
		}
		out[""] = se
	}
	return out
}

// exact reports whether the expression's values are integers computed
// without division (compared exactly); others within 1e-12.
func (x *msExpr) exact() bool {
	switch x.kind {
	case "range":
		return x.fn == "count_over_time" || x.fn == "bytes_over_time"
	case "agg":
		return x.fn != "avg" && x.inner.exact()
	}
	return false
}

// ---- the test ----

// msTimeParam writes t as Loki's API reads a time: Unix nanoseconds, RFC
// 3339 with nanoseconds, or Unix seconds with a decimal fraction (exact).
func msTimeParam(r *rand.Rand, t int64) string {
	switch r.IntN(3) {
	case 0:
		return time.Unix(0, t).UTC().Format(time.RFC3339Nano)
	case 1:
		if t > 0 {
			frac := strings.TrimRight(fmt.Sprintf("%09d", t%1e9), "0")
			if frac == "" {
				return strconv.FormatInt(t/1e9, 10)
			}
			return fmt.Sprintf("%d.%s", t/1e9, frac)
		}
	}
	return strconv.FormatInt(t, 10)
}

// msSecToNs reads a JSON number of seconds exactly (its decimal text),
// as nanoseconds rounded to the nearest.
func msSecToNs(s string) (int64, error) {
	rt, ok := new(big.Rat).SetString(s)
	if !ok {
		return 0, fmt.Errorf("timestamp %q is not a number", s)
	}
	rt.Mul(rt, big.NewRat(1e9, 1))
	f, _ := rt.Float64()
	return int64(math.Round(f)), nil
}

type msResp struct {
	Status string `json:"status"`
	Data   struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string   `json:"metric"`
			Values [][2]json.Number    `json:"values"`
			Value  *[2]json.RawMessage `json:"value"`
		} `json:"result"`
	} `json:"data"`
}

func msSeeds(t *testing.T, n uint64) []uint64 {
	if v := os.Getenv("HAY_METRICSEM_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("HAY_METRICSEM_SEED=%q", v)
		}
		return []uint64{s}
	}
	seeds := make([]uint64, n)
	s0 := testseed.Seed(t, "HAY_METRICSEM_SEED")
	for i := range seeds {
		seeds[i] = s0 + uint64(i)
	}
	return seeds
}

// msEach runs body once for each seed of msSeeds(t, n), in a subtest
// named by the seed, with a generator on stream and, on failure, the
// command that reruns that seed.
func msEach(t *testing.T, n, stream uint64, body func(t *testing.T, seed uint64, r *rand.Rand)) {
	t.Helper()
	for _, seed := range msSeeds(t, n) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("rerun: HAY_METRICSEM_SEED=%d go test -run %s ./internal/server", seed, strings.Split(t.Name(), "/")[0])
				}
			}()
			body(t, seed, rand.New(rand.NewPCG(seed, stream)))
		})
	}
}

func TestMetricSemantics(t *testing.T) {
	var total, points, nonEmpty int
	msEach(t, 6, 0x6d73, func(t *testing.T, seed uint64, r *rand.Rand) {
		env := newEnv(t, func(c *Config) {
			c.Store = store.Options{HeadBytes: 4 << 10, Segment: segment.Options{BlockSize: 512 << (seed % 3)}}
		})
		d := msGen(r)
		d.levels = env.levelsOn()
		msPush(t, env, r, d)
		for range 150 {
			np, ok := msCheck(t, env, r, d)
			total++
			points += np
			if ok {
				nonEmpty++
			}
		}
	})
	t.Logf("%d metric queries compared, %d with series, %d points", total, nonEmpty, points)
}

// msCheck draws one query, runs it and compares the answer with the
// oracle's. It returns the points compared and whether any series was.
func msCheck(t *testing.T, env *testEnv, r *rand.Rand, d *msData) (int, bool) {
	t.Helper()
	var x *msExpr
	if r.IntN(12) == 0 {
		for x == nil || !x.hasVector() || !func() bool { _, ok := x.constVal(); return ok }() {
			x = msRandConst(r, 3)
		}
	} else {
		x = msRandExpr(r)
	}
	pick := func() int64 {
		e := d.es[r.IntN(len(d.es))].t
		switch r.IntN(4) {
		case 0:
			return e
		case 1: // a window's open edge on an entry, or one ns either side
			return e + msRanges[r.IntN(len(msRanges))].ns + int64(r.IntN(3)-1)
		case 2:
			return e + int64(r.IntN(3)-1)
		}
		return d.origin + r.Int64N(660e9)
	}
	p := url.Values{"query": {x.String()}}
	path := "/loki/api/v1/query_range"
	instant := r.IntN(4) == 0
	var steps []int64
	var ee msEvalErr
	if instant {
		at := pick()
		path = "/loki/api/v1/query"
		p.Set("time", msTimeParam(r, at))
		steps = []int64{at}
	} else {
		start := pick()
		step := []int64{1e6, 250e6, 1e9, 5e9, 10e9, 60e9, 90e9}[r.IntN(7)]
		end := start + int64(r.IntN(120))*step + int64(r.IntN(3))*step/2
		p.Set("start", msTimeParam(r, start))
		p.Set("end", msTimeParam(r, end))
		switch r.IntN(4) {
		case 0:
			p.Set("step", time.Duration(step).String())
		case 1:
			p.Set("step", strconv.FormatFloat(float64(step)/1e9, 'f', -1, 64))
		case 2:
			// Loki's default: a 250th of the range in whole seconds, at least 1.
			step = max(1, (end-start)/1e9/250) * 1e9
		default:
			p.Set("step", time.Duration(step).String())
		}
		ee.end = end
		for s := start; s <= end; s += step {
			steps = append(steps, s)
		}
	}
	desc := "GET " + path + "?" + p.Encode()
	want := x.eval(d, steps, &ee)
	code, body := env.get(path + "?" + p.Encode())
	if ee.pipeline {
		if code != 400 || !strings.Contains(body, "pipeline error") {
			t.Fatalf("%s: a series with __error__ has a point: want 400 pipeline error, got %d %.300s", desc, code, body)
		}
		return 0, false
	}
	if ee.between {
		return 0, false // notes/metric-findings.md: Haystack fails, Loki answers
	}
	if code != 200 {
		t.Fatalf("%s: status %d: %.400s", desc, code, body)
	}
	if strings.Contains(body, "NaN") || strings.Contains(body, "Inf") {
		t.Fatalf("%s: NaN or Inf in the answer: %.400s", desc, body)
	}
	var resp msResp
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&resp); err != nil {
		t.Fatalf("%s: %v: %.300s", desc, err, body)
	}
	wantType := "matrix"
	if instant {
		wantType = "vector"
	}
	if resp.Status != "success" || resp.Data.ResultType != wantType {
		t.Fatalf("%s: status %q, resultType %q, want success and %s", desc, resp.Status, resp.Data.ResultType, wantType)
	}
	exact := x.exact()
	seen := map[string]bool{}
	npts := 0
	for _, se := range resp.Data.Result {
		k := msKey(se.Metric)
		if seen[k] {
			t.Fatalf("%s: series %s twice", desc, k)
		}
		seen[k] = true
		w := want[k]
		if w == nil {
			t.Fatalf("%s: unexpected series {%s}; want %d series: %v", desc, k, len(want), slices.Sorted(maps.Keys(want)))
		}
		vals := se.Values
		if instant {
			if se.Value == nil || se.Values != nil {
				t.Fatalf("%s: series %s: a vector sample wants value, not values", desc, k)
			}
			var vs string
			if err := json.Unmarshal(se.Value[1], &vs); err != nil {
				t.Fatalf("%s: series %s: value %s is not a string", desc, k, se.Value[1])
			}
			vals = [][2]json.Number{{json.Number(se.Value[0]), json.Number(vs)}}
		}
		if len(vals) == 0 {
			t.Fatalf("%s: series %s answered with no points", desc, k)
		}
		if len(vals) != len(w.pts) {
			t.Fatalf("%s: series {%s}: %d points, want %d: got %v want %v", desc, k, len(vals), len(w.pts), vals, w.pts)
		}
		si := 0
		for _, v := range vals {
			ns, err := msSecToNs(string(v[0]))
			if err != nil {
				t.Fatalf("%s: %v", desc, err)
			}
			// The next step time with a point, in order; the text must
			// name it within 1 µs (float seconds).
			for si < len(steps) {
				if _, ok := w.pts[steps[si]]; ok {
					break
				}
				si++
			}
			if si == len(steps) {
				t.Fatalf("%s: series {%s}: a point at %s past the expected ones", desc, k, v[0])
			}
			st := steps[si]
			si++
			if d := ns - st; d < -1000 || d > 1000 {
				t.Fatalf("%s: series {%s}: point at %s (%d ns), want the step at %d ns", desc, k, v[0], ns, st)
			}
			gv, err := strconv.ParseFloat(string(v[1]), 64)
			if err != nil {
				t.Fatalf("%s: series {%s}: value %q", desc, k, v[1])
			}
			wv := w.pts[st]
			if gv != wv && (exact || math.Abs(gv-wv) > 1e-12*math.Max(math.Abs(gv), math.Abs(wv))) {
				t.Fatalf("%s: series {%s} at %d: %v, want %v", desc, k, st, gv, wv)
			}
			npts++
		}
	}
	for k := range want {
		if !seen[k] {
			t.Fatalf("%s: missing series {%s} with %d points", desc, k, len(want[k].pts))
		}
	}
	return npts, len(want) > 0
}

// TestMetricRefusals: every LogQL function and operator Loki documents
// that Haystack does not evaluate is refused with a 400 whose error names
// what was refused, never answered with numbers (or a 500).
func TestMetricRefusals(t *testing.T) {
	env := newEnv(t, nil)
	env.mustPush("/loki/api/v1/push", jsonPush(`{"app":"a"}`, base-1e9, `{"n":1}`))
	for _, c := range []struct{ query, names string }{
		{`stddev(count_over_time({app="a"}[1m]))`, "stddev"},
		{`stdvar(count_over_time({app="a"}[1m]))`, "stdvar"},
		{`approx_topk(1, count_over_time({app="a"}[1m]))`, "approx_topk"},
		{`count_over_time({app="a"} | json | unwrap n [1m])`, "count_over_time with unwrap"},
		{`count_over_time({app="a"}[1m:10s])`, "1m:10s"},
		// sort, sort_desc, label_replace, absent_over_time, offset and
		// group_left/group_right are evaluated (metricq_fn_test.go).
	} {
		for _, path := range []string{"/loki/api/v1/query?time=1700000000&query=", "/loki/api/v1/query_range?start=1699999000&end=1700000000&step=60&query="} {
			code, body := env.get(path + url.QueryEscape(c.query))
			var e struct {
				Error string `json:"error"`
			}
			if code != 400 || json.Unmarshal([]byte(body), &e) != nil || !strings.Contains(e.Error, c.names) {
				t.Errorf("%s%s: %d %.300s; want 400 with an error naming %q", path, c.query, code, body, c.names)
			}
		}
	}
}
