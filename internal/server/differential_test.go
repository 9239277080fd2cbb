package server

// A differential test of the Loki HTTP API: random entries go in through
// every push format, the test keeps its own copy, and random queries
// through query_range, query, labels, label values and series are
// compared with answers computed here from that copy, with LogQL's
// documented semantics re-implemented naively (strings.Contains, Go
// regexps, encoding/json for | json, a split for | logfmt).
//
// Semantics assumed (Loki's HTTP API and LogQL documentation):
//   - query_range log queries return entries with start <= ts < end; the
//     limit keeps the entries closest to start (forward) or to end
//     (backward, the default); limit defaults to 100; entries with the
//     same time at the cut may be any of them; each stream's values are in
//     the direction's time order (equal times in any order); a label set
//     appears as one stream; streams in any order.
//   - times are Unix ns, RFC 3339, or Unix seconds with a fraction. Only
//     fractions a float64 holds exactly (eighths of a second) are drawn:
//     integer seconds and other fractions are findings of their own,
//     reproduced in notes/api-repro_test.go.txt.
//   - line filter regexes are Go's, unanchored, '.' matching '\n'
//     (internal/query's doc); selector regexes are anchored.
//   - | json and | logfmt as internal/query documents them (Loki's rules:
//     nested keys joined by '_', arrays skipped, sanitized names, a
//     clash with a stream label gets "_extracted", __error__ on a line
//     that is not a JSON object, with Haystack's __error_details__ texts);
//     numeric label filters drop a line without the label and pass a line
//     whose __error__ is set.
//   - metric queries are evaluated at start, start+step, ... <= end, each
//     over the window (t-range, t]; a window without entries gives no
//     point; rate is count/range in seconds, bytes_* count line bytes.
//     Loki fails a metric query whose series carry __error__, so the
//     metric queries here always end their pipeline with __error__="".
//   - exact duplicates (same stream, time and line) are never pushed:
//     Loki drops them, Haystack keeps them (a finding in the notes).
//   - labels, label values and series cover the streams with entries in
//     [start, end] (default: the last 6 hours); the index answers them at
//     block granularity (doc.go, streamsIn), so a stream with entries only
//     near the range may appear too: the test checks that the answer
//     holds every exact stream and no stream without entries at all, and
//     is exact where blocks cannot blur it (default range, or a range
//     before or after all data).

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"haystack/internal/segment"
	"haystack/internal/store"
)

// dtEntry is one pushed entry as the oracle keeps it.
type dtEntry struct {
	labels map[string]string
	ts     int64
	line   string
}

// dtStreams are the label sets pushed; level collides with the level
// extracted from lines, app with an app key in JSON and logfmt lines.
var dtStreams = []map[string]string{
	{"app": "api", "env": "prod"},
	{"app": "api", "env": "dev"},
	{"app": "auth", "env": "prod", "level": "info"},
	{"app": "db"},
	{"app": "db", "region": "eu-1"},
	{"app": "web", "env": "prod", "region": "us-2"},
	{"app": `q"uote`, "env": `back\\slash é`, "host_1": "{x=\"y\"}, z"},
}

func dtKey(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%q", k, m[k])
	}
	b.WriteByte('}')
	return b.String()
}

// dtT0 is the first time slot: 50 minutes before the test's "now", so the
// default one-hour ranges hold all entries.
const dtT0 = base - 50*60*1e9

// dtGen draws entries.
type dtGen struct {
	r    *rand.Rand
	seen map[string]bool // stream|ts|line: Loki drops exact duplicates, so none are pushed
	seq  int
	pods bool // half the entries go to 60 more streams
}

var dtWords = []string{"error", "timeout", "ok", "GET /api", "ERROR", "Error", "warn", "é", "naïve", "x{y}", "a|b", "bob", "status=500", "É", "\u212Aelvin", "ſtatus=404", "KELVIN"}

func (g *dtGen) line() string {
	r := g.r
	g.seq++
	switch k := r.IntN(20); {
	case k < 7: // plain words
		var ws []string
		for range 1 + r.IntN(4) {
			ws = append(ws, dtWords[r.IntN(len(dtWords))])
		}
		return strings.Join(ws, " ")
	case k < 11: // logfmt: every one starts with at=
		parts := []string{fmt.Sprintf("at=%d", g.seq)}
		if r.IntN(4) > 0 {
			parts = append(parts, "level="+[]string{"error", "warn", "info", "debug"}[r.IntN(4)])
		}
		if r.IntN(2) == 0 {
			parts = append(parts, "user="+[]string{"bob", "alice", "b0b"}[r.IntN(3)])
		}
		if r.IntN(2) == 0 {
			parts = append(parts, fmt.Sprintf("n=%d", r.IntN(8)))
		}
		if r.IntN(3) == 0 {
			parts = append(parts, fmt.Sprintf("dur=%dms", r.IntN(300)))
		}
		if r.IntN(4) == 0 {
			parts = append(parts, "app=zz")
		}
		if r.IntN(4) == 0 {
			parts = append(parts, "region=eu-1")
		}
		if r.IntN(4) == 0 {
			parts = append(parts, "flag")
		}
		if r.IntN(2) == 0 {
			parts = append(parts, fmt.Sprintf("msg=%q", dtWords[r.IntN(len(dtWords))]+" "+dtWords[r.IntN(len(dtWords))]))
		}
		r.Shuffle(len(parts)-1, func(i, j int) { parts[i+1], parts[j+1] = parts[j+1], parts[i+1] })
		return strings.Join(parts, " ")
	case k < 15: // JSON object
		var parts []string
		if r.IntN(4) > 0 {
			parts = append(parts, `"level":"`+[]string{"error", "warn", "info"}[r.IntN(3)]+`"`)
		}
		if r.IntN(2) == 0 {
			parts = append(parts, fmt.Sprintf(`"n":%d`, r.IntN(8)))
		}
		if r.IntN(3) == 0 {
			parts = append(parts, `"app":"x"`)
		}
		if r.IntN(3) == 0 {
			parts = append(parts, `"nested":{"k":"v","deep":{"z":1}}`)
		}
		if r.IntN(4) == 0 {
			parts = append(parts, `"arr":[1,"two"]`)
		}
		if r.IntN(4) == 0 {
			parts = append(parts, `"flag":true`, `"nul":null`)
		}
		if r.IntN(4) == 0 {
			parts = append(parts, `"user-id":"7"`)
		}
		if r.IntN(4) == 0 {
			// On {app="db"} this gives the labels of the stream
			// {app="db", region="eu-1"}: two streams' entries in one
			// result stream and one series.
			parts = append(parts, `"region":"eu-1"`)
		}
		if r.IntN(5) == 0 {
			parts = append(parts, `"1st":"a"`)
		}
		if r.IntN(3) == 0 {
			// A value with a newline: '.' in label regexes does not match it.
			parts = append(parts, []string{`"msg":"hi \u00e9 \"q\" error"`, `"msg":"multi\nline \u00e9 error"`}[r.IntN(2)])
		}
		parts = append(parts, fmt.Sprintf(`"seq":%d`, g.seq))
		r.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
		return "{" + strings.Join(parts, ",") + "}"
	case k < 16:
		return []string{"", "\r", " ", "\t"}[r.IntN(4)]
	case k < 17:
		return []string{"line one\r\nline two error", "crlf end\r\n", "bare cr\rok", "multi\nline\ntimeout"}[r.IntN(4)]
	case k < 18:
		return strings.Repeat("abcdefghij", 100+r.IntN(900)) + []string{" timeout", " error", ""}[r.IntN(3)]
	default: // invalid UTF-8 (protobuf pushes only)
		return []string{"bad \xff\xfe error", "\xc3", "trunc \xe2\x82 timeout", "ok \x80"}[r.IntN(4)]
	}
}

func (g *dtGen) ts() int64 {
	if g.r.IntN(20) == 0 { // a few times shared by many entries of all streams
		return dtT0 + []int64{0, 17e9, 17e9 + 1, 40e9}[g.r.IntN(4)]
	}
	t := dtT0 + int64(g.r.IntN(300))*200e6 // 60 s of 200 ms slots: many equal times
	if g.r.IntN(5) == 0 {
		t += int64(1 + g.r.IntN(999)) // and some off the grid
	}
	return t
}

