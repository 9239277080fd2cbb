package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"haystack/internal/server"
	"haystack/internal/store"
)

func init() {
	register(&command{
		name:    "serve",
		summary: "serve the Loki-compatible push/query API, the native API and the web UI",
		run:     runServe,
	})
}

// byteSizeFlag is a flag.Value for sizes like 64MiB.
type byteSizeFlag struct{ n *int64 }

func (f byteSizeFlag) String() string {
	if f.n == nil || *f.n == 0 {
		return ""
	}
	for _, u := range []struct {
		name string
		n    int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if *f.n%u.n == 0 {
			return fmt.Sprintf("%d%s", *f.n/u.n, u.name)
		}
	}
	return fmt.Sprint(*f.n)
}

func (f byteSizeFlag) Set(s string) error {
	v, err := parseByteSize(s)
	if err != nil {
		return err
	}
	*f.n = v
	return nil
}

func runServe(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: hay serve [flags]")
		fmt.Fprintln(fs.Output())
		fmt.Fprintln(fs.Output(), "Serves Loki's push and query API (POST /loki/api/v1/push, GET /loki/api/v1/query_range, ...,")
		fmt.Fprintln(fs.Output(), "and the endpoints of Grafana's Logs Drilldown), OTLP/HTTP logs (POST /otlp/v1/logs), JSON lines")
		fmt.Fprintln(fs.Output(), "(POST /api/v1/push/jsonl), the native API (/api/v1/search, /hits, /facets, /tail), /metrics,")
		fmt.Fprintln(fs.Output(), "/ready and the web UI at /. Each tenant (X-Scope-OrgID, default \"fake\") is the store DIR/<tenant>;")
		fmt.Fprintln(fs.Output(), "hay search --data DIR/<tenant> reads it. Every endpoint and limit: go doc haystack/internal/server.")
		fmt.Fprintln(fs.Output(), "A push is acknowledged only after its entries are fsynced. SIGTERM or SIGINT stops")
		fmt.Fprintln(fs.Output(), "accepting, finishes in-flight requests, flushes and exits 0.")
		fmt.Fprintln(fs.Output())
		fs.PrintDefaults()
	}
	data := fs.String("data", defaultDataDir(), "data `dir`ectory, one store per tenant: DIR/<tenant> ($HAY_DATA when set)")
	listen := fs.String("listen", "127.0.0.1:3100", "listen `address`")
	authFile := fs.String("auth-file", "", "credentials `file`: lines \"token <secret> [tenant]\" or \"basic <user> <password> [tenant]\"; a secret may be written as sha256:<hex> or a bcrypt hash ($2y$..., as htpasswd -B makes); a line without a tenant may use every tenant. Plain HTTP: put a TLS proxy in front")
	authFailures := fs.Int("auth-failures-per-minute", server.DefaultFailuresPerMinute, "with --auth-file, failed logins a client address may make a minute after a burst of 20; past it, 429 with Retry-After, even with good credentials (0 or negative: no limit). Behind a reverse proxy every client has the proxy's address, so one client with a bad password locks out all (Grafana too): set 0 and limit at the proxy")
	maxBody := int64(64 << 20)
	fs.Var(byteSizeFlag{&maxBody}, "max-body", "largest push `size` as sent, e.g. 64MiB (decompressed: 4x this)")
	maxLine := int64(256 << 10)
	fs.Var(byteSizeFlag{&maxLine}, "max-line", "largest line `size`, 64 B to 16MiB")
	linePolicy := fs.String("line-policy", "reject", "a line over --max-line: `reject` (the push, naming the entry) or truncate (with a marker)")
	queryTimeout := fs.Duration("query-timeout", 30*time.Second, "a query running longer gets 504")
	maxQueries := fs.Int("max-concurrent-queries", 2*runtime.GOMAXPROCS(0), "queries run at once (default 2 x cores: the number shown is this machine's); more wait in a queue (--query-queue-wait)")
	queueWait := fs.Duration("query-queue-wait", 5*time.Second, "how long a query waits for a slot before it gets 429 with Retry-After (0: 429 at once)")
	maxQueued := fs.Int("max-queued-queries", 100, "queries waiting for a slot at once; more get 429 at once")
	var allowedHosts stringList
	fs.Var(&allowedHosts, "allowed-host", "a `host` name browsers may reach this server at without --auth-file, besides localhost and IP addresses (repeatable; guards against DNS rebinding)")
	maxQuerySeries := fs.Int("max-query-series", 500, "most series a metric query may answer (Loki's max_query_series); more is a 400")
	maxTails := fs.Int("max-tails", server.DefaultMaxTails, "live tails (Loki's and the web UI's) open at once, all tenants; more get 429 (negative: no bound)")
	maxQueryLimit := fs.Int("max-query-limit", 5000, "largest limit (entries) a log query may ask for; Loki's max_entries_limit_per_query (Grafana's \"Maximum lines\" must not exceed it)")
	maxQueryBytes := int64(server.DefaultMaxQueryBytes)
	fs.Var(byteSizeFlag{&maxQueryBytes}, "max-query-bytes", "most bytes (`size`) of lines, metadata and labels one log query's answer may hold, e.g. 64MiB: an answer that reaches it keeps the entries that fit, in order, and says so (a warning; Grafana and hay search --server page on); a Loki tail's replay and delayed entries too (0: no bound)")
	older := fs.Duration("reject-older-than", 168*time.Hour, "reject entries older than this (0: accept any)")
	newer := fs.Duration("reject-newer-than", 10*time.Minute, "reject entries further in the future than this (0: accept any)")
	maxLabels := fs.Int("max-labels", 15, "labels a stream may have")
	maxLabelValue := fs.Int("max-label-value-bytes", 2048, "longest label value a push may have (names: 1 KiB)")
	maxStreams := fs.Int("max-streams-per-tenant", 5000, "active streams a tenant may have (pushed to in the last 30 minutes; Loki's max_global_streams_per_user): a push's entries for new streams past it get 429, a resend of the batch stores only those (0: no limit)")
	inflightPush := int64(256 << 20)
	fs.Var(byteSizeFlag{&inflightPush}, "max-inflight-push-bytes", "decompressed push bodies (`size`) processed at once, all tenants; a push beyond it waits up to 5s, then gets 429 with Retry-After; a body larger than it gets 413 (0: no bound)")
	discoverService := fs.Bool("discover-service-name", true, "give pushed streams without service_name one, as Loki's discover_service_name: the first of service, app, application, app_name, name, app_kubernetes_io_name, container, container_name, k8s_container_name, component, workload, job, k8s_job_name, else unknown_service (Grafana's Logs Drilldown lists services by it)")
	discoverLevels := fs.Bool("discover-log-levels", true, "give each pushed entry the structured metadata detected_level, as Loki's discover_log_levels: trace, debug, info, warn, error, critical, fatal or unknown, from its level label or metadata (level, LEVEL, Level, severity, ..., severity_text), OTLP severity_number, or its line (a JSON or logfmt level field, else a level word such as ERROR or [WARN]); an entry that has detected_level keeps it (Grafana's log volume and Logs Drilldown use it)")
	maxOpenTenants := fs.Int("max-open-tenants", server.DefaultMaxOpenTenants(), "tenant stores open at once (3 file descriptors each; the default, shown, is a sixth of this process's open-file limit); past it the least recently used idle tenant is flushed and closed, and reopens on its next request")
	compactEvery := fs.Duration("compact-interval", time.Minute, "compact new segments in the background when a tenant opens and then this often (0: never; see hay compact)")
	mergeBytes := int64(store.DefaultMergeBytes)
	fs.Var(byteSizeFlag{&mergeBytes}, "merge-bytes", "the background compaction merges consecutive segments into one of up to this `size` of raw bytes (0: rewrite each alone; see hay compact)")
	headIdle := fs.Duration("head-flush-idle", 30*time.Minute, "flush a tenant's head into a segment once it has had no entry for this long (Loki's chunk_idle_period; 0: never)")
	headAge := fs.Duration("head-flush-age", 2*time.Hour, "flush a tenant's head once it has held entries for this long, however busy (Loki's max_chunk_age; bounds the WAL a restart replays; 0: never)")
	headBytes := int64(0)
	fs.Var(byteSizeFlag{&headBytes}, "head-bytes", "head `size` at which a tenant's head is flushed into a segment (default 32MiB)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if *linePolicy != "reject" && *linePolicy != "truncate" {
		return fmt.Errorf("%w: --line-policy must be reject or truncate", errUsage)
	}
	if maxLine < 64 || maxLine > 16<<20 {
		return fmt.Errorf("%w: --max-line must be between 64 bytes and 16MiB", errUsage)
	}
	if *maxOpenTenants < 1 {
		return fmt.Errorf("%w: --max-open-tenants must be at least 1", errUsage)
	}
	if *compactEvery < 0 {
		return fmt.Errorf("%w: --compact-interval must be 0 (never) or positive", errUsage)
	}
	cfg := server.Config{
		DataDir:              *data,
		MaxBody:              maxBody,
		MaxLine:              int(maxLine),
		TruncateLines:        *linePolicy == "truncate",
		QueryTimeout:         *queryTimeout,
		MaxConcurrentQueries: *maxQueries,
		QueryQueueWait:       queueWaitConfig(*queueWait),
		MaxQueuedQueries:     *maxQueued,
		MaxLabelValueBytes:   *maxLabelValue,
		MaxQueryLimit:        *maxQueryLimit,
		MaxQueryBytes:        maxQueryBytes,
		MaxTails:             *maxTails,
		HeadFlushIdle:        neverIfZero(*headIdle),
		HeadFlushAge:         neverIfZero(*headAge),
		MaxQuerySeries:       *maxQuerySeries,
		AllowedHosts:         allowedHosts,
		RejectOlderThan:      *older,
		RejectNewerThan:      *newer,
		MaxLabels:            *maxLabels,
		MaxStreamsPerTenant:  *maxStreams,
		MaxInflightPushBytes: inflightPush,
		CompactInterval:      *compactEvery,
		MaxOpenTenants:       *maxOpenTenants,
		CompactMergeBytes:    mergeBytes,
		Logger:               slog.New(slog.NewTextHandler(os.Stderr, nil)),
	}
	cfg.Store.HeadBytes = headBytes
	cfg.NoServiceNameDiscovery = !*discoverService
	cfg.NoLogLevelDiscovery = !*discoverLevels
	if maxQueryBytes <= 0 {
		cfg.MaxQueryBytes = -1 // server: negative means no bound
	}
	if inflightPush <= 0 {
		cfg.MaxInflightPushBytes = -1 // server: negative means no bound
	}
	if mergeBytes == 0 {
		cfg.CompactMergeBytes = -1 // store: negative means no merging
	}
	if *authFile != "" {
		f, err := os.Open(*authFile)
		if err != nil {
			return err
		}
		cfg.Auth, err = server.ParseAuth(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", *authFile, err)
		}
		cfg.Auth.FailuresPerMinute = *authFailures
		if *authFailures == 0 {
			cfg.Auth.FailuresPerMinute = -1 // 0 a minute would lock out for good: read as no limit
		}
	}
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	if err := srv.OpenExisting(); err != nil {
		srv.Close()
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		srv.Close()
		return err
	}
	fmt.Fprintf(os.Stderr, "hay serve: listening on http://%s (data %s)\n", ln.Addr(), *data)
	if *authFile == "" && !loopbackListener(ln.Addr()) {
		fmt.Fprintf(os.Stderr, "hay serve: warning: no --auth-file, and %s is reachable from other machines: anyone who can connect may read and write every tenant\n", ln.Addr())
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serveUntil(ctx, srv, ln, cfg.Logger, "hay serve"); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "hay serve: stopped")
	return nil
}

// serveUntil serves srv on ln until ctx is done (a signal), then stops
// accepting, finishes in-flight requests (30 s at most), ends live tails
// and closes srv, which flushes every tenant's head. It closes srv in
// every case. `hay serve` and `hay demo` share it. name prefixes the
// shutdown message.
func serveUntil(ctx context.Context, srv *server.Server, ln net.Listener, logger *slog.Logger, name string) error {
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute, // a 64 MiB body at >= 0.5 MB/s
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	hs.RegisterOnShutdown(srv.StopTails)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		srv.Close()
		return err
	case <-ctx.Done():
		fmt.Fprintf(os.Stderr, "%s: stopping: finishing in-flight requests and flushing\n", name)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	serr := hs.Shutdown(sctx)
	if err := srv.Close(); err != nil {
		return fmt.Errorf("flush at shutdown: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("shutdown: %w", serr)
	}
	return nil
}

// queueWaitConfig maps --query-queue-wait to server.Config, where 0 means
// the default and a negative wait means none.
func queueWaitConfig(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// loopbackListener reports whether addr only accepts connections from
// this machine.
func loopbackListener(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// neverIfZero maps a flag's 0 ("never") to server.Config's negative.
func neverIfZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
