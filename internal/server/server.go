package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"haystack/internal/server/web"
	"haystack/internal/store"
)

// Config is the server's configuration; New fills zero fields with the
// defaults documented on each.
type Config struct {
	DataDir string // root; each tenant's store is DataDir/<tenant>
	// MaxBody caps a push body as sent (64 MiB); MaxDecompressed caps it
	// after gzip or snappy (4 × MaxBody).
	MaxBody, MaxDecompressed int64
	MaxLine                  int  // bytes of one line (256 KiB)
	TruncateLines            bool // cut long lines with a marker instead of rejecting the push
	QueryTimeout             time.Duration
	MaxConcurrentQueries     int // run at once (8); more wait in a queue
	// QueryQueueWait is how long a query waits for one of the
	// MaxConcurrentQueries slots before it is answered 429 (5 s); a
	// negative value answers 429 at once. Grafana sends a dashboard's
	// panels all at once and shows any 429 as a failed panel, while Loki
	// queues them: a burst must wait, not fail.
	QueryQueueWait time.Duration
	// MaxQueuedQueries bounds the queries waiting at once (100, Loki's
	// per-tenant default); more are answered 429 at once.
	MaxQueuedQueries int
	// Pushed entries older than RejectOlderThan or newer than now +
	// RejectNewerThan are rejected; 0 disables each check.
	RejectOlderThan, RejectNewerThan time.Duration
	MaxLabels                        int // labels a stream may have (15)
	// MaxLabelNameBytes and MaxLabelValueBytes bound one label's name
	// (1024) and value (2048), Loki's defaults.
	MaxLabelNameBytes, MaxLabelValueBytes int
	Auth                                  *Auth
	Store                                 store.Options
	Logger                                *slog.Logger
	Now                                   func() time.Time
	// MaxQueryLimit caps the limit parameter of log queries (5000).
	MaxQueryLimit int
	// MaxQueryBytes bounds the bytes of a log query's answer (64 MiB;
	// negative: no bound): its entries' lines, metadata and labels, as
	// hitSize counts them. An answer that reaches it stops there, as at
	// the limit, keeping the entries that fit in the query's order (at
	// least one), says so (Loki's "warnings", the native trailer's
	// limited_by) and counts it in hay_query_answers_cut_total; clients
	// page on from its last entry's time. Live tails send their entries
	// in messages of at most this much, and a delayed tail holds back at
	// most this much. One line_format can make each of 5000 entries
	// 1 MiB: without it one query held gigabytes.
	MaxQueryBytes int64
	// MaxTails bounds the live tails (Loki's and the UI's) open at once,
	// server-wide; more get 429 (DefaultMaxTails; negative: no bound).
	// Each tail filters every entry its tenant receives.
	MaxTails int
	// MaxQuerySeries caps the series a metric query answers (500, as
	// Loki's max_query_series); more is a 400.
	MaxQuerySeries int
	// MaxOpenTenants bounds the tenant stores open at once (0:
	// DefaultMaxOpenTenants). Opening one more closes the least recently
	// used idle tenant first; see openTenant.
	MaxOpenTenants int
	// HeadFlushIdle and HeadFlushAge flush a tenant's head into a segment
	// once it has had no entry for that long, or has held entries for
	// that long (Loki's chunk_idle_period and max_chunk_age: 30m and 2h
	// by default; negative: never), so that a quiet tenant does not keep
	// its head in memory and its WAL to replay.
	HeadFlushIdle, HeadFlushAge time.Duration
	// CompactInterval, when positive, has each tenant's store compact
	// its new segments in the background this often (store.Writer).
	CompactInterval time.Duration
	// CompactMergeBytes bounds the segments those compactions merge
	// (store.WriterOptions.CompactMergeBytes; 0: the default).
	CompactMergeBytes int64
	// AllowedHosts are the host names (without port) a server without
	// Auth answers browsers at, besides IP literals and localhost. A web
	// page can make a browser reach a loopback or intranet server under
	// the page's own name by DNS rebinding, and would then be same-origin
	// with it and read every log; so without auth a browser's request
	// naming any other host is refused (421). Clients that are not
	// browsers are not checked.
	AllowedHosts []string
	// MaxStreamsPerTenant bounds a tenant's active streams (pushed to
	// within streamActiveWindow), as Loki's max_global_streams_per_user:
	// a push's entries for new streams past it are refused with 429, the
	// others stored (and skipped when the batch is resent). 0: no limit
	// (hay serve's default is Loki's, 5000).
	MaxStreamsPerTenant int
	// MaxInflightPushBytes bounds the decompressed push bodies being
	// decoded and stored at once, server-wide (push.go:
	// defaultInflightPushBytes; negative: no bound). A push beyond it
	// waits up to PushQueueWait (5 s; negative: not at all) and then
	// gets 429 with Retry-After; a body larger than it gets 413.
	MaxInflightPushBytes int64
	PushQueueWait        time.Duration
	// NoServiceNameDiscovery turns off adding service_name to pushed
	// streams without one (push.go: discoverServiceName).
	NoServiceNameDiscovery bool
	// NoLogLevelDiscovery turns off adding the structured metadata
	// detected_level to pushed entries (levels.go), as Loki's
	// discover_log_levels: false.
	NoLogLevelDiscovery bool
}

