package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"haystack/internal/ingest"
	"haystack/internal/query"
	"haystack/internal/search"
	"haystack/internal/segment"
	"haystack/internal/store"
)

// lokiStream is one stream of a "streams" result.
type lokiStream struct {
	Stream map[string]string `json:"stream"`
	Values [][2]string       `json:"values"`
	// cats, with categorize-labels, is each value's third element.
	cats []lokiCats
}

// lokiCats is the third element of a value in Loki's categorize-labels
// encoding: the entry's structured metadata and parsed labels, each only
// when it has some (so {} for neither).
type lokiCats struct {
	StructuredMetadata map[string]string `json:"structuredMetadata,omitempty"`
	Parsed             map[string]string `json:"parsed,omitempty"`
}

// MarshalJSON writes [ts, line] values, or [ts, line, {...}] when the
// stream is categorized (as Loki 3 writes every value then).
func (s *lokiStream) MarshalJSON() ([]byte, error) {
	type plain lokiStream // without this method
	if s.cats == nil {
		return json.Marshal((*plain)(s))
	}
	values := make([][3]any, len(s.Values))
	for i, v := range s.Values {
		values[i] = [3]any{v[0], v[1], s.cats[i]}
	}
	return json.Marshal(struct {
		Stream map[string]string `json:"stream"`
		Values [][3]any          `json:"values"`
	}{s.Stream, values})
}

// categorizeFlag is the encoding flag of Loki's
// X-Loki-Response-Encoding-Flags request header that asks for each
// entry's structured metadata and parsed labels apart from its stream's
// labels.
const categorizeFlag = "categorize-labels"

// categorized reports whether r asks for categorize-labels (the header is
// a comma-separated list of flags, as Loki reads it).
func categorized(r *http.Request) bool {
	for _, v := range r.Header.Values("X-Loki-Response-Encoding-Flags") {
		for f := range strings.SplitSeq(v, ",") {
			if strings.TrimSpace(f) == categorizeFlag {
				return true
			}
		}
	}
	return false
}

// encodingFlags is data.encodingFlags of an answer to r: the flags
// honoured (Loki echoes them; unknown ones are not echoed here).
func encodingFlags(r *http.Request) []string {
	if categorized(r) {
		return []string{categorizeFlag}
	}
	return nil
}

// labelMap parses canonical labels into a map (never nil, so JSON says {}).
func labelMap(canon string) map[string]string {
	m := map[string]string{}
	ls, _ := ingest.ParseLabels(canon)
	for _, l := range ls {
		m[l.Name] = l.Value
	}
	return m
}

type lokiResponse struct {
	Status string   `json:"status"`
	Data   lokiData `json:"data"`
}

type lokiData struct {
	ResultType    string   `json:"resultType"`
	EncodingFlags []string `json:"encodingFlags,omitempty"`
	Result        any      `json:"result"`
	Stats         any      `json:"stats"`
}

func lokiStats(lines, bytes int64, took time.Duration) any {
	sec := took.Seconds()
	if sec <= 0 {
		sec = 1e-9
	}
	return map[string]any{"summary": map[string]any{
		"bytesProcessedPerSecond": int64(float64(bytes) / sec),
		"linesProcessedPerSecond": int64(float64(lines) / sec),
		"totalBytesProcessed":     bytes,
		"totalLinesProcessed":     lines,
		"execTime":                sec,
	}}
}

// isLogQuery tells a log query ({...} ...) from a metric expression.
func isLogQuery(q string) bool { return strings.HasPrefix(skipSpaceAndComments(q), "{") }

// lokiQueryRange serves /loki/api/v1/query_range. Entries with
// start <= ts < end are read, as Loki documents; end defaults to now and
// start to an hour before end.
func (s *Server) lokiQueryRange(w http.ResponseWriter, r *http.Request, ts *tenantStore) {
	t0 := time.Now()
	p := r.URL.Query()
	now := s.cfg.Now().UnixNano()
	end, err := parseTime("end", p.Get("end"), now)
	if err != nil {
		s.queryErr(w, err)
		return
	}
	start, err := parseStart(p, end, time.Hour)
	if err != nil {
		s.queryErr(w, err)
		return
	}
	if end < start {
		s.queryErr(w, badRequest("bad_param", "end (%d) is before start (%d)", end, start))
		return
	}
	q := p.Get("query")
	if isLogQuery(q) {
		s.lokiLog(w, r, ts, q, start, end-1, t0)
		return
	}
	step := time.Duration(max(1, (end-start)/int64(time.Second)/250)) * time.Second
	if v := p.Get("step"); v != "" {
		if step, err = parseDurationParam("step", v); err != nil {
			s.queryErr(w, err)
			return
		}
	}
	if span := end - start; span < 0 || span/int64(step) > 11000 {
		s.queryErr(w, badRequest("bad_param", "more than 11000 points per series: raise step"))
		return
	}
	s.lokiMetric(w, r, ts, q, start, end, step, false, t0)
}

