package logtest

import (
	"bytes"
	"strconv"
	"sync"
	"time"
)

// Levels.
const (
	lvlDebug = iota
	lvlInfo
	lvlWarn
	lvlError
	lvlFatal
)

var (
	levelPadded = [...]string{"DEBUG", "INFO ", "WARN ", "ERROR", "FATAL"}
	levelLower  = [...]string{"debug", "info", "warn", "error", "fatal"}
)

// field is one key/value of the event being rendered; the value is
// vals[start:end], a JSON number when num is set.
type field struct {
	key        string
	start, end int
	num        bool
	opt        bool // dropped when the line would overshoot and the mean runs high
}

// A template is a message with slots, parsed once.
type template []segment

type segment struct {
	lit  string
	slot byte // 0 for a literal
}

const (
	slotUser = iota + 1
	slotIP
	slotPort
	slotN
	slotBig
	slotDur
	slotUUID
	slotHex8
	slotHost
	slotCode
	slotPath
	slotTable
	slotPct
	slotClientIP
	slotSession
	slotBuild
	slotObj
	slotMethod
	slotRoute
	slotBytes
	slotTry
	slotReason
	slotTopic
	slotEvent
	slotJob
	slotCache
	slotHandler
	slotFlag
	slotSKU
	slotTenant
	slotCurrency
	slotQ
	slotServicePort
	slotPartition
	slotCents
)

// slotNames names the slots as templates write them ("{user}"). An array,
// not a map: a map literal is built by package init code, and this one is
// only read while the tables are built.
var slotNames = [...]string{
	slotUser: "user", slotIP: "ip", slotPort: "port", slotN: "n", slotBig: "big",
	slotDur: "dur", slotUUID: "uuid", slotHex8: "hex8", slotHost: "host", slotCode: "code", slotPath: "path",
	slotTable: "table", slotPct: "pct", slotClientIP: "cip",
	slotSession: "session", slotBuild: "build", slotObj: "obj",
	slotMethod: "method", slotRoute: "route", slotBytes: "bytes", slotTry: "try",
	slotReason: "reason", slotTopic: "topic", slotEvent: "event", slotJob: "job",
	slotCache: "cache", slotHandler: "handler", slotFlag: "flag", slotSKU: "sku",
	slotTenant: "tenant", slotCurrency: "currency", slotQ: "q",
	slotServicePort: "sport", slotPartition: "part", slotCents: "cents",
}

// slotByName returns the slot named name, or false.
func slotByName(name string) (byte, bool) {
	for i, n := range slotNames {
		if i > 0 && n == name {
			return byte(i), true
		}
	}
	return 0, false
}

func parseTemplates(ss []string) []template {
	ts := make([]template, len(ss))
	for i, s := range ss {
		var t template
		for len(s) > 0 {
			j := indexByte(s, '{')
			if j < 0 {
				t = append(t, segment{lit: s})
				break
			}
			k := indexByte(s[j:], '}')
			if k < 0 {
				panic("logtest: bad template " + ss[i])
			}
			slot, ok := slotByName(s[j+1 : j+k])
			if !ok {
				panic("logtest: bad template " + ss[i])
			}
			if j > 0 {
				t = append(t, segment{lit: s[:j]})
			}
			t = append(t, segment{slot: slot})
			s = s[j+k+1:]
		}
		ts[i] = t
	}
	return ts
}

