package server

// The endpoints Grafana's Logs Drilldown app calls besides the query API:
// index/volume and index/volume_range (its service list and volume
// graphs), detected_labels, detected_fields and detected_field/<name>/values
// (its labels and fields tabs), patterns and drilldown-limits. Without
// them its landing page is empty.
//
// Exact or estimate: Loki answers volumes and index/stats from its index,
// chunk by chunk, and calls them approximations. Here every number is
// exact for the entries in [start, end]: a block that lies inside the
// range and whose selected streams all count the same way is taken whole
// from the block index (segment.BlockMeta: entries, raw bytes, streams),
// and only the other blocks (at the range's edges, or mixing streams that
// count differently) are decoded. The cost is therefore that of decoding
// those blocks; a store whose blocks interleave many streams decodes most
// of them for a volume grouped by a label that differs between them.
// detected_fields is exact over its sample (the newest line_limit
// matching entries), as Loki's is a sample too. Patterns are hay's own
// simple rule (lineTemplate), counted exactly over every entry in range.

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"haystack/internal/ingest"
	"haystack/internal/query"
	"haystack/internal/segment"
	"haystack/internal/store"
	"haystack/internal/version"
)

// blockVisitor reads what a stream selector admits in [start, end] (both
// inclusive) from a view, from the block index where that is exact and by
// decoding the other blocks.
type blockVisitor struct {
	plan       *query.Plan // nil: every stream
	start, end int64
	// whole, if set, is asked about each block that lies inside the
	// range and whose streams are all selected: true takes the block from
	// its metadata (meta), false decodes it. Unset means true.
	whole func(m *segment.BlockMeta) bool
	meta  func(m *segment.BlockMeta)
	// entry gets each entry of a decoded block that is in the range and
	// of a selected stream (its time, stream and line length), and done
	// the number of them after each decoded block. Both run on the
	// caller's goroutine.
	entry func(t int64, id uint32, n int)
	done  func(n int)
}

// visit runs the visitor over v. A block that cannot be read fails it,
// as a query does (a partial answer would be silently wrong).
func (bv *blockVisitor) visit(ctx context.Context, v *store.View) error {
	set := selectStreams(v, bv.plan)
	var members bitset
	if !set.all {
		members = set.members()
	}
	sel := func(id uint32) bool {
		return int(id) < set.n && (set.all || members.has(id))
	}
	type ref struct {
		p  store.Part
		bi int
	}
	var dec []ref
	for _, p := range v.Parts {
		for bi := range p.NumBlocks() {
			m := p.BlockMeta(bi)
			if m.Entries == 0 || m.MaxTime < bv.start || m.MinTime > bv.end {
				continue
			}
			all, any := true, false
			for _, id := range m.Streams {
				if sel(id) {
					any = true
				} else {
					all = false
				}
			}
			if !any {
				continue
			}
			if all && m.MinTime >= bv.start && m.MaxTime <= bv.end && (bv.whole == nil || bv.whole(&m)) {
				bv.meta(&m)
				continue
			}
			dec = append(dec, ref{p, bi})
		}
	}
	if len(dec) == 0 {
		return ctx.Err()
	}
	// Decode on all cores; the entries are handed over here, on one
	// goroutine, so the callbacks need no locks.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		r   ref
		b   *segment.Block
		err error
	}
	workers := min(runtime.GOMAXPROCS(0), len(dec))
	jobs := make(chan ref)
	out := make(chan result, workers)
	wg.Go(func() {
		defer close(jobs)
		for _, r := range dec {
			select {
			case jobs <- r:
			case <-ctx.Done():
				return
			}
		}
	})
	var wwg sync.WaitGroup
	for range workers {
		wwg.Go(func() {
			for r := range jobs {
				b := segment.GetBlock()
				err := r.p.ReadBlock(r.bi, b)
				select {
				case out <- result{r, b, err}:
				case <-ctx.Done():
					segment.PutBlock(b)
					return
				}
			}
		})
	}
	wg.Go(func() { wwg.Wait(); close(out) })
	for res := range out {
		if res.err != nil {
			segment.PutBlock(res.b)
			return fmt.Errorf("%s block %d: %w", res.r.p.Name(), res.r.bi, res.err)
		}
		if err := ctx.Err(); err != nil {
			segment.PutBlock(res.b)
			return err
		}
		b, n := res.b, 0
		for k := range b.Len() {
			t, id := b.Times[k], b.Streams[k]
			if t < bv.start || t > bv.end || !sel(id) {
				continue
			}
			bv.entry(t, id, int(b.Offsets[k+1]-b.Offsets[k]))
			n++
		}
		segment.PutBlock(b)
		if bv.done != nil {
			bv.done(n)
		}
	}
	return ctx.Err()
}

