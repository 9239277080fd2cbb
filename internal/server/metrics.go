package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the server's Prometheus metrics, in a registry of its own
// (no globals: two servers in one test process do not collide).
type metrics struct {
	reg      *prometheus.Registry
	lines    prometheus.Counter
	bytes    prometheus.Counter
	pushDur  *prometheus.HistogramVec
	queryDur *prometheus.HistogramVec
	fsync    prometheus.Histogram
	rejected *prometheus.CounterVec
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		lines: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hay_ingested_lines_total", Help: "Entries stored by pushes (acknowledged)."}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hay_ingested_bytes_total", Help: "Line bytes stored by pushes (acknowledged)."}),
		pushDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "hay_push_duration_seconds", Help: "Push request latency, including the WAL fsync.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"format"}),
		queryDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "hay_query_duration_seconds", Help: "Query request latency by endpoint.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)}, []string{"endpoint"}),
		fsync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "hay_wal_fsync_duration_seconds", Help: "WAL fsync latency (one per group commit).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hay_rejected_total", Help: "Rejected requests and truncated lines by reason."}, []string{"reason"}),
	}
	segments := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hay_segments", Help: "Segment files of all open tenants."}, func() float64 {
		s.mu.Lock()
		defer s.mu.Unlock()
		n := 0
		for _, t := range s.tenants {
			n += t.w.Stats().Segments
		}
		return float64(n)
	})
	m.reg.MustRegister(m.lines, m.bytes, m.pushDur, m.queryDur, m.fsync, m.rejected, segments,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