// lokiQuery serves /loki/api/v1/query: a metric query at one instant
// (time, default now), or a log query over the hour before it.
func (s *Server) lokiQuery(w http.ResponseWriter, r *http.Request, ts *tenantStore) {
	t0 := time.Now()
	p := r.URL.Query()
	at, err := parseTime("time", p.Get("time"), s.cfg.Now().UnixNano())
	if err != nil {
		s.queryErr(w, err)
		return
	}
	q := p.Get("query")
	if isLogQuery(q) {
		s.lokiLog(w, r, ts, q, at-int64(time.Hour), at, t0)
		return
	}
	s.lokiMetric(w, r, ts, q, at, at, time.Second, true, t0)
}

func (s *Server) lokiLog(w http.ResponseWriter, r *http.Request, ts *tenantStore, q string, start, end int64, t0 time.Time) {
	p := r.URL.Query()
	limit, err := parseLimit(p.Get("limit"), 100, s.cfg.MaxQueryLimit)
	if n, cerr := strconv.Atoi(p.Get("limit")); err == nil && cerr == nil && n > s.cfg.MaxQueryLimit {
		// As Loki answers (its max_entries_limit_per_query): a client
		// asking for more must not take the first 5000 for all there is.
		err = badRequest("limit", "max entries limit per query exceeded, limit > max_entries_limit (%d > %d)", n, s.cfg.MaxQueryLimit)
	}
	if err != nil {
		s.queryErr(w, err)
		return
	}
	backward, err := parseDirection(p.Get("direction"))
	if err != nil {
		s.queryErr(w, err)
		return
	}
	sel, err := parseSelection(q, false)
	if err != nil {
		s.queryErr(w, err)
		return
	}
	sel.start, sel.end = start, end
	sel.categorize = categorized(r)
	hits, ans, err := collect(r.Context(), ts, sel, s.answerLimit(limit, backward))
	if err != nil {
		s.queryErr(w, err)
		return
	}
	var warnings []string
	if ans.bytesCut {
		// Grafana shows a response's warnings on the panel; the answer
		// itself ends as at the limit, and Grafana pages on from its
		// last entry's time.
		s.met.answersCut.WithLabelValues("loki").Inc() // query_range and query
		warnings = []string{cutWarning(len(hits), s.cfg.MaxQueryBytes)}
		if ans.splitTime {
			warnings = []string{splitWarning(len(hits), hits[len(hits)-1].Time, s.cfg.MaxQueryBytes)}
		}
	}
	writeLokiStreams(w, hits, sel.categorize, encodingFlags(r), lokiStats(int64(len(hits)), 0, time.Since(t0)), warnings)
}

// writeLokiStreams writes a log query's answer as writeJSON writes a
// lokiResponse of groupStreams(hits) (with "warnings" beside "data", as
// Prometheus and Loki put them), one value at a time: built whole, the
// answer was held twice more (its strings, then its encoding) beside
// the hits.
func writeLokiStreams(w http.ResponseWriter, hits []hit, categorize bool, flags []string, stats any, warnings []string) {
	w.Header().Set("Content-Type", "application/json")
	bw := bufio.NewWriterSize(w, 64<<10)
	// enc writes v as json.Marshal does (HTML escaped, as writeJSON's
	// Encoder), without its newline.
	enc := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			b = []byte("null") // not for the strings and maps written here
		}
		bw.Write(b)
	}
	bw.WriteString(`{"status":"success","data":{"resultType":"streams",`)
	if len(flags) > 0 {
		bw.WriteString(`"encodingFlags":`)
		enc(flags)
		bw.WriteByte(',')
	}
	bw.WriteString(`"result":[`)
	// Streams in order of first appearance, as groupStreams.
	var keys []string
	idx := map[string][]int{}
	for i := range hits {
		key := hits[i].Labels
		if categorize {
			key = streamPart(&hits[i])
		}
		if _, ok := idx[key]; !ok {
			keys = append(keys, key)
		}
		idx[key] = append(idx[key], i)
	}
	for si, key := range keys {
		if si > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString(`{"stream":`)
		enc(labelMap(key))
		bw.WriteString(`,"values":[`)
		for vi, i := range idx[key] {
			h := &hits[i]
			if vi > 0 {
				bw.WriteByte(',')
			}
			bw.WriteByte('[')
			enc(strconv.FormatInt(h.Time, 10))
			bw.WriteByte(',')
			enc(string(h.Line))
			if categorize {
				bw.WriteByte(',')
				enc(hitCats(h))
			}
			bw.WriteByte(']')
		}
		bw.WriteString(`]}`)
	}
	bw.WriteString(`],"stats":`)
	enc(stats)
	bw.WriteByte('}')
	if len(warnings) > 0 {
		bw.WriteString(`,"warnings":`)
		enc(warnings)
	}
	bw.WriteString("}\n")
	bw.Flush()
}

