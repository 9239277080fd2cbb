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
	"time"

	"haystack/internal/ingest"
	"haystack/internal/query"
	"haystack/internal/segment"
	"haystack/internal/store"
	"haystack/needle"
)

// query wraps a read endpoint: the concurrent query cap (429 with
// Retry-After when full), the query timeout, the tenant's store (nil when
// the tenant has no data yet) and the latency metric.
func (s *Server) query(name string, h func(http.ResponseWriter, *http.Request, *tenantStore)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		defer func() { s.met.queryDur.WithLabelValues(name).Observe(time.Since(start).Seconds()) }()
		select {
		case s.sem <- struct{}{}:
			defer func() { <-s.sem }()
		default:
			s.met.rejected.WithLabelValues("too_many_queries").Inc()
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusTooManyRequests, fmt.Sprintf("too many concurrent queries (limit %d); retry shortly", s.cfg.MaxConcurrentQueries))
			return
		}
		tenant, ok := s.tenant(w, r)
		if !ok {
			return
		}
		ts, err := s.openTenant(tenant, false)
		if err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.QueryTimeout)
		defer cancel()
		h(w, r.WithContext(ctx), ts)
	})
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
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return n, nil
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) && math.Abs(f) < 9e9 {
		sec, frac := math.Modf(f)
		return int64(sec)*1e9 + int64(math.Round(frac*1e9)), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t.UnixNano(), nil
	}
	return 0, badRequest("bad_param", "%s=%q: want Unix nanoseconds, Unix seconds with a fraction, or RFC 3339", name, v)
}

// parseDurationParam reads step-like values: a Go/Prometheus duration
// ("30s", "5m") or a number of seconds ("15", "0.5").
func parseDurationParam(name, v string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(v, 64); err == nil && f > 0 && f < 1e10 {
		return time.Duration(f * 1e9), nil
	}
	if d, err := parsePromDuration(v); err == nil && d > 0 {
		return d, nil
	}
	return 0, badRequest("bad_param", "%s=%q: want a positive duration (30s, 5m) or seconds", name, v)
}

// parsePromDuration is time.ParseDuration plus Prometheus' d, w and y.
func parsePromDuration(v string) (time.Duration, error) {
	if d, err := time.ParseDuration(v); err == nil {
		return d, nil
	}
	for _, u := range []struct {
		suf string
		d   time.Duration
	}{{"d", 24 * time.Hour}, {"w", 7 * 24 * time.Hour}, {"y", 365 * 24 * time.Hour}} {
		if n, ok := strings.CutSuffix(v, u.suf); ok {
			if k, err := strconv.Atoi(n); err == nil && k > 0 {
				return time.Duration(k) * u.d, nil
			}
		}
	}
	return 0, fmt.Errorf("bad duration %q", v)
}

// selection is what entries a query reads: LogQL (plan) or a plain-text
// literal (pat, fold), in [start, end] (both inclusive).
type selection struct {
	plan       *query.Plan
	pat        []byte
	fold       bool
	start, end int64
}

