// Package server is `hay serve`: Haystack's HTTP API. It speaks Loki's
// documented push and query API (so Promtail, Alloy, Fluent Bit, Vector
// and Grafana work against it unchanged), the native API of
// web/API.md that the embedded web UI uses, and /metrics.
//
// # Durability
//
// A push is answered 204 only after its entries are in the tenant's
// write-ahead log and the log is fsynced (store.Writer: concurrent pushes
// share one fsync). Every push is decoded whole before anything is
// stored: a body that cannot be read (413, 415, malformed 400) stores
// nothing. Then, as in Loki, each stream and entry is checked against the
// limits below: the valid ones are stored and the invalid ones refused,
// and the answer is then a 400 that names the first few refused and says
// how many entries were stored ("nothing was stored" when none). Shippers
// drop a batch answered 400, so refusing all of it for one entry past a
// limit would lose the valid ones too. A 5xx means the store failed (a
// write or fsync error), its entries may or may not be there, and the
// tenant's store refuses writes until a restart.
//
// # Endpoints
//
//	GET  /ready, /health                      200 when serving (/ready: 503 once a tenant's store has failed)
//	GET  /metrics                             Prometheus metrics
//	POST /loki/api/v1/push                    JSON, or protobuf+snappy (Content-Type application/x-protobuf); Content-Encoding gzip, deflate or snappy for both; structured metadata as Loki's (below)
//	POST /api/v1/push/jsonl                   JSON lines: {"labels":{...}|"{a=\"b\"}","ts":"<ns>"|<ns>|"<RFC3339>","line":"...","structuredMetadata":{"trace_id":"..."}} (ts optional: now; structuredMetadata optional, or "metadata" as an object of strings)
//	POST /otlp/v1/logs                        OTLP/HTTP logs (protobuf or JSON, gzip): Loki's default resource attributes as labels, the body as the line, the rest structured metadata, later pairs of a name winning as in Loki (otlp.go, otlp_attrs.go)
//	GET  /loki/api/v1/query_range             log queries → "streams"; metric queries → "matrix"
//	GET  /loki/api/v1/query                   metric queries → "vector" (log queries: "streams" over the hour before time)
//	GET  /loki/api/v1/labels, /label/<n>/values, /series, /index/stats (a plain selector's stats from the block index, exact)
//	GET  /loki/api/v1/index/volume, /index/volume_range   bytes per series (or per label: aggregateBy=labels) in [start, end], exact; Logs Drilldown's service list (drilldown.go)
//	GET  /loki/api/v1/detected_labels         stream labels with their exact cardinality in [start, end]
//	GET  /loki/api/v1/detected_fields, /detected_field/<n>/values   json/logfmt fields of the newest line_limit (1000) matching entries in [start, end)
//	GET  /loki/api/v1/patterns                line patterns (tokens with digits as <_>) with counts per step in [start, end); /drilldown-limits: Drilldown's limits
//	GET  /loki/api/v1/tail                    WebSocket live tail: replays the newest limit (100) entries from start (an hour ago) on, then live; delay_for ≤ 5 s sorts late entries in; pings every second, as Loki, so idle proxies keep it
//	GET  /loki/api/v1/status/buildinfo        this binary's version, VCS revision and Go version (no auth)
//	GET  /prometheus/api/v1/rules             no rules (hay has no ruler; Grafana's alerting pages ask)
//	GET  /api/v1/search, /api/v1/hits, /api/v1/facets, /api/v1/tail   see web/API.md
//	GET  /, /static/...                       the web UI
//
// Times (start, end, time) are as in Loki's API: an integer of up to ten
// digits is Unix seconds, a longer one Unix nanoseconds, a decimal number
// Unix seconds with a fraction (read exactly from its digits), or RFC
// 3339. Loki's query_range reads start <= ts < end; the native API reads
// start <= ts <= end (API.md). Without start, query_range and the label
// and series endpoints start since (a duration, as Loki) before end.
//
// Where this differs from Loki on purpose: an entry pushed twice with the
// same stream, time and line is stored twice (Loki drops a line equal to
// the stream's previous one; here every acknowledged entry is kept).
// Entries with the same timestamp come in store order (push order within
// a stream) in both directions (Loki reverses them for backward queries),
// so a stack trace pushed line by line at one time reads top-down in
// Grafana's newest-first view too. That order is kept by compaction, so
// the UI's "load more", which asks again from the boundary time and drops
// the rows there it already showed, neither repeats nor skips one.
// A live tail dedupes only where its replay and the live entries overlap
// (an entry committed while the replay read the store reaches both);
// delay_for holds an entry until delay_for has passed since its own time
// (or since it arrived, for a time in the future), as Loki's
// "let slow loggers catch up", and each message is sorted by time.
//
// Structured metadata (an entry's name=value pairs beside its line) is
// returned as Loki 3 returns it. By default each entry's metadata, and
// the labels a parser extracted, are merged into its labels, so entries
// of one stream with different metadata are different result streams,
// and metric series carry them (`sum by (trace_id) (...)`; `| keep` or
// `| drop` trims them). With the request header
// X-Loki-Response-Encoding-Flags: categorize-labels (query, query_range,
// tail), a result stream has the stream's labels alone (those the
// pipeline kept) and every value is [ts, line, {"structuredMetadata":
// {...}, "parsed": {...}}], each part only when non-empty ({} for
// neither; __error__ counts as parsed), and data (the tail's message) has
// "encodingFlags": ["categorize-labels"]; only that flag is recognised
// and echoed. In a pipeline, metadata are labels of the entry (label
// filters, drop, keep; internal/query's doc has the precedence rules);
// line filters never see them. Segments of format 5 index the metadata
// values apart from the lines (internal/segment): a label filter that
// needs a value (`| trace_id="5f89..."`) reads only the blocks whose
// values may hold it, or, after a json, logfmt, regexp or pattern
// parser, whose lines may (internal/search, query.Plan.LabelIndex); in
// older segments and the head it reads every block of the selected
// streams.
// The native API gives each entry's metadata as stored, in "metadata"
// (web/API.md).
//
// LogQL log queries are internal/query's: a stream selector, line
// filters, the json, logfmt (both with extraction parameters), regexp,
// pattern and unpack parsers, label filters, line_format, label_format,
// decolorize, drop and keep, and # comments to the end of a line (in
// metric queries too). A line that line_format, decolorize or unpack
// rewrote is the line returned, counted and measured (bytes_over_time),
// as in Loki; line filters after such a stage test the new line. Grafana Explore's
// logs-volume query ends its log query in `| drop __error__`, Logs
// Drilldown appends `| json | logfmt | drop __error__, __error_details__`.
// A metric query fails with Loki's pipeline error when a series still
// carries __error__ at the end of the pipeline (a line a parser or a
// label filter could not handle); dropping __error__, or a label filter
// on it, avoids that, as in Loki.
//
// Metric queries: count_over_time, rate, bytes_over_time, bytes_rate over a
// log query; over the values of a label (`| unwrap latency`, or
// duration(...), duration_seconds(...), bytes(...) of one, then label
// filters such as `| __error__=""`): sum_over_time, avg_over_time,
// max_over_time, min_over_time, first_over_time, last_over_time,
// stdvar_over_time, stddev_over_time, quantile_over_time(q, ...), rate
// (sum per second) and rate_counter (Prometheus's counter rate), all but
// sum_over_time, rate and rate_counter with an optional by/without (...)
// after them; the unwrapped label leaves the series, an entry without it
// gives no sample, and a value that does not convert sets
// __error__=SampleExtractionErr (so a pipeline error, as in Loki);
// sum/count/min/max/avg [by|without (...)] over those,
// topk(k, ...) and bottomk(k, ...) [by|without (...)] (at each step the k
// largest or smallest samples of each group, keeping their labels; equal
// values go to the labels that sort first, NaN ranks last), and
// binary operators with Loki's precedence and semantics: arithmetic
// (+ - * / % ^; x/0 is NaN, as Loki answers), comparisons (== != > >= < <=,
// which filter, or answer 1/0 with bool), and the set operators and, or,
// unless; between two vectors samples match one-to-one on their labels,
// or on (...) / ignoring (...), or many-to-one with group_left [(labels)]
// or group_right [(labels)] after on/ignoring (the listed labels copied
// from the "one" side; two samples of one signature on the one side, or
// two results with one label set, are a 400 "multiple matches" /
// "many-to-many" error, as in Prometheus). Also, with Prometheus's
// semantics: unary minus (-sum(...), binding looser than ^), sort(v) and
// sort_desc(v) (an instant answer in value order, NaN last; a range
// answer by labels as always), label_replace(v, "dst", "replacement",
// "src", "regex") (anchored regex, $1 and ${name} expanded, an empty
// result removes dst), "offset d" after a range ([5m] offset 1h, with
// unwrap too: the window ends d before each step), and
// absent_over_time(log query [r]), also over unwrapped values (1 at each
// step whose window has no entry, or no unwrapped value, labelled by the
// selector's equality matchers).
// vector(n) is a label-less vector at every step, so
// `sum(count_over_time({app="x"} |= "err" [5m])) or vector(0)` answers 0
// where there is no data, and Grafana's health check vector(1)+vector(1)
// works. A window (t-range, t] with no entries gives no point, as in Loki.
//
// # Limits
//
// Each is answered with a 4xx whose JSON body {"error": "..."} says why,
// and counted in hay_rejected_total{reason}: body over --max-body (413),
// decompressed body over 4 × --max-body (413; gzip is read through a
// limit, snappy's declared length is checked before decoding), malformed
// JSON/protobuf/jsonl (400, naming stream and entry), a line over
// --max-line (400 naming the entry, or cut to the limit with the marker
// "…[truncated]" under --line-policy=truncate), timestamps outside
// [now - --reject-older-than, now + --reject-newer-than] (400), more than
// --max-labels labels or a label name over 1 KiB or value over
// --max-label-value-bytes (2 KiB), as Loki (400), a query over
// --query-timeout (504), a metric query answering more than
// --max-query-series series (default 500, Loki's max_query_series; 400) or whose range
// vectors would hold more than 5,000,000 points before aggregation, the
// operands of a binary operator together (400, before the memory is
// spent; a binary operator or topk answering more series than the limit
// stops at the first one over). At most
// --max-concurrent-queries queries run at once; more wait for a slot, as
// Loki queues them, up to --query-queue-wait (then 429 with Retry-After:
// 1), and beyond --max-queued-queries waiting they get 429 at once. A
// POSTed query's form is read (within 10 s) before it waits for a slot. A
// Loki tail's replay of stored entries takes a slot and runs under
// --query-timeout like a query; at most --max-tails tails (256, Loki's
// and the UI's together) are open at once, more get 429.
//
// Answer bytes: a log query's answer (query_range, query, /api/v1/search,
// a Loki tail's replay, the entries detected_fields samples, the
// patterns /loki/api/v1/patterns tracks) holds at
// most --max-query-bytes (64 MiB) of lines, structured metadata and
// labels (an entry counts their lengths plus 32 bytes), whatever its
// limit: line_format can make each of 5000 entries 1 MiB, and stored
// lines may be up to --max-line (16 MiB at most). An answer that reaches
// it is not an error: it keeps the entries that fit, in the query's
// order (the newest backward, the oldest forward; at least one entry,
// however large), and ends between two times (unless all it holds share
// one), so that a client paging on from its last time, as Grafana and
// logcli do without skip, gets every entry once. It says so: Loki's
// answer carries "warnings" (beside "data", where Grafana reads them and
// shows them on the panel), the native trailer "limited":true,
// "limited_by":"bytes" and a "warning" (hay search --server and the UI
// page on with skip), and hay_query_answers_cut_total{endpoint} counts
// it (endpoint loki: query_range and query; search; tail: a replay).
// While an answer is collected the top-k holds at most about twice
// the bound plus one entry, and a block's scan keeps at most 1 MiB of
// rewritten lines and labels for its matches (more are rewritten again
// when delivered); the Loki answer is written entry by entry, not built
// whole. A Loki tail sends in messages of about 1 MiB and a delayed tail
// (delay_for) holds back at most --max-query-bytes, sending the oldest
// early past it. Entries sharing one time that hold more than the bound
// cannot all be paged through by a client without skip (as with Loki's
// limit): the Loki answer's warning then names that time and says so.
//
// Pushes: a tenant has at most --max-streams-per-tenant active streams
// (5000, Loki's max_global_streams_per_user; active: pushed to in the last
// 30 minutes, as Loki's ingesters hold a stream until chunk_idle_period):
// a push's entries of streams the store holds and of new streams within
// the limit are stored, the others refused with 429 "Maximum active
// stream limit exceeded ..." naming the limit and the counts. Shippers
// resend a 429'd batch whole: the server remembers (15 minutes, 256 pushes
// a tenant) which streams of such a push it stored, and a resend of the
// same entries within that time stores only the others. (A resend later
// than that, or of JSON lines without timestamps, whose times are those
// of their arrival, is a new push.) The decompressed bodies decoded and stored at once are
// bounded server-wide by --max-inflight-push-bytes (256 MiB): a push
// beyond it waits up to 5 s, then gets 429 with Retry-After: 1 (at once
// when as many bytes already wait); a body larger than it gets 413. A
// push that declares its Content-Length is admitted by it before its
// body is read, then again by its decompressed size.
//
// Structured metadata at push (push_attrs.go): the name=value pairs sent
// beside a line are stored with its entry (not part of its stream: a
// trace id an entry makes no stream an entry). Loki push JSON's optional
// third value element, an object of string values ([ts, line,
// {"trace_id":"ab12"}]; null is none; another type, or a value that is
// not a string, is a malformed push, as in Loki), push protobuf's
// EntryAdapter.structuredMetadata, jsonl's "structuredMetadata" (null is
// none; without it, "metadata" is its synonym when that is an object of
// strings, and anything else under "metadata" is not metadata; both keys
// match exactly, letter case included), OTLP's attributes and record
// fields (otlp.go). As Loki's distributor does: names are normalized
// (each character outside [a-zA-Z0-9] to '_', "key_" before a leading
// digit, "key" before a single leading '_': k8s.pod → k8s_pod, 1st →
// key_1st, _x → key_x, __x kept); of pairs that end up with one name the
// last given wins (a.b then a_b; a JSON object's repeated key; for OTLP
// in Loki's order: the record's attributes, its fields, its resource's
// attributes, its scope's attributes and fields, so a resource attribute
// host.id wins over a record's, a record's trace_id field over an
// attribute trace_id), each such name with two values counted in
// hay_structured_metadata_collisions_total; pairs with an empty value are
// dropped (an empty last value drops the name). Values are kept as their
// bytes, UTF-8 or not (Loki strips invalid bytes): the JSON answers show
// each invalid byte as U+FFFD, as they show lines. Only an entry whose
// metadata has more than 128 pairs (structured_metadata_too_many),
// encodes to more than 64 KiB (structured_metadata_too_large), or has a
// name that is empty or normalizes to underscores only (bad_metadata) is
// refused, with the entry (400 naming stream and entry, counted in
// hay_rejected_total; the push's other entries are stored; OTLP: a
// partial success naming resource and record). An OTLP attribute whose
// arrays and maps hold more than 65,536 values in all is refused as too
// large without being kept in memory (each value renders to at least a
// byte; Loki would keep a map of that many empty or repeated keys as
// fewer pairs). Metadata counts in
// hay_ingested_structured_metadata_bytes_total, is hashed in the resend
// check of the stream limit (entries differing only in metadata are
// other entries), and, for OTLP, the resource and scope metadata every
// record repeats counts toward --max-inflight-push-bytes (a request
// whose repeated metadata alone exceeds it gets 413).
//
// OTLP arrays and maps (bodies and attributes, protobuf and JSON) are
// checked at decode but their values are not decoded into memory: they
// are decoded one at a time to render or flatten, and a body that is
// not a string keeps only its first --max-line+1 bytes (the rest is
// counted, for the refusal's message, or cut by --line-policy=truncate):
// a push of millions of 2-byte values no longer costs ~100 bytes a value
// before the limits apply. One difference from before, OTLP/JSON only: a
// field given twice in one object (a repeated key, or keys equal but for
// case), the first with a value of the wrong type inside its arrays or
// maps, refused the request; now the later value is decoded, as the
// later of a repeated key wins elsewhere.
//
// A pushed stream without service_name gets one, as Loki's
// discover_service_name gives it (Logs Drilldown lists services by it):
// the value of the first of service, app, application, app_name, name,
// app_kubernetes_io_name, container, container_name, k8s_container_name,
// component, workload, job, k8s_job_name present, else unknown_service;
// added after the --max-labels check. --discover-service-name=false turns
// it off (OTLP streams get service_name from service.name either way).
//
// Each pushed entry (Loki JSON or protobuf, JSON lines, OTLP) gets the
// structured metadata detected_level, as Loki 3's discover_log_levels
// (on by default there too) adds it: Grafana's Explore colours its log
// volume by it (sum by (level, detected_level) (count_over_time(...)))
// and Logs Drilldown filters on it. Its value is one of trace, debug,
// info, warn, error, critical, fatal, unknown, or a level label's or
// metadata value as sent, taken from the first of:
//
//   - the stream's labels: the first of Loki's default log_level_fields
//     present (level, LEVEL, Level, Severity, severity, SEVERITY, lvl,
//     LVL, Lvl, severity_text, Severity_Text, SEVERITY_TEXT; names match
//     as written, as Loki's documentation says), its value normalised,
//     or kept as sent when it is none of the names below (level=cleared
//     gives detected_level=cleared, as in Loki since grafana/loki PR
//     22844 reverted PR 22373's unknown: users relied on such values; a
//     label's value is already the stream's, so it adds no series);
//   - the entry's metadata: the first of those names, normalised or kept
//     as sent the same way (each distinct value kept is a series of a
//     query by detected_level, as in Loki); else an OTLP severity_number (1-4 trace, 5-8
//     debug, 9-12 info, 13-16 warn, 17-20 error, 21-24 fatal); OTLP's
//     severity_text is one of the names, so it comes first (severity_text
//     Foo gives Foo);
//   - the line. A JSON object: the first of those keys in its own fields,
//     else in the fields of the objects directly under them (Loki's
//     log_level_from_json_max_depth 2); a string value normalised, a
//     number as pino and bunyan write levels (10 trace, 20 debug, 30
//     info, 40 warn, 50 error, 60 fatal; Loki has these unknown), null
//     and other kinds no level; without one, the first level word of its
//     string values (not its keys: "error":null is no error). Otherwise:
//     a logfmt key of those names (at the start or after a space or tab,
//     not inside a quoted value: level=warn, lvl="error"; a value it
//     does not know is unknown, not kept: a line's words are no label),
//     else a syslog priority (<PRI> at the start: its severity), else a
//     klog/glog header (I0102 15:04:05, W, E, F: hay's), else the first
//     level word or PostgreSQL severity; else unknown.
//
// Normalising a value ignores letter case and surrounding spaces and
// knows the usual names: trace (trc, trac, verbose, finest), debug (dbg,
// dbug, debu, fine, finer), info (inf, information, informational,
// notice), warn (warning, wrn), error (err, eror, erro, severe),
// critical (crit, crt, alert, emerg, emergency), fatal (ftl, fata,
// panic, pnc, pani), and Go slog's offsets (ERROR+2 is error, DEBUG-4
// debug); any other value is unknown (a field that names its
// level is not second-guessed by the words of the message). A level word
// is a whole word (a longest run of [A-Za-z0-9_]: errors, terror and
// level_error are none) that stands alone: not after '/' or '.' (a path
// /api/error, app.debug), not before '.' and a letter (error.log), and,
// unless in upper case, not joined by '-' or followed by '/' (a thread
// [trace-exporter-1], a host debug-vm; Celery's INFO/MainProcess and
// 12:00:00,000-ERROR-app count) of trace, debug, dbug, info, warn, warning,
// error, eror, critical, crit, emerg, fatal, panic in any letter case,
// or TRC, TRAC, DBG, DEBU, INF, WRN, ERR, ERRO, CRT, FTL, FATA, PNC, PANI
// in upper case only (zerolog's and logrus' short forms; err=<nil> is no
// error), or a bracketed token normalised as a field's value is
// (Apache's and nginx's [notice] is info, [alert] critical); the first
// one in the line wins (Grafana's own guess for lines
// without a level does the same). Three exceptions: a PostgreSQL
// severity, an upper-case word followed by a colon and two spaces as
// PostgreSQL writes it (LOG:  and NOTICE:  are info, DEBUG:  debug,
// FATAL:  and PANIC:  fatal; DETAIL:, HINT:, CONTEXT:,
// QUERY:, STATEMENT: and LOCATION: continue the message before them and
// are unknown, whatever words their SQL holds); a word after a '?' in
// its token is part of a URL's query and none (GET /search?q=fatal+error,
// a referrer's ?level=debug); and panic other than first in the line,
// followed by ':', in upper case, in brackets or after "Kernel " is
// error, not fatal: the message is about a panic the process that logs
// it recovered (Go's net/http logs http: panic serving ... for one
// request's handler and serves on), where Go's crash output (panic: ...,
// behind a shipper's prefix too) is fatal. An upper-case level between
// '.' and ':' counts as Monolog (Laravel, Symfony) writes it
// (production.ERROR: ...). Where
// Loki differs: its fallback looks for substrings in a fixed order (a
// line with "info" anywhere is info, "DEBUG x" and "WARN x" without a
// colon are unknown, a URL containing "error" is error, and a line
// http: panic serving ...: runtime error: ... is unknown, none of its
// substrings: grafana/loki issues 14428, 14443, 16611), which hay does
// not copy. A plain line is searched in its first 4 KiB, a
// JSON line's fields in all of it (its words in its first 4 KiB);
// invalid UTF-8 bytes are not word bytes.
//
// An entry that already has detected_level metadata keeps it, normalised
// when it names a level another way (ERROR, Warning: as Loki's
// distributor normalises it) and as sent otherwise, and the entries of a
// stream with a detected_level label get none. The pair is added after the metadata limits are checked, and not
// to an entry it would take past them (128 pairs, 64 KiB). It is derived
// from the line as pushed (before a cut by --line-policy=truncate), is
// stored like any metadata (it counts in
// hay_ingested_structured_metadata_bytes_total), and is derived at push
// only: hay ingest does not add it. --discover-log-levels=false turns it
// off; /loki/api/v1/drilldown-limits reports discover_log_levels and
// log_level_fields accordingly.
//
// Two more differences from Loki around detected_level. A parser's key
// named like a metadata pair replaces it (hay's precedence, internal/query):
// {"detected_level":"foo"} | json gives detected_level="foo", and
// detected_fields then lists detected_level with both the metadata's and
// the lines' values; Loki since grafana/loki PR 19991 (merged 2025-11)
// keeps the metadata and names the parsed key detected_level_extracted
// (for every metadata name). A line with a key of that name is rare; a
// parser given the keys to extract (| logfmt msg, status) leaves the
// metadata alone. And /loki/api/v1/patterns gives no level
// per pattern and takes a stream selector alone, so Logs Drilldown's
// Patterns tab cannot filter its patterns by level.
//
// Requests that change state (pushes, POSTed queries) sent by another
// site's page in a browser (Sec-Fetch-Site cross-site or same-site, or an
// Origin other than the Host) get 403 (net/http's CrossOriginProtection):
// any page open in a responder's browser could otherwise plant lines in
// the store. Shippers and Grafana's backend send neither header.
//
// # Tenants and auth
//
// X-Scope-OrgID names the tenant ([A-Za-z0-9_.-]{1,64}, not . or ..;
// default "fake" as in Loki). Each tenant's data is the store
// DATA/<tenant>, so no query can reach another tenant's entries. At most
// --max-open-tenants tenant stores are open (3 file descriptors each;
// default a sixth of the open-file limit; their segments keep up to a
// sixteenth of the limit more, over all tenants, to read blocks with
// pread, and past that read through their mappings): opening one more flushes and
// closes the least recently used idle tenant (no request in flight, no
// live tail), which reopens on its next request; when none is idle within
// 2 s the request gets 503. A tenant's head (its entries not yet in a
// segment, held in memory and replayed from the WAL after a restart) is
// flushed at --head-bytes, after --head-flush-idle without entries (30m)
// and after --head-flush-age with them (2h), as Loki's ingesters flush
// chunks. The server locks DATA for its life, so hay
// ingest, compact and verify --repair refuse DATA/<tenant> meanwhile, a
// closed tenant's included. With
// --auth-file (see Auth) every request except /ready, /health, /metrics,
// /loki/api/v1/status/buildinfo (the version, which Grafana reads) and the
// UI's static files needs a bearer token or basic credentials; a
// credential bound to a tenant can use only that tenant, and one without
// a tenant may use every tenant. A client address that fails to log in
// more than 20 times gets 429 until its allowance comes back (10 a
// minute; hay serve --auth-failures-per-minute). hay serve speaks plain
// HTTP: with credentials, put a TLS proxy in front of it, or they cross
// the network in clear text.
//
// # Search
//
// Queries read a store.View (segments plus the in-memory head), so pushed
// entries are visible as soon as they are acknowledged. A query over one
// stream runs on internal/search (needles driven by the LogQL plan over
// whole blocks); one over several streams runs on this package's one-pass
// parallel block scan (scan.go), because search.Run merges streams by
// time and so decodes a block once per stream it holds, and no caller
// here needs that order: /api/v1/hits uses search.Hist, metric queries
// and facets count, and log queries sort by time themselves. That scan
// only schedules blocks: which blocks to read and each block's matches
// come from search.Scanner, so both paths prune blocks by time range,
// stream and the segments' skip index (the literals every match must
// contain, from the plan or the plain-text needle), and a rare needle
// reads a few blocks of thousands. Loki clients
// may push a stream's entries out of time order, so the limit is applied
// with a bounded top-k: blocks are visited by their time bounds, and once
// the top-k is full a block that cannot beat its worst entry is skipped
// from the block index (exact; ties in scan order, the same on every run
// over the same data, so paging by time is deterministic). An entry is
// final once no unvisited block can hold a better one, so /api/v1/search
// streams lines while scanning, a batch after each block.
package server