// batch draws a push: entries of random streams, out of time order.
func (g *dtGen) batch(n int, utf8Only bool) []dtEntry {
	var out []dtEntry
	for len(out) < n {
		labs := dtStreams[g.r.IntN(len(dtStreams))]
		if g.pods && g.r.IntN(2) == 0 {
			// Many streams: one per pod, sharing app and env values.
			i := g.r.IntN(60)
			labs = map[string]string{"app": []string{"api", "db", "web", "auth"}[i%4], "env": []string{"prod", "dev", "stage"}[i%3], "pod": fmt.Sprintf("p%02d", i)}
		}
		e := dtEntry{labels: labs, ts: g.ts(), line: g.line()}
		if utf8Only && !utf8.ValidString(e.line) {
			continue
		}
		k := dtKey(labs) + "|" + strconv.FormatInt(e.ts, 10) + "|" + e.line
		if g.seen[k] {
			continue
		}
		g.seen[k] = true
		out = append(out, e)
	}
	return out
}

// dtStored is what the server stores of pushed entries: their labels
// with service_name discovered (withServiceName), as Loki adds it, and
// with levels the detected_level wantLevel expects (metadata, which
// answers give as a label).
func dtStored(es []dtEntry, levels bool) []dtEntry {
	out := make([]dtEntry, len(es))
	for i, e := range es {
		e.labels = levelLabels(levels, withServiceName(e.labels), nil, e.line)
		out[i] = e
	}
	return out
}

// dtStreamLabels is labs without the detected_level dtStored added:
// /labels, /series and the native search's labels are a stream's, its
// entries' metadata apart (the generator pushes no detected_level).
func dtStreamLabels(labs map[string]string) map[string]string {
	if _, ok := labs["detected_level"]; !ok {
		return labs
	}
	out := maps.Clone(labs)
	delete(out, "detected_level")
	return out
}