// parseSelection parses q: LogQL when it starts with '{', else plain text.
func parseSelection(q string, fold bool) (*selection, error) {
	sel := &selection{start: math.MinInt64, end: math.MaxInt64}
	if t := strings.TrimSpace(q); strings.HasPrefix(t, "{") {
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

// hit is one selected entry. Line is only valid during the scan callback
// unless copied.
type hit struct {
	Time   int64
	Stream uint32
	Seq    int64 // position in the store's order: a stable tie-break
	Labels string
	Line   []byte
}

// streamInfo caches, per stream id, its parsed labels and whether the
// selector admits it.
type streamInfo struct {
	known  bool
	ok     bool
	labels []query.Label
	text   string
}

// scan calls fn for every entry of v the selection admits, in store order
// (segments, then the head; blocks and entries in ingestion order). fn
// returns false to stop. Blocks outside the time range or holding no
// admitted stream are skipped from the block index alone.
func scan(ctx context.Context, v *store.View, sel *selection, fn func(*hit) bool) error {
	var srch *needle.Searcher
	if sel.plan == nil && len(sel.pat) > 0 {
		if sel.fold {
			srch = needle.NewFold(sel.pat)
		} else {
			srch = needle.New(sel.pat)
		}
	}
	infos := make([]streamInfo, len(v.Streams))
	info := func(id uint32) *streamInfo {
		if int(id) >= len(infos) {
			return &streamInfo{}
		}
		si := &infos[id]
		if !si.known {
			si.known = true
			si.text = v.Labels(id)
			labs, err := ingest.ParseLabels(si.text)
			if err == nil {
				for _, l := range labs {
					si.labels = append(si.labels, query.Label(l))
				}
			}
			si.ok = sel.plan == nil || sel.plan.MatchStream(si.labels)
		}
		return si
	}
	b := segment.GetBlock()
	defer segment.PutBlock(b)
	var seq int64
	var h hit
	for _, p := range v.Parts {
		for bi := range p.NumBlocks() {
			m := p.BlockMeta(bi)
			if m.Entries == 0 || m.MaxTime < sel.start || m.MinTime > sel.end {
				seq += int64(m.Entries)
				continue
			}
			any := false
			for _, id := range m.Streams {
				if info(id).ok {
					any = true
					break
				}
			}
			if !any {
				seq += int64(m.Entries)
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := p.ReadBlock(bi, b); err != nil {
				return fmt.Errorf("%s block %d: %w", p.Name(), bi, err)
			}
			for k := range b.Times {
				seq++
				t := b.Times[k]
				if t < sel.start || t > sel.end {
					continue
				}
				si := info(b.Streams[k])
				if !si.ok {
					continue
				}
				line := b.Line(k)
				h = hit{Time: t, Stream: b.Streams[k], Seq: seq, Labels: si.text, Line: line}
				switch {
				case srch != nil:
					if srch.Index(line) < 0 {
						continue
					}
				case sel.plan != nil:
					ext, ok := sel.plan.Labels(si.labels, line)
					if !ok {
						continue
					}
					if len(ext) > 0 {
						h.Labels = mergeLabels(si.labels, ext)
					}
				}
				if !fn(&h) {
					return nil
				}
			}
		}
	}
	return nil
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

// topK keeps the first limit hits in the requested order: time
// (descending when backward), then stream labels, then store position.
type topK struct {
	limit    int
	backward bool
	hits     []hit
	seen     int64
}

func (t *topK) less(a, b *hit) int {
	if a.Time != b.Time {
		if t.backward {
			return cmp.Compare(b.Time, a.Time)
		}
		return cmp.Compare(a.Time, b.Time)
	}
	if c := cmp.Compare(a.Labels, b.Labels); c != 0 {
		return c
	}
	return cmp.Compare(a.Seq, b.Seq)
}

func (t *topK) add(h *hit) {
	t.seen++
	c := *h
	c.Line = slices.Clone(h.Line)
	t.hits = append(t.hits, c)
	if len(t.hits) >= 2*t.limit+64 {
		t.compact()
	}
}

func (t *topK) compact() {
	slices.SortFunc(t.hits, func(a, b hit) int { return t.less(&a, &b) })
	if len(t.hits) > t.limit {
		clear(t.hits[t.limit:])
		t.hits = t.hits[:t.limit]
	}
}

// result returns the kept hits in order and whether more matched.
func (t *topK) result() ([]hit, bool) {
	t.compact()
	return t.hits, t.seen > int64(len(t.hits))
}

// collect runs a log query over ts (nil: no data) and returns up to limit
// entries in order, and whether the limit cut the answer short.
func collect(ctx context.Context, ts *tenantStore, sel *selection, limit int, backward bool) ([]hit, bool, error) {
	if ts == nil {
		return nil, false, nil
	}
	v, err := ts.w.View()
	if err != nil {
		return nil, false, err
	}
	k := &topK{limit: limit, backward: backward}
	if err := scan(ctx, v, sel, func(h *hit) bool { k.add(h); return true }); err != nil {
		return nil, false, err
	}
	hits, more := k.result()
	return hits, more, nil
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