// selectorPlan parses q as a stream selector alone (what the index
// endpoints take); name is the parameter, for the 400.
func selectorPlan(name, q string) (*query.Plan, error) {
	if strings.TrimSpace(q) == "" {
		return nil, badRequest("bad_param", "%s: want a stream selector such as {app=\"api\"}", name)
	}
	sel, err := parseSelection(q, false)
	if err != nil {
		return nil, err
	}
	if sel.plan == nil || len(sel.plan.Query.Stages) > 0 {
		return nil, badRequest("bad_param", "%s=%q: want a stream selector alone (no line filters or stages)", name, q)
	}
	return sel.plan, nil
}

// volumeMaxSeries caps the series a volume query returns (its limit);
// drilldown-limits reports it. Logs Drilldown asks for 5000.
const volumeMaxSeries = 5000

// volumeGrouping says into which series a stream's bytes go.
type volumeGrouping struct {
	names    []string // labels kept; nil keeps all
	byLabels bool     // aggregateBy=labels: one series per label name
	cache    map[uint32][]string
	metrics  map[string]map[string]string // series key -> its labels
}

// keys returns the series stream id adds to (canonical label text in
// series mode, label names in labels mode).
func (g *volumeGrouping) keys(v *store.View, id uint32) []string {
	if k, ok := g.cache[id]; ok {
		return k
	}
	ls, _ := ingest.ParseLabels(v.Labels(id))
	var kept ingest.Labels
	for _, l := range ls {
		if g.names == nil || slices.Contains(g.names, l.Name) {
			kept = append(kept, l)
		}
	}
	var keys []string
	if g.byLabels {
		for _, l := range kept {
			keys = append(keys, l.Name)
			if g.metrics[l.Name] == nil {
				g.metrics[l.Name] = map[string]string{l.Name: ""}
			}
		}
	} else {
		k := kept.String()
		keys = []string{k}
		if g.metrics[k] == nil {
			m := map[string]string{}
			for _, l := range kept {
				m[l.Name] = l.Value
			}
			g.metrics[k] = m
		}
	}
	g.cache[id] = keys
	return keys
}