// size is t's length with each slot counted as 8 bytes.
func (t template) size() int {
	n := 0
	for _, sg := range t {
		n += len(sg.lit)
		if sg.slot != 0 {
			n += 8
		}
	}
	return n
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// A table maps the top bits of a random word to an index with given
// integer weights: an O(1) weighted choice.
type table struct {
	t    []uint16
	bits uint
}

func newTable(weights []uint64, bits uint) table {
	size := uint64(1) << bits
	var sum uint64
	for _, w := range weights {
		sum += w
	}
	t := make([]uint16, size)
	var c uint64
	r := 0
	for j := range size {
		// Slot j belongs to the first r whose cumulative weight passes it.
		for r < len(weights)-1 && (c+weights[r])*size/sum <= j {
			c += weights[r]
			r++
		}
		t[j] = uint16(r)
	}
	return table{t, bits}
}

func (t table) pick(u uint64) int { return int(t.t[u>>(64-t.bits)]) }

// zipf returns weights proportional to 1/(rank+1).
func zipf(n int) []uint64 {
	w := make([]uint64, n)
	for i := range w {
		w[i] = (1 << 32) / uint64(i+1)
	}
	return w
}

// Statuses and methods that access lines draw (weights in newTables).
var (
	statuses = []string{"200", "201", "204", "304", "301", "400", "401", "403", "404", "429", "500", "502", "503", "504"}
	methods  = []string{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"}
)

// genTables are the parsed templates and the weighted-choice tables that
// every Generator shares. They are built on first use, not at package
// init: every binary that links logtest (all of cmd/hay) would otherwise
// pay ~570 KB of heap and ~0.7 ms at each start, searches included.
type genTables struct {
	infoT, debugT, warnT, errorT []template
	refusedT, panicT, diskT      []template
	pathT, timeoutT              []template
	exceptionT, causeT           []template

	// Statements by level, Zipf over each list (rotated per stream).
	levelTemplates [lvlError + 1][]template
	templateTables [lvlError + 1]table
	pathTable      table
	statusTable    table // statuses, per mille
	methodTable    table
	durTable       table // duration exponents 0..13 (durMillis)
	levelTable     table // levels of message (non-access) lines, per mille
	uaTable        table // user agents, most frequent first

	userCDF, clientCDF zipfCDF
	ormSelects         []string
}

// sharedTables builds the tables once; they are read-only afterwards, so
// Generators in several goroutines may share them.
var sharedTables = sync.OnceValue(newTables)

func newTables() *genTables {
	t := &genTables{
		infoT:    parseTemplates(infoMsgs),
		debugT:   parseTemplates(debugMsgs),
		warnT:    parseTemplates(warnMsgs),
		errorT:   parseTemplates(errorMsgs),
		refusedT: parseTemplates(refusedMsgs),
		panicT:   parseTemplates(panicMsgs),
		diskT:    parseTemplates(diskMsgs),
		pathT:    parseTemplates(paths),
		timeoutT: parseTemplates([]string{
			"request timeout after {dur}, retrying",
			"dial tcp {ip}:{sport}: i/o timeout",
			"upstream {host} timeout: context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
			"timeout waiting for response from {host} after {dur}",
		}),
		pathTable:   newTable(zipf(len(paths)), 12),
		statusTable: newTable([]uint64{770, 30, 30, 40, 10, 20, 15, 7, 50, 8, 10, 4, 4, 2}, 12),
		methodTable: newTable([]uint64{640, 200, 60, 40, 30, 20, 10}, 10),
		durTable:    newTable([]uint64{2, 4, 8, 12, 14, 14, 12, 10, 8, 6, 4, 3, 2, 1}, 10),
		levelTable:  newTable([]uint64{300, 590, 90, 20}, 10),
		uaTable:     newTable(zipf(len(userAgents)), 10),
		userCDF:     newZipfCDF(numUsers),
		clientCDF:   newZipfCDF(numClientIPs),
		ormSelects:  newORMSelects(),
	}
	ss := make([]string, len(exceptions))
	for i, e := range exceptions {
		ss[i] = e.class + ": " + e.msg
	}
	t.exceptionT = parseTemplates(ss)
	ss = make([]string, len(causes))
	for i, e := range causes {
		ss[i] = "Caused by: " + e.class + ": " + e.msg
	}
	t.causeT = parseTemplates(ss)
	t.levelTemplates = [...][]template{lvlDebug: t.debugT, lvlInfo: t.infoT, lvlWarn: t.warnT, lvlError: t.errorT}
	t.templateTables = [...]table{
		lvlDebug: newTable(zipf(len(debugMsgs)), 12),
		lvlInfo:  newTable(zipf(len(infoMsgs)), 12),
		lvlWarn:  newTable(zipf(len(warnMsgs)), 12),
		lvlError: newTable(zipf(len(errorMsgs)), 12),
	}
	return t
}

// lenBands is the spread of target lengths: with probability p/1024 a line
// targets lo..hi thousandths of lenNorm-scaled MeanLen. lenNorm is the
// spread's mean (in thousandths), so targets average MeanLen.
var lenBands = [...]struct{ p, lo, hi uint64 }{
	{563, 350, 1000},
	{358, 1000, 1800},
	{92, 1800, 3500},
	{11, 3500, 16000},
}

var lenNorm = func() uint64 {
	var m uint64
	for _, b := range lenBands {
		m += b.p * (b.lo + b.hi) / 2
	}
	return m / 1024
}()

// target returns the target length of the next line, corrected by the
// running deficit so that the mean converges to meanLen.
func (g *Generator) target() int {
	u := g.src.Uint64()
	p := u >> 54
	i := 0
	for i < len(lenBands)-1 && p >= lenBands[i].p {
		p -= lenBands[i].p
		i++
	}
	b := lenBands[i]
	x := b.lo + (u&(1<<32-1))*(b.hi-b.lo)>>32
	t := int(uint64(g.meanLen) * x / lenNorm)
	deficit := int64(g.meanLen)*int64(g.n-1) - g.total
	t += int(max(min(deficit/16, int64(2*g.meanLen)), -int64(g.meanLen/2)))
	return t
}

// line renders one ordinary or incident line of stream si at ns.
func (g *Generator) line(dst []byte, si int, incident bool, ns int64) []byte {
	s := g.stream(si)
	g.cur = s
	n0 := len(dst)
	target := g.target()
	g.msg = g.msg[:0]
	g.vals = g.vals[:0]
	g.fields = g.fields[:0]
	g.used = 0
	g.stmt = 0 // the access-log middleware's statement
	g.pads = 0

	// The request the line belongs to: a single-line one, or one of the
	// stream's requests in flight, whose last line is its access line.
	// Incident lines are requests failing: they never complete.
	switch {
	case !incident && g.chance(singleChance):
		g.rq = &g.single
		g.startRequest(g.rq, s)
		g.rq.left = 1
	case s.last >= 0 && g.chance(burstChance):
		g.rq = &s.reqs[s.last]
	default:
		s.last = g.intn(len(s.reqs))
		g.rq = &s.reqs[s.last]
	}
	g.nextRequestLine(g.rq)
	access := !incident && g.rq.left == 0

	lvl := lvlInfo
	trace := false // attach a stack trace
	switch {
	case incident:
		lvl, trace = g.incidentEvent(s)
		g.stmt = 1<<32 | uint64(g.incKind)
	case access:
		lvl = g.accessEvent(s)
	default:
		lvl = g.tb.levelTable.pick(g.src.Uint64())
		if lvl >= lvlError {
			lvl = lvlError
			trace = s.format == fmtJava && g.chance(620)
		}
		ts := g.tb.levelTemplates[lvl]
		i := (g.tb.templateTables[lvl].pick(g.src.Uint64()) + int(s.rot)) % len(ts)
		if g.total-int64(g.meanLen)*int64(g.n-1) > 4*int64(g.meanLen) {
			// The mean runs high (a small MeanLen, below the natural
			// length of many statements): the shortest of six, so
			// that small MeanLen values can be met.
			for range 5 {
				j := (g.tb.templateTables[lvl].pick(g.src.Uint64()) + int(s.rot)) % len(ts)
				if ts[j].size() < ts[i].size() {
					i = j
				}
			}
		}
		g.msg = g.appendTemplate(g.msg, ts[i])
		g.stmt = uint64(lvl)<<16 | uint64(i) + 1
	}

	// Trace context and user: most structured lines carry them.
	tracing := uint64(200)
	switch s.format {
	case fmtLogfmt, fmtJSON:
		tracing = 780
	case fmtJava:
		tracing = 300
	}
	if g.chance(tracing) {
		g.traceFields()
	}
	if !access && g.chance(180) {
		st := len(g.vals)
		g.vals = g.appendUser(g.vals)
		g.fields = append(g.fields, field{"user_id", st, len(g.vals), false, true})
		g.used |= 1 << keyUserID
	}

	// Short targets while the mean runs high (natural lines longer than
	// MeanLen, so only for small MeanLen): drop the host (many loggers
	// leave it to the collector) and optional fields, so small MeanLen
	// values can be met.
	over := g.total-int64(g.meanLen)*int64(g.n-1) > 4*int64(g.meanLen)
	host := !over || target >= 200

	// Header and message.
	switch s.format {
	case fmtPlain:
		dst = g.appendTS(dst, ns, s.tsStyle)
		dst = append(dst, ' ')
		dst = append(dst, levelPadded[lvl]...)
		dst = append(dst, " ["...)
		dst = append(dst, s.App...)
		dst = append(dst, "] "...)
		dst = append(dst, g.msg...)
	case fmtLogfmt:
		dst = append(dst, "ts="...)
		dst = g.appendTS(dst, ns, s.tsStyle)
		dst = append(dst, " level="...)
		dst = append(dst, levelLower[lvl]...)
		dst = append(dst, " app="...)
		dst = append(dst, s.App...)
		if host {
			dst = append(dst, " host="...)
			dst = append(dst, s.Host...)
		}
		dst = append(dst, ` msg="`...)
		dst = appendEscaped(dst, g.msg)
		dst = append(dst, '"')
	case fmtJSON:
		dst = append(dst, `{"time":"`...)
		dst = g.appendTS(dst, ns, s.tsStyle)
		dst = append(dst, `","level":"`...)
		dst = append(dst, levelLower[lvl]...)
		dst = append(dst, `","service":"`...)
		dst = append(dst, s.App...)
		if host {
			dst = append(dst, `","host":"`...)
			dst = append(dst, s.Host...)
		}
		dst = append(dst, `","msg":"`...)
		dst = appendEscaped(dst, g.msg)
		dst = append(dst, '"')
	case fmtJava:
		dst = g.appendTS(dst, ns, s.tsStyle)
		dst = append(dst, ' ')
		dst = append(dst, levelPadded[lvl]...)
		dst = append(dst, " ["...)
		dst = g.appendThread(dst)
		dst = append(dst, "] com.example."...)
		dst = append(dst, apps[si%len(apps)]...)
		dst = append(dst, '.')
		dst = append(dst, javaClasses[g.intn(len(javaClasses))]...)
		dst = append(dst, " - "...)
		dst = append(dst, g.msg...)
	}
	for _, f := range g.fields {
		if over && f.opt && len(dst)-n0+len(f.key)+f.end-f.start+4 > target {
			continue
		}
		dst = g.appendField(dst, s.format, f.key, g.vals[f.start:f.end], f.num)
	}

	// Pad to the target length with more context fields.
	trailer := 0
	if s.format == fmtJSON {
		trailer = 1
	}
	for len(dst)-n0+trailer < target {
		dst = g.pad(dst, s, target-(len(dst)-n0+trailer))
	}
	if s.format == fmtJSON {
		dst = append(dst, '}')
	}

	if trace {
		g.contStream = si
		g.contNS = ns
		if s.format == fmtJava || lvl != lvlFatal {
			g.javaTrace(si, lvl == lvlFatal)
		} else {
			g.goTrace(si)
		}
	}
	if g.rq.left == 0 && g.rq != &g.single {
		g.newRequest(g.rq, s) // done: another takes its place
		s.last = -1
	}
	return dst
}

// accessEvent fills the message and fields of an HTTP access line and
// returns its level.
func (g *Generator) accessEvent(s *stream) int {
	// The request's method, path and user agent were set when it
	// started (its other lines name them too).
	method := methods[g.rq.method]
	si := g.tb.statusTable.pick(g.src.Uint64())
	status := statuses[si]
	lvl := lvlInfo
	if status[0] == '5' {
		lvl = lvlError
	}
	ms := g.durMillis()
	pathStart := len(g.vals)
	g.vals = g.appendTemplate(g.vals, g.tb.pathT[g.rq.path])
	pathEnd := len(g.vals)
	switch s.format {
	case fmtPlain:
		g.msg = append(g.msg, method...)
		g.msg = append(g.msg, ' ')
		g.msg = append(g.msg, g.vals[pathStart:pathEnd]...)
		g.msg = append(g.msg, ' ')
		g.msg = append(g.msg, status...)
		g.msg = append(g.msg, ' ')
		g.msg = appendDur(g.msg, ms)
		g.msg = append(g.msg, ' ')
		g.msg = g.appendClientIP(g.msg)
		g.vals = g.vals[:pathStart]
		if g.chance(600) {
			st := len(g.vals)
			g.vals = append(g.vals, userAgents[g.rq.ua]...)
			g.fields = append(g.fields, field{"ua", st, len(g.vals), false, true})
		}
	case fmtJava:
		g.msg = append(g.msg, method...)
		g.msg = append(g.msg, ' ')
		g.msg = append(g.msg, g.vals[pathStart:pathEnd]...)
		g.msg = append(g.msg, " -> "...)
		g.msg = append(g.msg, status...)
		g.msg = append(g.msg, " in "...)
		g.msg = appendDur(g.msg, ms)
		g.vals = g.vals[:pathStart]
	default:
		if g.chance(512) {
			g.msg = append(g.msg, "request completed"...)
		} else {
			g.msg = append(g.msg, "handled request"...)
		}
		st := len(g.vals)
		g.vals = append(g.vals, method...)
		g.fields = append(g.fields,
			field{"method", st, len(g.vals), false, false},
			field{"path", pathStart, pathEnd, false, false})
		st = len(g.vals)
		g.vals = append(g.vals, status...)
		g.fields = append(g.fields, field{"status", st, len(g.vals), true, false})
		st = len(g.vals)
		g.vals = strconv.AppendInt(g.vals, ms, 10)
		g.fields = append(g.fields, field{"duration_ms", st, len(g.vals), true, false})
		st = len(g.vals)
		g.vals = g.appendClientIP(g.vals)
		g.fields = append(g.fields, field{"ip", st, len(g.vals), false, false})
		st = len(g.vals)
		g.vals = strconv.AppendUint(g.vals, g.uintn(1<<uint(g.intn(20)+1)), 10)
		g.fields = append(g.fields, field{"bytes", st, len(g.vals), true, true})
	}
	return lvl
}

// incidentEvent fills the message of an incident line and returns its
// level and whether a stack trace follows.
func (g *Generator) incidentEvent(s *stream) (lvl int, trace bool) {
	switch g.incKind {
	case incRefused:
		g.msg = g.appendTemplate(g.msg, g.tb.refusedT[g.intn(len(g.tb.refusedT))])
		return lvlError, false
	case incTimeout:
		g.msg = g.appendTemplate(g.msg, g.tb.timeoutT[g.intn(len(g.tb.timeoutT))])
		if g.chance(300) {
			return lvlWarn, false
		}
		return lvlError, false
	case incDisk:
		g.msg = g.appendTemplate(g.msg, g.tb.diskT[g.intn(len(g.tb.diskT))])
		return lvlError, false
	case incPanic:
		if s.format == fmtJava {
			g.msg = append(g.msg, "Unexpected error, shutting down"...)
		} else {
			g.msg = g.appendTemplate(g.msg, g.tb.panicT[g.intn(len(g.tb.panicT))])
		}
		return lvlFatal, true
	default: // incOOM
		if s.format == fmtJava {
			g.msg = append(g.msg, "Uncaught exception in worker thread, shutting down"...)
			return lvlFatal, true
		}
		g.msg = append(g.msg, "java.lang.OutOfMemoryError: Java heap space"...)
		return lvlFatal, false
	}
}

// traceFields adds the request's trace_id and span_id.
func (g *Generator) traceFields() {
	st := len(g.vals)
	g.vals = append(g.vals, g.rq.trace[:]...)
	g.fields = append(g.fields, field{"trace_id", st, len(g.vals), false, true})
	st = len(g.vals)
	g.vals = append(g.vals, g.rq.span[:]...)
	g.fields = append(g.fields, field{"span_id", st, len(g.vals), false, true})
}

// appendField renders key and value in the stream's format.
func (g *Generator) appendField(dst []byte, format int, key string, v []byte, num bool) []byte {
	if format == fmtJSON {
		dst = append(dst, `,"`...)
		dst = append(dst, key...)
		dst = append(dst, `":`...)
		if num {
			return append(dst, v...)
		}
		dst = append(dst, '"')
		dst = appendEscaped(dst, v)
		return append(dst, '"')
	}
	dst = append(dst, ' ')
	dst = append(dst, key...)
	dst = append(dst, '=')
	if needsQuote(v) {
		dst = append(dst, '"')
		dst = appendEscaped(dst, v)
		return append(dst, '"')
	}
	return append(dst, v...)
}

func needsQuote(v []byte) bool {
	if len(v) == 0 {
		return true
	}
	for _, c := range v {
		if c <= ' ' || c == '"' || c == '=' || c == '\\' {
			return true
		}
	}
	return false
}

// appendEscaped appends v with '"' and '\' backslash-escaped (valid in
// both JSON and logfmt strings; v never holds control characters).
func appendEscaped(dst, v []byte) []byte {
	if bytes.IndexByte(v, '"') < 0 && bytes.IndexByte(v, '\\') < 0 {
		return append(dst, v...) // the common case, at memmove speed
	}
	for _, c := range v {
		if c == '"' || c == '\\' {
			dst = append(dst, '\\')
		}
		dst = append(dst, c)
	}
	return dst
}

// pad appends one context field; want is how many bytes are still
// missing. A line's length beyond its message comes from the context a
// structured logger attaches (request, deployment and timing fields), and
// the longest lines from what makes real lines long: a logged SQL
// statement.
func (g *Generator) pad(dst []byte, s *stream, want int) []byte {
	g.vals = g.vals[:0]
	// A service's logger adds its context fields in one fixed order (a
	// zap or logrus With chain, a logback MDC pattern): the next key of
	// the stream's order that the line does not have yet; when all are
	// used, the SQL statement fills the rest.
	for g.pads < len(s.keys) && g.used&(1<<s.keys[g.pads]) != 0 {
		g.pads++
	}
	if g.pads == len(s.keys) || want > 300 && g.chance(200) {
		if m := methods[g.rq.method]; (m == "POST" || m == "PUT" || m == "PATCH") && g.chance(700) {
			// The body a write request posted, logged whole: the
			// other usual cause of multi-KB lines.
			g.vals = g.appendBody(g.vals, want-12)
			return g.appendField(dst, s.format, "body", g.vals, s.format == fmtJSON)
		}
		// A long SQL statement, the usual cause of multi-KB log lines:
		// an ORM's generated query, long for its column list, loading
		// a batch of rows.
		t := g.intn(len(tables))
		if want > len(g.tb.ormSelects[t])+40 {
			g.vals = append(g.vals, g.tb.ormSelects[t]...)
		} else {
			g.vals = append(g.vals, "SELECT id, status, updated_at FROM "...)
			g.vals = append(g.vals, tables[t]...)
			g.vals = append(g.vals, " WHERE id IN ("...)
		}
		// The ids come from an earlier result set (an ORM loading the
		// rows a page refers to): sorted, and close together, as
		// auto-increment keys of rows written around the same time are;
		// gaps log-uniform from 1 to 4096.
		id := 1_000_000 + g.uintn(8_000_000)
		for n := want - 60; n > 0 && len(g.vals) < 8000; n = want - 60 - len(g.vals) {
			g.vals = strconv.AppendUint(g.vals, id, 10)
			g.vals = append(g.vals, ", "...)
			id += 1 + g.uintn(1<<g.uintn(13))
		}
		g.vals = append(g.vals, "0)"...)
		return g.appendField(dst, s.format, "query", g.vals, false)
	}
	k := s.keys[g.pads]
	g.used |= 1 << k
	key := extraKeys[k]
	num := false
	switch key {
	case "request_id":
		g.vals = append(g.vals, g.rq.id[:]...)
	case "user_id":
		g.vals = g.appendUser(g.vals)
	case "route":
		g.vals = append(g.vals, routes[g.rq.path]...)
	case "http_method":
		g.vals = append(g.vals, methods[g.rq.method]...)
	case "caller":
		g.vals = g.appendCaller(g.vals)
	case "user_agent":
		g.vals = append(g.vals, userAgents[g.rq.ua]...)
	case "env":
		g.vals = append(g.vals, "production"...)
	case "attempt":
		// Most calls succeed the first time; the rest within 5 tries.
		a := uint64(1)
		if g.chance(100) {
			a = 2 + g.uintn(4)
		}
		g.vals = strconv.AppendUint(g.vals, a, 10)
		num = true
	case "retries":
		var a uint64
		if g.chance(100) {
			a = 1 + g.uintn(4)
		}
		g.vals = strconv.AppendUint(g.vals, a, 10)
		num = true
	case "shard":
		// Data is sharded by user: a user's requests hit one shard.
		g.vals = strconv.AppendUint(g.vals, mix(g.userSalt+uint64(g.rq.user))%64, 10)
		num = true
	case "db_rows", "queue_depth":
		g.vals = strconv.AppendUint(g.vals, g.smallN(), 10)
		num = true
	case "region":
		g.vals = append(g.vals, regions[s.region]...)
	case "zone":
		g.vals = append(g.vals, regions[s.region]...)
		g.vals = append(g.vals, s.zone)
	case "version":
		g.vals = append(g.vals, s.version...)
	case "bytes_out":
		g.vals = strconv.AppendUint(g.vals, g.uintn(1<<uint(g.intn(24)+1)), 10)
		num = true
	case "cache":
		if g.chance(700) {
			g.vals = append(g.vals, "hit"...)
		} else {
			g.vals = append(g.vals, "miss"...)
		}
	case "pod":
		g.vals = append(g.vals, s.Host...)
	case "tenant":
		g.vals = g.appendTenant(g.vals)
	case "build":
		g.vals = append(g.vals, s.build[:]...)
	case "feature":
		// The flags the request was evaluated under: the service's
		// current experiment.
		g.vals = append(g.vals, flags[s.rot%uint32(len(flags))]...)
	case "client_ip":
		g.vals = g.appendClientIP(g.vals)
	case "elapsed":
		g.vals = appendDur(g.vals, g.durMillis())
	default: // "component": the subsystem the statement belongs to
		g.vals = append(g.vals, components[mix(g.stmt)%uint64(len(components))]...)
	}
	return g.appendField(dst, s.format, key, g.vals, num)
}

// appendSKU renders the product of rank clientCDF.rank(u): products follow
// the same hot-head law as client addresses (a few best sellers). It
// returns the product's key for its price.
func (g *Generator) appendSKU(dst []byte, u uint64) []byte {
	dst = append(dst, "SKU-"...)
	return strconv.AppendUint(dst, g.skuID(u), 10)
}

func (g *Generator) skuID(u uint64) uint64 {
	return 10_000 + mix(g.ipSalt^0x736b75+uint64(g.tb.clientCDF.rank(u)))%90_000
}

// appendBody renders an order as the JSON body a checkout request posts,
// with items until it is about want bytes long (at most ~8 KB): the
// request's order and user, and for each item a product, a quantity and
// the product's price (fixed per product, as in a catalogue).
func (g *Generator) appendBody(dst []byte, want int) []byte {
	n0 := len(dst)
	dst = append(dst, `{"order_id":`...)
	dst = strconv.AppendUint(dst, 100_000+mix(g.rq.objA)%900_000_000, 10)
	dst = append(dst, `,"customer_id":`...)
	dst = strconv.AppendUint(dst, g.userID(g.rq.user), 10)
	dst = append(dst, `,"currency":"USD","items":[`...)
	for i := 0; i == 0 || len(dst)-n0 < want-60 && len(dst)-n0 < 8000; i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		id := g.skuID(g.src.Uint64())
		dst = append(dst, `{"sku":"SKU-`...)
		dst = strconv.AppendUint(dst, id, 10)
		dst = append(dst, `","quantity":`...)
		q := uint64(1)
		if g.chance(200) {
			q = 2 + g.uintn(4)
		}
		dst = strconv.AppendUint(dst, q, 10)
		dst = append(dst, `,"unit_price_cents":`...)
		dst = strconv.AppendUint(dst, 99+mix(id)%200*100, 10)
		dst = append(dst, '}')
	}
	return append(dst, `],"shipping":{"method":"standard","country":"US"}}`...)
}

// appendCaller renders the file:line of the statement being logged: fixed
// per statement and service, as a logger reports where it was called.
func (g *Generator) appendCaller(dst []byte) []byte {
	if g.stmt == 0 {
		return append(dst, "middleware/access_log.go:64"...)
	}
	h := mix(g.stmt + uint64(g.cur.rot)<<40)
	dst = append(dst, callerFiles[h%uint64(len(callerFiles))]...)
	dst = append(dst, ':')
	return strconv.AppendUint(dst, 20+(h>>32)%900, 10)
}

// appendTemplate renders t.
func (g *Generator) appendTemplate(dst []byte, t template) []byte {
	for _, sg := range t {
		if sg.slot == 0 {
			dst = append(dst, sg.lit...)
			continue
		}
		switch sg.slot {
		case slotUser:
			dst = g.appendUser(dst)
		case slotIP:
			dst = g.appendPeerIP(dst)
		case slotClientIP:
			dst = g.appendClientIP(dst)
		case slotPort:
			dst = strconv.AppendUint(dst, 1024+g.uintn(64512), 10)
		case slotN:
			dst = strconv.AppendUint(dst, g.smallN(), 10)
		case slotBig:
			dst = strconv.AppendUint(dst, 100_000+g.uintn(900_000_000), 10)
		case slotDur:
			dst = appendDur(dst, g.durMillis())
		case slotUUID:
			dst = appendUUID(dst, g.rq.objA, g.rq.objB)
		case slotObj:
			dst = strconv.AppendUint(dst, 100_000+mix(g.rq.objA)%900_000_000, 10)
		case slotHex8:
			dst = appendHex(dst, g.src.Uint64(), 8)
		case slotSession:
			dst = g.appendSession(dst)
		case slotBuild:
			dst = append(dst, g.cur.build[:]...)
		case slotMethod:
			dst = append(dst, methods[g.rq.method]...)
		case slotRoute:
			dst = append(dst, routes[g.rq.path]...)
		case slotBytes:
			dst = strconv.AppendUint(dst, g.uintn(1<<uint(g.intn(20)+1)), 10)
		case slotTry:
			dst = strconv.AppendUint(dst, 1+g.uintn(4), 10)
			dst = append(dst, "/5"...)
		case slotReason:
			dst = append(dst, reasons[g.intn(len(reasons))]...)
		case slotTopic:
			dst = append(dst, topics[g.intn(len(topics))]...)
		case slotEvent:
			dst = append(dst, eventTypes[g.intn(len(eventTypes))]...)
		case slotJob:
			dst = append(dst, jobs[g.intn(len(jobs))]...)
		case slotCache:
			dst = append(dst, caches[g.intn(len(caches))]...)
		case slotHandler:
			dst = append(dst, handlers[g.intn(len(handlers))]...)
		case slotFlag:
			dst = append(dst, flags[g.intn(len(flags))]...)
		case slotSKU:
			dst = g.appendSKU(dst, g.src.Uint64())
		case slotTenant:
			dst = g.appendTenant(dst)
		case slotCurrency:
			dst = append(dst, currencies[g.intn(len(currencies))]...)
		case slotServicePort:
			dst = append(dst, servicePorts[g.intn(len(servicePorts))]...)
		case slotPartition:
			// Topics have 12 partitions.
			dst = strconv.AppendUint(dst, g.uintn(12), 10)
		case slotCents:
			// Prices end in 99: 0.99 to 499.99.
			dst = strconv.AppendUint(dst, 99+g.uintn(500)*100, 10)
		case slotQ:
			dst = append(dst, searchTerms[g.intn(len(searchTerms))]...)
		case slotHost:
			dst = append(dst, peerHosts[g.intn(len(peerHosts))]...)
		case slotCode:
			dst = append(dst, errorCodes[g.intn(len(errorCodes))]...)
		case slotPath:
			dst = g.appendTemplate(dst, g.tb.pathT[g.tb.pathTable.pick(g.src.Uint64())])
		case slotTable:
			dst = append(dst, tables[g.intn(len(tables))]...)
		case slotPct:
			dst = strconv.AppendUint(dst, 80+g.uintn(20), 10)
		}
	}
	return dst
}

// smallN returns a small count, skewed to small values.
func (g *Generator) smallN() uint64 {
	u := g.src.Uint64()
	m := uint64(1) << (u >> 61)   // 1..128
	k := 1 + (u>>58)&1            // 1 or 2
	return ((u & 0xffff) % m) * k // 0..254, mostly small
}

// durMillis returns a request duration in ms, log-uniform-ish 0..~16s.
func (g *Generator) durMillis() int64 {
	// Latencies are roughly log-normal: most requests take 4 to 64 ms,
	// a tail runs to seconds.
	u := g.src.Uint64()
	e := g.tb.durTable.pick(u)
	return int64((u & 0xffffff) % (2 << e))
}

// appendDur renders ms as "12ms" or "1.234s".
func appendDur(dst []byte, ms int64) []byte {
	if ms < 1000 {
		dst = strconv.AppendInt(dst, ms, 10)
		return append(dst, "ms"...)
	}
	dst = strconv.AppendInt(dst, ms/1000, 10)
	dst = append(dst, '.')
	f := ms % 1000
	dst = append(dst, byte('0'+f/100), byte('0'+f/10%10), byte('0'+f%10))
	return append(dst, 's')
}

// appendUUID renders a version 4 UUID from the random words a and b.
func appendUUID(dst []byte, a, b uint64) []byte {
	dst = appendHex(dst, a>>32, 8)
	dst = append(dst, '-')
	dst = appendHex(dst, a>>16, 4)
	dst = append(dst, "-4"...)
	dst = appendHex(dst, a, 3)
	dst = append(dst, '-')
	dst = append(dst, "89ab"[b>>62])
	dst = appendHex(dst, b>>48, 3)
	dst = append(dst, '-')
	return appendHex(dst, b, 12)
}

const hexDigits = "0123456789abcdef"

// appendHex appends the low n hex digits of v, most significant first.
func appendHex(dst []byte, v uint64, n int) []byte {
	for i := n - 1; i >= 0; i-- {
		dst = append(dst, hexDigits[(v>>(4*uint(i)))&15])
	}
	return dst
}

// appendAlnum appends n characters of a Kubernetes-style random suffix.
func (g *Generator) appendAlnum(dst []byte, n int) []byte {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789" // 27 characters
	u := g.src.Uint64()
	for range n {
		dst = append(dst, alphabet[u%27])
		u /= 27
	}
	return dst
}

// appendThread renders the request's worker thread: a servlet container
// serves a request on one thread from start to end.
func (g *Generator) appendThread(dst []byte) []byte {
	u := g.rq.thread
	t := threads[u%uint64(len(threads))]
	dst = append(dst, t...)
	if t[len(t)-1] == '-' {
		dst = strconv.AppendUint(dst, 1+(u>>32)%16, 10)
	}
	return dst
}

// appendTS renders unix-ns ns in style.
func (g *Generator) appendTS(dst []byte, ns int64, style int) []byte {
	sec, frac := ns/1e9, ns%1e9
	if frac < 0 {
		sec, frac = sec-1, frac+1e9
	}
	if sec != g.tsSec {
		g.tsSec = sec
		t := time.Unix(sec, 0).UTC()
		y, mo, d := t.Date()
		h, mi, s := t.Clock()
		b := g.tsDate[:0]
		b = append(b, byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-')
		b = append2(b, int(mo))
		b = append(b, '-')
		b = append2(b, d)
		b = append(b, 'T')
		b = append2(b, h)
		b = append(b, ':')
		b = append2(b, mi)
		b = append(b, ':')
		b = append2(b, s)
		_ = b // b aliases g.tsDate
	}
	dst = append(dst, g.tsDate[:]...)
	switch style {
	case tsMilli:
		ms := frac / 1e6
		return append(dst, '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z')
	case tsMicro:
		us := frac / 1e3
		dst = append(dst, '.')
		for d := int64(100000); d > 0; d /= 10 {
			dst = append(dst, byte('0'+us/d%10))
		}
		return append(dst, 'Z')
	default: // tsLog4j
		dst[len(dst)-9] = ' '
		ms := frac / 1e6
		return append(dst, ',', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	}
}

func append2(b []byte, v int) []byte { return append(b, byte('0'+v/10), byte('0'+v%10)) }
