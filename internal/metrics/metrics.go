// Package metrics is a small Prometheus client: counters, histograms and
// gauge functions (optionally with one label), the standard process_* and
// go_* metrics, and an http.Handler that writes them in the text exposition
// format, version 0.0.4.
//
// It exists because github.com/prometheus/client_golang is expensive to
// link into a CLI whose processes are mostly short-lived: its package init
// (a default registry with process and Go collectors, regexps, two extra OS
// threads) costs about 0.5–1 ms and ~100 page faults at the start of every
// hay process, including the `hay search` runs timed against ripgrep, where
// a whole search the skip index answers should take 2–3 ms. Measured on
// test programs: net/http alone starts in 1.99 ms, with client_golang's
// prometheus package 2.94 ms, with promhttp and collectors 3.24 ms. This
// package has no init work and no package-level state: everything hangs
// off a Registry value that its owner (the server) creates.
//
// The hot path is lock-free: a counter is an atomic integer plus an atomic
// float64 (math.Float64bits, compare-and-swap) for fractional additions; a
// histogram keeps one atomic counter per bucket and a CAS-updated sum; the
// children of a vector sit in a copy-on-write map read through an atomic
// pointer, so looking up an existing label value takes no lock.
//
// The output is deterministic: families sorted by name, the children of a
// vector by label value. A vector with no children yet is left out, as
// client_golang does. Registering an invalid or duplicate name panics: it
// is a programming error, found by the first test that builds the registry.
package metrics

import (
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// ContentType is the media type of the text exposition format, version 0.0.4.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Registry holds metrics and writes them. Its zero value is not usable; call
// NewRegistry. All methods are safe for concurrent use.
type Registry struct {
	mu    sync.Mutex
	names map[string]bool // family names taken, incl. the standard ones
	cs    []collector
	gz    sync.Pool // *gzip.Writer: each allocates ~1.2 MB of compressor state
}

// collector appends the families it currently exposes to out.
type collector interface {
	collect(out []family) []family
}

// family is one metric family, rendered: its samples are complete lines.
type family struct {
	name, help, typ string
	samples         []byte
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{names: map[string]bool{}}
}

// register adds c under the given family names, panicking on a bad or
// duplicate name.
func (r *Registry) register(c collector, names ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range names {
		if !validMetricName(n) {
			panic(fmt.Sprintf("metrics: invalid metric name %q", n))
		}
		if r.names[n] {
			panic(fmt.Sprintf("metrics: metric %q registered twice", n))
		}
	}
	for _, n := range names {
		r.names[n] = true
	}
	r.cs = append(r.cs, c)
}

// AppendText appends the exposition of every registered metric to b.
func (r *Registry) AppendText(b []byte) []byte {
	r.mu.Lock()
	cs := slices.Clone(r.cs)
	r.mu.Unlock()
	var fams []family
	for _, c := range cs {
		fams = c.collect(fams)
	}
	slices.SortFunc(fams, func(a, b family) int { return strings.Compare(a.name, b.name) })
	for _, f := range fams {
		if len(f.samples) == 0 {
			continue
		}
		b = append(b, "# HELP "...)
		b = append(b, f.name...)
		b = append(b, ' ')
		b = appendEscaped(b, strings.ToValidUTF8(f.help, "\uFFFD"), false)
		b = append(b, "\n# TYPE "...)
		b = append(b, f.name...)
		b = append(b, ' ')
		b = append(b, f.typ...)
		b = append(b, '\n')
		b = append(b, f.samples...)
	}
	return b
}

// WriteTo writes the exposition of every registered metric to w.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(r.AppendText(nil))
	return int64(n), err
}

// Handler returns an http.Handler serving the registry's exposition,
// gzip-compressed when the client accepts it (Prometheus does).
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body := r.AppendText(nil)
		h := w.Header()
		h.Set("Content-Type", ContentType)
		h.Add("Vary", "Accept-Encoding")
		if acceptsGzip(req.Header.Get("Accept-Encoding")) {
			h.Set("Content-Encoding", "gzip")
			zw, _ := r.gz.Get().(*gzip.Writer)
			if zw == nil {
				zw, _ = gzip.NewWriterLevel(w, gzip.BestSpeed)
			} else {
				zw.Reset(w)
			}
			zw.Write(body)
			zw.Close()
			r.gz.Put(zw)
			return
		}
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	})
}