// lokiVolume serves /loki/api/v1/index/volume (instant: a vector of the
// bytes per series in [start, end]) and /index/volume_range (a matrix:
// at start, start+step, ... <= end, each point the bytes in [t, t+step)
// within [start, end], so the points of a series add up to its instant
// volume). Bytes are the entries' line bytes, exactly (see the file's
// comment); series are ranked by their total bytes, largest first, and
// cut at limit.
//
// Series, as Loki's reference describes them: by default the labels the
// selector names, with the stream's values (a stream lacking one has no
// such label in its series); targetLabels (comma-separated) names them
// instead; aggregateBy=labels makes one series per label name, {name=""},
// holding the bytes of every stream that has the label.
func (s *Server) lokiVolume(rangeQuery bool) func(http.ResponseWriter, *http.Request, *tenantStore) {
	return func(w http.ResponseWriter, r *http.Request, ts *tenantStore) {
		t0 := time.Now()
		p := r.URL.Query()
		plan, start, end, err := s.selectorRange(r)
		if err != nil {
			s.queryErr(w, err)
			return
		}
		limit, err := parseLimit(p.Get("limit"), 100, volumeMaxSeries)
		if err != nil {
			s.queryErr(w, err)
			return
		}
		g := &volumeGrouping{cache: map[uint32][]string{}, metrics: map[string]map[string]string{}}
		switch a := p.Get("aggregateBy"); a {
		case "", "series":
		case "labels":
			g.byLabels = true
		default:
			s.queryErr(w, badRequest("bad_param", "aggregateBy=%q: want series or labels", a))
			return
		}
		for _, n := range strings.Split(p.Get("targetLabels"), ",") {
			if n = strings.TrimSpace(n); n != "" && !slices.Contains(g.names, n) {
				g.names = append(g.names, n)
			}
		}
		if g.names == nil {
			for _, m := range plan.Streams {
				if !slices.Contains(g.names, m.Name) {
					g.names = append(g.names, m.Name)
				}
			}
		}
		step := int64(0)
		if rangeQuery {
			step = int64(max(1, (end-start)/int64(time.Second)/250)) * int64(time.Second)
			if v := p.Get("step"); v != "" {
				d, err := parseDurationParam("step", v)
				if err != nil {
					s.queryErr(w, err)
					return
				}
				step = int64(d)
			}
			if (end-start)/step >= 11000 {
				s.queryErr(w, badRequest("bad_param", "step=%s: more than 11000 points per series: raise step", time.Duration(step)))
				return
			}
		}
		bucket := func(t int64) int64 {
			if step == 0 {
				return 0
			}
			return (t - start) / step
		}
		vol := map[string]map[int64]int64{} // series -> bucket -> bytes
		add := func(keys []string, b, n int64) {
			for _, k := range keys {
				m := vol[k]
				if m == nil {
					m = map[int64]int64{}
					vol[k] = m
				}
				m[b] += n
			}
		}
		if ts != nil {
			v, err := ts.w.View()
			if err != nil {
				s.queryErr(w, err)
				return
			}
			bv := &blockVisitor{plan: plan, start: start, end: end}
			// A block is taken whole when all its streams go to the same
			// series and it lies in one step.
			bv.whole = func(m *segment.BlockMeta) bool {
				first := g.keys(v, m.Streams[0])
				for _, id := range m.Streams[1:] {
					if !slices.Equal(g.keys(v, id), first) {
						return false
					}
				}
				return bucket(m.MinTime) == bucket(m.MaxTime)
			}
			bv.meta = func(m *segment.BlockMeta) { add(g.keys(v, m.Streams[0]), bucket(m.MinTime), int64(m.RawBytes)) }
			bv.entry = func(t int64, id uint32, n int) { add(g.keys(v, id), bucket(t), int64(n)) }
			if err := bv.visit(r.Context(), v); err != nil {
				s.queryErr(w, err)
				return
			}
		}
		keys, totals := largestFirst(vol, limit)
		res := []any{}
		for _, k := range keys {
			if !rangeQuery {
				res = append(res, map[string]any{"metric": g.metrics[k], "value": []any{unixSecondsJSON(end), strconv.FormatInt(totals[k], 10)}})
				continue
			}
			bs := slices.Sorted(maps.Keys(vol[k]))
			vals := make([][]any, 0, len(bs))
			for _, b := range bs {
				vals = append(vals, []any{unixSecondsJSON(start + b*step), strconv.FormatInt(vol[k][b], 10)})
			}
			res = append(res, map[string]any{"metric": g.metrics[k], "values": vals})
		}
		typ := "vector"
		if rangeQuery {
			typ = "matrix"
		}
		writeJSON(w, lokiResponse{Status: "success", Data: lokiData{ResultType: typ, Result: res, Stats: lokiStats(0, 0, time.Since(t0))}})
	}
}

// lokiDetectedLabels serves /loki/api/v1/detected_labels: the stream
// labels of the streams with entries in [start, end] that the selector
// (query, optional) admits, each with its number of distinct values,
// exactly (blocks at the range's edges are decoded to tell which streams
// have entries inside it).
func (s *Server) lokiDetectedLabels(w http.ResponseWriter, r *http.Request, ts *tenantStore) {
	var plan *query.Plan
	if q := r.URL.Query().Get("query"); strings.TrimSpace(q) != "" {
		var err error
		if plan, err = selectorPlan("query", q); err != nil {
			s.queryErr(w, err)
			return
		}
	}
	start, end, err := s.rangeParams(r)
	if err != nil {
		s.queryErr(w, err)
		return
	}
	type detected struct {
		Label       string `json:"label"`
		Cardinality int    `json:"cardinality"`
	}
	out := []detected{}
	if ts != nil {
		v, err := ts.w.View()
		if err != nil {
			s.queryErr(w, err)
			return
		}
		// The streams with an entry in the range, as a bitset: a map
		// of every stream of a big tenant cost more than the rest.
		seen := newBitset(len(v.Streams))
		bv := &blockVisitor{plan: plan, start: start, end: end}
		bv.meta = func(m *segment.BlockMeta) {
			for _, id := range m.Streams {
				if int(id) < len(v.Streams) {
					seen.add(id)
				}
			}
		}
		bv.entry = func(_ int64, id uint32, _ int) {
			if int(id) < len(v.Streams) {
				seen.add(id)
			}
		}
		if err := bv.visit(r.Context(), v); err != nil {
			s.queryErr(w, err)
			return
		}
		var ids []uint32
		for id := range uint32(len(v.Streams)) {
			if seen.has(id) {
				ids = append(ids, id)
			}
		}
		card := labelCardinalities(v, ids)
		for _, n := range slices.Sorted(maps.Keys(card)) {
			out = append(out, detected{n, card[n]})
		}
	}
	writeJSON(w, map[string]any{"detectedLabels": out})
}