// Server is the HTTP API. Create it with New, serve Handler, and Close it
// after the HTTP server has shut down.
type Server struct {
	cfg Config
	// pushLim holds the stream-limit reservations and the in-flight
	// push budget (push.go); its zero value is ready.
	pushLim pushLimiter
	log     *slog.Logger
	met     *metrics
	sem     chan struct{} // query slots
	// dirLock holds an exclusive lock on DataDir for the server's life.
	dirLock *os.File
	// queued counts the queries waiting for a slot (MaxQueuedQueries).
	queued atomic.Int64

	mu sync.Mutex
	// tenants holds every tenant store that is open, opening or closing:
	// all of them count against MaxOpenTenants, since each holds (or is
	// about to hold, or still holds) its descriptors.
	tenants map[string]*tenantStore
	// pins counts the requests running per tenant (tenantAuth), open or
	// not: a pinned tenant is never closed, since its handler may hold
	// the store's views (mmapped segments that Writer.Close unmaps).
	pins     map[string]int
	useClock uint64        // orders tenantStore.lastUse
	changed  chan struct{} // closed (and replaced) when a tenant may have become closable
	// orphans are directories of new tenants whose open failed and
	// whose removal failed too (out of descriptors: RemoveAll opens
	// them); removed at the next open or close of a tenant.
	orphans map[string]bool
	closed  bool
	// StopTails ran: a tenant opened now has its tails ended
	tailsStopped bool

	// tails counts running live-tail handlers: Close waits for them to
	// send what they hold and their shutdown message (a WebSocket is
	// hijacked, so http.Server.Shutdown does not wait for it).
	tails     sync.WaitGroup
	tailCount int // running tails, under mu (MaxTails)

	handler http.Handler
}

// tenantStore is one tenant's store and live-tail fan-out.
type tenantStore struct {
	name string
	w    *store.Writer // nil while opening
	hub  *hub

	// Guarded by Server.mu.
	state   tenantState
	settled chan struct{} // closed when the opening or closing in progress ends
	lastUse uint64        // Server.useClock at the last open or request end
}

type tenantState int

const (
	tenantOpening tenantState = iota
	tenantOpen
	tenantClosing
)