// groupStreams groups ordered hits by labels, streams in order of first
// appearance, entries in the hits' order. Without categorize, the labels
// are each entry's whole set (its metadata and parsed labels make other
// streams, as in Loki 3); with it, the stream's labels alone, each value
// carrying the entry's metadata and parsed labels (Loki's
// categorize-labels encoding).
func groupStreams(hits []hit, categorize bool) []*lokiStream {
	out := []*lokiStream{}
	idx := map[string]*lokiStream{}
	for i := range hits {
		h := &hits[i]
		key := h.Labels
		if categorize {
			key = streamPart(h)
		}
		st := idx[key]
		if st == nil {
			st = &lokiStream{Stream: labelMap(key)}
			if categorize {
				st.cats = []lokiCats{}
			}
			idx[key] = st
			out = append(out, st)
		}
		st.Values = append(st.Values, [2]string{strconv.FormatInt(h.Time, 10), string(h.Line)})
		if categorize {
			st.cats = append(st.cats, hitCats(h))
		}
	}
	return out
}

// streamPart is h's labels without its metadata and parsed ones, as
// Loki's categorize-labels iterator takes them out.
func streamPart(h *hit) string {
	labels := h.Labels
	if h.Meta != "" {
		labels = withoutLabels(labels, h.Meta)
	}
	if h.Parsed != "" {
		labels = withoutLabels(labels, h.Parsed)
	}
	return labels
}

// hitCats is the third element of h's value with categorize-labels.
func hitCats(h *hit) lokiCats {
	var c lokiCats
	if h.Meta != "" {
		c.StructuredMetadata = labelMap(h.Meta)
	}
	if h.Parsed != "" {
		c.Parsed = labelMap(h.Parsed)
	}
	return c
}

// series is one metric series: labels and points at step times.
type series struct {
	labels ingest.Labels
	ts     []int64
	vs     []float64
}

func (s *Server) lokiMetric(w http.ResponseWriter, r *http.Request, ts *tenantStore, q string, start, end int64, step time.Duration, instant bool, t0 time.Time) {
	e, err := parseMetric(q)
	if err != nil {
		s.queryErr(w, badRequest("bad_query", "%v", err))
		return
	}
	if instant && e.scalar() {
		// A number (1+1, Grafana's old health check) is a scalar, as
		// Loki answers it at an instant: [<time>, "<value>"].
		res := []any{unixSecondsJSON(start), strconv.FormatFloat(e.val, 'f', -1, 64)}
		writeJSON(w, lokiResponse{Status: "success", Data: lokiData{ResultType: "scalar", EncodingFlags: encodingFlags(r), Result: res, Stats: lokiStats(0, 0, time.Since(t0))}})
		return
	}
	// The limit also stops a binary operator or topk building more
	// series than it allows (withSeriesLimit).
	out, err := evalMetric(withSeriesLimit(r.Context(), e, s.cfg.MaxQuerySeries), ts, e, start, end, int64(step))
	if err != nil {
		s.queryErr(w, err)
		return
	}
	// Label by label, as Loki (and Prometheus) sort series: by the
	// labels' text, {app="a b"} came before {app="a"}.
	// sort and sort_desc at the root order an instant answer by value.
	if !instant || !sortsByValue(e) {
		slices.SortStableFunc(out, func(a, b *series) int { return a.labels.Compare(b.labels) })
	}
	if n := nonEmpty(out); n > s.cfg.MaxQuerySeries {
		// As Loki's max_query_series: a result no one can read, whose
		// answer alone could take gigabytes.
		s.queryErr(w, badRequest("too_many_series", "maximum number of series (%d) reached for a single query; the answer has %d: narrow the selector or aggregate (sum by ...)", s.cfg.MaxQuerySeries, n))
		return
	}
	val := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	lm := func(ls ingest.Labels) map[string]string {
		m := map[string]string{}
		for _, l := range ls {
			m[l.Name] = l.Value
		}
		return m
	}
	if instant {
		res := []any{}
		for _, se := range out {
			if len(se.ts) > 0 {
				res = append(res, map[string]any{"metric": lm(se.labels), "value": []any{unixSecondsJSON(se.ts[0]), val(se.vs[0])}})
			}
		}
		writeJSON(w, lokiResponse{Status: "success", Data: lokiData{ResultType: "vector", EncodingFlags: encodingFlags(r), Result: res, Stats: lokiStats(0, 0, time.Since(t0))}})
		return
	}
	res := []any{}
	for _, se := range out {
		if len(se.ts) == 0 {
			continue
		}
		res = append(res, map[string]any{"metric": lm(se.labels), "values": matrixValues{se.ts, se.vs}})
	}
	writeJSON(w, lokiResponse{Status: "success", Data: lokiData{ResultType: "matrix", EncodingFlags: encodingFlags(r), Result: res, Stats: lokiStats(0, 0, time.Since(t0))}})
}