// detectedField is one field of detected_fields' answer.
type detectedField struct {
	Label       string   `json:"label"`
	Type        string   `json:"type"`
	Cardinality int      `json:"cardinality"`
	Parsers     []string `json:"parsers"`
	values      map[string]bool
}

// fieldParsers are the pipelines detected_fields parses a line with:
// json first, then logfmt for a line that is not JSON, as Loki does. The
// selector is never used (Plan.Labels runs the stages only), so the
// fields are what `| json` or `| logfmt` would extract in a query,
// including the _extracted suffix for a name the stream has as a label.
var fieldParsers = sync.OnceValue(func() [2]*query.Plan {
	var out [2]*query.Plan
	for i, src := range []string{`{x="x"} | json`, `{x="x"} | logfmt`} {
		ast, err := query.Parse(src)
		if err != nil {
			panic(err)
		}
		if out[i], err = query.Compile(ast); err != nil {
			panic(err)
		}
	}
	return out
})

// detectFields parses the newest lineLimit entries that q selects in
// [start, end] (fewer when they hold more than maxBytes, as an answer
// would: answerLimit) and returns their fields by name.
func detectFields(ctx context.Context, ts *tenantStore, q string, start, end int64, lineLimit int, maxBytes int64) (map[string]*detectedField, error) {
	fields := map[string]*detectedField{}
	sel, err := parseSelection(q, false)
	if err != nil {
		return nil, err
	}
	if sel.plan == nil {
		return nil, badRequest("bad_param", "query=%q: want a LogQL query such as {app=\"api\"}", q)
	}
	sel.start, sel.end = start, end
	hits, _, err := collect(ctx, ts, sel, answerLimit{entries: lineLimit, bytes: maxBytes, backward: true})
	if err != nil || len(hits) == 0 {
		return fields, err
	}
	v, err := ts.w.View()
	if err != nil {
		return nil, err
	}
	parsers := fieldParsers()
	streams := map[uint32][]query.Label{}
	for _, h := range hits {
		sl, ok := streams[h.Stream]
		if !ok {
			sl = queryLabels(v.Labels(h.Stream))
			streams[h.Stream] = sl
		}
		// Structured metadata are fields too, found by no parser (Loki
		// lists them with "parsers": null).
		for name, value := range metadataMap(h.Attrs) {
			if value == "" {
				continue
			}
			f := fields[name]
			if f == nil {
				f = &detectedField{Label: name, Type: fieldType(value), values: map[string]bool{}}
				fields[name] = f
			} else {
				f.Type = mergeFieldType(f.Type, fieldType(value))
			}
			f.values[value] = true
		}
		for i, name := range []string{"json", "logfmt"} {
			ext, ok := parsers[i].Labels(sl, h.Line)
			if !ok || slices.ContainsFunc(ext, func(l query.Label) bool { return l.Name == "__error__" }) {
				continue
			}
			for _, l := range ext {
				if l.Value == "" {
					continue
				}
				f := fields[l.Name]
				if f == nil {
					f = &detectedField{Label: l.Name, Type: fieldType(l.Value), values: map[string]bool{}}
					fields[l.Name] = f
				} else {
					f.Type = mergeFieldType(f.Type, fieldType(l.Value))
				}
				f.values[l.Value] = true
				if !slices.Contains(f.Parsers, name) {
					f.Parsers = append(f.Parsers, name)
					slices.Sort(f.Parsers)
				}
			}
			break
		}
	}
	return fields, nil
}