// DefaultMaxOpenTenants is the default bound on open tenant stores: a
// sixth of the process's descriptor limit (RLIMIT_NOFILE, which Go
// raises to the hard limit at start). An open tenant holds 3 descriptors
// (its data directory, through which every write goes so that a replaced
// directory is never written; its LOCK; its current WAL file) and a
// flushing one up to about 6 for a moment (the next WAL file, the segment
// being written, the directories it syncs, the MANIFEST being replaced),
// so a sixth leaves half the table for those moments, for connections (each one a
// descriptor, a live tail for its whole life) and for segment files:
// being opened, and kept open to read blocks with pread, which
// internal/segment bounds to a sixteenth of the limit over the process
// (past it a segment's blocks are read through its mapping). Past the
// limit an open fails with EMFILE: at start-up
// that stopped the server from starting, and on a push it was a 500.
func DefaultMaxOpenTenants() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 170 // a sixth of the usual 1024
	}
	n := rl.Cur / tenantDescriptors / 2
	if n > 1<<20 {
		n = 1 << 20 // RLIM_INFINITY: memory (E5) binds long before this
	}
	return max(int(n), 1)
}

// tenantDescriptors is what an open tenant store holds (see
// DefaultMaxOpenTenants).
const tenantDescriptors = 3

// tenantSlotWait is how long opening a tenant at MaxOpenTenants waits for
// another tenant's in-flight requests to end (or its close to finish)
// before it is answered 503: pushes last milliseconds, so a burst of
// pushes to more tenants than the bound queues briefly instead of failing.
const tenantSlotWait = 2 * time.Second

// tenantParallel bounds the tenants OpenExisting opens and Close flushes
// at once: each is mostly fsync waits (and a WAL replay on open), which
// overlap on one disk; more would only add memory (replayed heads).
const tenantParallel = 4

// DefaultMaxQueryBytes is Config.MaxQueryBytes' default: far above what
// 5000 ordinary lines hold (a few MB), while --max-concurrent-queries
// answers of it (each held about twice while it is collected, once more
// while it is written) fit a small server's memory.
const DefaultMaxQueryBytes = 64 << 20

// DefaultTenant is the tenant of requests without X-Scope-OrgID when auth
// is off, as in Loki.
const DefaultTenant = "fake"

