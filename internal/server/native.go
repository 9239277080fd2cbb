package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"haystack/internal/attrs"
	"haystack/internal/ingest"
	"haystack/internal/search"
	"haystack/internal/store"
	"haystack/needle"
)

// The native API of internal/server/web/API.md: the web UI's contract.

func containsFold(line, pat []byte) bool { return needle.IndexFold(line, pat) >= 0 }

type nativeLine struct {
	TS     string            `json:"ts"`
	Time   string            `json:"time"`
	Labels map[string]string `json:"labels"`
	Line   string            `json:"line"`
	// LineBase64 carries the exact bytes of a line that is not valid
	// UTF-8 (Line then has U+FFFD for each bad byte), as std base64;
	// []byte fields are encoded so by encoding/json.
	LineBase64 []byte `json:"line_base64,omitempty"`
	// Metadata is the entry's structured metadata as stored (names and
	// values as pushed; absent when it has none). Unlike Loki's answers,
	// labels does not repeat it.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// nativeHit is h as a native line: its labels without the metadata part
// (the stream's, and a pipeline's), and its metadata as stored.
func nativeHit(h *hit) nativeLine {
	labels := h.Labels
	if h.Meta != "" {
		labels = withoutLabels(h.Labels, h.Meta)
	}
	e := nativeEntry(h.Time, labels, h.Line)
	e.Metadata = metadataMap(h.Attrs)
	return e
}

// metadataMap decodes structured metadata (nil for none, or when it does
// not decode: the segment reader validated it).
func metadataMap(b []byte) map[string]string {
	if len(b) == 0 {
		return nil
	}
	ps, err := attrs.Decode(b)
	if err != nil || len(ps) == 0 {
		return nil
	}
	m := make(map[string]string, len(ps))
	for _, p := range ps {
		m[p.Name] = p.Value
	}
	return m
}

// withoutLabels is the canonical labels all without those named in drop.
func withoutLabels(all, drop string) string {
	ls, _ := ingest.ParseLabels(all)
	d, _ := ingest.ParseLabels(drop)
	kept := ls[:0]
	for _, l := range ls {
		if d.Get(l.Name) == "" {
			kept = append(kept, l)
		}
	}
	return kept.String()
}

func nativeEntry(t int64, labels string, line []byte) nativeLine {
	e := nativeLine{
		TS:     strconv.FormatInt(t, 10),
		Time:   time.Unix(0, t).UTC().Format(time.RFC3339Nano),
		Labels: labelMap(labels),
		Line:   string(line),
	}
	if !utf8.Valid(line) {
		e.LineBase64 = bytes.Clone(line)
	}
	return e
}

// parseSelectionText is parseSelection, except that with text q is a
// literal even when it starts with "{".
func parseSelectionText(q string, fold, text bool) (*selection, error) {
	if text {
		return &selection{start: math.MinInt64, end: math.MaxInt64, pat: []byte(q), fold: fold}, nil
	}
	return parseSelection(q, fold)
}

// nativeSelection reads q, fold, text, start and end (both inclusive;
// absent start is the beginning of the store, absent end is now). With
// text=1, q is plain text even when it starts with "{": a client that
// searches for a literal (hay search --server) can then find JSON lines'
// beginnings, which would otherwise read as LogQL.
func (s *Server) nativeSelection(r *http.Request) (*selection, error) {
	p := r.URL.Query()
	sel, err := parseSelectionText(p.Get("q"), p.Get("fold") == "1", p.Get("text") == "1")
	if err != nil {
		return nil, err
	}
	if sel.start, err = parseTime("start", p.Get("start"), math.MinInt64); err != nil {
		return nil, err
	}
	if sel.end, err = parseTime("end", p.Get("end"), s.cfg.Now().UnixNano()); err != nil {
		return nil, err
	}
	if sel.start > sel.end {
		return nil, badRequest("bad_param", "start (%d) is after end (%d)", sel.start, sel.end)
	}
	return sel, nil
}

// nativeSearch serves /api/v1/search as NDJSON. The newest (or, forward,
// oldest) limit entries are found first and then streamed with a flush
// every 64 lines; the request context cancels the scan.
func (s *Server) nativeSearch(w http.ResponseWriter, r *http.Request, ts *tenantStore) {
	t0 := time.Now()
	sel, err := s.nativeSelection(r)
	if err != nil {
		s.queryErr(w, err)
		return
	}
	p := r.URL.Query()
	limit, err := parseLimit(p.Get("limit"), 500, s.cfg.MaxQueryLimit)
	if err != nil {
		s.queryErr(w, err)
		return
	}
	backward, err := parseDirection(p.Get("direction"))
	if err != nil {
		s.queryErr(w, err)
		return
	}
	// skip drops that many leading entries at the paging boundary (end
	// backward, start forward), which the client has shown already; they
	// do not count toward limit. With the skip on the client's side
	// instead (limit = page + shown), more than --max-query-limit entries
	// sharing one time could not be paged past: the capped limit returned
	// only rows the client skipped, and the UI called the search done.
	skip, err := parseSkip(p.Get("skip"))
	if err != nil {
		s.queryErr(w, err)
		return
	}
	boundary := sel.start
	if backward {
		boundary = sel.end
	}
	// labels=stream: each entry's stream labels alone, without those a
	// pipeline extracted (hay search --server prints the stream, as a
	// local search does; a logfmt query would otherwise name every field).
	var view *store.View
	if p.Get("labels") == "stream" && ts != nil { // nil: a tenant with no store yet
		if view, err = ts.w.View(); err != nil {
			s.queryErr(w, err)
			return
		}
	}
	// Lines are written as soon as their place in the answer is final
	// (collectStream), flushed after each block's worth; the status and
	// headers go out with the first line, so an error before it is still
	// a proper 4xx/5xx.
	rc := http.NewResponseController(w)
	var enc *json.Encoder
	count := 0
	start := func() {
		if enc == nil {
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			enc = json.NewEncoder(w)
			enc.SetEscapeHTML(false)
		}
	}
	lim := s.answerLimit(limit, backward)
	lim.skip, lim.boundary = skip, boundary
	end, err := collectStream(r.Context(), ts, sel, lim, func(h *hit) error {
		if h == nil {
			rc.Flush() // a batch is complete; a failed write shows up in Encode
			return nil
		}
		start()
		count++
		e := *h
		if view != nil {
			if l := view.Labels(h.Stream); l != "" {
				e.Labels, e.Meta = l, ""
			}
		}
		return enc.Encode(nativeHit(&e))
	})
	if err != nil {
		if enc == nil {
			s.queryErr(w, err)
			return
		}
		// Lines are out, so no 504 can be sent: the error goes as the
		// last line, and a timeout is still counted as one.
		if errors.Is(err, context.DeadlineExceeded) {
			s.met.rejected.WithLabelValues("query_timeout").Inc()
		}
		enc.Encode(map[string]string{"error": err.Error()})
		return
	}
	start()
	trailer := map[string]any{"done": true, "count": count, "limited": end.more, "elapsed_ms": time.Since(t0).Milliseconds()}
	if end.bytesCut {
		// Limited before limit entries: the client pages on as after a
		// full page (hay search --server, the UI's "load more").
		s.met.answersCut.WithLabelValues("search").Inc()
		trailer["limited_by"] = "bytes"
		trailer["warning"] = cutWarning(count, s.cfg.MaxQueryBytes)
	}
	enc.Encode(trailer)
}

// maxBuckets bounds the histogram /api/v1/hits chooses (API.md asks for
// roughly 50 to 150 buckets).
const maxBuckets = 150

// nativeHits serves /api/v1/hits: a histogram of the matching entries
// (search.Hist: counted in the workers, no entry is copied).
func (s *Server) nativeHits(w http.ResponseWriter, r *http.Request, ts *tenantStore) {
	sel, err := s.nativeSelection(r)
	if err != nil {
		s.queryErr(w, err)
		return
	}
	type bucket struct {
		T     int64 `json:"t"`
		Count int64 `json:"count"`
	}
	var stepNS int64
	if v := r.URL.Query().Get("step"); v != "" {
		d, err := parseDurationParam("step", v)
		if err != nil {
			s.queryErr(w, err)
			return
		}
		stepNS = max(int64(time.Millisecond), d.Truncate(time.Millisecond).Nanoseconds())
	}
	buckets := []bucket{}
	var total int64
	resp := func() {
		if stepNS == 0 {
			stepNS = int64(time.Second)
		}
		writeJSON(w, map[string]any{"step_ms": stepNS / 1e6, "buckets": buckets, "total": total})
	}
	if ts == nil {
		resp()
		return
	}
	v, err := ts.w.View()
	if err != nil {
		s.queryErr(w, err)
		return
	}
	sel.skipAttrs = true // a histogram counts: no entry's metadata is shown
	q := searchQuery(v, sel)
	lo, hi := sel.start, sel.end
	// Buckets cover the asked range; an open side (no start, or an end
	// past 2262 such as end=9999999999, "no end") and a range too wide
	// for its buckets are narrowed to where entries can match, so that
	// they neither drop entries nor fill centuries with empty buckets.
	l, h, ok := search.TimeRange(v.Parts, q)
	if !ok {
		resp()
		return
	}
	narrow := func() {
		if l > lo && l <= hi {
			lo = l
		}
		if h < hi && h >= lo {
			hi = h
		}
	}
	if lo == math.MinInt64 || hi == math.MaxInt64 {
		narrow()
	}
	var b search.Buckets
	if stepNS == 0 {
		b = search.ChooseBuckets(lo, hi, maxBuckets)
		stepNS = b.Width
	} else {
		// hi-start in uint64: the range may span more than 292 years.
		start := floorDiv(lo, stepNS) * stepNS
		n := (uint64(hi)-uint64(start))/uint64(stepNS) + 1
		if n > 11000 {
			narrow()
			start = floorDiv(lo, stepNS) * stepNS
			n = (uint64(hi)-uint64(start))/uint64(stepNS) + 1
		}
		if n > 11000 {
			s.queryErr(w, badRequest("bad_param", "step too small: %d buckets", n))
			return
		}
		b = search.Buckets{Start: start, Width: stepNS, N: int(n)}
	}
	counts, err := search.Hist(r.Context(), v.Parts, q, b, func(error) {})
	if err != nil {
		s.queryErr(w, err)
		return
	}
	for i, n := range counts {
		if n > 0 {
			buckets = append(buckets, bucket{T: (b.Start + int64(i)*b.Width) / 1e6, Count: n})
			total += n
		}
	}
	resp()
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// maxFacetValues caps the values sent per label (the largest counts).
const maxFacetValues = 100

// nativeFacets serves /api/v1/facets: per label name, the matching
// entries per value.
func (s *Server) nativeFacets(w http.ResponseWriter, r *http.Request, ts *tenantStore) {
	sel, err := s.nativeSelection(r)
	if err != nil {
		s.queryErr(w, err)
		return
	}
	byStream := map[string]int64{}
	if ts != nil {
		v, err := ts.w.View()
		if err != nil {
			s.queryErr(w, err)
			return
		}
		err = run(r.Context(), v, sel, anyOrder, 0, func(h *hit) bool {
			// The labels a search line shows: without metadata, whose
			// values (trace ids) would make a key per entry.
			labels := h.Labels
			if h.Meta != "" {
				labels = withoutLabels(labels, h.Meta)
			}
			byStream[labels]++
			return true
		})
		if err != nil {
			s.queryErr(w, err)
			return
		}
	}
	facets := map[string]map[string]int64{}
	for k, n := range byStream {
		ls, _ := ingest.ParseLabels(k)
		for _, l := range ls {
			m := facets[l.Name]
			if m == nil {
				m = map[string]int64{}
				facets[l.Name] = m
			}
			m[l.Value] += n
		}
	}
	for name, m := range facets {
		if len(m) <= maxFacetValues {
			continue
		}
		type vc struct {
			v string
			n int64
		}
		var all []vc
		for v, n := range m {
			all = append(all, vc{v, n})
		}
		slices.SortFunc(all, func(a, b vc) int {
			if a.n != b.n {
				return cmp.Compare(b.n, a.n)
			}
			return cmp.Compare(a.v, b.v)
		})
		keep := map[string]int64{}
		for _, x := range all[:maxFacetValues] {
			keep[x.v] = x.n
		}
		facets[name] = keep
	}
	writeJSON(w, map[string]any{"labels": facets})
}

// maxSkip bounds skip: the server finds the entries to skip by their
// store-order positions among those at the boundary time, holding up to
// skip of them (8 bytes each; collectStream), 200 pages of the UI's 500
// entries sharing one time.
const maxSkip = 100_000

func parseSkip(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > maxSkip {
		return 0, badRequest("bad_param", "skip=%q: want an integer from 0 to %d", v, maxSkip)
	}
	return n, nil
}