// fieldParams reads detected_fields' parameters: the time range, the
// query (any LogQL log query: its filters choose the lines), line_limit
// (lines sampled, default 1000, at most MaxQueryLimit) and limit (fields
// or values returned, default 1000).
func (s *Server) fieldParams(r *http.Request) (q string, start, end int64, lineLimit, limit int, err error) {
	p := r.URL.Query()
	q = p.Get("query")
	if strings.TrimSpace(q) == "" {
		return "", 0, 0, 0, 0, badRequest("bad_param", "query: want a LogQL query such as {app=\"api\"}")
	}
	if start, end, err = s.rangeParams(r); err != nil {
		return
	}
	if lineLimit, err = parseLimit(p.Get("line_limit"), 1000, s.cfg.MaxQueryLimit); err != nil {
		err = badRequest("bad_param", "line_limit=%q: want a non-negative integer", p.Get("line_limit"))
		return
	}
	limit, err = parseLimit(p.Get("limit"), 1000, 1<<20)
	return
}

// lokiDetectedFields serves /loki/api/v1/detected_fields: the fields that
// json (or, for a line that is not JSON, logfmt) extracts from a sample of
// the newest matching entries, each with a type guess from its values
// (int, float, boolean, duration, bytes, else string), its number of
// distinct values in the sample and the parsers that found it. The body
// is bare ({"fields": [...], "limit": N}), as Loki's; limit is given only
// when some field was found, as Loki does.
func (s *Server) lokiDetectedFields(w http.ResponseWriter, r *http.Request, ts *tenantStore) {
	fields, limit, ok := s.detectedSample(w, r, ts)
	if !ok {
		return
	}
	out := []*detectedField{}
	for _, n := range slices.Sorted(maps.Keys(fields)) {
		f := fields[n]
		f.Cardinality = len(f.values)
		out = append(out, f)
	}
	// Keep the most varied fields when cutting at limit, then name order.
	if len(out) > limit {
		slices.SortStableFunc(out, func(a, b *detectedField) int { return b.Cardinality - a.Cardinality })
		out = out[:limit]
		slices.SortFunc(out, func(a, b *detectedField) int { return strings.Compare(a.Label, b.Label) })
	}
	resp := map[string]any{"fields": out}
	if len(out) > 0 {
		resp["limit"] = limit
	}
	writeJSON(w, resp)
}

// lokiDetectedFieldValues serves /loki/api/v1/detected_field/<name>/values:
// the distinct values of one detected field in the same sample, sorted,
// at most limit of them: {"values": [...], "limit": N}.
func (s *Server) lokiDetectedFieldValues(w http.ResponseWriter, r *http.Request, ts *tenantStore) {
	name := r.PathValue("name")
	fields, limit, ok := s.detectedSample(w, r, ts)
	if !ok {
		return
	}
	vals := []string{}
	if f := fields[name]; f != nil {
		vals = slices.Sorted(maps.Keys(f.values))
	}
	writeJSON(w, map[string]any{"values": vals[:min(len(vals), limit)], "limit": limit})
}

// fieldType guesses a value's type as Loki names them, trying int, float,
// boolean, duration and bytes in that order.
func fieldType(v string) string {
	if _, err := strconv.ParseInt(v, 10, 64); err == nil {
		return "int"
	}
	if _, err := strconv.ParseFloat(v, 64); err == nil {
		return "float"
	}
	if _, err := strconv.ParseBool(v); err == nil {
		return "boolean"
	}
	if _, err := time.ParseDuration(v); err == nil {
		return "duration"
	}
	if isBytes(v) {
		return "bytes"
	}
	return "string"
}

// mergeFieldType is the type of a field whose values have types a and b:
// int and float make float, other differences string.
func mergeFieldType(a, b string) string {
	switch {
	case a == b:
		return a
	case a == "int" && b == "float", a == "float" && b == "int":
		return "float"
	}
	return "string"
}

// isBytes reports whether v is a size such as "10KB", "1.5 MiB" or "3b":
// a decimal number, an optional space and a unit (b, or k/m/g/t/p/e with
// an optional "i" and "b"; any case).
func isBytes(v string) bool {
	i := 0
	digits := 0
	for i < len(v) && (v[i] >= '0' && v[i] <= '9' || v[i] == '.') {
		if v[i] != '.' {
			digits++
		}
		i++
	}
	if digits == 0 || strings.Count(v[:i], ".") > 1 {
		return false
	}
	if i < len(v) && v[i] == ' ' {
		i++
	}
	switch u := strings.ToLower(v[i:]); u {
	case "b":
		return true
	default:
		if len(u) == 0 || !strings.ContainsRune("kmgtpe", rune(u[0])) {
			return false
		}
		switch u[1:] {
		case "", "b", "ib", "i":
			return true
		}
	}
	return false
}