// New creates the server; it opens tenants' stores lazily.
func New(cfg Config) (*Server, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("server: no data directory")
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 64 << 20
	}
	if cfg.MaxDecompressed <= 0 {
		cfg.MaxDecompressed = 4 * cfg.MaxBody
	}
	if cfg.MaxLine <= 0 {
		cfg.MaxLine = 256 << 10
	}
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = 30 * time.Second
	}
	if cfg.MaxConcurrentQueries <= 0 {
		cfg.MaxConcurrentQueries = 8
	}
	if cfg.QueryQueueWait == 0 {
		cfg.QueryQueueWait = 5 * time.Second
	}
	if cfg.MaxQueuedQueries <= 0 {
		cfg.MaxQueuedQueries = 100
	}
	if cfg.MaxLabels <= 0 {
		cfg.MaxLabels = 15
	}
	if cfg.MaxLabelNameBytes <= 0 {
		cfg.MaxLabelNameBytes = 1024
	}
	if cfg.MaxLabelValueBytes <= 0 {
		cfg.MaxLabelValueBytes = 2048
	}
	if cfg.MaxQueryLimit <= 0 {
		cfg.MaxQueryLimit = 5000
	}
	if cfg.MaxQueryBytes == 0 {
		cfg.MaxQueryBytes = DefaultMaxQueryBytes
	}
	if cfg.HeadFlushIdle == 0 {
		cfg.HeadFlushIdle = 30 * time.Minute
	}
	if cfg.HeadFlushAge == 0 {
		cfg.HeadFlushAge = 2 * time.Hour
	}
	if cfg.MaxTails == 0 {
		cfg.MaxTails = DefaultMaxTails
	}
	for i, h := range cfg.AllowedHosts {
		cfg.AllowedHosts[i] = strings.TrimSuffix(strings.ToLower(h), ".")
	}
	if cfg.MaxQuerySeries <= 0 {
		cfg.MaxQuerySeries = 500
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	// Serving a store as a directory of tenants would open its internal
	// directories as tenants and plant stores inside them.
	if store.HasStore(cfg.DataDir) {
		return nil, fmt.Errorf("%s is one store (as hay ingest makes), not a directory of tenant stores: hay serve keeps each tenant in DIR/<tenant>, and Loki's default tenant is %q; to serve it, move it there (mkdir NEW && mv %s NEW/%s) and serve NEW", cfg.DataDir, DefaultTenant, cfg.DataDir, DefaultTenant)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	dirLock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	s := &Server{
		dirLock: dirLock,
		cfg:     cfg,
		log:     cfg.Logger,
		sem:     make(chan struct{}, cfg.MaxConcurrentQueries),
		tenants: map[string]*tenantStore{},
		pins:    map[string]int{},
		orphans: map[string]bool{},
		changed: make(chan struct{}),
	}
	if s.cfg.MaxOpenTenants <= 0 {
		s.cfg.MaxOpenTenants = DefaultMaxOpenTenants()
	}
	s.met = newMetrics(s)
	s.met.reg.NewGaugeFunc("hay_open_tenants", "Tenant stores open (each holds 3 file descriptors); at most --max-open-tenants.", func() float64 {
		return float64(len(s.openTenants()))
	})
	s.handler = s.routes()
	return s, nil
}

// Handler is the whole API plus the web UI.
func (s *Server) Handler() http.Handler { return s.handler }

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, r *http.Request) {
		if err := s.failed(); err != nil {
			msg := "not ready: " + err.Error()
			if s.cfg.Auth != nil {
				// /ready answers without credentials: with auth on it
				// does not name the tenant or the data directory's path
				// (auth audit A2); the store's failure was logged.
				msg = "not ready: a tenant's store failed and refuses writes until a restart (the server log names it)"
			}
			http.Error(w, msg, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.Handle("GET /metrics", s.met.handler())
	mux.HandleFunc("GET /loki/api/v1/status/buildinfo", s.lokiBuildInfo)
	// Grafana's alerting pages ask a Loki data source for its ruler's
	// rules, and show an error banner when that fails. hay has no ruler:
	// no rules (behind auth, as a ruler's list would be).
	mux.Handle("GET /prometheus/api/v1/rules", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"status": "success", "data": map[string]any{"groups": []any{}}})
	})))

	mux.Handle("/loki/api/v1/push", s.tenantAuth(s.handlePush("loki")))
	mux.Handle("/api/v1/push/jsonl", s.tenantAuth(s.handlePush("jsonl")))
	mux.Handle("/otlp/v1/logs", s.tenantAuth(http.HandlerFunc(s.handleOTLPLogs)))

	q := func(name string, h func(http.ResponseWriter, *http.Request, *tenantStore)) http.Handler {
		return s.tenantAuth(s.query(name, h))
	}
	mux.Handle("/loki/api/v1/query_range", q("query_range", s.lokiQueryRange))
	mux.Handle("/loki/api/v1/query", q("query", s.lokiQuery))
	mux.Handle("/loki/api/v1/labels", q("labels", s.lokiLabels))
	mux.Handle("/loki/api/v1/label/{name}/values", q("label_values", s.lokiLabelValues))
	mux.Handle("/loki/api/v1/series", q("series", s.lokiSeries))
	mux.Handle("/loki/api/v1/index/stats", q("index_stats", s.lokiIndexStats))
	// Logs Drilldown's endpoints (drilldown.go).
	mux.Handle("/loki/api/v1/index/volume", q("index_volume", s.lokiVolume(false)))
	mux.Handle("/loki/api/v1/index/volume_range", q("index_volume_range", s.lokiVolume(true)))
	mux.Handle("/loki/api/v1/detected_labels", q("detected_labels", s.lokiDetectedLabels))
	mux.Handle("/loki/api/v1/detected_fields", q("detected_fields", s.lokiDetectedFields))
	mux.Handle("/loki/api/v1/detected_field/{name}/values", q("detected_field_values", s.lokiDetectedFieldValues))
	mux.Handle("/loki/api/v1/patterns", q("patterns", s.lokiPatterns))
	mux.Handle("/loki/api/v1/drilldown-limits", q("drilldown_limits", s.lokiDrilldownLimits))
	mux.Handle("GET /loki/api/v1/tail", s.tenantAuth(http.HandlerFunc(s.lokiTail)))

	mux.Handle("GET /api/v1/search", q("search", s.nativeSearch))
	mux.Handle("GET /api/v1/hits", q("hits", s.nativeHits))
	mux.Handle("GET /api/v1/facets", q("facets", s.nativeFacets))
	mux.Handle("GET /api/v1/tail", s.tenantAuth(http.HandlerFunc(s.nativeTail)))

	mux.Handle("/", web.Handler())
	// A push (or a POSTed query) from another site's page in the
	// browser of someone who can reach this server would be stored:
	// forged lines planted in what responders read. Browsers mark such
	// requests (Sec-Fetch-Site, Origin); shippers and Grafana's backend
	// send neither and pass.
	return s.hostCheck(http.NewCrossOriginProtection().Handler(mux))
}