// dtPush sends entries in one of the push formats.
func dtPush(env *testEnv, r *rand.Rand, tenant string, es []dtEntry, format int) error {
	var body []byte
	path := "/loki/api/v1/push"
	var hdr []string
	// Entries of a stream stay in one group (in the batch's order), as
	// Loki clients send them.
	type grp struct {
		labels map[string]string
		es     []dtEntry
	}
	var groups []*grp
	idx := map[string]*grp{}
	for _, e := range es {
		k := dtKey(e.labels)
		if idx[k] == nil {
			idx[k] = &grp{labels: e.labels}
			groups = append(groups, idx[k])
		}
		idx[k].es = append(idx[k].es, e)
	}
	switch format {
	case 0: // protobuf + snappy
		var ps []PushStream
		for _, g := range groups {
			s := PushStream{Labels: dtKey(g.labels)}
			for _, e := range g.es {
				s.Entries = append(s.Entries, PushEntry{Time: e.ts, Line: e.line})
			}
			ps = append(ps, s)
		}
		body = protoBody(ps)
		hdr = append(hdr, "Content-Type", "application/x-protobuf")
	case 1: // JSON
		type st struct {
			Stream map[string]string `json:"stream"`
			Values [][]string        `json:"values"`
		}
		var req struct {
			Streams []st `json:"streams"`
		}
		for _, g := range groups {
			s := st{Stream: g.labels}
			for _, e := range g.es {
				s.Values = append(s.Values, []string{strconv.FormatInt(e.ts, 10), e.line})
			}
			req.Streams = append(req.Streams, s)
		}
		body, _ = json.Marshal(req)
		hdr = append(hdr, "Content-Type", "application/json")
	default: // JSON lines, labels as text or object, ts as string or number
		path = "/api/v1/push/jsonl"
		var b bytes.Buffer
		for _, e := range es {
			obj := map[string]any{"line": e.line}
			if r.IntN(2) == 0 {
				obj["labels"] = dtKey(e.labels)
			} else {
				obj["labels"] = e.labels
			}
			switch r.IntN(3) {
			case 0:
				obj["ts"] = strconv.FormatInt(e.ts, 10)
			case 1:
				obj["ts"] = e.ts
			default:
				obj["ts"] = time.Unix(0, e.ts).In(time.FixedZone("", 3600)).Format(time.RFC3339Nano)
			}
			line, _ := json.Marshal(obj)
			b.Write(line)
			b.WriteByte('\n')
		}
		body = b.Bytes()
	}
	if r.IntN(4) == 0 {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		zw.Write(body)
		zw.Close()
		body = z.Bytes()
		hdr = append(hdr, "Content-Encoding", "gzip")
	}
	hdr = append(hdr, "X-Scope-OrgID", tenant)
	req, err := http.NewRequest("POST", env.ts.URL+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 204 {
		return fmt.Errorf("push format %d to %s: %d %s", format, tenant, resp.StatusCode, msg)
	}
	return nil
}

// ---- the oracle's LogQL ----

type dtMatcher struct {
	name, op, val string
	re            *regexp.Regexp
}

func (m *dtMatcher) match(v string) bool {
	switch m.op {
	case "=":
		return v == m.val
	case "!=":
		return v != m.val
	case "=~":
		return m.re.MatchString(v)
	default:
		return !m.re.MatchString(v)
	}
}

func (m *dtMatcher) String() string { return m.name + m.op + strconv.Quote(m.val) }

func newDtMatcher(name, op, val string) *dtMatcher {
	m := &dtMatcher{name: name, op: op, val: val}
	if op == "=~" || op == "!~" {
		m.re = regexp.MustCompile(`^(?:` + val + `)$`)
	}
	return m
}

// dtLineFilter is op followed by alternatives joined by "or".
type dtLineFilter struct {
	op   string
	alts []string
	res  []*regexp.Regexp
}

func (f *dtLineFilter) match(line string) bool {
	any := false
	for i, a := range f.alts {
		var ok bool
		if f.op == "|=" || f.op == "!=" {
			ok = strings.Contains(line, a)
		} else {
			ok = f.res[i].MatchString(line)
		}
		any = any || ok
	}
	if f.op == "|=" || f.op == "|~" {
		return any
	}
	return !any
}

func (f *dtLineFilter) String() string {
	var qs []string
	for _, a := range f.alts {
		qs = append(qs, strconv.Quote(a))
	}
	return f.op + " " + strings.Join(qs, " or ")
}

// dtLabelTerm is a label predicate after a parser: a string matcher, or
// a number / duration comparison.
type dtLabelTerm struct {
	m     *dtMatcher // string matcher
	name  string     // comparison
	op    string
	num   float64
	isDur bool
	text  string
}

type dtQuery struct {
	sel     []*dtMatcher
	filters []*dtLineFilter
	parser  string // "", "json", "logfmt"
	terms   []*dtLabelTerm
	joins   []string // between terms: "and", "or", ","
}

func (q *dtQuery) String() string {
	var ms []string
	for _, m := range q.sel {
		ms = append(ms, m.String())
	}
	s := "{" + strings.Join(ms, ", ") + "}"
	for _, f := range q.filters {
		s += " " + f.String()
	}
	if q.parser != "" {
		s += " | " + q.parser
		if len(q.terms) > 0 {
			s += " | "
			for i, t := range q.terms {
				if i > 0 {
					j := q.joins[i-1]
					if j == "," {
						s += ", "
					} else {
						s += " " + j + " "
					}
				}
				s += t.text
			}
		}
	}
	return s
}

// dtSanitize is the extracted-name rule: [A-Za-z0-9_:] kept, others '_',
// a leading digit prefixed with '_'.
func dtSanitize(k string) string {
	b := []byte(k)
	for i, c := range b {
		if !(c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	s := string(b)
	if s != "" && s[0] >= '0' && s[0] <= '9' {
		s = "_" + s
	}
	return s
}

func dtFlatten(prefix string, m map[string]any, out *[][2]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys) // generated lines have no repeated names, so order is moot
	for _, k := range keys {
		name := k
		if prefix != "" {
			name = prefix + "_" + k
		}
		switch v := m[k].(type) {
		case map[string]any:
			dtFlatten(name, v, out)
		case []any:
		case string:
			*out = append(*out, [2]string{name, v})
		case json.Number:
			*out = append(*out, [2]string{name, v.String()})
		case bool:
			*out = append(*out, [2]string{name, strconv.FormatBool(v)})
		case nil:
			*out = append(*out, [2]string{name, ""})
		}
	}
}

// eval returns the entry's result labels and whether the query keeps it.
func (q *dtQuery) eval(e *dtEntry) (map[string]string, bool) {
	for _, m := range q.sel {
		if !m.match(e.labels[m.name]) {
			return nil, false
		}
	}
	for _, f := range q.filters {
		if !f.match(e.line) {
			return nil, false
		}
	}
	labs := map[string]string{}
	for k, v := range e.labels {
		labs[k] = v
	}
	if q.parser == "" {
		return labs, true
	}
	var kv [][2]string
	switch q.parser {
	case "json":
		var m map[string]any
		d := json.NewDecoder(strings.NewReader(e.line))
		d.UseNumber()
		if err := d.Decode(&m); err != nil || m == nil || d.More() {
			labs["__error__"] = "JSONParserErr"
			// Loki puts the parser's message in __error_details__; these
			// texts are Haystack's (internal/query's tests).
			labs["__error_details__"] = "invalid JSON"
			if json.Valid([]byte(e.line)) {
				labs["__error_details__"] = "not a JSON object"
			}
		} else {
			dtFlatten("", m, &kv)
		}
	case "logfmt":
		for _, tok := range dtSplitLogfmt(e.line) {
			k, v, ok := strings.Cut(tok, "=")
			if !ok {
				continue // a standalone key, dropped without --keep-empty
			}
			if strings.HasPrefix(v, `"`) {
				v, _ = strconv.Unquote(v)
			}
			kv = append(kv, [2]string{k, v})
		}
	}
	for _, p := range kv {
		name := dtSanitize(p[0])
		if _, ok := e.labels[name]; ok {
			name += "_extracted"
		}
		if _, ok := labs[name]; ok {
			continue // the first value wins
		}
		labs[name] = p[1]
	}
	if len(q.terms) == 0 {
		return labs, true
	}
	ok := q.terms[0].eval(labs)
	for i, t := range q.terms[1:] {
		v := t.eval(labs)
		if q.joins[i] == "or" {
			ok = ok || v
		} else {
			ok = ok && v
		}
	}
	return labs, ok
}

func dtSplitLogfmt(s string) []string {
	var out []string
	for len(s) > 0 {
		s = strings.TrimLeft(s, " ")
		if s == "" {
			break
		}
		i := 0
		for i < len(s) && s[i] != ' ' {
			if s[i] == '"' {
				i++
				for i < len(s) && s[i] != '"' {
					if s[i] == '\\' {
						i++
					}
					i++
				}
			}
			i++
		}
		i = min(i, len(s))
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

func (t *dtLabelTerm) eval(labs map[string]string) bool {
	if t.m != nil {
		return t.m.match(labs[t.m.name])
	}
	if labs["__error__"] != "" {
		return true // once __error__ is set, only string predicates filter
	}
	v, ok := labs[t.name]
	if !ok || v == "" {
		return false
	}
	var x float64
	if t.isDur {
		d, err := time.ParseDuration(v)
		if err != nil {
			panic("generated durations parse: " + v)
		}
		x = d.Seconds()
	} else {
		var err error
		if x, err = strconv.ParseFloat(v, 64); err != nil {
			panic("generated numbers parse: " + v)
		}
	}
	switch t.op {
	case ">":
		return x > t.num
	case ">=":
		return x >= t.num
	case "<":
		return x < t.num
	case "<=":
		return x <= t.num
	case "==":
		return x == t.num
	default:
		return x != t.num
	}
}

// ---- random queries ----

func dtRandQuery(r *rand.Rand) *dtQuery {
	q := &dtQuery{}
	pool := []func() *dtMatcher{
		func() *dtMatcher {
			return newDtMatcher("app", []string{"=", "!=", "=~", "!~"}[r.IntN(4)], []string{"api", "db", "nope", "a.*", "api|auth", "d.", ".+", "auth", `q"uote`}[r.IntN(9)])
		},
		func() *dtMatcher {
			return newDtMatcher("env", []string{"=", "!=", "=~", "!~"}[r.IntN(4)], []string{"prod", "dev", "", "prod|dev", "p.*", `back\\slash é`, `back\\\\slash é`}[r.IntN(7)])
		},
		func() *dtMatcher {
			return newDtMatcher("region", []string{"=", "!=", "=~", "!~"}[r.IntN(4)], []string{"eu-1", ".+", "eu-.*", "us-2", ""}[r.IntN(5)])
		},
		func() *dtMatcher { return newDtMatcher("level", []string{"=", "!="}[r.IntN(2)], "info") },
		func() *dtMatcher {
			return newDtMatcher("pod", []string{"=", "!=", "=~", "!~"}[r.IntN(4)], []string{"p01", "p0.*", ".+", "p[1-3]."}[r.IntN(4)])
		},
	}
	perm := r.Perm(len(pool))
	for _, i := range perm[:1+r.IntN(3)] {
		m := pool[i]()
		if (m.op == "=~" || m.op == "!~") && m.val == "" {
			m.val = ".*"
			m.re = regexp.MustCompile(`^(?:.*)$`)
		}
		q.sel = append(q.sel, m)
	}
	rejectsEmpty := false
	for _, m := range q.sel {
		rejectsEmpty = rejectsEmpty || !m.match("")
	}
	if !rejectsEmpty {
		q.sel = append([]*dtMatcher{newDtMatcher("app", "=~", ".+")}, q.sel...)
	}
	lits := []string{"error", "ERROR", "timeout", "é", "\r\n", "\r", "at=", "{", "", "bob", "ok", `"level":"error"`, "abcdefghij", "two", "\xff", "É", " "}
	res := []string{"err(or)?", "(?i)error", `^\{`, "t.*t", "[0-9]+ms", "é|ok", "line one.line two", `\r$`, "(?i)É", "^$", "^.{0,5}$", `^\s*$`, "ERROR|timeout", `\d`, "b.b", "(?i)naÏve", "(?i)kelvin", "(?i)status=", "(?i)STATUS=404", "(?i)k"}
	for range []int{0, 0, 0, 1, 1, 1, 2, 3}[r.IntN(8)] {
		f := &dtLineFilter{op: []string{"|=", "!=", "|~", "!~"}[r.IntN(4)]}
		for range 1 + r.IntN(2)*r.IntN(3) {
			if f.op == "|=" || f.op == "!=" {
				f.alts = append(f.alts, lits[r.IntN(len(lits))])
			} else {
				re := res[r.IntN(len(res))]
				f.alts = append(f.alts, re)
				f.res = append(f.res, regexp.MustCompile(`(?s)`+re))
			}
		}
		q.filters = append(q.filters, f)
	}
	switch k := r.IntN(10); {
	case k < 3:
		q.parser = "json"
	case k < 5:
		q.parser = "logfmt"
		q.filters = append(q.filters, &dtLineFilter{op: "|=", alts: []string{"at="}})
	}
	if q.parser != "" {
		for i := range r.IntN(3) {
			q.terms = append(q.terms, dtRandTerm(r, q.parser))
			if i > 0 {
				q.joins = append(q.joins, []string{"and", "or", ","}[r.IntN(3)])
			}
		}
	}
	return q
}

func dtRandTerm(r *rand.Rand, parser string) *dtLabelTerm {
	switch r.IntN(10) {
	case 0, 1:
		op := []string{">", ">=", "<", "<=", "==", "!="}[r.IntN(6)]
		n := r.IntN(8)
		return &dtLabelTerm{name: "n", op: op, num: float64(n), text: fmt.Sprintf("n %s %d", op, n)}
	case 2:
		if parser == "logfmt" {
			op := []string{">", "<="}[r.IntN(2)]
			ms := r.IntN(300)
			return &dtLabelTerm{name: "dur", op: op, num: float64(ms) / 1000, isDur: true, text: fmt.Sprintf("dur %s %dms", op, ms)}
		}
		fallthrough
	case 3:
		m := newDtMatcher("__error__", []string{"=", "!="}[r.IntN(2)], "")
		return &dtLabelTerm{m: m, text: m.String()}
	default:
		names := []string{"level", "level_extracted", "user", "app_extracted", "region", "region_extracted", "nested_k", "nested_deep_z", "user_id", "_1st", "msg", "flag", "app"}
		vals := map[string][]string{
			"level": {"error", "warn", "info", "err.*|warn"}, "level_extracted": {"error", "info"}, "user": {"bob", "b.b"},
			"app_extracted": {"x", "zz"}, "region": {"eu-1", ".+"}, "region_extracted": {"eu-1"}, "nested_k": {"v"}, "nested_deep_z": {"1"}, "user_id": {"7"}, "_1st": {"a"},
			"msg": {`hi é "q" error`, "error.*", ".*é.*", "(?s).*é.*", "multi\nline é error"}, "flag": {"true", ""}, "app": {"api", "a.*"},
		}
		name := names[r.IntN(len(names))]
		vs := vals[name]
		m := newDtMatcher(name, []string{"=", "!=", "=~", "!~"}[r.IntN(4)], vs[r.IntN(len(vs))])
		return &dtLabelTerm{m: m, text: m.String()}
	}
}

// ---- response decoding ----

type dtStreamsResp struct {
	Status string `json:"status"`
	Data   struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Stream map[string]string `json:"stream"`
			Values [][2]string       `json:"values"`
		} `json:"result"`
	} `json:"data"`
}

type dtMatrixResp struct {
	Status string `json:"status"`
	Data   struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]json.Number  `json:"values"`
			Value  []json.Number     `json:"value"`
		} `json:"result"`
	} `json:"data"`
}