// Pattern mining limits: distinct patterns tracked (lines of patterns
// first seen after that many are not counted) and patterns answered (the
// most frequent).
const (
	maxPatternsTracked  = 10000
	maxPatternsAnswered = 500
)

// lineTemplate is a line's pattern as hay mines them: the line split at
// runs of white space, each token that holds a digit replaced by <_>
// (for key=value tokens whose key has no digit, the value only:
// key=<_>), tokens joined by one space. Lines without a constant token
// have no pattern (""). This is hay's own, simpler rule than Loki's
// pattern ingester (which clusters similar lines with the Drain
// algorithm): lines that differ in a word without digits make two
// patterns here.
func lineTemplate(line []byte) string {
	var b strings.Builder
	constant := false
	for tok := range strings.FieldsSeq(string(line)) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		if !strings.ContainsAny(tok, "0123456789") {
			b.WriteString(tok)
			constant = true
			continue
		}
		if k, _, ok := strings.Cut(tok, "="); ok && k != "" && !strings.ContainsAny(k, "0123456789") {
			b.WriteString(k)
			b.WriteString("=<_>")
			constant = true
			continue
		}
		b.WriteString("<_>")
	}
	if !constant {
		return ""
	}
	return b.String()
}

// lokiPatterns serves /loki/api/v1/patterns: the patterns (lineTemplate)
// of the entries a stream selector admits in [start, end) (end exclusive,
// as Loki's pattern samples and query_range), each with its
// count per step ([t, t+step) from start, as volume_range), the most
// frequent first (at most maxPatternsAnswered). Counts are exact: every
// entry in the range is read (Loki's pattern ingester keeps them as
// they arrive instead).
func (s *Server) lokiPatterns(w http.ResponseWriter, r *http.Request, ts *tenantStore) {
	p := r.URL.Query()
	plan, start, end, err := s.selectorRange(r)
	if err != nil {
		s.queryErr(w, err)
		return
	}
	step := int64(max(1, (end-start)/int64(time.Second)/250)) * int64(time.Second)
	if v := p.Get("step"); v != "" {
		d, err := parseDurationParam("step", v)
		if err != nil {
			s.queryErr(w, err)
			return
		}
		// Samples are in whole seconds: a shorter step would repeat
		// their times.
		step = max(int64(d), int64(time.Second))
	}
	if (end-start)/step >= 11000 {
		s.queryErr(w, badRequest("bad_param", "step=%s: more than 11000 samples per pattern: raise step", time.Duration(step)))
		return
	}
	counts := map[string]map[int64]int64{}
	if ts != nil {
		v, err := ts.w.View()
		if err != nil {
			s.queryErr(w, err)
			return
		}
		// Patterns come from the lines and times alone.
		sel := &selection{plan: plan, start: start, end: exclusiveEnd(start, end), skipAttrs: true}
		// The patterns tracked hold at most --max-query-bytes, as a log
		// query's answer: a pattern is as long as its line, up to
		// --max-line (16 MiB at most), and maxPatternsTracked of them
		// could hold gigabytes.
		maxTracked, tracked := s.answerLimit(0, true).bytes, int64(0)
		err = run(r.Context(), v, sel, anyOrder, 0, func(h *hit) bool {
			tpl := lineTemplate(h.Line)
			if tpl == "" {
				return true
			}
			m := counts[tpl]
			if m == nil {
				if len(counts) >= maxPatternsTracked || maxTracked > 0 && tracked+int64(len(tpl)) > maxTracked {
					return true
				}
				tracked += int64(len(tpl))
				m = map[int64]int64{}
				counts[tpl] = m
			}
			m[(h.Time-start)/step]++
			return true
		})
		if err != nil {
			s.queryErr(w, err)
			return
		}
	}
	keys, _ := largestFirst(counts, maxPatternsAnswered)
	type pattern struct {
		Pattern string     `json:"pattern"`
		Samples [][2]int64 `json:"samples"`
	}
	out := []pattern{}
	for _, k := range keys {
		pt := pattern{Pattern: k}
		for _, b := range slices.Sorted(maps.Keys(counts[k])) {
			// Samples are [seconds, count], as Loki's reference shows.
			pt.Samples = append(pt.Samples, [2]int64{(start + b*step) / 1e9, counts[k][b]})
		}
		out = append(out, pt)
	}
	writeJSON(w, map[string]any{"status": "success", "data": out})
}