// hostCheck refuses, on a server without auth, browser requests whose
// Host is a name other than localhost or one of cfg.AllowedHosts (see
// AllowedHosts). Only browsers send Sec-Fetch-Site (all of them since
// 2023), and only a browser can be turned against the server by DNS
// rebinding: shippers, Prometheus and Grafana's backend pass.
func (s *Server) hostCheck(h http.Handler) http.Handler {
	if s.cfg.Auth != nil {
		return h // rebinding gets no credentials: they belong to the real name
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Sec-Fetch-Site") == "" {
			h.ServeHTTP(w, r)
			return
		}
		host := r.Host
		if hh, _, err := net.SplitHostPort(host); err == nil {
			host = hh
		}
		host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
		if host == "" || host == "localhost" || strings.HasSuffix(host, ".localhost") || net.ParseIP(host) != nil || slices.Contains(s.cfg.AllowedHosts, host) {
			h.ServeHTTP(w, r)
			return
		}
		s.met.rejected.WithLabelValues("host").Inc()
		writeError(w, http.StatusMisdirectedRequest, fmt.Sprintf("host %q is not served to browsers without auth: add it with --allowed-host (a web page could otherwise reach this server under its own name by DNS rebinding and read every log)", host))
	})
}

// writeError answers with status and {"error": msg}; Loki clients show
// the body of a failed push to the user.
func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	// "message" too: Grafana shows a JSON error body's message field and
	// otherwise the raw JSON text.
	json.NewEncoder(w).Encode(struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}{msg, msg})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// errShuttingDown answers a request that needs a store once Close began.
var errShuttingDown = &httpError{http.StatusServiceUnavailable, "shutting_down", "server is shutting down"}

// tenantAuth is auth for the endpoints that use a tenant's store: the
// request's tenant stays pinned (never closed to make room for another)
// while the handler runs, live tails included.
func (s *Server) tenantAuth(h http.Handler) http.Handler {
	return s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, _ := r.Context().Value(tenantKey{}).(string)
		s.mu.Lock()
		s.pins[name]++
		s.mu.Unlock()
		defer s.unpin(name)
		h.ServeHTTP(w, r)
	}))
}

func (s *Server) unpin(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pins[name]--; s.pins[name] > 0 {
		return
	}
	delete(s.pins, name)
	if ts, ok := s.tenants[name]; ok {
		s.useClock++
		ts.lastUse = s.useClock
	}
	s.notifyLocked()
}

