package server

import (
	"net/http"

	hmetrics "haystack/internal/metrics"
)

// metrics are the server's Prometheus metrics, in a registry of its own
// (no globals: two servers in one test process do not collide). They use
// internal/metrics rather than client_golang, whose package init would
// slow the start of every hay process, `hay search` included.
type metrics struct {
	reg   *hmetrics.Registry
	lines *hmetrics.Counter
	bytes *hmetrics.Counter
	// metaBytes counts the structured metadata stored (attrs encoding),
	// as Loki's distributor counts it beside the line bytes.
	metaBytes *hmetrics.Counter
	// metaCollisions counts metadata names given twice to an entry with
	// different values (the later pair kept, as Loki).
	metaCollisions *hmetrics.Counter
	pushDur        *hmetrics.HistogramVec
	queryDur       *hmetrics.HistogramVec
	fsync          *hmetrics.Histogram
	rejected       *hmetrics.CounterVec
	// answersCut counts log query answers cut at --max-query-bytes.
	answersCut *hmetrics.CounterVec
}

func newMetrics(s *Server) *metrics {
	r := hmetrics.NewRegistry()
	m := &metrics{
		reg:   r,
		lines: r.NewCounter("hay_ingested_lines_total", "Entries stored by pushes (acknowledged)."),
		bytes: r.NewCounter("hay_ingested_bytes_total", "Line bytes stored by pushes (acknowledged)."),
		metaBytes: r.NewCounter("hay_ingested_structured_metadata_bytes_total",
			"Structured metadata bytes (encoded) stored by pushes with their entries (acknowledged)."),
		metaCollisions: r.NewCounter("hay_structured_metadata_collisions_total",
			"Structured metadata names given twice to a pushed entry with different values (after name normalization; OTLP record attributes, record fields, resource and scope attributes): the later pair was kept, as Loki keeps it."),
		pushDur: r.NewHistogramVec("hay_push_duration_seconds", "Push request latency, including the WAL fsync (requests past the auth and tenant checks).",
			hmetrics.ExponentialBuckets(0.0005, 2, 16), "format"),
		queryDur: r.NewHistogramVec("hay_query_duration_seconds", "Query request latency by endpoint (requests past the auth and tenant checks).",
			hmetrics.ExponentialBuckets(0.0005, 2, 18), "endpoint"),
		fsync: r.NewHistogram("hay_wal_fsync_duration_seconds", "WAL fsync latency (one per group commit).",
			hmetrics.ExponentialBuckets(0.0001, 2, 16)),
		rejected: r.NewCounterVec("hay_rejected_total", "Rejected requests and truncated lines by reason.", "reason"),
		answersCut: r.NewCounterVec("hay_query_answers_cut_total",
			"Log query answers (and live tails' replays) that stopped at --max-query-bytes before their limit: the entries that fit were sent, in order, marked limited, and the client pages on.", "endpoint"),
	}
	r.NewGaugeFunc("hay_segments", "Segment files of all open tenants.", func() float64 {
		n := 0
		for _, t := range s.openTenants() {
			n += t.w.Stats().Segments
		}
		return float64(n)
	})
	r.RegisterGoMetrics()
	r.RegisterProcessMetrics()
	return m
}

func (m *metrics) handler() http.Handler { return m.reg.Handler() }
