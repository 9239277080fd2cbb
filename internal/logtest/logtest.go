// Package logtest generates realistic log lines, deterministically, for
// tests, benchmarks and the demo.
//
// The same Config always gives the same bytes, on every machine and Go
// version: all randomness comes from one math/rand/v2 PCG seeded from
// Config.Seed, read only through PCG.Uint64 (whose algorithm is fixed) and
// reduced by this package's own arithmetic, never through rand.Rand's helper
// methods, global state or map iteration.
//
// # What the output looks like
//
// Each stream is one application on one host and writes one format; stream
// i uses format i%4, so the default 8 streams cover all four (with fewer
// than 4 streams some formats are missing, java and its stack traces
// first). Lower-numbered streams are chattier (weight 4/(i+4)).
//
//	plain   2026-11-01T00:00:01.123Z INFO  [api] GET /v1/users/123 200 12ms 10.0.3.7 ...
//	logfmt  ts=2026-11-01T00:00:01.123Z level=warn app=payments host=... msg="retrying charge attempt=2" trace_id=... span_id=...
//	json    {"time":"2026-11-01T00:00:01.123456Z","level":"error","service":"auth",...,"msg":"...","ip":"10.1.2.3"}
//	java    2026-11-01 00:00:01,123 ERROR [pool-3-thread-2] com.example.orders.OrderService - ...
//
// Every line starts with a timestamp (RFC 3339 in UTC with milliseconds or,
// for plain and json streams 4-7, 12-15, ..., microseconds; "ts=" then RFC
// 3339 for logfmt; "2006-01-02 15:04:05,000" in UTC for java; JSON lines
// start with their "time" member), except the continuation
// lines of stack traces, which follow their parent line as they do in a log
// file: an exception line ("java.net.SocketTimeoutException: connect timed
// out"), frames ("\tat com.example...(X.java:42)"), "Caused by: ...",
// "\t... 12 more", and for Go panics "goroutine 7 [running]:", a function
// line and a "\t/src/...go:42 +0x1d" line. Timestamps never decrease: line k
// of N planned lines falls in [Start+k*Span/N, Start+(k+1)*Span/N), the
// first exactly at Start. Continuation lines report their parent's
// timestamp.
//
// Messages come from log statements, as in real services: a fixed set of
// templates per level (46 INFO, 25 DEBUG, 19 WARN, 13 ERROR; vocab.go),
// each a constant text with a few variable fields ("Cache miss for key
// {cache}:{obj}, loading it from the database at {host}"), chosen with a
// Zipf law whose ranking is rotated per stream, so each service has its own
// hot statements. There is no free-text filler: a line's length beyond its
// message comes from the context fields a structured logger attaches
// (request_id, user_id, route, http_method, caller, region, version, pod,
// tenant, user_agent, ...), added in a fixed order per service as a logger
// does, and the longest lines from what makes real lines long: a request
// body logged whole (write requests) or an ORM's SQL statement loading a
// batch of rows. Tokens follow real logs: a few words ("the", "request",
// "user", "GET", "INFO") are everywhere and most tokens are rare
// identifiers; HTTP methods are dominated by GET, statuses by 200, request
// paths by /healthz, durations by 4-64 ms. Levels are mostly INFO and
// DEBUG, some WARN, about 2% ERROR.
//
// Identifiers repeat as they do in real services (request.go): each stream
// has a pool of requests in flight (64 for the busiest stream, 23 for the
// eighth), and a line belongs to one of them or is a request that logs
// only its access line (probes, scrapes, simple reads; 29% of lines). A
// pooled request logs 2 to 10 lines, in bursts (half the time its next
// line follows at once, as a handler logs until it blocks on I/O),
// interleaved with the other requests' lines, and its last line is its
// access line. Its lines share its request_id, trace_id, user, client
// address, java worker thread and the order or payment it is about; a
// span_id covers 1 to 4 of them. Four requests in ten join the trace (and
// user) of a recently started request, as a call crosses services. Users
// are drawn from 50,000 and public client addresses from 4,000 with a
// Zipf–Mandelbrot law (weight 1/(rank+2): the hottest is about 5%);
// internal 10.x addresses from 16 per stream; tenants and sessions follow
// the user; build, version, region and zone are fixed per stream; a
// request keeps one method, path and user agent; products (SKUs) follow
// the same Zipf law, each with one price; the ids of a long SQL IN list are sorted and close together. Trace, span and
// request ids, UUIDs and order ids stay unique per request.
//
// Incidents are rare events clustered in time: the timeline is cut into
// segments of about 20,000 lines, and each holds one window in which one
// stream reports an incident: a burst of "connection refused" errors, a
// storm of timeouts, "no space left on device", or a few Go panics
// ("panic: ...") or java.lang.OutOfMemoryError with their stack traces.
//
// Line lengths: each line gets a target length drawn from a spread around
// MeanLen (most lines between a third of it and twice it, 1% of lines up to
// about 13 times it, so a few KB at the default), and is padded to it with
// context fields (key=value pairs, JSON members) and, past them, a request
// body or SQL statement. A running correction keeps the mean within a few
// percent of MeanLen (within 6% at 128, closer above); below that the natural
// length of a line's header and message wins and the mean stays above it.
//
// # The default corpus
//
// Generate(Config{Lines: 100_000}) measures: 25.6 MB; formats plain 31%,
// logfmt 26%, json 22%, java 20%, stack-trace lines 1.3%; levels DEBUG 17%,
// INFO 74%, WARN 5.2%, ERROR 2.1%, FATAL 0.02%; line length p10 109, median
// 222, p90 370, p99 812, max 3709 bytes. DefaultNeedles lists hit rates.
// Generation runs at about 400 MB/s on one core of an AMD EPYC
// (BenchmarkGenerate; 355 MB/s with the earlier word filler, in the same
// run).
package logtest