// lokiDrilldownLimits serves /loki/api/v1/drilldown-limits, which Logs
// Drilldown reads to decide what to offer: the limits object of Loki's
// tenant limits that it uses, with hay's values, whether patterns are
// answered, and the version. Durations are in Prometheus' form;
// 0s is no limit.
func (s *Server) lokiDrilldownLimits(w http.ResponseWriter, r *http.Request, ts *tenantStore) {
	// service_name is derived at push from these labels (push.go,
	// discoverServiceName) unless --discover-service-name=false;
	// detected_level from these fields (levels.go) unless
	// --discover-log-levels=false.
	discover := serviceNameSources
	if s.cfg.NoServiceNameDiscovery {
		discover = []string{}
	}
	writeJSON(w, map[string]any{
		"limits": map[string]any{
			"discover_log_levels":         !s.cfg.NoLogLevelDiscovery,
			"discover_service_name":       discover,
			"log_level_fields":            levelFields,
			"max_entries_limit_per_query": s.cfg.MaxQueryLimit,
			"max_line_size_truncate":      s.cfg.TruncateLines,
			"max_query_bytes_read":        "0B",
			"max_query_length":            "0s",
			"max_query_lookback":          "0s",
			"max_query_range":             "0s",
			"max_query_series":            s.cfg.MaxQuerySeries,
			"metric_aggregation_enabled":  false,
			"pattern_persistence_enabled": false,
			"query_timeout":               promDuration(s.cfg.QueryTimeout),
			"retention_period":            "0s",
			"volume_enabled":              true,
			"volume_max_series":           volumeMaxSeries,
		},
		// Patterns are mined at query time (lokiPatterns).
		"pattern_ingester_enabled": true,
		"version":                  "haystack " + version.Get().Version,
	})
}

// promDuration writes d as Prometheus durations are written ("30d1h",
// "5m", "1s500ms", "0s").
func promDuration(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	var b strings.Builder
	for _, u := range []struct {
		suf string
		d   time.Duration
	}{{"y", 365 * 24 * time.Hour}, {"w", 7 * 24 * time.Hour}, {"d", 24 * time.Hour}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond}} {
		if n := d / u.d; n > 0 {
			b.WriteString(strconv.FormatInt(int64(n), 10) + u.suf)
			d -= n * u.d
		}
	}
	if b.Len() == 0 {
		return "0s"
	}
	return b.String()
}

// largestFirst returns up to limit keys of m (a series' or pattern's
// counts per bucket), the largest total first, ties by key, and every
// key's total.
func largestFirst(m map[string]map[int64]int64, limit int) ([]string, map[string]int64) {
	totals := map[string]int64{}
	for k, byBucket := range m {
		for _, n := range byBucket {
			totals[k] += n
		}
	}
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmp.Compare(totals[b], totals[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return keys[:min(len(keys), limit)], totals
}

// exclusiveEnd is the last nanosecond before a range's end, for the
// endpoints that read [start, end) as query_range does; a range of one
// instant (end == start) keeps it.
func exclusiveEnd(start, end int64) int64 {
	if end > start {
		return end - 1
	}
	return end
}

// selectorRange reads the query parameter (a stream selector alone) and
// start and end, for volume and patterns.
func (s *Server) selectorRange(r *http.Request) (*query.Plan, int64, int64, error) {
	plan, err := selectorPlan("query", r.URL.Query().Get("query"))
	if err != nil {
		return nil, 0, 0, err
	}
	start, end, err := s.rangeParams(r)
	return plan, start, end, err
}

// detectedSample reads the detected-field parameters and the fields of
// the sampled entries, for detected_fields and detected_field values; on
// an error it has answered the request.
func (s *Server) detectedSample(w http.ResponseWriter, r *http.Request, ts *tenantStore) (map[string]*detectedField, int, bool) {
	q, start, end, lineLimit, limit, err := s.fieldParams(r)
	if err == nil {
		var fields map[string]*detectedField
		// A log query's range: end exclusive, as Loki's detected_fields
		// (review 15c F3: a field only the entry at end had was listed).
		if fields, err = detectFields(r.Context(), ts, q, start, exclusiveEnd(start, end), lineLimit, s.answerLimit(0, true).bytes); err == nil {
			return fields, limit, true
		}
	}
	s.queryErr(w, err)
	return nil, 0, false
}