// matrixValues is a series' points as Prometheus's matrix writes them,
// [[<unix seconds>, "<value>"], ...], encoded straight from the slices:
// a boxed []any per point took ~190 bytes of memory each.
type matrixValues struct {
	ts []int64
	vs []float64
}

func (m matrixValues) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+len(m.ts)*28)
	b = append(b, '[')
	for i, t := range m.ts {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = appendUnixSeconds(b, t)
		b = append(b, ',', '"')
		b = strconv.AppendFloat(b, m.vs[i], 'f', -1, 64)
		b = append(b, '"', ']')
	}
	return append(b, ']'), nil
}

// unixSecondsJSON is t as a JSON number of seconds (appendUnixSeconds).
func unixSecondsJSON(t int64) json.Number { return json.Number(appendUnixSeconds(nil, t)) }

// appendUnixSeconds writes Unix nanoseconds t as decimal seconds, exactly
// and without trailing zeros (1724099053.735): float64 division printed
// ms-aligned times with noise (1724099053.7350001), 1 ms early for a reader
// that truncates.
func appendUnixSeconds(b []byte, t int64) []byte {
	u := uint64(t)
	if t < 0 {
		b = append(b, '-')
		u = -u
	}
	b = strconv.AppendUint(b, u/1e9, 10)
	if frac := u % 1e9; frac != 0 {
		digits := strconv.AppendUint(nil, frac+1e9, 10)[1:] // 9 digits, leading zeros kept
		for digits[len(digits)-1] == '0' {
			digits = digits[:len(digits)-1]
		}
		b = append(append(b, '.'), digits...)
	}
	return b
}

// nonEmpty counts the series that have points (the ones answered).
func nonEmpty(out []*series) int {
	n := 0
	for _, se := range out {
		if len(se.ts) > 0 {
			n++
		}
	}
	return n
}

// maxRangePoints bounds the points a range vector expands into before any
// aggregation (series × steps; ~16 bytes each): 10,000 streams over 3,600
// steps took 6.8 GB and could take a server down with one request.
const maxRangePoints = 5_000_000

// evalMetric evaluates e at start, start+step, ... <= end.
func evalMetric(ctx context.Context, ts *tenantStore, e *mexpr, start, end, step int64) ([]*series, error) {
	var steps []int64
	for t := start; t <= end; t += step {
		steps = append(steps, t)
		if t > math.MaxInt64-step || len(steps) > 11000 {
			break // the handlers reject more points before getting here
		}
	}
	switch e.kind {
	case "const":
		se := &series{ts: steps, vs: make([]float64, len(steps))}
		for i := range se.vs {
			se.vs[i] = e.val
		}
		return []*series{se}, nil
	case "range":
		return evalRange(ctx, ts, e, start, end, steps, nil)
	case "agg":
		if g := preGroupOf(e); g != nil {
			var in []*series
			var err error
			if e.inner.kind == "unwrap" {
				in, err = evalUnwrap(ctx, ts, e.inner, start, end, step, g)
			} else {
				in, err = evalRange(ctx, ts, e.inner, start, end, steps, g)
			}
			if err != nil {
				return nil, err
			}
			return aggregate(e, in), nil
		}
		in, err := evalMetric(ctx, ts, e.inner, start, end, step)
		if err != nil {
			return nil, err
		}
		return aggregate(e, in), nil
	case "binop", "topk", "unwrap", "fn", "offset", "absent": // metricq.go
		return evalMore(ctx, ts, e, start, end, step)
	}
	return nil, fmt.Errorf("unsupported expression")
}

// pipelineError is Loki's answer to a metric query whose series carry
// __error__ (a line the parser or a label filter could not handle):
// counting such lines silently would mix them in, so the query fails with
// Loki's message and its advice, unless the query filters __error__.
func pipelineError(labels string) error {
	if !strings.Contains(labels, "__error__") {
		return nil
	}
	ls, _ := ingest.ParseLabels(labels)
	e := ls.Get("__error__")
	if e == "" {
		return nil
	}
	return badRequest("pipeline_error", "pipeline error: '%s' for series: '%s'. Use a label filter to intentionally skip this error. (e.g | __error__!=\"%s\"). To skip all potential errors you can match empty errors.(e.g __error__=\"\"). The label filter can also be specified after unwrap. (e.g | unwrap latency | __error__=\"\" )", e, labels, e)
}

