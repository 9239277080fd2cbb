package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"haystack/internal/ingest"
	"haystack/internal/query"
	"haystack/internal/search"
	"haystack/internal/segment"
	"haystack/internal/store"
)

// formReadTimeout bounds the read of a query's POST form: a form is at
// most 1 MiB, and an honest client sends it with its headers.
const formReadTimeout = 10 * time.Second

// query wraps a read endpoint: the concurrent query cap (a bounded wait
// for a slot, then 429 with Retry-After), the query timeout, the tenant's
// store (nil when the tenant has no data yet) and the latency metric.
func (s *Server) query(name string, h func(http.ResponseWriter, *http.Request, *tenantStore)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		defer func() { s.met.queryDur.WithLabelValues(name).Observe(time.Since(start).Seconds()) }()
		if r.Method == http.MethodPost {
			// Loki accepts its query endpoints as POST forms too: read the
			// form (bounded in size and time) into the query string the
			// handlers read, before taking a slot: a client that sent the
			// headers and never the body held a slot until the server's
			// read timeout (2 minutes), so a few such connections kept
			// every tenant's queries out (auth audit A6).
			r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
			rc := http.NewResponseController(w)
			rc.SetReadDeadline(time.Now().Add(formReadTimeout))
			err := r.ParseForm()
			rc.SetReadDeadline(time.Time{})
			if err != nil {
				writeError(w, http.StatusBadRequest, "reading form: "+err.Error())
				return
			}
			r.URL.RawQuery = r.Form.Encode()
		}
		if !s.takeSlot(w, r) {
			return
		}
		defer func() { <-s.sem }()
		tenant, ok := s.tenant(w, r)
		if !ok {
			return
		}
		ts, err := s.openTenant(tenant, false)
		if err != nil {
			s.queryErr(w, err) // 503 past --max-open-tenants or shutting down
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.QueryTimeout)
		defer cancel()
		h(w, r.WithContext(ctx), ts)
	})
}

// takeSlot is acquireSlot for a handler: without a slot it answers 429
// with Retry-After and reports false.
func (s *Server) takeSlot(w http.ResponseWriter, r *http.Request) bool {
	if s.acquireSlot(r.Context()) {
		return true
	}
	s.met.rejected.WithLabelValues("too_many_queries").Inc()
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusTooManyRequests, fmt.Sprintf("too many concurrent queries (limit %d, waited %s); retry shortly", s.cfg.MaxConcurrentQueries, max(s.cfg.QueryQueueWait, 0)))
	return false
}