// notifyLocked wakes the opens waiting for a tenant to become closable.
func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// openTenant returns the tenant's store, opening it on first use. Without
// create, a tenant that has no directory yet returns nil, nil: it has no
// data, and a query must not create directories.
//
// At most MaxOpenTenants stores are open: opening one more first closes
// (flushes and releases) the least recently used tenant that no request
// has pinned (see tenantAuth), waiting up to tenantSlotWait for one; if
// none becomes closable the error is a 503 naming the limit. A closed
// tenant reopens here on its next use, replaying its WAL. The caller's
// tenant must be pinned (every route using a store is behind tenantAuth)
// for the store to stay open after this returns.
func (s *Server) openTenant(name string, create bool) (*tenantStore, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var deadline time.Time
	for {
		if s.closed {
			return nil, errShuttingDown
		}
		s.removeOrphansLocked()
		if ts, ok := s.tenants[name]; ok {
			if ts.state == tenantOpen {
				s.useClock++
				ts.lastUse = s.useClock
				return ts, nil
			}
			// Opening (by another request) or closing: wait for the end
			// and look again.
			ch := ts.settled
			s.mu.Unlock()
			<-ch
			s.mu.Lock()
			continue
		}
		dir := filepath.Join(s.cfg.DataDir, name)
		existed := true
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) || s.orphans[name] {
			if !create {
				return nil, nil
			}
			existed = false
		}
		if len(s.tenants) >= s.cfg.MaxOpenTenants {
			if v := s.idlestLocked(); v != nil {
				s.closeTenantLocked(v)
				continue
			}
			if deadline.IsZero() {
				deadline = time.Now().Add(tenantSlotWait)
			}
			if !s.mayFreeLocked() || !s.waitLocked(deadline) {
				s.log.Warn("tenant not opened: too many open tenants", "tenant", name, "max_open_tenants", s.cfg.MaxOpenTenants)
				return nil, &httpError{http.StatusServiceUnavailable, "too_many_open_tenants", fmt.Sprintf(
					"tenant %s is not open and cannot be opened: %d tenant stores are open (--max-open-tenants %d) and each has a request in flight or a live tail; nothing was stored; retry later",
					name, len(s.tenants), s.cfg.MaxOpenTenants)}
			}
			continue
		}
		return s.openLocked(name, dir, existed)
	}
}

// openLocked opens the store of a tenant not in s.tenants, holding its
// place (state opening) without s.mu meanwhile: a WAL replay can take a
// while, and other tenants' requests must not wait for it.
func (s *Server) openLocked(name, dir string, existed bool) (*tenantStore, error) {
	ts := &tenantStore{name: name, hub: newHub(), state: tenantOpening, settled: make(chan struct{})}
	if s.tailsStopped {
		// A tail that was in flight when StopTails ran (say in a slow
		// auth check) must end at once, not hold the shutdown.
		ts.hub.close()
	}
	s.tenants[name] = ts
	s.mu.Unlock()
	w, err := store.OpenWriter(dir, store.WriterOptions{
		Options:  s.cfg.Store,
		OnCommit: ts.hub.publish,
		OnSync:   func(d time.Duration) { s.met.fsync.Observe(d.Seconds()) },

		CompactInterval:   s.cfg.CompactInterval,
		CompactMergeBytes: s.cfg.CompactMergeBytes,
		FlushIdle:         max(s.cfg.HeadFlushIdle, 0),
		FlushAge:          max(s.cfg.HeadFlushAge, 0),
		OnIndexDamage: func(seg string, err error) {
			s.log.Warn("skip index damaged: searches scan the segment's blocks in full (results stay exact); run hay verify",
				"tenant", name, "segment", seg, "err", err)
		},
		OnFlush: func(why string, err error) {
			if err != nil {
				s.log.Error("flushing the head failed", "tenant", name, "why", why, "err", err)
				return
			}
			s.log.Debug("flushed the head", "tenant", name, "why", why)
		},
		OnCompact: func(cs store.CompactStats, err error) {
			if err != nil {
				s.log.Error("compaction failed; retried later", "tenant", name, "err", err)
				return
			}
			s.log.Info("compacted", "tenant", name, "segments", cs.Segments, "bytes_before", cs.Before, "bytes_after", cs.After)
		},
	})
	var orphan bool
	if err != nil && !existed {
		// Nothing is stored in it: leave no directory behind (a restart
		// would otherwise meet an empty tenant). Only this goroutine uses
		// the name while it is opening, and the data directory's lock
		// keeps other processes out.
		orphan = os.RemoveAll(dir) != nil
	}
	s.mu.Lock()
	close(ts.settled)
	if err != nil {
		if orphan {
			s.orphans[name] = true
		}
		delete(s.tenants, name)
		s.notifyLocked()
		s.log.Error("open tenant failed", "tenant", name, "err", err)
		// Nothing was written: say so, rather than the push's "may or
		// may not be stored". Out of descriptors is worth a retry.
		status := http.StatusInternalServerError
		if errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) {
			status = http.StatusServiceUnavailable
		}
		return nil, &httpError{status, "tenant_open_failed", fmt.Sprintf("open tenant %s: %v; nothing was stored", name, err)}
	}
	delete(s.orphans, name)
	ts.w = w
	ts.state = tenantOpen
	s.useClock++
	ts.lastUse = s.useClock
	return ts, nil
}