// minusRange is t-rng saturated at the earliest time: near it, t-rng
// would wrap to the far future.
func minusRange(t, rng int64) int64 {
	if t < math.MinInt64+rng {
		return math.MinInt64
	}
	return t - rng
}

// With g (the outer sum's grouping, preGroupOf), entries are grouped by
// their labels projected on g as they are read, so entries that differ
// only in labels the sum drops (each entry's trace_id) share one series;
// the sum over the answer is then the same. And when the sum's labels
// cannot come from metadata, blocks are read without it (metaFree).
//
// Groups are counted as they are made: more than --max-query-series of
// them with a point (when e's series all reach the answer) or more than
// maxRangePoints points stop the scan with the 400 the finished answer
// would get, before a series per entry is allocated (review 9, F3).
func evalRange(ctx context.Context, ts *tenantStore, e *mexpr, start, end int64, steps []int64, g *preGroup) ([]*series, error) {
	if !isLogQuery(e.log) {
		return nil, badRequest("bad_query", "%s wants a log query {...}, got %q", e.fn, e.log)
	}
	sel, err := parseSelection(e.log, false)
	if err != nil {
		return nil, err
	}
	if g != nil && g.metaFree(sel) {
		sel.skipAttrs = true
	}
	st := stateOf(ctx)
	limit := 0
	if st.limitNode == e {
		limit = st.maxSeries
	}
	// covered: every entry read lies in some window (t-rng, t], so every
	// group has a point; else inWindow looks.
	covered := true
	for i := 1; i < len(steps); i++ {
		if steps[i]-steps[i-1] > int64(e.rng) {
			covered = false
			break
		}
	}
	inWindow := func(t int64) bool {
		if covered {
			return true
		}
		i := sort.Search(len(steps), func(i int) bool { return steps[i] >= t })
		return i < len(steps) && minusRange(steps[i], int64(e.rng)) < t
	}
	rng := int64(e.rng)
	sel.start, sel.end = minusRange(start, rng)+1, end
	type acc struct {
		labels string
		times  []int64
		sizes  []int64
		point  bool // an entry in a window: the series is answered
	}
	groups := map[string]*acc{}
	answered := 0
	var stop error
	var key []byte
	var last *acc // the group of the last entry, whose labels were lastLabels
	var lastLabels string
	if ts != nil {
		v, err := ts.w.View()
		if err != nil {
			return nil, err
		}
		err = run(ctx, v, sel, anyOrder, 0, func(h *hit) bool {
			k := h.Labels
			var a *acc
			if last != nil && k == lastLabels {
				// Entries without metadata come a stream at a time, with
				// the same labels text: no projection, no map.
				a = last
			} else if g != nil && !hasPipelineError(h.Labels) {
				// An entry with a pipeline error keeps its own series, so
				// that the query fails as before where it has a point.
				key = g.project(key[:0], h.Labels)
				a = groups[string(key)]
				if a == nil {
					k = string(key)
				}
			} else {
				a = groups[k]
			}
			if a == nil {
				a = &acc{labels: k}
				groups[k] = a
				if err := checkRangePoints(ctx, e.fn, len(groups), len(steps)); err != nil {
					stop = err
					return false
				}
			}
			last, lastLabels = a, h.Labels
			if !a.point && inWindow(h.Time) {
				a.point = true
				answered++
				if limit > 0 && answered > limit {
					stop = tooManySeries(limit)
					return false
				}
			}
			a.times = append(a.times, h.Time)
			a.sizes = append(a.sizes, int64(len(h.Line)))
			return true
		})
		if stop != nil {
			return nil, stop
		}
		if err != nil {
			return nil, err
		}
	}
	var out []*series
	if err := checkRangePoints(ctx, e.fn, len(groups), len(steps)); err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(groups)) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		a := groups[k]
		idx := make([]int, len(a.times))
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(i, j int) bool { return a.times[idx[i]] < a.times[idx[j]] })
		times := make([]int64, len(idx))
		prefix := make([]int64, len(idx)+1)
		for i, j := range idx {
			times[i] = a.times[j]
			prefix[i+1] = prefix[i] + a.sizes[j]
		}
		labs, _ := ingest.ParseLabels(a.labels)
		se := &series{labels: labs}
		for _, t := range steps {
			// Entries in (t-rng, t].
			from := minusRange(t, rng)
			lo := sort.Search(len(times), func(i int) bool { return times[i] > from })
			hi := sort.Search(len(times), func(i int) bool { return times[i] > t })
			n := hi - lo
			if n == 0 {
				continue
			}
			var v float64
			switch e.fn {
			case "count_over_time":
				v = float64(n)
			case "rate":
				v = float64(n) / e.rng.Seconds()
			case "bytes_over_time":
				v = float64(prefix[hi] - prefix[lo])
			case "bytes_rate":
				v = float64(prefix[hi]-prefix[lo]) / e.rng.Seconds()
			}
			se.ts = append(se.ts, t)
			se.vs = append(se.vs, v)
		}
		// A pipeline error fails the query only where its series has a
		// point, as in Loki: an unparsable line outside every window
		// (between windows with step > range, after the last step) counts
		// nowhere.
		if len(se.ts) > 0 {
			if err := pipelineError(k); err != nil {
				return nil, err
			}
		}
		out = append(out, se)
	}
	return out, nil
}