// acquireSlot takes one of the MaxConcurrentQueries slots, waiting up to
// QueryQueueWait in a queue of at most MaxQueuedQueries (or until the
// client goes away). It reports whether it got one; the caller then
// gives it back with <-s.sem.
func (s *Server) acquireSlot(ctx context.Context) bool {
	select {
	case s.sem <- struct{}{}:
		return true
	default:
	}
	if s.cfg.QueryQueueWait < 0 {
		return false
	}
	if s.queued.Add(1) > int64(s.cfg.MaxQueuedQueries) {
		s.queued.Add(-1)
		return false
	}
	defer s.queued.Add(-1)
	t := time.NewTimer(s.cfg.QueryQueueWait)
	defer t.Stop()
	select {
	case s.sem <- struct{}{}:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// queryErr answers a failed query: 400 for bad input, 504 for the timeout.
func (s *Server) queryErr(w http.ResponseWriter, err error) {
	var he *httpError
	switch {
	case errors.As(err, &he):
		writeError(w, he.status, he.msg)
	case errors.Is(err, context.DeadlineExceeded):
		s.met.rejected.WithLabelValues("query_timeout").Inc()
		writeError(w, http.StatusGatewayTimeout, fmt.Sprintf("query timed out after %s", s.cfg.QueryTimeout))
	case errors.Is(err, context.Canceled):
		writeError(w, 499, "client closed the request")
	default:
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

// parseTime reads a time parameter: Unix nanoseconds (an integer), Unix
// seconds with a fraction ("1764467400.5"), or RFC 3339. Empty gives def.
func parseTime(name, v string, def int64) (int64, error) {
	if v == "" {
		return def, nil
	}
	if n, ok := parseUnixDecimal(v); ok {
		return n, nil
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) && math.Abs(f) < 9e9 {
		sec, frac := math.Modf(f)
		return int64(sec)*1e9 + int64(math.Round(frac*1e9)), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		// Saturated: year 9999 is "no end", not a wrapped time in 1816.
		return ingest.UnixNano(t), nil
	}
	return 0, badRequest("bad_param", "%s=%q: want Unix nanoseconds, Unix seconds with a fraction, or RFC 3339", name, v)
}

// parseUnixDecimal reads a Unix time as Loki's API writes it: an integer
// of up to ten digits is seconds, a longer one nanoseconds ("Timestamp
// formats" in Loki's HTTP API reference), and digits with a decimal point
// are seconds with a fraction, read exactly from the text (through a
// float64, 1699999402.4 would be 95 ns late and miss the entry at it).
// Digits of the fraction past nanoseconds are dropped. Seconds past what
// int64 nanoseconds hold (2262-04-11) saturate to math.MaxInt64 (or
// MinInt64 before 1677), so end=9999999999 means "no end".
func parseUnixDecimal(v string) (int64, bool) {
	neg := strings.HasPrefix(v, "-")
	digits := strings.TrimPrefix(v, "-")
	whole, frac, dot := strings.Cut(digits, ".")
	if whole == "" && frac == "" || !allDigits(whole) || !allDigits(frac) {
		return 0, false
	}
	if !dot && len(whole) > 10 {
		// Nanoseconds; parsed with the sign so that MinInt64 reads.
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, false
		}
		return n, true
	}
	if len(whole) > 10 {
		return 0, false // seconds beyond year 2286: not a time
	}
	n, sat := exactSeconds(whole, frac)
	switch {
	case sat && neg:
		return math.MinInt64, true
	case sat:
		return math.MaxInt64, true
	case neg:
		return -n, true
	}
	return n, true
}

// exactSeconds reads whole.frac seconds (digits only, whole at most ten
// of them) as nanoseconds, exactly; digits past nanoseconds are dropped.
// sat reports a value beyond int64 nanoseconds (n is then 0).
func exactSeconds(whole, frac string) (n int64, sat bool) {
	sec := int64(0)
	if whole != "" {
		sec, _ = strconv.ParseInt(whole, 10, 64) // at most ten digits: fits
	}
	frac = (frac + "000000000")[:9]
	ns, _ := strconv.ParseInt(frac, 10, 64)
	const maxSec, maxNs = math.MaxInt64 / int64(1e9), math.MaxInt64 % int64(1e9)
	if sec > maxSec || sec == maxSec && ns > maxNs {
		return 0, true
	}
	return sec*1e9 + ns, false
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseDurationParam reads step-like values: a Go/Prometheus duration
// ("30s", "5m") or a number of seconds ("15", "0.5"; digits with a
// decimal point are read exactly, other numbers such as "1e3" as Loki
// does, through a float). It must be positive and fit a Duration: a step
// that rounds to 0 would divide by zero.
func parseDurationParam(name, v string) (time.Duration, error) {
	bad := badRequest("bad_param", "%s=%q: want a positive duration (30s, 5m) or seconds", name, v)
	if whole, frac, _ := strings.Cut(v, "."); (whole != "" || frac != "") && allDigits(whole) && allDigits(frac) {
		whole = strings.TrimLeft(whole, "0") // "0015" is 15 s
		if len(whole) > 10 {
			return 0, bad
		}
		if n, sat := exactSeconds(whole, frac); !sat && n > 0 {
			return time.Duration(n), nil
		}
		return 0, bad
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if ns := f * 1e9; ns >= 1 && ns < math.MaxInt64 { // NaN fails both
			return time.Duration(ns), nil
		}
		return 0, bad
	}
	if d, err := parsePromDuration(v); err == nil && d > 0 {
		return d, nil
	}
	return 0, bad
}

// parsePromDuration is time.ParseDuration, or Prometheus' duration syntax
// (what Loki reads): whole numbers of y, w, d, h, m, s and ms, in that
// order, each at most once (1d12h, 1w1d); a value that overflows a
// Duration is an error, as in Prometheus.
func parsePromDuration(v string) (time.Duration, error) {
	if d, err := time.ParseDuration(v); err == nil {
		return d, nil
	}
	bad := fmt.Errorf("bad duration %q", v)
	units := []struct {
		suf string
		d   time.Duration
	}{{"y", 365 * 24 * time.Hour}, {"w", 7 * 24 * time.Hour}, {"d", 24 * time.Hour}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond}}
	var total time.Duration
	rest, next := v, 0
	for rest != "" {
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 0 {
			return 0, bad
		}
		n, err := strconv.ParseInt(rest[:i], 10, 64)
		rest = rest[i:]
		u := -1
		for k := next; k < len(units); k++ {
			// "ms" before "m": the longer unit where both fit.
			if k == 4 && strings.HasPrefix(rest, "ms") {
				continue
			}
			if strings.HasPrefix(rest, units[k].suf) {
				u = k
				break
			}
		}
		if u < 0 {
			return 0, bad
		}
		rest, next = rest[len(units[u].suf):], u+1
		if err != nil || n > (math.MaxInt64-int64(total))/int64(units[u].d) {
			return 0, fmt.Errorf("duration %q out of range", v)
		}
		total += time.Duration(n) * units[u].d
	}
	if total <= 0 {
		return 0, bad
	}
	return total, nil
}

// selection is what entries a query reads: LogQL (plan) or a plain-text
// literal (pat, fold), in [start, end] (both inclusive).
type selection struct {
	plan       *query.Plan
	pat        []byte
	fold       bool
	start, end int64
	// categorize asks for each hit's parsed labels apart (hit.Parsed),
	// for Loki's categorize-labels responses.
	categorize bool
	// skipAttrs says the caller uses no entry's structured metadata:
	// neither hit.Attrs nor what metadata add to hit.Labels and hit.Meta
	// (a count or sum without a grouping by labels). Segment blocks are
	// then read without it (search.Query.SkipAttrs), unless the plan's
	// label filters need it to select entries (search.NeedsAttrs), and
	// hits carry no metadata, or only some. The zero value reads it.
	skipAttrs bool
}

// parseSelection parses q: LogQL when it starts with '{' (after any #
// comment lines), else plain text.
func parseSelection(q string, fold bool) (*selection, error) {
	sel := &selection{start: math.MinInt64, end: math.MaxInt64}
	if t := strings.TrimSpace(q); strings.HasPrefix(skipSpaceAndComments(t), "{") {
		ast, err := query.Parse(t)
		if err != nil {
			return nil, badRequest("bad_query", "%v", err)
		}
		p, err := query.Compile(ast)
		if err != nil {
			return nil, badRequest("bad_query", "%v", err)
		}
		sel.plan = p
		return sel, nil
	}
	sel.pat, sel.fold = []byte(q), fold
	return sel, nil
}

// hit is one selected entry. Line is only valid during the callback
// unless copied.
type hit struct {
	Time   int64
	Stream uint32
	Ord    int64 // the entry's position in store order (scanBlocksOpt only)
	// Labels are the entry's labels as Loki 3 gives them: the stream's,
	// plus its structured metadata and a pipeline's extracted ones.
	Labels string
	// Meta is the part of Labels that came from the entry's structured
	// metadata, Parsed (only when selection.categorize) the part a parser
	// extracted with __error__ and __error_details__; "" for none. Both
	// canonical label text.
	Meta, Parsed string
	Line         []byte
	// Attrs is the entry's structured metadata as stored (package attrs'
	// encoding, empty for none), valid like Line.
	Attrs []byte
}

// labelHit runs sel's LogQL pipeline on an entry of a stream (its labels
// parsed, and text, their canonical form) and sets h's labels: text when
// the pipeline changed nothing, else the whole set, with Meta and Parsed
// (see hit), and h.Line when a stage rewrote the line. It reports whether
// the entry passed.
func (sel *selection) labelHit(h *hit, stream []query.Label, text string, meta, line []byte) bool {
	l, changed, ok := sel.plan.LabelSetAttrs(stream, meta, line)
	if !ok {
		return false
	}
	if l.Line != nil {
		// line_format, decolorize or unpack rewrote it: Loki returns,
		// counts and measures the new line.
		h.Line = l.Line
	}
	h.Labels, h.Meta, h.Parsed = text, "", ""
	if !changed {
		return true
	}
	h.Labels = labelText(l.All)
	if l.Meta != nil {
		h.Meta = labelText(l.Meta)
	}
	if sel.categorize {
		if _, parsed := l.Split(stream); parsed != nil {
			h.Parsed = labelText(parsed)
		}
	}
	return true
}

// streamInfo caches a stream's labels, parsed once per query (known)
// when needed.
type streamInfo struct {
	known  bool
	labels []query.Label
	text   string
}

// queryLabels parses a stream's label text for a plan; text that does not
// parse gives no labels.
func queryLabels(text string) []query.Label {
	ls, _ := ingest.ParseLabels(text)
	var out []query.Label
	for _, l := range ls {
		out = append(out, query.Label(l))
	}
	return out
}

// hasStages reports whether a plan has parser, label-filter, drop or keep
// stages, the only ones that change a result's labels.
func hasStages(p *query.Plan) bool {
	for _, st := range p.Query.Stages {
		if _, ok := st.(*query.LineFilter); !ok {
			return true
		}
	}
	return false
}

var errStop = errors.New("stop")

// anyOrder asks run for the matches in whatever order is cheapest: callers
// that count, or sort by time themselves.
const anyOrder search.Order = -1

// selectedStreams counts, up to limit, the streams the selection admits
// that have blocks in its time range (from the block index alone).
func selectedStreams(v *store.View, sel *selection, limit int) int {
	return len(selectStreams(v, sel.plan).presentIDs(v, sel.start, sel.end, limit))
}

// searchQuery is sel as a search.Query over v.
func searchQuery(v *store.View, sel *selection) search.Query {
	q := search.Query{Since: sel.start, Labels: v.Labels, SkipAttrs: sel.skipAttrs}
	if sel.end < math.MaxInt64 {
		q.Until = sel.end + 1 // search's Until is exclusive
	}
	// search reads a zero Since or Until as "no bound": run's callback
	// re-checks the range for those two edge values.
	if sel.plan != nil {
		// Plain text needs no stream index: it is not built for it.
		q.Plan, q.Index = sel.plan, v.Index()
	} else {
		q.Pattern, q.Fold = sel.pat, sel.fold
	}
	return q
}

// run executes sel over v with internal/search (parallel block scan,
// stream pruning, driving needles from the plan) and calls fn for each
// match in order, until fn returns false or limit matches (0: no limit).
// Oldest order is ascending time, ties by stream id then ingestion order;
// Newest is its exact reverse; anyOrder is whatever is cheapest.
func run(ctx context.Context, v *store.View, sel *selection, order search.Order, limit int64, fn func(*hit) bool) error {
	if order == anyOrder {
		if n := selectedStreams(v, sel, 2); n == 0 {
			return nil
		} else if n > 1 {
			return scanBlocks(ctx, v, sel, fn)
		}
		order = search.Stored // one stream: search's single run, in store order (no sorting)
	}
	// Parsed as matches arrive: a slice by stream id would cost every
	// stream of the tenant per query.
	extract := sel.plan != nil && hasStages(sel.plan)
	infos := map[uint32]*streamInfo{}
	info := func(id uint32, parse bool) *streamInfo {
		si := infos[id]
		if si == nil {
			si = &streamInfo{text: v.Labels(id)}
			infos[id] = si
		}
		if parse && !si.known {
			si.labels, si.known = queryLabels(si.text), true
		}
		return si
	}
	q := searchQuery(v, sel)
	q.Limit, q.Order = limit, order
	var h hit
	var firstErr error
	_, err := search.Run(ctx, v.Parts, q, func(m *search.Match) error {
		if m.Time < sel.start || m.Time > sel.end {
			return nil
		}
		// Metadata are labels of the entry even without stages (Loki 3).
		label := extract || sel.plan != nil && len(m.Attrs) > 0
		si := info(m.Stream, label)
		h = hit{Time: m.Time, Stream: m.Stream, Labels: si.text, Line: m.Line, Attrs: m.Attrs}
		if label && !sel.labelHit(&h, si.labels, si.text, m.Attrs, m.Line) {
			// search.Run decided the stages already; this agrees with it
			// when it saw the same metadata.
			return nil
		}
		if !fn(&h) {
			return errStop
		}
		return nil
	}, func(err error) {
		if firstErr == nil {
			firstErr = err
		}
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	if err == nil && firstErr != nil {
		// A damaged block: fail the query rather than answer partially.
		err = firstErr
	}
	return err
}

// labelText is a pipeline's label set (query.Plan.LabelSet: sorted, no
// empty values) in canonical form.
func labelText(set []query.Label) string {
	all := make(ingest.Labels, len(set))
	for i, l := range set {
		all[i] = ingest.Label(l)
	}
	return all.String()
}

// mergeLabels is a stream's labels with a pipeline's extracted ones, in
// canonical form (extracted names never clash: the parser renames them).
func mergeLabels(base, ext []query.Label) string {
	all := make(ingest.Labels, 0, len(base)+len(ext))
	for _, l := range base {
		all = append(all, ingest.Label(l))
	}
	for _, l := range ext {
		if l.Value != "" {
			all = append(all, ingest.Label(l))
		}
	}
	slices.SortFunc(all, func(a, b ingest.Label) int { return cmp.Compare(a.Name, b.Name) })
	return all.String()
}

// collect runs a log query over ts (nil: no data) and returns up to limit
// entries sorted by time (newest first when backward), and whether more
// matched. Ties keep the scan's order (blocks by time bound, then store
// order), which is the same every time over the same data.
//
// Loki clients may push a stream's entries out of time order, so the
// limit cannot be taken from the first entries the store yields. Instead
// blocks are visited by their time bounds (newest MaxTime first when
// backward) into a bounded top-k, and once it holds limit entries every
// block whose time range cannot beat the worst of them is skipped from
// the block index alone: a "latest 100 lines" query reads a few blocks
// whatever the store's size, and the answer is exact.
func collect(ctx context.Context, ts *tenantStore, sel *selection, limit int, backward bool) ([]hit, bool, error) {
	var hits []hit
	more, err := collectStream(ctx, ts, sel, limit, backward, func(h *hit) error {
		if h != nil {
			hits = append(hits, *h)
		}
		return nil
	})
	return hits, more, err
}

// collectStream is collect delivering the answer to out in order as soon
// as each entry's place is final, rather than at the end: blocks are
// visited by time bound, so after a block every kept entry at least as
// new (backward) as the next block's MaxTime can no longer be displaced
// (an entry of equal time found later ranks after it). out(nil) marks the
// end of each batch of entries. An error from out stops the scan and is
// returned.
func collectStream(ctx context.Context, ts *tenantStore, sel *selection, limit int, backward bool, out func(*hit) error) (bool, error) {
	if ts == nil {
		return false, nil
	}
	v, err := ts.w.View()
	if err != nil {
		return false, err
	}
	k := &topK{limit: limit, backward: backward}
	var full atomic.Bool
	var bound atomic.Int64 // the k-th best time, once full
	opt := scanOpts{byTime: 1}
	if backward {
		opt.byTime = -1
	}
	var skipped atomic.Bool
	opt.skip = func(m segment.BlockMeta) bool {
		if !full.Load() {
			return false
		}
		skip := m.MaxTime < bound.Load()
		if !backward {
			skip = m.MinTime > bound.Load()
		}
		if skip {
			skipped.Store(true)
		}
		return skip
	}
	sent := 0
	flush := func(next *segment.BlockMeta) error {
		before := sent
		defer func() {
			if sent > before {
				out(nil) // the end of a batch: the caller may flush
			}
		}()
		for sent < len(k.hits) {
			h := &k.hits[sent]
			if next != nil && (backward && h.Time <= next.MaxTime || !backward && h.Time >= next.MinTime) {
				break
			}
			if err := out(h); err != nil {
				return err
			}
			sent++
		}
		return nil
	}
	opt.blockDone = func(next *segment.BlockMeta) error {
		if !k.sorted {
			k.compact()
		}
		if len(k.hits) >= limit {
			bound.Store(k.hits[limit-1].Time)
			full.Store(true)
		}
		return flush(next)
	}
	err = scanBlocksOpt(ctx, v, sel, opt, func(h *hit) bool {
		k.add(h)
		return true
	})
	if err != nil {
		return false, err
	}
	_, more := k.result()
	if err := flush(nil); err != nil {
		return false, err
	}
	// A skipped block may hold matches beyond the limit: "limited" then
	// says the answer stopped at the limit, as the UI's "load more" needs.
	return more || skipped.Load(), nil
}

// topK keeps the first limit hits by time (descending when backward),
// ties by store order (hit.Ord, which compaction keeps, so that a page
// asked again after a compaction orders equal times the same: the UI's
// "load more" drops the rows at the boundary time it already showed),
// then by arrival.
type topK struct {
	limit    int
	backward bool
	hits     []hit
	seqs     []int64
	seen     int64
	sorted   bool  // hits are compacted: sorted, at most limit
	full     bool  // limit entries kept at the last compaction
	worst    int64 // the time of the last of them
	bytes    int64 // line, metadata and label bytes held
	kept     int64 // bytes held after the last compaction
}

func (t *topK) add(h *hit) {
	t.seen++
	// Once limit entries are kept, one whose time is worse than the
	// worst of them cannot enter (an equal time may rank before it: ties
	// go by store order, Ord, not by arrival).
	if t.full && (t.backward && h.Time < t.worst || !t.backward && h.Time > t.worst) {
		return
	}
	c := *h
	c.Line = slices.Clone(h.Line)
	if len(h.Attrs) > 0 {
		c.Attrs = slices.Clone(h.Attrs)
	}
	t.hits = append(t.hits, c)
	t.seqs = append(t.seqs, t.seen)
	// Labels count too: label_format can make up to 1 MiB of them for
	// an entry (query.Pipeline's template bound).
	t.bytes += int64(len(c.Line) + len(c.Attrs) + len(c.Labels))
	t.sorted = false
	// Compact by count, and by bytes so that long lines cannot pile up:
	// when what arrived since the last compaction outweighs what it kept
	// and 64 MiB. (Against a fixed 64 MiB, a limit whose own entries
	// held more compacted, sorting them all, at every entry added.)
	if len(t.hits) >= 2*t.limit+256 || t.bytes-t.kept > max(t.kept, 64<<20) && len(t.hits) > t.limit {
		t.compact()
	}
}

func (t *topK) compact() {
	idx := make([]int, len(t.hits))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		ha, hb := &t.hits[a], &t.hits[b]
		if ha.Time != hb.Time {
			if t.backward {
				return cmp.Compare(hb.Time, ha.Time)
			}
			return cmp.Compare(ha.Time, hb.Time)
		}
		if c := cmp.Compare(ha.Ord, hb.Ord); c != 0 {
			return c
		}
		return cmp.Compare(t.seqs[a], t.seqs[b])
	})
	n := min(len(idx), t.limit)
	hits := make([]hit, n)
	seqs := make([]int64, n)
	for i := range n {
		hits[i], seqs[i] = t.hits[idx[i]], t.seqs[idx[i]]
	}
	t.hits, t.seqs, t.sorted = hits, seqs, true
	t.bytes = 0
	for i := range hits {
		t.bytes += int64(len(hits[i].Line) + len(hits[i].Attrs) + len(hits[i].Labels))
	}
	t.kept = t.bytes
	if n == t.limit && n > 0 {
		t.full, t.worst = true, hits[n-1].Time
	}
}

// result returns the kept hits in order and whether more matched.
func (t *topK) result() ([]hit, bool) {
	t.compact()
	return t.hits, t.seen > int64(len(t.hits))
}

func parseLimit(v string, def, max int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, badRequest("bad_param", "limit=%q: want a non-negative integer", v)
	}
	if n == 0 || n > max {
		n = max
	}
	return n, nil
}

func parseDirection(v string) (backward bool, err error) {
	switch strings.ToLower(v) {
	case "", "backward":
		return true, nil
	case "forward":
		return false, nil
	}
	return false, badRequest("bad_param", "direction=%q: want forward or backward", v)
}