// acceptsGzip reports whether an Accept-Encoding header value lists gzip
// with a non-zero quality.
func acceptsGzip(v string) bool {
	for part := range strings.SplitSeq(v, ",") {
		coding, params, _ := strings.Cut(part, ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		k, q, ok := strings.Cut(strings.TrimSpace(params), "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
			if f, err := strconv.ParseFloat(strings.TrimSpace(q), 64); err == nil && f == 0 {
				return false
			}
		}
		return true
	}
	return false
}

// ExponentialBuckets returns n upper bounds: start, start*factor, ... . It
// panics unless n >= 1, start > 0 and factor > 1.
func ExponentialBuckets(start, factor float64, n int) []float64 {
	if n < 1 || !(start > 0) || !(factor > 1) {
		panic("metrics: ExponentialBuckets needs n >= 1, start > 0, factor > 1")
	}
	b := make([]float64, n)
	for i := range b {
		b[i] = start
		start *= factor
	}
	return b
}

// atomicFloat is a float64 updated lock-free through its bits.
type atomicFloat struct{ bits atomic.Uint64 }

func (a *atomicFloat) add(v float64) {
	for {
		old := a.bits.Load()
		if a.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

func (a *atomicFloat) load() float64 { return math.Float64frombits(a.bits.Load()) }

// Counter is a value that only goes up.
type Counter struct {
	name, help string
	n          atomic.Uint64 // whole-number additions: one atomic add, no retries
	f          atomicFloat   // fractional additions
}

// NewCounter registers and returns a counter.
func (r *Registry) NewCounter(name, help string) *Counter {
	c := &Counter{name: name, help: help}
	r.register(c, name)
	return c
}

// Inc adds 1.
func (c *Counter) Inc() { c.n.Add(1) }

// Add adds v. It panics if v is negative: a counter never goes down.
func (c *Counter) Add(v float64) {
	if v < 0 {
		panic("metrics: counter cannot decrease")
	}
	if v < 1<<63 {
		if u := uint64(v); float64(u) == v {
			c.n.Add(u)
			return
		}
	}
	c.f.add(v)
}

// Value returns the current value.
func (c *Counter) Value() float64 { return float64(c.n.Load()) + c.f.load() }

func (c *Counter) collect(out []family) []family {
	return append(out, family{c.name, c.help, "counter", appendSample(nil, c.name, "", c.Value())})
}

// vec is the children of a one-label vector: a copy-on-write map for
// lock-free lookups and the same children sorted by label value for output.
type vec[T any] struct {
	label string
	cur   atomic.Pointer[vecSnap[T]]
	mu    sync.Mutex // serializes the creation of children
	mk    func() *T
}

type vecSnap[T any] struct {
	m    map[string]*T
	list []vecChild[T] // sorted by value
}

type vecChild[T any] struct {
	value string // valid UTF-8
	m     *T
}

func newVec[T any](label string, mk func() *T) *vec[T] {
	v := &vec[T]{label: label, mk: mk}
	v.cur.Store(&vecSnap[T]{m: map[string]*T{}})
	return v
}

func (v *vec[T]) with(value string) *T {
	if m, ok := v.cur.Load().m[value]; ok {
		return m
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	old := v.cur.Load()
	if m, ok := old.m[value]; ok {
		return m
	}
	// Prometheus requires UTF-8 label values; values that differ only in
	// their invalid bytes share a child, found under both spellings.
	valid := strings.ToValidUTF8(value, "\uFFFD")
	next := &vecSnap[T]{m: make(map[string]*T, len(old.m)+1), list: old.list}
	for k, m := range old.m {
		next.m[k] = m
	}
	m, ok := next.m[valid]
	if !ok {
		m = v.mk()
		i, _ := slices.BinarySearchFunc(old.list, valid, func(c vecChild[T], s string) int { return strings.Compare(c.value, s) })
		next.list = slices.Insert(slices.Clip(old.list), i, vecChild[T]{valid, m})
		next.m[valid] = m
	}
	next.m[value] = m
	v.cur.Store(next)
	return m
}

// CounterVec is a family of counters told apart by one label.
type CounterVec struct {
	name, help string
	v          *vec[Counter]
}

// NewCounterVec registers and returns a counter vector with one label.
func (r *Registry) NewCounterVec(name, help, label string) *CounterVec {
	checkLabel(label, "")
	c := &CounterVec{name: name, help: help, v: newVec(label, func() *Counter { return &Counter{} })}
	r.register(c, name)
	return c
}

// WithLabelValues returns the counter for the label value, creating it at
// zero on first use.
func (c *CounterVec) WithLabelValues(value string) *Counter { return c.v.with(value) }

func (c *CounterVec) collect(out []family) []family {
	var b []byte
	for _, ch := range c.v.cur.Load().list {
		b = appendSample(b, c.name, "", ch.m.Value(), c.v.label, ch.value)
	}
	return append(out, family{c.name, c.help, "counter", b})
}

// Histogram counts observations in buckets with inclusive upper bounds.
type Histogram struct {
	upper  []float64       // strictly increasing, without a final +Inf
	les    []string        // the bounds formatted, +Inf last
	counts []atomic.Uint64 // len(upper)+1: the last is the +Inf bucket
	sum    atomicFloat
}

// newHistogram returns an empty histogram; upper and les may be shared.
func newHistogram(upper []float64, les []string) *Histogram {
	return &Histogram{upper: upper, les: les, counts: make([]atomic.Uint64, len(upper)+1)}
}

// checkBuckets validates upper bounds and returns them without a final
// +Inf, and their formatted forms with it.
func checkBuckets(b []float64) ([]float64, []string) {
	b = slices.Clone(b)
	if n := len(b); n > 0 && math.IsInf(b[n-1], 1) {
		b = b[:n-1]
	}
	for i, u := range b {
		if math.IsNaN(u) || (i > 0 && !(u > b[i-1])) {
			panic(fmt.Sprintf("metrics: histogram buckets must increase strictly: %v", b))
		}
	}
	les := make([]string, len(b)+1)
	for i, u := range b {
		les[i] = string(appendFloat(nil, u))
	}
	les[len(b)] = "+Inf"
	return b, les
}

// Observe records v in the first bucket whose upper bound is >= v (NaN
// goes to +Inf).
func (h *Histogram) Observe(v float64) {
	i := len(h.upper) // NaN, which slices.BinarySearch would put first
	if v == v {
		i, _ = slices.BinarySearch(h.upper, v)
	}
	h.counts[i].Add(1)
	h.sum.add(v)
}

// appendSamples writes the cumulative buckets, _sum and _count. Count is
// the sum of the buckets read here, so +Inf and _count always agree even
// while observations race with the scrape.
func (h *Histogram) appendSamples(b []byte, name, label, value string) []byte {
	var cum uint64
	for i := range h.counts {
		cum += h.counts[i].Load()
		if label == "" {
			b = appendSample(b, name, "_bucket", float64(cum), "le", h.les[i])
		} else {
			b = appendSample(b, name, "_bucket", float64(cum), label, value, "le", h.les[i])
		}
	}
	if label == "" {
		b = appendSample(b, name, "_sum", h.sum.load())
		return appendSample(b, name, "_count", float64(cum))
	}
	b = appendSample(b, name, "_sum", h.sum.load(), label, value)
	return appendSample(b, name, "_count", float64(cum), label, value)
}

type histogramFamily struct {
	name, help string
	h          *Histogram
}

func (f *histogramFamily) collect(out []family) []family {
	return append(out, family{f.name, f.help, "histogram", f.h.appendSamples(nil, f.name, "", "")})
}

// NewHistogram registers and returns a histogram with the given bucket
// upper bounds (strictly increasing; a final +Inf is implied).
func (r *Registry) NewHistogram(name, help string, buckets []float64) *Histogram {
	h := newHistogram(checkBuckets(buckets))
	r.register(&histogramFamily{name, help, h}, name)
	return h
}

// HistogramVec is a family of histograms told apart by one label.
type HistogramVec struct {
	name, help string
	v          *vec[Histogram]
}

// NewHistogramVec registers and returns a histogram vector with one label.
func (r *Registry) NewHistogramVec(name, help string, buckets []float64, label string) *HistogramVec {
	checkLabel(label, "le")
	upper, les := checkBuckets(buckets)
	h := &HistogramVec{name: name, help: help, v: newVec(label, func() *Histogram { return newHistogram(upper, les) })}
	r.register(h, name)
	return h
}

// WithLabelValues returns the histogram for the label value, creating it
// empty on first use.
func (h *HistogramVec) WithLabelValues(value string) *Histogram { return h.v.with(value) }

func (h *HistogramVec) collect(out []family) []family {
	var b []byte
	for _, ch := range h.v.cur.Load().list {
		b = ch.m.appendSamples(b, h.name, h.v.label, ch.value)
	}
	return append(out, family{h.name, h.help, "histogram", b})
}

// gaugeFunc is a gauge whose value a function computes at each scrape.
type gaugeFunc struct {
	name, help string
	f          func() float64
}

// NewGaugeFunc registers a gauge whose value f returns when scraped; f
// must be safe for concurrent use.
func (r *Registry) NewGaugeFunc(name, help string, f func() float64) {
	r.register(&gaugeFunc{name, help, f}, name)
}

func (g *gaugeFunc) collect(out []family) []family {
	return append(out, family{g.name, g.help, "gauge", appendSample(nil, g.name, "", g.f())})
}

// validMetricName reports whether s matches [a-zA-Z_:][a-zA-Z0-9_:]*.
func validMetricName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return s != ""
}

// checkLabel panics unless s matches [a-zA-Z_][a-zA-Z0-9_]*, is not
// reserved (__ prefix) and is not the type's own label (le, quantile).
func checkLabel(s, own string) {
	ok := s != "" && !strings.HasPrefix(s, "__") && s != own
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		ok = c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9'
	}
	if !ok {
		panic(fmt.Sprintf("metrics: invalid label name %q", s))
	}
}

// appendSample appends one sample line: name+suffix, the label pairs
// (name, value, ...) if any, and v.
func appendSample(b []byte, name, suffix string, v float64, labels ...string) []byte {
	b = append(b, name...)
	b = append(b, suffix...)
	if len(labels) > 0 {
		b = append(b, '{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, labels[i]...)
			b = append(b, `="`...)
			b = appendEscaped(b, labels[i+1], true)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	b = append(b, ' ')
	b = appendFloat(b, v)
	return append(b, '\n')
}

// appendEscaped escapes backslash and newline (HELP text) and, in a label
// value, the double quote.
func appendEscaped(b []byte, s string, quote bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// appendFloat formats v as client_golang does: Go's shortest 'g' form,
// +Inf, -Inf, NaN.
func appendFloat(b []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}