// hasPipelineError reports whether labels carry a non-empty __error__.
func hasPipelineError(labels string) bool {
	return strings.Contains(labels, "__error__") && pipelineError(labels) != nil
}

// preGroup is the grouping of a sum directly over a range aggregation
// whose value over a set of entries is the sum of its values over any
// partition of them (count_over_time, rate, bytes_over_time, bytes_rate:
// counts and byte sizes, divided by the same range; over unwrapped
// values sum_over_time and rate: sums, divided by the range): the range
// series can then be keyed by the labels the sum keeps. Not min/max/count
// /avg (they see the series), not the other unwrap aggregations: an
// average, quantile or deviation of a group is not the sum of the
// series'; first/last pick one series' sample; max/min under a max/min
// would fold but for NaN (aggregate's max propagates a series' NaN,
// max_over_time skips NaN unless all are); rate_counter sees each
// series' resets.
type preGroup struct {
	by      []string
	without bool
}

// preGroupOf is e's preGroup, or nil when e's answer needs every series.
func preGroupOf(e *mexpr) *preGroup {
	if e.kind != "agg" || e.fn != "sum" || e.inner == nil {
		return nil
	}
	switch e.inner.kind {
	case "range":
		switch e.inner.fn {
		case "count_over_time", "rate", "bytes_over_time", "bytes_rate":
			return &preGroup{by: e.by, without: e.without}
		}
	case "unwrap":
		switch e.inner.fn {
		case "sum_over_time", "rate":
			return &preGroup{by: e.by, without: e.without}
		}
	}
	return nil
}

// project appends to dst the label text of labels (canonical text,
// ingest.Labels.String) keeping those g keeps, in their order. Text it
// cannot read is appended whole: a group of its own, still summed right
// by aggregate.
func (g *preGroup) project(dst []byte, labels string) []byte {
	s := labels
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return append(dst, labels...)
	}
	s = s[1 : len(s)-1]
	dst = append(dst, '{')
	first := true
	for len(s) > 0 {
		eq := strings.IndexByte(s, '=')
		if eq <= 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			return append(dst[:0], labels...)
		}
		name := s[:eq]
		// The quoted value ends at the first '"' not escaped.
		i := eq + 2
		for i < len(s) && s[i] != '"' {
			if s[i] == '\\' {
				i++
			}
			i++
		}
		if i >= len(s) {
			return append(dst[:0], labels...)
		}
		pair := s[:i+1]
		s = s[i+1:]
		if len(s) > 0 {
			if !strings.HasPrefix(s, ", ") {
				return append(dst[:0], labels...)
			}
			s = s[2:]
		}
		if slices.Contains(g.by, name) != g.without {
			if !first {
				dst = append(dst, ", "...)
			}
			dst = append(dst, pair...)
			first = false
		}
	}
	return append(dst, '}')
}

// metaFree reports whether sel's entries' structured metadata cannot
// change the sum's answer, so blocks may be read without it: the sum keeps
// no label, or only labels every selected stream has (an equality matcher
// with a value, or a regexp not matching ""; an entry's metadata of such
// a name is renamed _extracted, so the value is the stream's), and no
// stage can read metadata (no label filter: search.NeedsAttrs) or drop a
// label. without (...) keeps metadata labels: never.
func (g *preGroup) metaFree(sel *selection) bool {
	if g.without || sel.plan == nil || search.NeedsAttrs(sel.plan) {
		return false
	}
	for _, st := range sel.plan.Query.Stages {
		if _, ok := st.(*query.DropStage); ok {
			return false
		}
	}
	for _, l := range g.by {
		if !slices.ContainsFunc(sel.plan.Query.Selector, func(m *query.Matcher) bool {
			if m.Name != l {
				return false
			}
			switch m.Type {
			case query.MatchEqual:
				return m.Value != ""
			case query.MatchRegexp:
				// Anchored as the selector's: a regexp the empty value
				// does not match selects only streams with the label.
				re, err := regexp.Compile("^(?:" + m.Value + ")$")
				return err == nil && !re.MatchString("")
			}
			return false
		}) {
			return false
		}
	}
	return true
}