// idlestLocked returns the least recently used open tenant that can be
// closed: no request pinned, no live tail.
func (s *Server) idlestLocked() *tenantStore {
	var v *tenantStore
	for name, ts := range s.tenants {
		if ts.state != tenantOpen || s.pins[name] > 0 || ts.hub.tails() > 0 {
			continue
		}
		if v == nil || ts.lastUse < v.lastUse {
			v = ts
		}
	}
	return v
}

// mayFreeLocked reports whether waiting can make a place: a close or an
// open is under way, or a tenant is pinned by requests that will end (not
// by a live tail, which may last for days).
func (s *Server) mayFreeLocked() bool {
	for name, ts := range s.tenants {
		if ts.state != tenantOpen || (s.pins[name] > 0 && ts.hub.tails() == 0) {
			return true
		}
	}
	return false
}

// waitLocked waits, without s.mu, for a change or the deadline; it
// reports whether the deadline is still ahead.
func (s *Server) waitLocked(deadline time.Time) bool {
	d := time.Until(deadline)
	if d <= 0 {
		return false
	}
	ch := s.changed
	s.mu.Unlock()
	t := time.NewTimer(d)
	select {
	case <-ch:
	case <-t.C:
	}
	t.Stop()
	s.mu.Lock()
	return time.Now().Before(deadline)
}

// closeTenantLocked flushes and closes an idle open tenant to make room,
// without s.mu meanwhile (a flush can take a while); the tenant keeps its
// place, state closing, until its descriptors are released. A failed
// close loses nothing acknowledged: the WAL holds it, and the next open
// replays it.
func (s *Server) closeTenantLocked(ts *tenantStore) {
	ts.state = tenantClosing
	ts.settled = make(chan struct{})
	s.mu.Unlock()
	start := time.Now()
	err := ts.w.Close()
	if err != nil {
		s.log.Error("closing an idle tenant failed; its WAL is replayed when it reopens", "tenant", ts.name, "err", err)
	} else {
		s.log.Debug("closed an idle tenant", "tenant", ts.name, "took", time.Since(start))
	}
	s.mu.Lock()
	delete(s.tenants, ts.name)
	close(ts.settled)
	s.notifyLocked()
	s.removeOrphansLocked()
}

// removeOrphansLocked retries the removal of the orphans (those not being
// opened again meanwhile).
func (s *Server) removeOrphansLocked() {
	for name := range s.orphans {
		if _, busy := s.tenants[name]; busy {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.cfg.DataDir, name)); err == nil {
			delete(s.orphans, name)
		}
	}
}