import (
	"fmt"
	"io"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"time"
)

// Config describes a corpus. The zero value of a field means its default.
type Config struct {
	Lines   int64         // number of lines; 0 means use Size
	Size    int64         // approximate total bytes, newlines included, when Lines == 0
	MeanLen int           // target mean line length in bytes, newline excluded (default 255)
	Seed    int64         // PCG seed; every value is valid
	Streams int           // number of distinct streams (apps/hosts), default 8
	Start   time.Time     // timestamp of the first line (default 2026-11-01T00:00:00Z)
	Span    time.Duration // time covered by all lines (default 24h)
}

// Defaults for Config's zero fields.
const (
	DefaultMeanLen = 255
	DefaultStreams = 8
	DefaultSpan    = 24 * time.Hour
	// DefaultLines is the corpus size of the blog that started the project,
	// and the number of lines a Generator plans its timeline for when the
	// Config gives neither Lines nor Size.
	DefaultLines = 100_000
)

// DefaultStart is the timestamp of the first line when Config.Start is zero.
func DefaultStart() time.Time { return time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC) }

// Limits on Config, checked by Validate.
const (
	MinMeanLen = 16
	MaxMeanLen = 1 << 20
	MaxStreams = 1 << 16
)

// Validate reports the first invalid field of c.
func (c Config) Validate() error {
	switch {
	case c.Lines < 0:
		return fmt.Errorf("logtest: negative line count %d", c.Lines)
	case c.Size < 0:
		return fmt.Errorf("logtest: negative size %d", c.Size)
	case c.MeanLen < 0 || c.MeanLen != 0 && c.MeanLen < MinMeanLen || c.MeanLen > MaxMeanLen:
		return fmt.Errorf("logtest: mean length %d outside [%d, %d]", c.MeanLen, MinMeanLen, MaxMeanLen)
	case c.Streams < 0 || c.Streams > MaxStreams:
		return fmt.Errorf("logtest: stream count %d outside [1, %d]", c.Streams, MaxStreams)
	case c.Span < 0:
		return fmt.Errorf("logtest: negative span %v", c.Span)
	}
	c = c.withDefaults()
	// Timestamps are rendered with four-digit years.
	if y := c.Start.Year(); y < 1 || y > 9999 {
		return fmt.Errorf("logtest: start %v outside years 0001-9999", c.Start)
	}
	if y := c.Start.Add(2 * c.Span).Year(); y > 9999 {
		return fmt.Errorf("logtest: start %v plus span %v runs past year 9999", c.Start, c.Span)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.MeanLen <= 0 {
		c.MeanLen = DefaultMeanLen
	}
	if c.Streams <= 0 {
		c.Streams = DefaultStreams
	}
	if c.Start.IsZero() {
		c.Start = DefaultStart()
	}
	c.Start = c.Start.UTC()
	if c.Span <= 0 {
		c.Span = DefaultSpan
	}
	return c
}

// planned is the number of lines the timeline is spread over.
func (c Config) planned() uint64 {
	switch {
	case c.Lines > 0:
		return uint64(c.Lines)
	case c.Size > 0:
		return max(1, uint64(c.Size)/uint64(c.MeanLen+1))
	}
	return DefaultLines
}

// Generate writes the corpus described by cfg to w, each line ended by
// "\n": exactly cfg.Lines lines, or when Lines is 0, lines until at least
// cfg.Size bytes are written (so it overshoots Size by less than one line,
// stack traces may be cut short). Lines and Size both 0 write nothing.
// It returns the number of lines and bytes written.
func Generate(w io.Writer, cfg Config) (lines int64, bytes int64, err error) {
	if err := cfg.Validate(); err != nil {
		return 0, 0, err
	}
	if cfg.Lines == 0 && cfg.Size == 0 {
		return 0, 0, nil
	}
	g := NewGenerator(cfg)
	// Our own buffer instead of bufio: lines are appended in place and
	// handed to w in large writes.
	const chunk = 1 << 20
	buf := make([]byte, 0, chunk+64<<10)
	for cfg.Lines > 0 && lines < cfg.Lines || cfg.Lines == 0 && bytes < cfg.Size {
		n0 := len(buf)
		buf, _, _ = g.Next(buf)
		buf = append(buf, '\n')
		lines++
		bytes += int64(len(buf) - n0)
		if len(buf) >= chunk {
			if _, err := w.Write(buf); err != nil {
				return lines, bytes, fmt.Errorf("logtest: write: %w", err)
			}
			buf = buf[:0]
		}
	}
	if len(buf) > 0 {
		if _, err := w.Write(buf); err != nil {
			return lines, bytes, fmt.Errorf("logtest: write: %w", err)
		}
	}
	return lines, bytes, nil
}

// Line formats, one per stream.
const (
	fmtPlain = iota
	fmtLogfmt
	fmtJSON
	fmtJava
)

var formatNames = [...]string{"plain", "logfmt", "json", "java"}

// Timestamp styles.
const (
	tsMilli = iota // 2026-11-01T00:00:01.123Z
	tsMicro        // 2026-11-01T00:00:01.123456Z
	tsLog4j        // 2026-11-01 00:00:01,123
)

// Stream describes one stream of a Generator.
type Stream struct {
	App    string // application name, e.g. "payments"
	Host   string // host (pod) name, e.g. "payments-5f7c9d8b4-x2k4q"
	Format string // "plain", "logfmt", "json" or "java"
}

type stream struct {
	Stream
	format  int
	tsStyle int
	reqs    []request        // requests in flight
	last    int              // index in reqs of the last request that logged, or -1
	peers   [numPeers]uint32 // internal addresses it talks to
	// The deployment: one build, version, region and zone per service,
	// as every line of a running binary reports the same ones.
	build   [8]byte // commit hash
	version []byte  // "v1.12.3"
	region  int     // index in regions
	zone    byte    // 'a'..'c'
	// rot rotates the Zipf ranking of statements: each service has its
	// own most frequent log lines.
	rot uint32
	// keys is the order in which the service's logger adds context
	// fields (indexes in extraKeys).
	keys [numExtraKeys]uint8
}

// Incident kinds.
const (
	incRefused = iota
	incTimeout
	incDisk
	incPanic
	incOOM
	numIncidents
)

// Generator produces a corpus one line at a time. It is not safe for
// concurrent use.
type Generator struct {
	src     rand.PCG
	tb      *genTables // shared, read-only
	meanLen int
	planned uint64

	// Timeline: line k gets start + k*span/planned plus jitter, computed
	// incrementally (base, acc) to avoid overflow and division per line.
	start      int64 // unix ns
	base       int64 // ns since start for the current line
	step, srem uint64
	acc        uint64
	lastNS     int64

	n     uint64 // lines produced
	total int64  // bytes produced, newlines excluded

	streams []stream
	cum     []uint32 // cumulative stream weights, last == 1<<32-1

	// Current incident window, drawn lazily per segment of the timeline.
	segLen             uint64
	segEnd             uint64
	incStart, incEnd   uint64
	incKind, incStream int
	incOrder           [numIncidents]int
	segs               int // segments started

	// Pending continuation lines (a stack trace) and their parent's data.
	cont       []byte
	contEnds   []int
	contNext   int
	contStream int
	contNS     int64

	// Timestamp cache: the "YYYY-MM-DDTHH:MM:SS" text of second tsSec.
	tsSec  int64
	tsDate [19]byte

	// Request context of the line being rendered (see request.go).
	cur       *stream
	rq        *request
	single    request // a request that logs only its access line
	traceRing [numTraceRing]struct {
		trace [32]byte
		user  uint32
	}
	traceNext        uint64
	userSalt, ipSalt uint64

	// Scratch space for the event being rendered.
	msg    []byte
	vals   []byte
	fields []field
	used   uint32 // bit i: extraKeys[i] already on this line
	stmt   uint64 // the statement being logged: level<<16|index+1, 0 for access lines
	pads   int    // context fields of the stream's order considered so far
}

// NewGenerator returns a Generator for cfg. Zero and invalid fields take
// their defaults; Lines and Size only set how many lines the timeline is
// spread over (Next never stops: after them, timestamps go on past Span at
// the same rate). Use Generate, or Config.Validate first, to reject bad
// configs.
func NewGenerator(cfg Config) *Generator {
	if cfg.Validate() != nil {
		cfg = Config{Lines: max(0, cfg.Lines), Size: max(0, cfg.Size), Seed: cfg.Seed}
	}
	cfg = cfg.withDefaults()
	g := &Generator{
		tb:      sharedTables(),
		meanLen: cfg.MeanLen,
		planned: cfg.planned(),
		start:   cfg.Start.UnixNano(),
		tsSec:   -1 << 62,
	}
	// The second PCG word is a constant ("haystack") so that seed 0 is an
	// ordinary seed.
	g.src.Seed(uint64(cfg.Seed), 0x686179737461636b)

	span := uint64(cfg.Span)
	g.step, g.srem = span/g.planned, span%g.planned

	g.streams = make([]stream, cfg.Streams)
	g.cum = make([]uint32, cfg.Streams)
	// Some streams are much chattier than others: stream i has weight
	// 4/(i+4). Integers only, so that no platform's floating point can
	// change the output.
	weights := make([]uint64, cfg.Streams)
	var sum uint64
	for i := range g.streams {
		s := &g.streams[i]
		s.format = i % 4
		s.Format = formatNames[s.format]
		s.App = apps[i%len(apps)]
		if i >= len(apps) {
			s.App += "-" + strconv.Itoa(i/len(apps)+1)
		}
		switch {
		case s.format == fmtJava:
			s.tsStyle = tsLog4j
		case s.format == fmtLogfmt || (i/4)%2 == 0:
			s.tsStyle = tsMilli
		default:
			s.tsStyle = tsMicro
		}
		// Kubernetes-style pod name: deployment, replica-set hash, pod id.
		h := make([]byte, 0, 48)
		h = append(h, s.App...)
		h = append(h, '-')
		h = g.appendAlnum(h, 9)
		h = append(h, '-')
		h = g.appendAlnum(h, 5)
		s.Host = string(h)
		weights[i] = (1 << 24) / uint64(i+4)
		sum += weights[i]
	}
	var c uint64
	for i, w := range weights {
		c += w
		g.cum[i] = uint32(min(c<<32/sum, 1<<32-1))
	}
	g.cum[len(g.cum)-1] = 1<<32 - 1

	g.userSalt, g.ipSalt = g.src.Uint64(), g.src.Uint64()
	for i := range g.traceRing {
		t := &g.traceRing[i]
		appendHex(t.trace[:0], g.src.Uint64(), 16)
		appendHex(t.trace[16:16], g.src.Uint64(), 16)
		t.user = uint32(g.tb.userCDF.rank(g.src.Uint64()))
	}
	g.cur, g.rq = g.stream(0), &g.single
	g.startRequest(g.rq, g.cur)

	// Segments of ~20,000 lines, each with one incident window; the kinds
	// take turns in a seed-chosen order, so a corpus of five segments or
	// more (the default 100,000 lines) has every kind.
	g.segLen = 20_000
	if g.planned < numIncidents*g.segLen {
		g.segLen = max(g.planned/numIncidents, 50)
	}
	for i := range g.incOrder {
		g.incOrder[i] = i
	}
	for i := len(g.incOrder) - 1; i > 0; i-- {
		j := g.intn(i + 1)
		g.incOrder[i], g.incOrder[j] = g.incOrder[j], g.incOrder[i]
	}
	g.newSegment()
	return g
}

// NumStreams returns the number of streams.
func (g *Generator) NumStreams() int { return len(g.streams) }

// Stream describes stream i, 0 <= i < NumStreams().
func (g *Generator) Stream(i int) Stream { return g.streams[i].Stream }

// Next appends one line, without "\n", to dst and returns the extended
// slice, the line's stream and its timestamp.
func (g *Generator) Next(dst []byte) (line []byte, stream int, ts time.Time) {
	ns := g.tick()
	if g.n >= g.segEnd {
		g.newSegment()
	}
	g.n++
	n0 := len(dst)
	if g.contNext < len(g.contEnds) {
		from := 0
		if g.contNext > 0 {
			from = g.contEnds[g.contNext-1]
		}
		dst = append(dst, g.cont[from:g.contEnds[g.contNext]]...)
		g.contNext++
		g.total += int64(len(dst) - n0)
		return dst, g.contStream, time.Unix(0, g.contNS).UTC()
	}
	st, inc := g.pickStream()
	dst = g.line(dst, st, inc, ns)
	g.total += int64(len(dst) - n0)
	return dst, st, time.Unix(0, ns).UTC()
}

// tick returns the timestamp (unix ns) of the next line and advances the
// timeline.
func (g *Generator) tick() int64 {
	ns := g.base
	if g.step > 1 {
		// Jitter within the line's slot; the first line is exactly at
		// Start (the draw still happens, so the stream of draws does
		// not depend on it).
		j := int64(g.uintn(g.step))
		if g.n > 0 {
			ns += j
		}
	}
	g.base += int64(g.step)
	g.acc += g.srem
	if g.acc >= g.planned {
		g.acc -= g.planned
		g.base++
	}
	ns += g.start
	if ns < g.lastNS { // cannot happen by construction; cheap insurance
		ns = g.lastNS
	}
	g.lastNS = ns
	return ns
}

// newSegment draws the incident window of the segment starting at line n.
func (g *Generator) newSegment() {
	segStart := g.n
	g.segEnd = segStart + g.segLen
	l := max(g.segLen/50, 20)
	l = l/2 + g.uintn(l) // 0.5x..1.5x
	g.incStart = segStart + g.uintn(g.segLen-l)
	g.incEnd = g.incStart + l
	g.incKind = g.incOrder[g.segs%numIncidents]
	g.segs++
	g.incStream = int(g.uintn(uint64(len(g.streams))))
	switch {
	case g.incKind == incOOM && len(g.streams) > fmtJava:
		// OutOfMemoryError belongs in a java stream.
		g.incStream = fmtJava + 4*int(g.uintn(uint64((len(g.streams)-fmtJava+3)/4)))
	case g.incKind == incPanic && g.streams[g.incStream].format == fmtJava:
		g.incStream-- // and a Go panic in a Go service
	}
}

// pickStream chooses the stream of the next line and whether it is an
// incident line.
func (g *Generator) pickStream() (int, bool) {
	u := g.src.Uint64()
	if g.n > g.incStart && g.n <= g.incEnd {
		// Bursty kinds flood their window; panics and OOMs happen a few times.
		p := uint64(1 << 62) // 25%
		if g.incKind == incPanic || g.incKind == incOOM {
			p = 1 << 58 // 1 in 64
		}
		if u < p {
			return g.incStream, true
		}
	}
	r := uint32(u)
	lo, hi := 0, len(g.cum)-1
	for lo < hi {
		m := (lo + hi) / 2
		if g.cum[m] < r {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, false
}

// uintn returns a value in [0, n) for n > 0 (Lemire's multiply-shift;
// the tiny bias does not matter here, the determinism does).
func (g *Generator) uintn(n uint64) uint64 {
	hi, _ := bits.Mul64(g.src.Uint64(), n)
	return hi
}

func (g *Generator) intn(n int) int { return int(g.uintn(uint64(n))) }

// chance reports true with probability p/1024.
func (g *Generator) chance(p uint64) bool { return g.src.Uint64()>>54 < p }