func aggregate(e *mexpr, in []*series) []*series {
	type point struct {
		sum, min, max float64
		n             int
	}
	type group struct {
		labels ingest.Labels
		pts    map[int64]*point
	}
	groups := map[string]*group{}
	for _, se := range in {
		var ls ingest.Labels
		for _, l := range se.labels {
			keep := slices.Contains(e.by, l.Name)
			if e.without {
				keep = !keep
			}
			if keep {
				ls = append(ls, l)
			}
		}
		k := ls.String()
		g := groups[k]
		if g == nil {
			g = &group{labels: ls, pts: map[int64]*point{}}
			groups[k] = g
		}
		for i, t := range se.ts {
			v := se.vs[i]
			p := g.pts[t]
			if p == nil {
				p = &point{min: v, max: v}
				g.pts[t] = p
			}
			p.sum += v
			p.min = min(p.min, v)
			p.max = max(p.max, v)
			p.n++
		}
	}
	var out []*series
	for _, k := range slices.Sorted(maps.Keys(groups)) {
		g := groups[k]
		se := &series{labels: g.labels}
		for t := range g.pts {
			se.ts = append(se.ts, t)
		}
		slices.Sort(se.ts)
		for _, t := range se.ts {
			p := g.pts[t]
			var v float64
			switch e.fn {
			case "sum":
				v = p.sum
			case "count":
				v = float64(p.n)
			case "min":
				v = p.min
			case "max":
				v = p.max
			case "avg":
				v = p.sum / float64(p.n)
			}
			se.vs = append(se.vs, v)
		}
		out = append(out, se)
	}
	return out
}

// rangeParams reads start and end for the metadata endpoints (default:
// the last 6 hours, as Loki); end before start is a 400.
func (s *Server) rangeParams(r *http.Request) (int64, int64, error) {
	p := r.URL.Query()
	end, err := parseTime("end", p.Get("end"), s.cfg.Now().UnixNano())
	if err != nil {
		return 0, 0, err
	}
	start, err := parseStart(p, end, 6*time.Hour)
	if err == nil && end < start {
		err = badRequest("bad_param", "end (%d) is before start (%d)", end, start)
	}
	return start, end, err
}

// parseStart reads start; without it, start is since (a duration,
// Loki's parameter for this) or else def before end.
func parseStart(p url.Values, end int64, def time.Duration) (int64, error) {
	if v := p.Get("since"); v != "" {
		d, err := parseDurationParam("since", v)
		if err != nil {
			return 0, err
		}
		def = d
	}
	return parseTime("start", p.Get("start"), minusRange(end, int64(def)))
}

// streamsIn returns the view and, ascending, the ids of the streams that
// have entries in [start, end] and that the selector q (if any) admits.
// The block index answers for blocks inside the range; blocks that reach
// past it are decoded (streamSet.present, exact). The stream index
// answers the selector (see streamSet).
func streamsIn(ts *tenantStore, q string, start, end int64) (*store.View, []uint32, error) {
	if ts == nil {
		return nil, nil, nil
	}
	var plan *query.Plan
	if strings.TrimSpace(q) != "" {
		sel, err := parseSelection(q, false)
		if err != nil {
			return nil, nil, err
		}
		if sel.plan == nil {
			return nil, nil, badRequest("bad_query", "%q is not a stream selector", q)
		}
		plan = sel.plan
	}
	v, err := ts.w.View()
	if err != nil {
		return nil, nil, err
	}
	return v, selectStreams(v, plan).presentIDs(v, start, end, 0, true), nil
}

// requestStreams is streamsIn for a request's query and time range; on
// an error it has answered the request and returns false.
func (s *Server) requestStreams(w http.ResponseWriter, r *http.Request, ts *tenantStore) (*store.View, []uint32, bool) {
	start, end, err := s.rangeParams(r)
	if err != nil {
		s.queryErr(w, err)
		return nil, nil, false
	}
	v, ids, err := streamsIn(ts, r.URL.Query().Get("query"), start, end)
	if err != nil {
		s.queryErr(w, err)
		return nil, nil, false
	}
	return v, ids, true
}

func (s *Server) lokiLabels(w http.ResponseWriter, r *http.Request, ts *tenantStore) {
	v, ids, ok := s.requestStreams(w, r, ts)
	if !ok {
		return
	}
	names := []string{}
	if v != nil {
		names = labelNames(v, ids)
	}
	writeJSON(w, map[string]any{"status": "success", "data": names})
}

