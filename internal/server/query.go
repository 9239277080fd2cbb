package server

import (
	"cmp"
	"container/heap"
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
	// ownLine: a stage made Line for this hit alone (line_format...), so
	// a consumer may keep it without copying it.
	ownLine bool
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
		h.Line, h.ownLine = l.Line, true
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
	return len(selectStreams(v, sel.plan).presentIDs(v, sel.start, sel.end, limit, false))
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

// answerLimit bounds a log query's answer.
type answerLimit struct {
	// entries is the query's limit (at least 1).
	entries int
	// bytes, when positive, bounds the answer's entries by size
	// (hitSize, summed; Config.MaxQueryBytes): the answer is the longest
	// run of entries, in the query's order, that fits, and holds at
	// least one entry however large. The answer stops there as it stops
	// at the entry limit, so a client pages on from its last time.
	bytes    int64
	backward bool
	// skip drops the first skip entries (in the answer's order) whose
	// time is boundary: the native API's paging past entries a client
	// has shown (native.go). They neither count toward entries or bytes
	// nor are held while the answer is collected.
	skip     int
	boundary int64
}

// answerLimit is a log query's answerLimit on this server.
func (s *Server) answerLimit(entries int, backward bool) answerLimit {
	return answerLimit{entries: entries, bytes: max(s.cfg.MaxQueryBytes, 0), backward: backward}
}

// answerEnd says how a log query's answer ended.
type answerEnd struct {
	// more: more entries matched than the answer holds.
	more bool
	// bytesCut: the answer stopped at answerLimit.bytes with fewer
	// entries than the limit.
	bytesCut bool
	// splitTime: bytesCut left out entries at the time of the answer's
	// last entry (all its entries share that time: the cut ends between
	// two times otherwise). A client that pages on by time alone (Loki's
	// API) cannot reach them.
	splitTime bool
}

// hitSize is what an entry of an answer is counted as against
// answerLimit.bytes: its line, metadata and label texts (label_format
// can make up to 1 MiB of labels for an entry) and 32 bytes for its time
// and the answer's framing. A rough measure of both the memory the
// entry holds while the answer is collected and its share of the
// encoded answer (JSON escaping may make that larger).
func hitSize(h *hit) int64 {
	return int64(len(h.Line)+len(h.Attrs)+len(h.Labels)+len(h.Meta)+len(h.Parsed)) + 32
}

// cutWarning is the warning a log query's answer cut by bytes carries.
func cutWarning(n int, maxBytes int64) string {
	return fmt.Sprintf("the answer was cut at %d entries: they hold about %s, the server's --max-query-bytes; ask again from the last entry's time for the rest (Grafana and hay search --server page on by themselves)", n, byteSize(maxBytes))
}

// splitWarning is the warning of a Loki answer whose entries all share
// one time and that left out others of that time (answerEnd.splitTime):
// Loki's API pages on from the last entry's time, with nothing to say how
// many of that time the client has, so those entries cannot be fetched
// with this bound.
func splitWarning(n int, t int64, maxBytes int64) string {
	return fmt.Sprintf("the answer was cut at %d entries, which hold about %s, the server's --max-query-bytes, and all share the time %s; other entries of that same time were left out, and paging on from it will not return them: narrow the query (a line filter, fewer streams), or ask the server's operator to raise --max-query-bytes (hay search --server pages past them)", n, byteSize(maxBytes), time.Unix(0, t).UTC().Format(time.RFC3339Nano))
}

// byteSize writes n as --max-query-bytes takes it (64MiB), or in bytes.
func byteSize(n int64) string {
	for _, u := range []struct {
		name string
		n    int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n > 0 && n%u.n == 0 {
			return fmt.Sprintf("%d%s", n/u.n, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// collect runs a log query over ts (nil: no data) and returns the
// entries of its answer sorted by time (newest first when backward): up
// to lim.entries, and as many as fit lim.bytes. Ties keep the scan's
// order (blocks by time bound, then store order), which is the same
// every time over the same data.
//
// Loki clients may push a stream's entries out of time order, so the
// limit cannot be taken from the first entries the store yields. Instead
// blocks are visited by their time bounds (newest MaxTime first when
// backward) into a bounded top-k, and once it holds limit entries (or
// as many as fit the bytes) every block whose time range cannot beat
// the worst of them is skipped from the block index alone: a "latest
// 100 lines" query reads a few blocks whatever the store's size, and the
// answer is exact.
func collect(ctx context.Context, ts *tenantStore, sel *selection, lim answerLimit) ([]hit, answerEnd, error) {
	var hits []hit
	end, err := collectStream(ctx, ts, sel, lim, func(h *hit) error {
		if h != nil {
			hits = append(hits, *h)
		}
		return nil
	})
	return hits, end, err
}

// collectStream is collect delivering the answer to out in order as soon
// as each entry's place is final, rather than at the end: blocks are
// visited by time bound, so after a block every kept entry at least as
// new (backward) as the next block's MaxTime can no longer be displaced
// (an entry of equal time found later ranks after it, and a cut by bytes
// only ever drops the answer's last entries). out(nil) marks the end of
// each batch of entries. An error from out stops the scan and is
// returned. What out is given stays valid until collectStream returns,
// but the top-k lets go of a line once out had it.
func collectStream(ctx context.Context, ts *tenantStore, sel *selection, lim answerLimit, out func(*hit) error) (answerEnd, error) {
	if ts == nil {
		return answerEnd{}, nil
	}
	v, err := ts.w.View()
	if err != nil {
		return answerEnd{}, err
	}
	limit, backward := max(lim.entries, 1), lim.backward
	byTime := 1
	if backward {
		byTime = -1
	}
	// The entries to skip are found first, from the entries at the
	// boundary time alone, by their store-order position (what orders
	// equal times): holding them in the top-k (limit+skip entries) made
	// a page past many long entries at one time hold all of them.
	var skipOrds []int64
	if lim.skip > 0 {
		if skipOrds, err = boundaryOrds(ctx, v, sel, lim.boundary, lim.skip, byTime); err != nil {
			return answerEnd{}, err
		}
	}
	k := &topK{limit: limit, maxBytes: lim.bytes, backward: backward}
	var full atomic.Bool
	var bound atomic.Int64 // the k-th best time, once full
	opt := scanOpts{byTime: byTime}
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
	// want spares a hit the top-k would refuse its line (see scanOpts).
	// (It counts it as seen: "more" says an entry was left out.)
	opt.want = func(t int64) bool {
		if k.worse(t) {
			k.seen++
			return false
		}
		return true
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
			if next != nil && k.cut && h.Time == k.cutKey.time {
				break // the answer may end before this time (compact's time rule)
			}
			if err := out(h); err != nil {
				return err
			}
			// Its place is final and it is out: only its size (k.sizes)
			// still counts toward the bytes of the answer.
			h.Line, h.Attrs = nil, nil
			sent++
		}
		return nil
	}
	opt.blockDone = func(next *segment.BlockMeta) error {
		if !k.sorted {
			k.compact(false)
		}
		if k.full {
			bound.Store(k.worst)
			full.Store(true)
		}
		return flush(next)
	}
	err = scanBlocksOpt(ctx, v, sel, opt, func(h *hit) bool {
		if len(skipOrds) > 0 && h.Time == lim.boundary {
			if _, found := slices.BinarySearch(skipOrds, h.Ord); found {
				return true
			}
		}
		k.add(h)
		return true
	})
	if err != nil {
		return answerEnd{}, err
	}
	hits, more := k.result()
	if err := flush(nil); err != nil {
		return answerEnd{}, err
	}
	// A skipped block may hold matches beyond the limit: "limited" then
	// says the answer stopped at the limit, as the UI's "load more" needs.
	more = more || skipped.Load()
	end := answerEnd{more: more, bytesCut: more && len(hits) < limit && lim.bytes > 0}
	end.splitTime = end.bytesCut && k.cut && len(hits) > 0 && hits[len(hits)-1].Time == k.cutKey.time
	return end, nil
}

// boundaryOrds returns, sorted, the store-order positions (hit.Ord) of
// the first n entries sel selects at time t, in a top-k's order for
// equal times (by position).
func boundaryOrds(ctx context.Context, v *store.View, sel *selection, t int64, n, byTime int) ([]int64, error) {
	at := *sel
	at.start, at.end = t, t
	if t < sel.start || t > sel.end {
		return nil, nil
	}
	// A max-heap of the n smallest positions seen.
	h := &ordHeap{}
	err := scanBlocksOpt(ctx, v, &at, scanOpts{byTime: byTime, keysOnly: true}, func(x *hit) bool {
		if h.Len() < n {
			heap.Push(h, x.Ord)
		} else if x.Ord < (*h)[0] {
			(*h)[0] = x.Ord
			heap.Fix(h, 0)
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(*h)
	return *h, nil
}

// ordHeap is a max-heap of int64 (container/heap).
type ordHeap []int64

func (h ordHeap) Len() int           { return len(h) }
func (h ordHeap) Less(i, j int) bool { return h[i] > h[j] }
func (h ordHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *ordHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *ordHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// topK keeps the first limit hits by time (descending when backward),
// ties by store order (hit.Ord, which compaction keeps, so that a page
// asked again after a compaction orders equal times the same: the UI's
// "load more" drops the rows at the boundary time it already showed),
// then by arrival. When maxBytes > 0 it keeps, of those, the longest
// run from the first whose sizes (hitSize) sum to at most maxBytes (at
// least one hit), less the hits of the run's last time when hits of that
// time do not fit and it is not the first time (see compact).
//
// A hit left out for its bytes can never come back, since hits that
// arrive later only add to what ranks before it; nor can any hit that
// ranks after it. So the first hit ever left out for bytes is
// remembered (cutKey): hits worse than its time are refused at once
// (and their blocks skipped), and compact cuts where it would rank.
type topK struct {
	limit    int
	maxBytes int64 // 0: no bound by bytes
	backward bool
	hits     []hit
	seqs     []int64
	sizes    []int64 // hitSize of each hit, kept when collectStream lets go of its line
	seen     int64
	sorted   bool  // hits are compacted: sorted, at most limit
	full     bool  // worst is set: a hit worse than it cannot enter
	worst    int64 // the time of the limit-th hit, or of cutKey
	bytes    int64 // sizes of the hits held
	kept     int64 // sizes held after the last compaction
	cut      bool  // cutKey is set
	cutKey   rankKey
}

// rankKey is a hit's place in a topK's order.
type rankKey struct{ time, ord, seq int64 }

// rank orders two keys as the answer does.
func (t *topK) rank(a, b rankKey) int {
	if a.time != b.time {
		if t.backward {
			return cmp.Compare(b.time, a.time)
		}
		return cmp.Compare(a.time, b.time)
	}
	if c := cmp.Compare(a.ord, b.ord); c != 0 {
		return c
	}
	return cmp.Compare(a.seq, b.seq)
}

func (t *topK) key(i int) rankKey { return rankKey{t.hits[i].Time, t.hits[i].Ord, t.seqs[i]} }

// worse reports whether a hit at time tm cannot enter: one whose time is
// worse than worst (an equal time may rank before the hit there: ties go
// by store order, Ord, not by arrival).
func (t *topK) worse(tm int64) bool {
	return t.full && (t.backward && tm < t.worst || !t.backward && tm > t.worst)
}

func (t *topK) add(h *hit) {
	t.seen++
	if t.worse(h.Time) {
		return
	}
	c := *h
	if !h.ownLine {
		c.Line = slices.Clone(h.Line) // the block's, reused after the callback
	}
	if len(h.Attrs) > 0 {
		c.Attrs = slices.Clone(h.Attrs)
	}
	size := hitSize(&c)
	t.hits = append(t.hits, c)
	t.seqs = append(t.seqs, t.seen)
	t.sizes = append(t.sizes, size)
	t.bytes += size
	t.sorted = false
	// Compact by count, and by bytes so that long lines cannot pile up:
	// when what arrived since the last compaction outweighs what it kept
	// and 64 MiB, or with a bound, half of that and of maxBytes. What is
	// held then stays under 1.5 x maxBytes plus one hit. (Against a fixed
	// amount, a limit whose own entries held more compacted, sorting them
	// all, at every entry added.)
	over := t.bytes-t.kept > max(t.kept, 64<<20)
	if t.maxBytes > 0 {
		over = t.bytes-t.kept > max(t.kept, t.maxBytes)/2
	}
	if len(t.hits) >= 2*t.limit+256 || over && (len(t.hits) > t.limit || t.maxBytes > 0 && len(t.hits) > 1) {
		t.compact(false)
	}
}

// compact sorts the hits and keeps those that may be in the answer;
// final applies the time rule to a cut by bytes (result: no hit comes
// after it).
func (t *topK) compact(final bool) {
	idx := make([]int, len(t.hits))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return t.rank(t.key(a), t.key(b)) })
	n := min(len(idx), t.limit)
	// The bytes: the first hit that does not fit, or where cutKey ranks.
	cut, cutKey := -1, rankKey{}
	var sum int64
	for i := range n {
		k := t.key(idx[i])
		if t.cut && t.rank(t.cutKey, k) < 0 {
			cut, cutKey = i, t.cutKey
			break
		}
		s := t.sizes[idx[i]]
		if t.maxBytes > 0 && i > 0 && sum+s > t.maxBytes {
			cut, cutKey = i, k
			break
		}
		sum += s
	}
	if cut < 0 && t.cut && n < t.limit {
		cut, cutKey = n, t.cutKey // all of them rank before it
	}
	if cut >= 0 {
		// The key remembered is the first hit left out, not where the
		// answer ends for the time rule below: that rule depends on the
		// hits before it, and a later hit that ranks before them all may
		// push the cut out of the limit's reach, where the hits of that
		// time fit after all.
		t.cut, t.cutKey = true, cutKey
		if final {
			// Cut by bytes between two hits of one time: end before that
			// time instead, unless it is the first. A client without skip
			// (Loki's API: Grafana, logcli) pages on from the last time it
			// got, and would get again the entries of that time it has,
			// and never those it has not, whenever fewer of them fit than
			// share the time.
			m := cut
			for m > 0 && t.hits[idx[m-1]].Time == cutKey.time {
				m--
			}
			if m > 0 && m < cut {
				for j := m; j < cut; j++ {
					sum -= t.sizes[idx[j]]
				}
				cut = m
			}
		}
		n = cut
	}
	hits := make([]hit, n)
	seqs := make([]int64, n)
	sizes := make([]int64, n)
	for i := range n {
		hits[i], seqs[i], sizes[i] = t.hits[idx[i]], t.seqs[idx[i]], t.sizes[idx[i]]
	}
	t.hits, t.seqs, t.sizes, t.sorted = hits, seqs, sizes, true
	t.bytes, t.kept = sum, sum
	switch {
	case n == t.limit && n > 0:
		t.full, t.worst = true, hits[n-1].Time
	case t.cut:
		t.full, t.worst = true, t.cutKey.time
	}
}

// result returns the kept hits in order and whether more matched.
func (t *topK) result() ([]hit, bool) {
	t.compact(true)
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