// dtJSONLine is a line as it reads after a JSON round trip (invalid UTF-8
// becomes U+FFFD), which is all a JSON response can carry.
func dtJSONLine(s string) string {
	b, _ := json.Marshal(s)
	var out string
	json.Unmarshal(b, &out)
	return out
}

// dtSecToNs reads a decimal number of seconds exactly.
func dtSecToNs(n json.Number) (int64, error) {
	s := string(n)
	ip, fp, _ := strings.Cut(s, ".")
	sec, err := strconv.ParseInt(ip, 10, 64)
	if err != nil {
		return 0, err
	}
	if len(fp) > 9 {
		return 0, fmt.Errorf("more than ns precision: %s", s)
	}
	fp += strings.Repeat("0", 9-len(fp))
	ns, err := strconv.ParseInt(fp, 10, 64)
	if err != nil {
		return 0, err
	}
	return sec*1e9 + ns, nil
}

// dtTimeParam formats t in one of the accepted forms.
func dtTimeParam(r *rand.Rand, t int64) string {
	switch k := r.IntN(4); {
	case k == 0:
		return time.Unix(0, t).UTC().Format(time.RFC3339Nano)
	case k == 1 && t%125e6 == 0 && t%1e9 != 0:
		// Only eighths of a second, which a float64 holds exactly: other
		// fractions and whole seconds as a bare integer are separate
		// findings (notes/api-repro_test.go.txt), not drawn here.
		return strconv.FormatInt(t/1e9, 10) + "." + strings.TrimRight(fmt.Sprintf("%09d", t%1e9), "0")
	default:
		return strconv.FormatInt(t, 10)
	}
}

// ---- the test ----

type dtRun struct {
	t       *testing.T
	env     *testEnv
	r       *rand.Rand
	data    map[string][]dtEntry // tenant -> entries
	nReq    int                  // HTTP requests compared
	nQuery  int                  // queries drawn (a native search may take several pages)
	nonEmpt int                  // queries whose expected answer is not empty
}