func (s *Server) lokiLabelValues(w http.ResponseWriter, r *http.Request, ts *tenantStore) {
	name := r.PathValue("name")
	v, ids, ok := s.requestStreams(w, r, ts)
	if !ok {
		return
	}
	vals := []string{}
	if v != nil {
		vals = labelValues(v, ids, name)
	}
	writeJSON(w, map[string]any{"status": "success", "data": vals})
}

// lokiSeries serves /loki/api/v1/series: the label sets of the streams
// matching any match[] selector (all streams when none is given).
func (s *Server) lokiSeries(w http.ResponseWriter, r *http.Request, ts *tenantStore) {
	if err := r.ParseForm(); err != nil {
		s.queryErr(w, badRequest("bad_param", "%v", err))
		return
	}
	start, end, err := s.rangeParams(r)
	if err != nil {
		s.queryErr(w, err)
		return
	}
	matches := r.Form["match[]"]
	if len(matches) == 0 {
		matches = r.Form["match"]
	}
	if len(matches) == 0 {
		matches = []string{""}
	}
	seen := map[string]bool{}
	var keys []string
	for _, m := range matches {
		v, ids, err := streamsIn(ts, m, start, end)
		if err != nil {
			s.queryErr(w, err)
			return
		}
		if v == nil {
			continue
		}
		for _, ls := range parsedLabels(v, ids) {
			k := ls.String()
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	data := []map[string]string{}
	for _, k := range keys {
		data = append(data, labelMap(k))
	}
	writeJSON(w, map[string]any{"status": "success", "data": data})
}

// lokiIndexStats serves /loki/api/v1/index/stats: streams, chunks
// (blocks), entries and bytes of the entries matching the selector in
// [start, end].
func (s *Server) lokiIndexStats(w http.ResponseWriter, r *http.Request, ts *tenantStore) {
	start, end, err := s.rangeParams(r)
	if err != nil {
		s.queryErr(w, err)
		return
	}
	q := r.URL.Query().Get("query")
	var st struct {
		Streams int   `json:"streams"`
		Chunks  int   `json:"chunks"`
		Entries int64 `json:"entries"`
		Bytes   int64 `json:"bytes"`
	}
	if ts != nil && strings.TrimSpace(q) != "" {
		sel, err := parseSelection(q, false)
		if err != nil || sel.plan == nil {
			s.queryErr(w, badRequest("bad_query", "query must be a stream selector"))
			return
		}
		sel.start, sel.end = start, end
		v, err := ts.w.View()
		if err != nil {
			s.queryErr(w, err)
			return
		}
		if len(sel.plan.Query.Stages) == 0 {
			// A plain selector (what Grafana sends) is answered from the
			// block index, decoding only blocks at the range's edges or
			// mixing other streams: exact, where Loki's is an index
			// estimate. Chunks are the blocks holding a counted entry.
			streams := map[uint32]bool{}
			bv := &blockVisitor{plan: sel.plan, start: start, end: end}
			bv.meta = func(m *segment.BlockMeta) {
				for _, id := range m.Streams {
					streams[id] = true
				}
				st.Chunks++
				st.Entries += int64(m.Entries)
				st.Bytes += int64(m.RawBytes)
			}
			bv.entry = func(_ int64, id uint32, n int) {
				streams[id] = true
				st.Entries++
				st.Bytes += int64(n)
			}
			bv.done = func(n int) {
				if n > 0 {
					st.Chunks++
				}
			}
			if err := bv.visit(r.Context(), v); err != nil {
				s.queryErr(w, err)
				return
			}
			st.Streams = len(streams)
			writeJSON(w, st)
			return
		}
		streams := map[uint32]bool{}
		blocks := map[[2]int64]bool{}
		pi := map[store.Part]int64{}
		for i, p := range v.Parts {
			pi[p] = int64(i)
		}
		err = run(r.Context(), v, sel, anyOrder, 0, func(h *hit) bool {
			streams[h.Stream] = true
			st.Entries++
			st.Bytes += int64(len(h.Line))
			return true
		})
		if err != nil {
			s.queryErr(w, err)
			return
		}
		for _, p := range v.Parts {
			for bi := range p.NumBlocks() {
				m := p.BlockMeta(bi)
				if m.MaxTime < start || m.MinTime > end {
					continue
				}
				for _, id := range m.Streams {
					if streams[id] {
						blocks[[2]int64{pi[p], int64(bi)}] = true
						break
					}
				}
			}
		}
		st.Streams, st.Chunks = len(streams), len(blocks)
	}
	writeJSON(w, st)
}