// OpenExisting opens the stores of the tenant directories under DataDir
// at start-up, so that their recovery (WAL replay) happens now rather
// than on their first request: at most MaxOpenTenants of them, the most
// recently modified first, tenantParallel at a time. The others stay
// closed until their first request opens them; queries see every tenant
// either way, since a query opens a closed tenant's store on demand.
func (s *Server) OpenExisting() error {
	ents, err := os.ReadDir(s.cfg.DataDir)
	if err != nil {
		return err
	}
	type cand struct {
		name string
		mod  time.Time
	}
	var cands []cand
	for _, e := range ents {
		if !e.IsDir() || !validTenant(e.Name()) {
			continue
		}
		c := cand{name: e.Name()}
		if fi, err := e.Info(); err == nil {
			c.mod = fi.ModTime()
		}
		cands = append(cands, c)
	}
	slices.SortFunc(cands, func(a, b cand) int {
		if c := b.mod.Compare(a.mod); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	if len(cands) > s.cfg.MaxOpenTenants {
		s.log.Info("opening the most recently modified tenants; the others open on first use", "tenants", len(cands), "max_open_tenants", s.cfg.MaxOpenTenants)
		cands = cands[:s.cfg.MaxOpenTenants]
	}
	errs := make([]error, len(cands))
	sem := make(chan struct{}, tenantParallel)
	var wg sync.WaitGroup
	for i, c := range cands {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_, errs[i] = s.openTenant(c.name, true)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close stops the tails, flushes every tenant's head into a segment and
// releases the stores, tenantParallel at a time. Call it after
// http.Server.Shutdown, so no push is in flight.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed, s.tailsStopped = true, true
	// Opens and closes under way finish first: an opened store is closed
	// below, a closed one is gone.
	for {
		var ch chan struct{}
		for _, t := range s.tenants {
			if t.state != tenantOpen {
				ch = t.settled
				break
			}
		}
		if ch == nil {
			break
		}
		s.mu.Unlock()
		<-ch
		s.mu.Lock()
	}
	ts := s.tenants
	s.tenants = map[string]*tenantStore{}
	s.mu.Unlock()
	for _, t := range ts {
		t.hub.close()
	}
	// The tails send what they hold and their shutdown message; a client
	// that does not read gets the tail's own write timeout.
	done := make(chan struct{})
	go func() { s.tails.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		s.log.Warn("live tails still running at shutdown; closing anyway")
	}
	// Each close is mostly fsyncs (segment, directories, MANIFEST): a few
	// at once overlap them, 2,000 tenants one by one took 17 s.
	names := slices.Sorted(maps.Keys(ts))
	errs := make([]error, len(names))
	sem := make(chan struct{}, tenantParallel)
	var wg sync.WaitGroup
	for i, name := range names {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := ts[name].w.Close(); err != nil {
				errs[i] = fmt.Errorf("tenant %s: %w", name, err)
			}
		})
	}
	wg.Wait()
	s.mu.Lock()
	s.removeOrphansLocked()
	s.mu.Unlock()
	if s.dirLock != nil {
		s.dirLock.Close() // releases the lock
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// lockDataDir takes an exclusive flock on the data directory itself. Each
// tenant's store has its own lock, but a second server on the same
// directory started healthy and failed push by push ("in use by another
// writer") for the tenants the first had opened.
func lockDataDir(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s is in use by another hay serve (or hay demo), or by hay ingest, compact or verify --repair of one of its tenants", dir)
		}
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return f, nil
}

// StopTails ends every live tail (they would otherwise keep a graceful
// shutdown waiting). Register it with http.Server.RegisterOnShutdown.
func (s *Server) StopTails() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tailsStopped = true
	for _, t := range s.tenants {
		t.hub.close()
	}
}

// failed returns the first failure of an open tenant's store, if any
// (closed tenants have none: a reopen recovers from the WAL).
func (s *Server) failed() error {
	for _, t := range s.openTenants() {
		if err := t.w.Err(); err != nil {
			return fmt.Errorf("tenant %s: %w", t.name, err)
		}
	}
	return nil
}

// openTenants lists the open tenants' stores (not those opening or
// closing). Callers that then wait on
// a store (its lock may be held through a flush) do so without s.mu, so
// that no other tenant's request waits with them.
func (s *Server) openTenants() []*tenantStore {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*tenantStore, 0, len(s.tenants))
	for _, t := range s.tenants {
		if t.state == tenantOpen {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b *tenantStore) int { return strings.Compare(a.name, b.name) })
	return out
}

// tails counts the live tails subscribed.
func (h *hub) tails() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}