func (d *dtRun) get(tenant, path string, params url.Values) (int, []byte) {
	d.t.Helper()
	d.nReq++
	var req *http.Request
	var err error
	if strings.HasPrefix(path, "/loki/") && d.r.IntN(5) == 0 { // Loki's query endpoints also take POST forms
		req, err = http.NewRequest("POST", d.env.ts.URL+path, strings.NewReader(params.Encode()))
		if err == nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	} else {
		req, err = http.NewRequest("GET", d.env.ts.URL+path+"?"+params.Encode(), nil)
	}
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("X-Scope-OrgID", tenant)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (d *dtRun) tenant() string {
	switch d.r.IntN(16) {
	case 0, 1:
		return "other"
	case 2:
		if d.data["third"] != nil {
			return "third"
		}
	case 3:
		return "ghost" // never pushed to: no data, no directory
	}
	return DefaultTenant
}

// randRange picks [start, end) around the data: often exactly at entry
// times, sometimes the defaults.
func (d *dtRun) randRange(es []dtEntry) (start, end int64, params url.Values) {
	params = url.Values{}
	pick := func() int64 {
		switch k := d.r.IntN(6); {
		case k < 3 && len(es) > 0:
			return es[d.r.IntN(len(es))].ts
		case k < 4:
			return dtT0 + int64(d.r.IntN(62))*1e9 - 1e9
		case k < 5:
			return dtT0 + int64(d.r.IntN(480))*125e6
		default:
			return dtT0 + int64(d.r.IntN(60e9))
		}
	}
	start, end = pick(), pick()
	if start > end {
		start, end = end, start
	}
	now := base
	switch d.r.IntN(10) {
	case 0: // defaults: the hour before now
		return now - 3600e9, now, params
	case 1:
		params.Set("end", dtTimeParam(d.r, end))
		return end - 3600e9, end, params
	}
	params.Set("start", dtTimeParam(d.r, start))
	params.Set("end", dtTimeParam(d.r, end))
	return start, end, params
}

type dtHit struct {
	ts     int64
	line   string
	labels string
}

func (d *dtRun) logQuery() {
	tenant := d.tenant()
	es := d.data[tenant]
	q := dtRandQuery(d.r)
	start, end, params := d.randRange(es)
	params.Set("query", q.String())
	limit := 100
	switch k := d.r.IntN(5); {
	case k < 3:
		limit = 1 + d.r.IntN(40)
		params.Set("limit", strconv.Itoa(limit))
	case k < 4:
		limit = 1000
		params.Set("limit", "1000")
	}
	backward := true
	switch d.r.IntN(3) {
	case 0:
		params.Set("direction", "forward")
		backward = false
	case 1:
		params.Set("direction", "backward")
	}
	desc := fmt.Sprintf("query_range tenant=%s %s", tenant, params.Encode())

	var want []dtHit
	for i := range es {
		e := &es[i]
		if e.ts < start || e.ts >= end {
			continue
		}
		labs, ok := q.eval(e)
		if !ok {
			continue
		}
		want = append(want, dtHit{e.ts, dtJSONLine(e.line), dtKey(labs)})
	}
	better := func(a, b int64) bool { // a is closer to the direction's origin
		if backward {
			return a > b
		}
		return a < b
	}
	sort.SliceStable(want, func(i, j int) bool { return better(want[i].ts, want[j].ts) })

	code, body := d.get(tenant, "/loki/api/v1/query_range", params)
	if code != 200 {
		d.t.Fatalf("%s: status %d: %s", desc, code, body)
	}
	var resp dtStreamsResp
	if err := json.Unmarshal(body, &resp); err != nil {
		d.t.Fatalf("%s: %v: %s", desc, err, body)
	}
	if resp.Status != "success" || resp.Data.ResultType != "streams" {
		d.t.Fatalf("%s: status %q resultType %q", desc, resp.Status, resp.Data.ResultType)
	}
	var got []dtHit
	seenStream := map[string]bool{}
	for _, st := range resp.Data.Result {
		k := dtKey(st.Stream)
		if seenStream[k] {
			d.t.Fatalf("%s: stream %s appears twice", desc, k)
		}
		seenStream[k] = true
		if len(st.Values) == 0 {
			d.t.Fatalf("%s: stream %s without values", desc, k)
		}
		var prev int64
		for i, v := range st.Values {
			ts, err := strconv.ParseInt(v[0], 10, 64)
			if err != nil {
				d.t.Fatalf("%s: bad timestamp %q", desc, v[0])
			}
			if i > 0 && better(ts, prev) {
				d.t.Fatalf("%s: stream %s out of order: %d after %d (backward=%v)", desc, k, ts, prev, backward)
			}
			prev = ts
			got = append(got, dtHit{ts, v[1], k})
		}
	}
	hitStr := func(h dtHit) string { return fmt.Sprintf("%d %s %q", h.ts, h.labels, h.line) }
	n := min(limit, len(want))
	if len(got) != n {
		d.t.Fatalf("%s: %d entries, want %d (of %d matching)\nfirst want: %v", desc, len(got), n, len(want), want[:min(3, len(want))])
	}
	if n == 0 {
		return
	}
	d.nonEmpt++
	// All entries strictly better than the cut must be there; at the cut
	// any of the entries with that time.
	cut := want[n-1].ts
	wantSet := map[string]int{}
	cutSet := map[string]int{}
	for _, h := range want {
		switch {
		case better(h.ts, cut):
			wantSet[hitStr(h)]++
		case h.ts == cut:
			cutSet[hitStr(h)]++
		}
	}
	for _, h := range got {
		s := hitStr(h)
		switch {
		case wantSet[s] > 0:
			wantSet[s]--
		case cutSet[s] > 0:
			cutSet[s]--
		default:
			var near []string
			for _, w := range want {
				if w.ts == h.ts {
					near = append(near, hitStr(w))
				}
			}
			d.t.Fatalf("%s: unexpected entry %s\n oracle entries at that time: %q", desc, s, near)
		}
	}
	for s, c := range wantSet {
		if c > 0 {
			d.t.Fatalf("%s: missing entry %s", desc, s)
		}
	}
}

// metricQuery runs a range or instant metric query and compares every
// series and point.
func (d *dtRun) metricQuery() {
	tenant := d.tenant()
	es := d.data[tenant]
	q := dtRandQuery(d.r)
	if q.parser != "" {
		// Loki fails a metric query whose series carry __error__ (a
		// pipeline error, 400), and so does Haystack
		// (TestLokiMetricPipelineError): metric queries here drop them
		// as Loki's error message advises.
		m := newDtMatcher("__error__", "=", "")
		if len(q.terms) > 0 {
			q.joins = append(q.joins, "and")
		}
		q.terms = append(q.terms, &dtLabelTerm{m: m, text: m.String()})
	}
	fn := []string{"count_over_time", "rate", "bytes_over_time", "bytes_rate"}[d.r.IntN(4)]
	rng := []int64{500e6, 1e9, 2e9, 5e9, 10e9, 30e9, 60e9}[d.r.IntN(7)]
	rt := time.Duration(rng).String() // 500ms, 1s, ..., 1m0s
	if rng == 60e9 {
		rt = "1m"
	}
	inner := fmt.Sprintf("%s(%s [%s])", fn, q.String(), rt)
	type aggT struct {
		op      string
		by      []string
		without bool
	}
	aggs := []aggT{{}, {op: "sum"}, {op: "sum", by: []string{"app"}}, {op: "sum", by: []string{"env"}}, {op: "count", by: []string{"app"}},
		{op: "max", by: []string{"app"}}, {op: "min"}, {op: "avg", by: []string{"env"}}, {op: "sum", by: []string{"env"}, without: true}, {op: "sum", by: []string{"level", "app"}}}
	agg := aggs[d.r.IntN(len(aggs))]
	expr := inner
	if agg.op != "" {
		g := ""
		if agg.by != nil {
			w := "by"
			if agg.without {
				w = "without"
			}
			g = fmt.Sprintf(" %s (%s)", w, strings.Join(agg.by, ", "))
		}
		if d.r.IntN(2) == 0 {
			expr = fmt.Sprintf("%s%s (%s)", agg.op, g, inner)
		} else {
			expr = fmt.Sprintf("%s (%s)%s", agg.op, inner, g)
		}
	}
	instant := d.r.IntN(4) == 0
	params := url.Values{"query": {expr}}
	var steps []int64
	var step int64
	if instant {
		at := dtT0 + int64(d.r.IntN(64)-2)*1e9
		params.Set("time", dtTimeParam(d.r, at))
		steps = []int64{at}
	} else {
		start := dtT0 + int64(d.r.IntN(70)-5)*1e9
		step = []int64{500e6, 1e9, 2e9, 3e9, 7e9, 10e9}[d.r.IntN(6)]
		end := start + int64(d.r.IntN(40))*step + int64(d.r.IntN(3))*step/2
		params.Set("start", dtTimeParam(d.r, start))
		params.Set("end", dtTimeParam(d.r, end))
		switch d.r.IntN(3) {
		case 0:
			params.Set("step", strconv.FormatFloat(float64(step)/1e9, 'f', -1, 64)) // seconds: "0.5", "3"
		default:
			params.Set("step", time.Duration(step).String())
		}
		for t := start; t <= end; t += step {
			steps = append(steps, t)
		}
	}
	desc := fmt.Sprintf("metric tenant=%s instant=%v %s", tenant, instant, params.Encode())

	// Oracle: per result label set, matches with times and bytes.
	type acc struct {
		labels map[string]string
		ts     []int64
		size   []int64
	}
	series := map[string]*acc{}
	for i := range es {
		e := &es[i]
		labs, ok := q.eval(e)
		if !ok {
			continue
		}
		k := dtKey(labs)
		if series[k] == nil {
			series[k] = &acc{labels: labs}
		}
		series[k].ts = append(series[k].ts, e.ts)
		series[k].size = append(series[k].size, int64(len(e.line)))
	}
	type pt struct {
		sum, min, max float64
		n             int
	}
	// out: group key -> time -> value.
	out := map[string]map[int64]*pt{}
	for _, a := range series {
		g := a.labels
		if agg.op != "" {
			g = map[string]string{}
			for k, v := range a.labels {
				if slices.Contains(agg.by, k) != agg.without {
					g[k] = v
				}
			}
		}
		gk := dtKey(g)
		for _, t := range steps {
			var n, b int64
			for i, ts := range a.ts {
				if ts > t-rng && ts <= t {
					n++
					b += a.size[i]
				}
			}
			if n == 0 {
				continue
			}
			v := oracleWindowValue(fn, n, b, rng)
			if out[gk] == nil {
				out[gk] = map[int64]*pt{}
			}
			p := out[gk][t]
			if p == nil {
				p = &pt{min: v, max: v}
				out[gk][t] = p
			}
			p.sum += v
			p.min, p.max = min(p.min, v), max(p.max, v)
			p.n++
		}
	}
	value := func(p *pt) float64 {
		switch agg.op {
		case "", "sum":
			return p.sum
		case "count":
			return float64(p.n)
		case "min":
			return p.min
		case "max":
			return p.max
		default:
			return p.sum / float64(p.n)
		}
	}

	path := "/loki/api/v1/query_range"
	if instant {
		path = "/loki/api/v1/query"
	}
	code, body := d.get(tenant, path, params)
	if code != 200 {
		d.t.Fatalf("%s: status %d: %s", desc, code, body)
	}
	var resp dtMatrixResp
	if err := json.Unmarshal(body, &resp); err != nil {
		d.t.Fatalf("%s: %v: %s", desc, err, body)
	}
	wantType := "matrix"
	if instant {
		wantType = "vector"
	}
	if resp.Status != "success" || resp.Data.ResultType != wantType {
		d.t.Fatalf("%s: status %q resultType %q, want %s", desc, resp.Status, resp.Data.ResultType, wantType)
	}
	gotKeys := map[string]bool{}
	for _, se := range resp.Data.Result {
		k := dtKey(se.Metric)
		if gotKeys[k] {
			d.t.Fatalf("%s: series %s twice", desc, k)
		}
		gotKeys[k] = true
		w := out[k]
		if w == nil {
			d.t.Fatalf("%s: unexpected series %s; oracle has %d series", desc, k, len(out))
		}
		vals := se.Values
		if instant {
			if len(se.Value) != 2 {
				d.t.Fatalf("%s: series %s: value %v", desc, k, se.Value)
			}
			vals = [][2]json.Number{{se.Value[0], se.Value[1]}}
		}
		if len(vals) != len(w) {
			var wts []int64
			for t := range w {
				wts = append(wts, t)
			}
			slices.Sort(wts)
			d.t.Fatalf("%s: series %s: %d points, want %d at %v\n got %v", desc, k, len(vals), len(w), wts, vals)
		}
		var prev int64
		for i, v := range vals {
			t, err := dtSecToNs(v[0])
			if err != nil {
				d.t.Fatalf("%s: %v", desc, err)
			}
			if i > 0 && t <= prev {
				d.t.Fatalf("%s: series %s: times not ascending", desc, k)
			}
			prev = t
			p := w[t]
			if p == nil {
				d.t.Fatalf("%s: series %s: unexpected point at %d (%s)", desc, k, t, v[0])
			}
			gv, err := strconv.ParseFloat(string(v[1]), 64)
			if err != nil {
				d.t.Fatalf("%s: value %q", desc, v[1])
			}
			wv := value(p)
			// Counts and byte sums are exact; rates are sums of quotients,
			// which may round differently in another summation order.
			if gv != wv && !(strings.Contains(fn, "rate") && math.Abs(gv-wv) <= 1e-12*math.Abs(wv)) {
				d.t.Fatalf("%s: series %s at %s: %v, want %v", desc, k, v[0], gv, wv)
			}
		}
	}
	for k := range out {
		if !gotKeys[k] {
			d.t.Fatalf("%s: missing series %s", desc, k)
		}
	}
	if len(out) > 0 {
		d.nonEmpt++
	}
}

// metaQuery checks labels, label values and series.
func (d *dtRun) metaQuery() {
	tenant := d.tenant()
	es := d.data[tenant]
	params := url.Values{}
	var start, end int64
	exact := false
	switch d.r.IntN(5) {
	case 0: // defaults: the 6 hours before now hold everything
		start, end, exact = base-6*3600e9, base, true
	case 1: // before or after all data: nothing
		if d.r.IntN(2) == 0 {
			start, end = dtT0-100e9, dtT0-1
		} else {
			start, end = dtT0+61e9, dtT0+200e9
		}
		exact = true
	default:
		start, end, _ = d.randRange(es)
	}
	if !exact || start != base-6*3600e9 {
		params.Set("start", dtTimeParam(d.r, start))
		params.Set("end", dtTimeParam(d.r, end))
	}
	var sel *dtQuery
	var matches []*dtQuery
	kind := d.r.IntN(3)
	switch kind {
	case 0, 1:
		if d.r.IntN(2) == 0 {
			sel = dtRandQuery(d.r)
			sel.filters, sel.parser, sel.terms = nil, "", nil
			params.Set("query", sel.String())
		}
	case 2:
		for range d.r.IntN(3) {
			m := dtRandQuery(d.r)
			m.filters, m.parser, m.terms = nil, "", nil
			matches = append(matches, m)
			params.Add("match[]", m.String())
		}
	}
	admits := func(e *dtEntry) bool {
		if sel != nil {
			_, ok := sel.eval(e)
			return ok
		}
		if len(matches) == 0 {
			return true
		}
		for _, m := range matches {
			if _, ok := m.eval(e); ok {
				return true
			}
		}
		return false
	}
	lower := map[string]map[string]string{} // streams with entries in [start, end]
	upper := map[string]map[string]string{} // streams with entries at all
	for i := range es {
		e := &es[i]
		if !admits(e) {
			continue
		}
		labs := dtStreamLabels(e.labels)
		k := dtKey(labs)
		upper[k] = labs
		if e.ts >= start && e.ts <= end {
			lower[k] = labs
		}
	}
	if exact {
		upper = lower
	}
	var path, name string
	switch kind {
	case 0:
		path = "/loki/api/v1/labels"
	case 1:
		name = []string{"app", "env", "region", "level", "pod", "nothing"}[d.r.IntN(6)]
		path = "/loki/api/v1/label/" + name + "/values"
	default:
		path = "/loki/api/v1/series"
	}
	desc := fmt.Sprintf("%s tenant=%s %s", path, tenant, params.Encode())
	code, body := d.get(tenant, path, params)
	if code != 200 {
		d.t.Fatalf("%s: status %d: %s", desc, code, body)
	}
	var resp struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &resp); err != nil || resp.Status != "success" {
		d.t.Fatalf("%s: %v: %s", desc, err, body)
	}
	// Turn both bounds and the answer into sorted string sets.
	set := func(m map[string]map[string]string) []string {
		var out []string
		for k, labs := range m {
			switch kind {
			case 0:
				for n := range labs {
					out = append(out, n)
				}
			case 1:
				if v := labs[name]; v != "" {
					out = append(out, v)
				}
			default:
				out = append(out, k)
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	var got []string
	if kind == 2 {
		var ss []map[string]string
		if err := json.Unmarshal(resp.Data, &ss); err != nil {
			d.t.Fatalf("%s: %v", desc, err)
		}
		for _, s := range ss {
			got = append(got, dtKey(s))
		}
	} else if err := json.Unmarshal(resp.Data, &got); err != nil {
		d.t.Fatalf("%s: %v", desc, err)
	}
	if got == nil {
		got = []string{}
	}
	if kind != 2 && !slices.IsSorted(got) {
		d.t.Fatalf("%s: not sorted: %q", desc, got)
	}
	sorted := slices.Clone(got)
	slices.Sort(sorted)
	if len(slices.Compact(slices.Clone(sorted))) != len(sorted) {
		d.t.Fatalf("%s: duplicates: %q", desc, got)
	}
	lo, hi := set(lower), set(upper)
	for _, s := range lo {
		if !slices.Contains(sorted, s) {
			d.t.Fatalf("%s: missing %q (got %q)", desc, s, got)
		}
	}
	for _, s := range sorted {
		if !slices.Contains(hi, s) {
			d.t.Fatalf("%s: unexpected %q (got %q, allowed %q)", desc, s, got, hi)
		}
	}
	if len(lo) > 0 {
		d.nonEmpt++
	}
}

// ---- the native API (internal/server/web/API.md) ----

// dtNative is a native query: LogQL (q) or a plain-text literal.
type dtNative struct {
	logql *dtQuery
	text  string
	fold  bool
}

func dtASCIILower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// eval is dtQuery.eval, or for plain text a substring test (fold: ASCII
// letters only, as the native API folds).
func (n *dtNative) eval(e *dtEntry) (map[string]string, bool) {
	if n.logql != nil {
		return n.logql.eval(e)
	}
	ok := strings.Contains(e.line, n.text)
	if n.fold {
		ok = strings.Contains(dtASCIILower(e.line), dtASCIILower(n.text))
	}
	return e.labels, ok
}

func (d *dtRun) randNative() (*dtNative, url.Values) {
	p := url.Values{}
	n := &dtNative{}
	if d.r.IntN(3) == 0 {
		n.text = []string{"", "error", "ERROR", "Error", "TIMEOUT", "é", "É", "\r\n", "at=", "\"level\":\"", "a.b*", "x{y}", "\xff", "NAÏVE", "abcdefghijABC", "kelvin", "STATUS"}[d.r.IntN(17)]
		n.fold = d.r.IntN(2) == 0
		p.Set("q", n.text)
		if n.fold {
			p.Set("fold", "1")
		}
		if n.text != "" && d.r.IntN(4) == 0 {
			p.Set("q", " \t"+n.text) // leading white space: still plain text
			n.text = " \t" + n.text
		}
	} else {
		n.logql = dtRandQuery(d.r)
		p.Set("q", n.logql.String())
	}
	return n, p
}

// randNativeRange picks [start, end], both inclusive, often at entry times;
// either may be absent (the beginning of the store, now).
func (d *dtRun) randNativeRange(es []dtEntry, p url.Values) (int64, int64) {
	start, end, _ := d.randRange(es)
	if start == base-3600e9 && end == base {
		return math.MinInt64, base // the defaults of randRange: absent here
	}
	if d.r.IntN(8) == 0 {
		p.Set("end", strconv.FormatInt(end, 10))
		return math.MinInt64, end
	}
	p.Set("start", strconv.FormatInt(start, 10))
	if d.r.IntN(8) == 0 {
		return start, base
	}
	p.Set("end", strconv.FormatInt(end, 10))
	return start, end
}

type dtNativeLine struct {
	TS         string            `json:"ts"`
	Time       string            `json:"time"`
	Labels     map[string]string `json:"labels"`
	Line       string            `json:"line"`
	LineBase64 []byte            `json:"line_base64"`
	Done       bool              `json:"done"`
	Count      int               `json:"count"`
	Limited    bool              `json:"limited"`
	Error      string            `json:"error"`
}

// nativeSearch pages through /api/v1/search as the UI does ("load more"
// with end=T or start=T and limit=page+k, dropping the k entries at T
// already shown) and checks that the pages add up to the oracle's
// entries, each exactly once, in order.
func (d *dtRun) nativeSearch() {
	tenant := d.tenant()
	es := d.data[tenant]
	n, p := d.randNative()
	start, end := d.randNativeRange(es, p)
	backward := true
	switch d.r.IntN(3) {
	case 0:
		p.Set("direction", "forward")
		backward = false
	case 1:
		p.Set("direction", "backward")
	}
	page := []int{1, 2, 3, 7, 50, 500}[d.r.IntN(6)]
	want := map[string]int{}
	total := 0
	for i := range es {
		e := &es[i]
		if e.ts < start || e.ts > end {
			continue
		}
		labs, ok := n.eval(e)
		if !ok {
			continue
		}
		want[fmt.Sprintf("%d %s %q", e.ts, dtKey(dtStreamLabels(labs)), e.line)]++
		total++
	}
	page = max(page, total/20) // at most about 20 pages
	desc := fmt.Sprintf("search tenant=%s %s page=%d", tenant, p.Encode(), page)
	var shown []dtNativeLine
	for pages := 0; ; pages++ {
		if pages > total+5 {
			d.t.Fatalf("%s: paging does not end (%d pages, %d entries shown of %d)", desc, pages, len(shown), total)
		}
		q := url.Values{}
		for k, v := range p {
			q[k] = v
		}
		k := 0
		if len(shown) > 0 {
			last := shown[len(shown)-1].TS
			for _, l := range shown {
				if l.TS == last {
					k++
				}
			}
			if backward {
				q.Set("end", last)
			} else {
				q.Set("start", last)
			}
		}
		q.Set("limit", strconv.Itoa(page+k))
		code, body := d.get(tenant, "/api/v1/search", q)
		if code != 200 {
			d.t.Fatalf("%s: status %d: %s", desc, code, body)
		}
		lines := bytes.Split(bytes.TrimSuffix(body, []byte("\n")), []byte("\n"))
		var trailer dtNativeLine
		if err := json.Unmarshal(lines[len(lines)-1], &trailer); err != nil || !trailer.Done {
			d.t.Fatalf("%s: bad trailer %q (%v)", desc, lines[len(lines)-1], err)
		}
		lines = lines[:len(lines)-1]
		if trailer.Count != len(lines) {
			d.t.Fatalf("%s: trailer count %d, %d lines", desc, trailer.Count, len(lines))
		}
		if len(lines) > page+k {
			d.t.Fatalf("%s: %d lines over limit %d", desc, len(lines), page+k)
		}
		var got []dtNativeLine
		for _, l := range lines {
			var nl dtNativeLine
			if err := json.Unmarshal(l, &nl); err != nil || nl.Done || nl.Error != "" {
				d.t.Fatalf("%s: bad line %q (%v)", desc, l, err)
			}
			ts, err := strconv.ParseInt(nl.TS, 10, 64)
			if err != nil || time.Unix(0, ts).UTC().Format(time.RFC3339Nano) != nl.Time {
				d.t.Fatalf("%s: ts %q time %q", desc, nl.TS, nl.Time)
			}
			if utf8.ValidString(nl.Line) && nl.LineBase64 == nil {
				nl.LineBase64 = []byte(nl.Line)
			}
			got = append(got, nl)
		}
		// Drop the k entries at the edge time shown already.
		if len(shown) > 0 {
			edge := shown[len(shown)-1].TS
			drop := 0
			for drop < len(got) && drop < k && got[drop].TS == edge {
				drop++
			}
			if drop != min(k, len(got)) {
				d.t.Fatalf("%s: page after %d entries starts with %d entries at %s, want %d", desc, len(shown), drop, edge, k)
			}
			got = got[drop:]
		}
		shown = append(shown, got...)
		if !trailer.Limited {
			break
		}
		if len(got) == 0 && len(lines) < page+k {
			d.t.Fatalf("%s: limited with %d of %d lines", desc, len(lines), page+k)
		}
		if len(got) == 0 {
			break // limited at exactly the last entry: nothing more
		}
	}
	for i, l := range shown {
		ts, _ := strconv.ParseInt(l.TS, 10, 64)
		if i > 0 {
			prev, _ := strconv.ParseInt(shown[i-1].TS, 10, 64)
			if backward && ts > prev || !backward && ts < prev {
				d.t.Fatalf("%s: entry %d at %d after %d", desc, i, ts, prev)
			}
		}
		key := fmt.Sprintf("%d %s %q", ts, dtKey(l.Labels), l.LineBase64)
		if want[key] == 0 {
			d.t.Fatalf("%s: unexpected or repeated entry %s (entry %d of %d shown; oracle %d)", desc, key, i, len(shown), total)
		}
		want[key]--
	}
	if len(shown) != total {
		d.t.Fatalf("%s: %d entries shown over all pages, oracle %d", desc, len(shown), total)
	}
	if total > 0 {
		d.nonEmpt++
	}
}

// nativeHits checks /api/v1/hits and /api/v1/facets.
func (d *dtRun) nativeHits() {
	tenant := d.tenant()
	es := d.data[tenant]
	n, p := d.randNative()
	start, end := d.randNativeRange(es, p)
	var step int64
	if d.r.IntN(2) == 0 {
		step = []int64{1, 2, 5, 60}[d.r.IntN(4)] * 1e9
		p.Set("step", strconv.FormatInt(step/1e9, 10))
	}
	desc := fmt.Sprintf("hits tenant=%s %s", tenant, p.Encode())
	var matches []int64
	facets := map[string]map[string]int64{}
	for i := range es {
		e := &es[i]
		if e.ts < start || e.ts > end {
			continue
		}
		labs, ok := n.eval(e)
		if !ok {
			continue
		}
		matches = append(matches, e.ts)
		for k, v := range dtStreamLabels(labs) { // stream labels: no metadata
			if v == "" {
				continue
			}
			if facets[k] == nil {
				facets[k] = map[string]int64{}
			}
			facets[k][v]++
		}
	}
	code, body := d.get(tenant, "/api/v1/hits", p)
	if code != 200 {
		d.t.Fatalf("%s: status %d: %s", desc, code, body)
	}
	var h struct {
		StepMS  int64 `json:"step_ms"`
		Buckets []struct {
			T     int64 `json:"t"`
			Count int64 `json:"count"`
		} `json:"buckets"`
		Total int64 `json:"total"`
	}
	if err := json.Unmarshal(body, &h); err != nil {
		d.t.Fatalf("%s: %v: %s", desc, err, body)
	}
	if step != 0 && h.StepMS*1e6 != step || h.StepMS <= 0 {
		d.t.Fatalf("%s: step_ms %d", desc, h.StepMS)
	}
	w := h.StepMS * 1e6
	wantB := map[int64]int64{}
	for _, ts := range matches {
		b := ts / w * w
		if ts < 0 && ts%w != 0 {
			b -= w
		}
		wantB[b/1e6]++
	}
	if h.Total != int64(len(matches)) {
		d.t.Fatalf("%s: total %d, want %d", desc, h.Total, len(matches))
	}
	var prev int64 = math.MinInt64
	for _, b := range h.Buckets {
		if b.T <= prev || b.T%h.StepMS != 0 {
			d.t.Fatalf("%s: bucket t %d (step %d ms, previous %d)", desc, b.T, h.StepMS, prev)
		}
		prev = b.T
		if b.Count != wantB[b.T] {
			d.t.Fatalf("%s: bucket %d: %d, want %d", desc, b.T, b.Count, wantB[b.T])
		}
		delete(wantB, b.T)
	}
	for t, c := range wantB {
		d.t.Fatalf("%s: bucket %d (%d entries) missing", desc, t, c)
	}

	p.Del("step")
	code, body = d.get(tenant, "/api/v1/facets", p)
	if code != 200 {
		d.t.Fatalf("facets %s: status %d: %s", desc, code, body)
	}
	var f struct {
		Labels map[string]map[string]int64 `json:"labels"`
	}
	if err := json.Unmarshal(body, &f); err != nil {
		d.t.Fatalf("facets %s: %v", desc, err)
	}
	// Values per label may be capped (maxFacetValues, the largest counts);
	// the counts sent are exact.
	for name, vals := range facets {
		got := f.Labels[name]
		if len(got) != min(len(vals), maxFacetValues) {
			d.t.Fatalf("facets %s: label %s: %d values, want %d", desc, name, len(got), min(len(vals), maxFacetValues))
		}
		least := int64(math.MaxInt64)
		for v, c := range got {
			if vals[v] != c {
				d.t.Fatalf("facets %s: %s=%q: %d, want %d", desc, name, v, c, vals[v])
			}
			least = min(least, c)
		}
		for v, c := range vals {
			if _, ok := got[v]; !ok && c > least {
				d.t.Fatalf("facets %s: %s=%q (%d entries) left out for a smaller count %d", desc, name, v, c, least)
			}
		}
	}
	for name := range f.Labels {
		if facets[name] == nil {
			d.t.Fatalf("facets %s: unexpected label %s", desc, name)
		}
	}
	if len(matches) > 0 {
		d.nonEmpt++
	}
}

func TestDifferentialLokiAPI(t *testing.T) {
	total := 0
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { total += dtScenario(t, seed) })
	}
	t.Logf("%d requests compared in all", total)
}

// dtScenario pushes and queries one random data set; it returns the
// number of requests compared.
func dtScenario(t *testing.T, seed uint64) int {
	env := newEnv(t, func(c *Config) {
		c.Store = store.Options{HeadBytes: 16 << 10, Segment: segment.Options{BlockSize: 2 << 10}}
		if seed%2 == 1 { // tiny blocks: most hold one or two entries
			c.Store = store.Options{HeadBytes: 4 << 10, Segment: segment.Options{BlockSize: 256}}
		}
	})
	r := rand.New(rand.NewPCG(20261130, seed))
	d := &dtRun{t: t, env: env, r: r, data: map[string][]dtEntry{}}
	gen := &dtGen{r: r, seen: map[string]bool{}, pods: seed%4 >= 2}
	push := func(n int) {
		for range n {
			tenant := DefaultTenant
			if r.IntN(6) == 0 {
				tenant = "other"
			}
			format := r.IntN(3)
			es := gen.batch(1+r.IntN(60), format != 0)
			if err := dtPush(d.env, r, tenant, es, format); err != nil {
				t.Fatal(err)
			}
			d.data[tenant] = append(d.data[tenant], dtStored(es, env.levelsOn())...)
		}
	}
	queries := func(n int) {
		for range n {
			d.nQuery++
			switch k := r.IntN(13); {
			case k < 6:
				d.logQuery()
			case k < 8:
				d.metricQuery()
			case k < 10:
				d.metaQuery()
			case k < 12:
				d.nativeSearch()
			default:
				d.nativeHits()
			}
		}
	}
	tenantWriter := func() *store.Writer {
		ts, err := d.env.srv.openTenant(DefaultTenant, false)
		if err != nil || ts == nil {
			t.Fatalf("tenant: %v", err)
		}
		return ts.w
	}
	compact := func() {
		if _, err := tenantWriter().Compact(context.Background(), store.CompactOptions{Segment: &segment.Options{BlockSize: 4 << 10}}); err != nil {
			t.Error(err)
		}
	}
	push(20)
	queries(150) // head plus the segments of background flushes
	if err := tenantWriter().Flush(); err != nil {
		t.Fatal(err)
	}
	push(20)
	if err := tenantWriter().Flush(); err != nil {
		t.Fatal(err)
	}
	compact()
	queries(150)
	push(15) // into the head again, over the same time range
	if err := tenantWriter().Flush(); err != nil {
		t.Fatal(err)
	}
	push(5)
	// Queries while a compaction swaps segments under them, and while
	// another tenant's pushes go on.
	done := make(chan struct{})
	go func() { defer close(done); compact() }()
	thirdDone := make(chan []dtEntry)
	go func() {
		r := rand.New(rand.NewPCG(seed, 99))
		g := &dtGen{r: r, seen: map[string]bool{}}
		var all []dtEntry
		defer func() { thirdDone <- all }()
		for range 15 {
			es := g.batch(1+r.IntN(40), false)
			if err := dtPush(d.env, r, "third", es, 0); err != nil {
				t.Error(err)
				return
			}
			all = append(all, dtStored(es, env.levelsOn())...)
		}
	}()
	queries(100)
	<-done
	d.data["third"] = <-thirdDone
	queries(150)
	if st := tenantWriter().Stats(); st.Segments < 2 {
		t.Errorf("want several segments, have %d", st.Segments)
	}
	// A restart over the same directory: the stores reopen from their
	// segments and write-ahead logs.
	cfg := d.env.srv.cfg
	d.env.ts.Close()
	if err := d.env.srv.Close(); err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.OpenExisting(); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})
	d.env = &testEnv{t: t, srv: srv, ts: hs}
	queries(60)
	push(5)
	queries(60)

	// A crash: every tenant flushed, a few small batches acknowledged (in
	// the write-ahead log only, too small to start a background flush),
	// and the directory copied as it is, as a power cut would leave it.
	// A server on the copy must recover every acknowledged entry.
	d.env.srv.mu.Lock()
	var writers []*store.Writer
	for _, ts := range d.env.srv.tenants {
		writers = append(writers, ts.w)
	}
	d.env.srv.mu.Unlock()
	for _, w := range writers {
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		var es []dtEntry
		format := r.IntN(3)
		for _, e := range gen.batch(20, format != 0) {
			if len(e.line) < 100 {
				es = append(es, e)
			}
		}
		if err := dtPush(d.env, r, DefaultTenant, es, format); err != nil {
			t.Fatal(err)
		}
		d.data[DefaultTenant] = append(d.data[DefaultTenant], dtStored(es, env.levelsOn())...)
	}
	if st := tenantWriter().Stats(); st.HeadEntries == 0 {
		t.Fatalf("want entries in the head before the crash")
	}
	if _, err := os.Stat(cfg.DataDir + "/ghost"); !os.IsNotExist(err) {
		t.Errorf("queries to a tenant without data made its directory: %v", err)
	}
	crashDir := t.TempDir()
	if err := os.CopyFS(crashDir, os.DirFS(cfg.DataDir)); err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = crashDir
	srv2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv2.OpenExisting(); err != nil {
		t.Fatal(err)
	}
	hs2 := httptest.NewServer(srv2.Handler())
	t.Cleanup(func() {
		hs2.Close()
		if err := srv2.Close(); err != nil {
			t.Error(err)
		}
	})
	d.env = &testEnv{t: t, srv: srv2, ts: hs2}
	queries(80)
	t.Logf("%d entries (%d in tenant other, %d in third), %d queries (%d with non-empty expected answers), %d HTTP requests compared",
		len(d.data[DefaultTenant])+len(d.data["other"])+len(d.data["third"]), len(d.data["other"]), len(d.data["third"]), d.nQuery, d.nonEmpt, d.nReq)
	return d.nReq
}

// oracleWindowValue is a range function's value over a window of rng
// nanoseconds holding n entries of b line bytes.
func oracleWindowValue(fn string, n, b, rng int64) float64 {
	switch fn {
	case "count_over_time":
		return float64(n)
	case "rate":
		return float64(n) / (float64(rng) / 1e9)
	case "bytes_over_time":
		return float64(b)
	case "bytes_rate":
		return float64(b) / (float64(rng) / 1e9)
	}
	return 0
}
