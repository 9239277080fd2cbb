package server

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"haystack/internal/ingest"
	"haystack/internal/query"
	"haystack/internal/segment"
	"haystack/internal/store"
)

// ddEntry is one pushed entry of the drilldown tests, with what a parser
// must find in it (the oracle of detected_fields).
type ddEntry struct {
	stream int
	t      int64
	line   string
	parser string            // "json", "logfmt" or "" (plain text)
	fields map[string]string // field -> value, as the parser names them
	types  map[string]string // field -> type of this value
}

// ddPushed are the streams' labels as pushed; ddStreams as stored, the
// oracles' view: the last gets service_name="cron" from its job label
// (withServiceName), as Loki's discover_service_name gives it.
var ddPushed = []map[string]string{
	{"service_name": "api", "env": "prod", "level": "info"},
	{"service_name": "api", "env": "dev"},
	{"service_name": "web", "env": "prod"},
	{"service_name": "db"},
	{"job": "cron", "env": "prod"},
}

var ddStreams = func() []map[string]string {
	out := make([]map[string]string, len(ddPushed))
	for i, m := range ddPushed {
		out[i] = withServiceName(m)
	}
	return out
}()

func ddLabels(i int) string {
	b, _ := json.Marshal(ddPushed[i])
	return string(b)
}

// ddGen makes n entries with distinct times in the two hours before base
// (pushed out of time order), lines of three kinds and known fields.
func ddGen(seed uint64, n int) []ddEntry {
	rng := rand.New(rand.NewPCG(seed, 7))
	gap := int64(2*time.Hour) / int64(n)
	perm := rng.Perm(n)
	out := make([]ddEntry, n)
	msgs := []string{"hello", "db timeout", "ok done", "retry later"}
	for i := range out {
		e := ddEntry{stream: rng.IntN(len(ddStreams)), t: base - int64(2*time.Hour) + int64(perm[i])*gap + rng.Int64N(gap/2), fields: map[string]string{}, types: map[string]string{}}
		set := func(k, v, typ string) { e.fields[k], e.types[k] = v, typ }
		switch rng.IntN(3) {
		case 0:
			e.parser = "logfmt"
			var parts []string
			st := []string{"200", "404", "500"}[rng.IntN(3)]
			set("status", st, "int")
			parts = append(parts, "status="+st)
			d := []string{"15ms", "2s", "1m30s"}[rng.IntN(3)]
			set("dur", d, "duration")
			parts = append(parts, "dur="+d)
			if rng.IntN(2) == 0 {
				ok := []string{"true", "false"}[rng.IntN(2)]
				set("ok", ok, "boolean")
				parts = append(parts, "ok="+ok)
			}
			if rng.IntN(3) == 0 {
				sz := []string{"10KB", "3MiB", "512b"}[rng.IntN(3)]
				set("size", sz, "bytes")
				parts = append(parts, "size="+sz)
			}
			if rng.IntN(4) == 0 {
				// A field named like a stream label: _extracted when the
				// stream has env.
				set("env", "staging", "string")
				parts = append(parts, "env=staging")
			}
			m := msgs[rng.IntN(len(msgs))]
			set("msg", m, "string")
			parts = append(parts, "msg="+strconv.Quote(m))
			rng.Shuffle(len(parts), func(a, b int) { parts[a], parts[b] = parts[b], parts[a] })
			e.line = strings.Join(parts, " ")
		case 1:
			e.parser = "json"
			code := strconv.Itoa(100 + rng.IntN(5))
			set("code", code, "int")
			v := []string{"1", "2", "0.5", "1.25"}[rng.IntN(4)]
			typ := "int"
			if strings.Contains(v, ".") {
				typ = "float"
			}
			set("v", v, typ)
			x := []string{"7", "seven"}[rng.IntN(2)]
			xt := "int"
			if x == "seven" {
				xt = "string"
			}
			set("x", x, xt)
			u := fmt.Sprintf("u%d", rng.IntN(6))
			set("user_id", u, "string")
			m := msgs[rng.IntN(len(msgs))]
			set("msg", m, "string")
			e.line = fmt.Sprintf(`{"code":%s,"v":%s,"x":%q,"user":{"id":%q},"msg":%q}`, code, v, x, u, m)
			if x == "7" {
				e.line = fmt.Sprintf(`{"code":%s,"v":%s,"x":7,"user":{"id":%q},"msg":%q}`, code, v, u, m)
			}
		default:
			e.line = strings.Repeat("plain words here ", 1+rng.IntN(4))
			e.line = strings.TrimSpace(e.line)
		}
		out[i] = e
	}
	return out
}

// ddPush pushes es: the first third stream by stream (so blocks hold one
// stream), the rest interleaved in batches of several streams.
func ddPush(e *testEnv, tenant string, es []ddEntry, hdr ...string) {
	e.t.Helper()
	push := func(batch []ddEntry) {
		byStream := map[int][]ddEntry{}
		for _, x := range batch {
			byStream[x.stream] = append(byStream[x.stream], x)
		}
		var b strings.Builder
		b.WriteString(`{"streams":[`)
		for i, s := range slices.Sorted(maps.Keys(byStream)) {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"stream":%s,"values":[`, ddLabels(s))
			for j, x := range byStream[s] {
				if j > 0 {
					b.WriteByte(',')
				}
				lb, _ := json.Marshal(x.line)
				fmt.Fprintf(&b, `["%d",%s]`, x.t, lb)
			}
			b.WriteString("]}")
		}
		b.WriteString("]}")
		e.mustPush("/loki/api/v1/push", []byte(b.String()), append([]string{"Content-Type", "application/json", "X-Scope-OrgID", tenant}, hdr...)...)
	}
	third := len(es) / 3
	first := slices.Clone(es[:third])
	slices.SortStableFunc(first, func(a, b ddEntry) int { return a.stream - b.stream })
	for i := 0; i < len(first); i += 8 {
		push(first[i:min(i+8, len(first))])
	}
	rest := es[third:]
	for i := 0; i < len(rest); i += 7 {
		push(rest[i:min(i+7, len(rest))])
	}
}

// ddEnv is a server with small blocks and heads (many segments, blocks
// that cut every range) holding es under tenant "t1" and others under "t2".
func ddEnv(t *testing.T, es, others []ddEntry, compact bool) *testEnv {
	e := newEnv(t, func(c *Config) {
		c.Store = store.Options{HeadBytes: 4 << 10, Segment: segment.Options{BlockSize: 512}}
	})
	ddPush(e, "t1", es)
	ddPush(e, "t2", others)
	if compact {
		ts, err := e.srv.openTenant("t1", false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ts.w.Compact(context.Background(), store.CompactOptions{Segment: &segment.Options{BlockSize: 2 << 10}}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

type ddSelector struct {
	q     string
	match func(map[string]string) bool
}

var ddSelectors = []ddSelector{
	{`{service_name=~".+"}`, func(l map[string]string) bool { return l["service_name"] != "" }},
	{`{env="prod"}`, func(l map[string]string) bool { return l["env"] == "prod" }},
	{`{service_name="api", env=~"p.*"}`, func(l map[string]string) bool {
		return l["service_name"] == "api" && strings.HasPrefix(l["env"], "p")
	}},
	{`{service_name=~".+", env!="dev"}`, func(l map[string]string) bool { return l["service_name"] != "" && l["env"] != "dev" }},
	{`{service_name="none"}`, func(l map[string]string) bool { return false }},
}

// ddRanges are [start, end] pairs: everything, nothing, single entries
// and random cuts at entry times (and a nanosecond beside them).
func ddRanges(es []ddEntry, seed uint64) [][2]int64 {
	rng := rand.New(rand.NewPCG(seed, 9))
	out := [][2]int64{
		{base - int64(3*time.Hour), base},
		{base - int64(5*time.Hour), base - int64(4*time.Hour)},
		{es[0].t, es[0].t},
		// Entries a nanosecond before a step's end and at a step's start.
		{es[1].t - int64(time.Minute) + 1, es[1].t + int64(time.Hour)},
		{es[2].t - int64(7*time.Minute), base},
	}
	for range 6 {
		a, b := es[rng.IntN(len(es))].t+rng.Int64N(3)-1, es[rng.IntN(len(es))].t+rng.Int64N(3)-1
		out = append(out, [2]int64{min(a, b), max(a, b)})
	}
	return out
}

// secJSON is t in exact decimal seconds, as the API writes times.
func secJSON(t int64) string {
	s := big.NewRat(t, 1e9).FloatString(9)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// volumeOracle computes index/volume's (step 0) or volume_range's
// expected result from the pushed entries.
func volumeOracle(es []ddEntry, sel ddSelector, start, end, step int64, names []string, byLabels bool, limit int) string {
	type series struct {
		key    string
		metric map[string]string
		total  int64
		pts    map[int64]int64
	}
	all := map[string]*series{}
	for _, x := range es {
		ls := ddStreams[x.stream]
		if x.t < start || x.t > end || !sel.match(ls) {
			continue
		}
		var kept ingest.Labels
		for _, n := range slices.Sorted(maps.Keys(ls)) {
			if slices.Contains(names, n) {
				kept = append(kept, ingest.Label{Name: n, Value: ls[n]})
			}
		}
		var keys []string
		metrics := map[string]map[string]string{}
		if byLabels {
			for _, l := range kept {
				keys = append(keys, l.Name)
				metrics[l.Name] = map[string]string{l.Name: ""}
			}
		} else {
			k := kept.String()
			keys = []string{k}
			m := map[string]string{}
			for _, l := range kept {
				m[l.Name] = l.Value
			}
			metrics[k] = m
		}
		b := int64(0)
		if step > 0 {
			b = start + (x.t-start)/step*step
		}
		for _, k := range keys {
			s := all[k]
			if s == nil {
				s = &series{key: k, metric: metrics[k], pts: map[int64]int64{}}
				all[k] = s
			}
			s.total += int64(len(x.line))
			s.pts[b] += int64(len(x.line))
		}
	}
	list := slices.Collect(maps.Values(all))
	slices.SortFunc(list, func(a, b *series) int {
		if a.total != b.total {
			return int(b.total - a.total)
		}
		return strings.Compare(a.key, b.key)
	})
	list = list[:min(len(list), limit)]
	var res []string
	for _, s := range list {
		mb, _ := json.Marshal(s.metric)
		if step == 0 {
			res = append(res, fmt.Sprintf(`{"metric":%s,"value":[%s,"%d"]}`, mb, secJSON(end), s.total))
			continue
		}
		var pts []string
		for _, t := range slices.Sorted(maps.Keys(s.pts)) {
			pts = append(pts, fmt.Sprintf(`[%s,"%d"]`, secJSON(t), s.pts[t]))
		}
		res = append(res, fmt.Sprintf(`{"metric":%s,"values":[%s]}`, mb, strings.Join(pts, ",")))
	}
	typ := "vector"
	if step > 0 {
		typ = "matrix"
	}
	return fmt.Sprintf(`{"status":"success","data":{"resultType":%q,"result":[%s]}}`, typ, strings.Join(res, ","))
}

func selectorNames(q string) []string {
	ast, err := query.Parse(q)
	if err != nil {
		panic(err)
	}
	var out []string
	for _, m := range ast.Selector {
		if !slices.Contains(out, m.Name) {
			out = append(out, m.Name)
		}
	}
	return out
}

func TestDrilldownVolume(t *testing.T) {
	es := ddGen(1, 600)
	others := ddGen(2, 50)
	for _, compact := range []bool{false, true} {
		t.Run(fmt.Sprintf("compact=%v", compact), func(t *testing.T) {
			e := ddEnv(t, es, others, compact)
			for _, sel := range ddSelectors {
				for ri, rg := range ddRanges(es, 3) {
					type variant struct {
						params   string
						names    []string
						byLabels bool
						limit    int
					}
					vs := []variant{
						{"", selectorNames(sel.q), false, 100},
						{"&targetLabels=env,%20level", []string{"env", "level"}, false, 100},
						{"&aggregateBy=labels", selectorNames(sel.q), true, 100},
						{"&aggregateBy=labels&targetLabels=service_name,env,job,level", []string{"service_name", "env", "job", "level"}, true, 100},
						{"&aggregateBy=series&targetLabels=service_name,env&limit=2", []string{"service_name", "env"}, false, 2},
					}
					for _, v := range vs {
						path := fmt.Sprintf("/loki/api/v1/index/volume?query=%s&start=%d&end=%d%s", q(sel.q), rg[0], rg[1], v.params)
						code, body := e.get(path, "X-Scope-OrgID", "t1")
						if code != 200 {
							t.Fatalf("%s: %d %s", path, code, body)
						}
						want := volumeOracle(es, sel, rg[0], rg[1], 0, v.names, v.byLabels, v.limit)
						wantJSON(t, fmt.Sprintf("range %d %s", ri, path), dropStats(t, body), want)
						for _, step := range []int64{int64(time.Minute), int64(7 * time.Minute), int64(time.Hour)} {
							if (rg[1]-rg[0])/step >= 11000 {
								continue
							}
							rpath := strings.Replace(path, "/index/volume?", "/index/volume_range?", 1) + fmt.Sprintf("&step=%ds", step/1e9)
							code, body := e.get(rpath, "X-Scope-OrgID", "t1")
							if code != 200 {
								t.Fatalf("%s: %d %s", rpath, code, body)
							}
							want := volumeOracle(es, sel, rg[0], rg[1], step, v.names, v.byLabels, v.limit)
							wantJSON(t, fmt.Sprintf("range %d %s", ri, rpath), dropStats(t, body), want)
						}
					}
				}
			}
			// The other tenant sees its own entries only.
			rg := [2]int64{base - int64(3*time.Hour), base}
			path := fmt.Sprintf("/loki/api/v1/index/volume?query=%s&start=%d&end=%d", q(ddSelectors[0].q), rg[0], rg[1])
			_, body := e.get(path, "X-Scope-OrgID", "t2")
			wantJSON(t, "tenant t2", dropStats(t, body), volumeOracle(others, ddSelectors[0], rg[0], rg[1], 0, []string{"service_name"}, false, 100))
			// A tenant without data: an empty vector.
			_, body = e.get(path, "X-Scope-OrgID", "nobody")
			wantJSON(t, "tenant without data", dropStats(t, body), `{"status":"success","data":{"resultType":"vector","result":[]}}`)
		})
	}
}

// TestDrilldownVisitPaths checks that a volume over a store with blocks of
// one stream and blocks of several takes both paths (block metadata and
// decoding), and that both give the oracle's numbers.
func TestDrilldownVisitPaths(t *testing.T) {
	es := ddGen(5, 400)
	e := ddEnv(t, es, es[:1], false)
	ts, err := e.srv.openTenant("t1", false)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ts.w.View()
	if err != nil {
		t.Fatal(err)
	}
	// A selector that leaves a stream out (db has no env), so blocks
	// holding it and others must be decoded.
	sel, _ := parseSelection(`{env=~".+"}`, false)
	for _, rg := range ddRanges(es, 11) {
		var metas, entries, bytes, n int64
		bv := &blockVisitor{plan: sel.plan, start: rg[0], end: rg[1]}
		bv.meta = func(m *segment.BlockMeta) { metas++; n += int64(m.Entries); bytes += int64(m.RawBytes) }
		bv.entry = func(_ int64, _ uint32, l int) { entries++; n++; bytes += int64(l) }
		if err := bv.visit(context.Background(), v); err != nil {
			t.Fatal(err)
		}
		var wantN, wantBytes int64
		for _, x := range es {
			if x.t >= rg[0] && x.t <= rg[1] && ddStreams[x.stream]["env"] != "" {
				wantN++
				wantBytes += int64(len(x.line))
			}
		}
		if n != wantN || bytes != wantBytes {
			t.Errorf("range %v: %d entries %d bytes, want %d %d", rg, n, bytes, wantN, wantBytes)
		}
		if rg[1]-rg[0] == int64(3*time.Hour) && (metas == 0 || entries == 0) {
			t.Errorf("whole store: %d blocks from metadata, %d entries decoded; want both paths used", metas, entries)
		}
	}
}

func TestDrilldownDetectedLabels(t *testing.T) {
	es := ddGen(3, 500)
	others := []ddEntry{{stream: 4, t: base - 10, line: "x"}}
	e := ddEnv(t, es, others, false)
	for _, sel := range append(ddSelectors, ddSelector{"", func(map[string]string) bool { return true }}) {
		for _, rg := range ddRanges(es, 4) {
			vals := map[string]map[string]bool{}
			for _, x := range es {
				ls := ddStreams[x.stream]
				if x.t < rg[0] || x.t > rg[1] || !sel.match(ls) {
					continue
				}
				for k, v := range ls {
					if vals[k] == nil {
						vals[k] = map[string]bool{}
					}
					vals[k][v] = true
				}
			}
			var want []string
			for _, k := range slices.Sorted(maps.Keys(vals)) {
				want = append(want, fmt.Sprintf(`{"label":%q,"cardinality":%d}`, k, len(vals[k])))
			}
			path := fmt.Sprintf("/loki/api/v1/detected_labels?query=%s&start=%d&end=%d", q(sel.q), rg[0], rg[1])
			code, body := e.get(path, "X-Scope-OrgID", "t1")
			if code != 200 {
				t.Fatalf("%s: %d %s", path, code, body)
			}
			wantJSON(t, path, body, `{"detectedLabels":[`+strings.Join(want, ",")+`]}`)
		}
	}
	_, body := e.get("/loki/api/v1/detected_labels", "X-Scope-OrgID", "t2")
	wantJSON(t, "tenant t2", body, `{"detectedLabels":[{"label":"env","cardinality":1},{"label":"job","cardinality":1},{"label":"service_name","cardinality":1}]}`)
	_, body = e.get("/loki/api/v1/detected_labels", "X-Scope-OrgID", "nobody")
	wantJSON(t, "no data", body, `{"detectedLabels":[]}`)
}

// fieldsOracle is detected_fields' answer for the newest lineLimit
// entries of es that match and lie in [start, end], and the values of
// each field. With levels, the entries' structured metadata
// detected_level (wantLevel's) is a field of no parser.
func fieldsOracle(es []ddEntry, match func(ddEntry) bool, start, end int64, lineLimit, limit int, levels bool) (string, map[string][]string) {
	var sample []ddEntry
	for _, x := range es {
		if x.t >= start && x.t <= end && match(x) {
			sample = append(sample, x)
		}
	}
	slices.SortFunc(sample, func(a, b ddEntry) int { return int(b.t - a.t) })
	sample = sample[:min(len(sample), lineLimit)]
	type field struct {
		typ     string
		parsers map[string]bool
		vals    map[string]bool
	}
	fields := map[string]*field{}
	for _, x := range sample {
		for k, v := range x.fields {
			if _, clash := ddStreams[x.stream][k]; clash {
				k += "_extracted"
			}
			typ := x.types[strings.TrimSuffix(k, "_extracted")]
			f := fields[k]
			if f == nil {
				f = &field{typ: typ, parsers: map[string]bool{}, vals: map[string]bool{}}
				fields[k] = f
			} else if f.typ != typ {
				if (f.typ == "int" || f.typ == "float") && (typ == "int" || typ == "float") {
					f.typ = "float"
				} else {
					f.typ = "string"
				}
			}
			f.parsers[x.parser] = true
			f.vals[v] = true
		}
		if levels {
			f := fields["detected_level"]
			if f == nil {
				f = &field{typ: "string", parsers: map[string]bool{}, vals: map[string]bool{}}
				fields["detected_level"] = f
			}
			f.vals[wantLevel(ddStreams[x.stream], nil, x.line)] = true
		}
	}
	names := slices.Sorted(maps.Keys(fields))
	if len(names) > limit {
		slices.SortStableFunc(names, func(a, b string) int { return len(fields[b].vals) - len(fields[a].vals) })
		names = names[:limit]
		slices.Sort(names)
	}
	var out []string
	values := map[string][]string{}
	for _, n := range names {
		f := fields[n]
		ps, _ := json.Marshal(slices.Sorted(maps.Keys(f.parsers))) // none: null
		out = append(out, fmt.Sprintf(`{"label":%q,"type":%q,"cardinality":%d,"parsers":%s}`, n, f.typ, len(f.vals), ps))
	}
	for n, f := range fields {
		values[n] = slices.Sorted(maps.Keys(f.vals))
	}
	if len(out) == 0 {
		return `{"fields":[]}`, values
	}
	return fmt.Sprintf(`{"fields":[%s],"limit":%d}`, strings.Join(out, ","), limit), values
}

func TestDrilldownDetectedFields(t *testing.T) {
	es := ddGen(4, 500)
	e := ddEnv(t, es, es[:3], false)
	cases := []struct {
		q     string
		match func(ddEntry) bool
	}{
		{`{service_name="api"}`, func(x ddEntry) bool { return ddStreams[x.stream]["service_name"] == "api" }},
		{`{service_name=~".+"} | json | logfmt | drop __error__, __error_details__`, func(x ddEntry) bool { return ddStreams[x.stream]["service_name"] != "" }},
		{`{env="prod"} |= "status"`, func(x ddEntry) bool {
			return ddStreams[x.stream]["env"] == "prod" && strings.Contains(x.line, "status")
		}},
		{`{job="cron"}`, func(x ddEntry) bool { return x.stream == 4 }},
		{`{job="none"}`, func(x ddEntry) bool { return false }},
	}
	for _, c := range cases {
		for _, rg := range ddRanges(es, 6)[:5] {
			for _, lim := range []struct {
				params           string
				lineLimit, limit int
			}{{"", 1000, 1000}, {"&line_limit=10", 10, 1000}, {"&limit=3&line_limit=50", 50, 3}} {
				path := fmt.Sprintf("/loki/api/v1/detected_fields?query=%s&start=%d&end=%d%s", q(c.q), rg[0], rg[1], lim.params)
				code, body := e.get(path, "X-Scope-OrgID", "t1")
				if code != 200 {
					t.Fatalf("%s: %d %s", path, code, body)
				}
				want, values := fieldsOracle(es, c.match, rg[0], rg[1], lim.lineLimit, lim.limit, e.levelsOn())
				wantJSON(t, path, body, want)
				for _, name := range []string{"status", "user_id", "env_extracted", "env", "nosuch", "detected_level"} {
					vpath := fmt.Sprintf("/loki/api/v1/detected_field/%s/values?query=%s&start=%d&end=%d%s", name, q(c.q), rg[0], rg[1], lim.params)
					code, body := e.get(vpath, "X-Scope-OrgID", "t1")
					if code != 200 {
						t.Fatalf("%s: %d %s", vpath, code, body)
					}
					vs := values[name]
					vs = vs[:min(len(vs), lim.limit)]
					vb, _ := json.Marshal(append([]string{}, vs...))
					wantJSON(t, vpath, body, fmt.Sprintf(`{"values":%s,"limit":%d}`, vb, lim.limit))
				}
			}
		}
	}
	_, body := e.get("/loki/api/v1/detected_fields?query="+q(`{service_name="api"}`), "X-Scope-OrgID", "nobody")
	wantJSON(t, "no data", body, `{"fields":[]}`)
}

func TestDrilldownBadParams(t *testing.T) {
	e := ddEnv(t, ddGen(6, 30), nil, false)
	for _, c := range []struct{ path, param string }{
		{"/loki/api/v1/index/volume", "query"},
		{"/loki/api/v1/index/volume?query=" + q(`{app="x"} |= "y"`), "query"},
		{"/loki/api/v1/index/volume?query=" + q(`{app="x"`), ""},
		{"/loki/api/v1/index/volume?query=" + q(`{app="x"}`) + "&aggregateBy=pods", "aggregateBy"},
		{"/loki/api/v1/index/volume?query=" + q(`{app="x"}`) + "&limit=-1", "limit"},
		{"/loki/api/v1/index/volume?query=" + q(`{app="x"}`) + "&start=yesterday", "start"},
		{"/loki/api/v1/index/volume?query=" + q(`{app="x"}`) + "&start=20&end=10", "end"},
		{"/loki/api/v1/index/volume_range?query=" + q(`{app="x"}`) + "&step=0", "step"},
		{"/loki/api/v1/index/volume_range?query=" + q(`{app="x"}`) + "&step=1ms", "step"},
		{"/loki/api/v1/detected_labels?query=" + q(`{app="x"} | json`), "query"},
		{"/loki/api/v1/detected_labels?end=soon", "end"},
		{"/loki/api/v1/detected_fields", "query"},
		{"/loki/api/v1/detected_fields?query=plain", "query"},
		{"/loki/api/v1/detected_fields?query=" + q(`{app="x"}`) + "&line_limit=x", "line_limit"},
		{"/loki/api/v1/detected_fields?query=" + q(`{app="x"}`) + "&limit=-5", "limit"},
		{"/loki/api/v1/detected_field/a/values?query=" + q(`{app="x"}`) + "&limit=z", "limit"},
		{"/loki/api/v1/index/stats?query=" + q(`{app="x"}`) + "&since=-1h", "since"},
	} {
		code, body := e.get(c.path, "X-Scope-OrgID", "t1")
		if code != 400 || !strings.Contains(body, c.param) {
			t.Errorf("GET %s: %d %s; want 400 naming %q", c.path, code, body, c.param)
		}
	}
}

// TestDrilldownIndexStats checks index/stats (F13: a plain selector from
// the block index) against the entries pushed, and its chunks against a
// brute-force count of the blocks holding a counted entry; a query with a
// line filter takes the scanning path and counts the same way.
func TestDrilldownIndexStats(t *testing.T) {
	es := ddGen(7, 500)
	e := ddEnv(t, es, nil, false)
	ts, err := e.srv.openTenant("t1", false)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ts.w.View()
	if err != nil {
		t.Fatal(err)
	}
	for _, sel := range ddSelectors {
		for _, rg := range ddRanges(es, 8) {
			var entries, bytes int64
			streams := map[int]bool{}
			for _, x := range es {
				if x.t >= rg[0] && x.t <= rg[1] && sel.match(ddStreams[x.stream]) {
					entries++
					bytes += int64(len(x.line))
					streams[x.stream] = true
				}
			}
			chunks := 0
			for _, p := range v.Parts {
				for bi := range p.NumBlocks() {
					b := segment.GetBlock()
					if err := p.ReadBlock(bi, b); err != nil {
						t.Fatal(err)
					}
					for k := range b.Len() {
						lm := map[string]string{}
						ls, _ := ingest.ParseLabels(v.Labels(b.Streams[k]))
						for _, l := range ls {
							lm[l.Name] = l.Value
						}
						if b.Times[k] >= rg[0] && b.Times[k] <= rg[1] && sel.match(lm) {
							chunks++
							break
						}
					}
					segment.PutBlock(b)
				}
			}
			want := fmt.Sprintf(`{"streams":%d,"chunks":%d,"entries":%d,"bytes":%d}`, len(streams), chunks, entries, bytes)
			path := fmt.Sprintf("/loki/api/v1/index/stats?query=%s&start=%d&end=%d", q(sel.q), rg[0], rg[1])
			_, body := e.get(path, "X-Scope-OrgID", "t1")
			wantJSON(t, path, body, want)
		}
	}
}

// patternGen makes n entries from known templates: each token is a
// constant word (no digit), a number-bearing value, or key=value, joined
// by varied white space; it returns them with each entry's pattern ("" for
// a line without constant tokens).
func patternGen(seed uint64, n int) ([]ddEntry, map[int64]string) {
	rng := rand.New(rand.NewPCG(seed, 3))
	num := func() string { return strconv.Itoa(rng.IntN(100000)) }
	type tok struct{ text, pat string }
	c := func(w string) tok { return tok{w, w} }
	templates := []func() []tok{
		func() []tok { return []tok{c("GET"), {"/api/items/" + num(), "<_>"}, c("took"), {num() + "ms", "<_>"}} },
		func() []tok {
			return []tok{c("level=info"), c("msg=served"), {"status=" + num(), "status=<_>"}, {"dur=" + num() + "ms", "dur=<_>"}}
		},
		func() []tok { return []tok{c("connection"), c("reset"), c("by"), c("peer")} },
		func() []tok { return []tok{{num(), "<_>"}, {num(), "<_>"}} },
		func() []tok {
			return []tok{c("user"), {"u" + num(), "<_>"}, c("logged"), c("in"), c("from"), {"10.0.0." + num(), "<_>"}}
		},
		func() []tok {
			return []tok{c("panic:"), c("boom"), c("at"), {"main.go:" + num(), "<_>"}, {"2x=" + num(), "<_>"}}
		},
	}
	seps := []string{" ", "  ", "\t", " \n\t"}
	gap := int64(2*time.Hour) / int64(n)
	perm := rng.Perm(n)
	var es []ddEntry
	pats := map[int64]string{}
	for i := range n {
		toks := templates[rng.IntN(len(templates))]()
		var line strings.Builder
		var pat []string
		constant := false
		for j, tk := range toks {
			if j > 0 {
				line.WriteString(seps[rng.IntN(len(seps))])
			}
			line.WriteString(tk.text)
			pat = append(pat, tk.pat)
			if tk.pat != "<_>" {
				constant = true
			}
		}
		x := ddEntry{stream: rng.IntN(len(ddStreams)), t: base - int64(2*time.Hour) + int64(perm[i])*gap + rng.Int64N(gap/2), line: line.String()}
		if constant {
			pats[x.t] = strings.Join(pat, " ")
		} else {
			pats[x.t] = ""
		}
		es = append(es, x)
	}
	return es, pats
}

func TestDrilldownPatterns(t *testing.T) {
	es, pats := patternGen(9, 600)
	e := ddEnv(t, es, es[:2], false)
	for _, sel := range ddSelectors {
		for _, rg := range ddRanges(es, 10) {
			for _, step := range []int64{int64(time.Minute), int64(7 * time.Minute)} {
				if (rg[1]-rg[0])/step >= 11000 {
					continue
				}
				counts := map[string]map[int64]int64{}
				totals := map[string]int64{}
				last := rg[1] // [start, end), as query_range; one instant when end == start
				if rg[1] > rg[0] {
					last--
				}
				for _, x := range es {
					p := pats[x.t]
					if x.t < rg[0] || x.t > last || !sel.match(ddStreams[x.stream]) || p == "" {
						continue
					}
					if counts[p] == nil {
						counts[p] = map[int64]int64{}
					}
					counts[p][(x.t-rg[0])/step]++
					totals[p]++
				}
				keys := slices.Collect(maps.Keys(counts))
				slices.SortFunc(keys, func(a, b string) int {
					if totals[a] != totals[b] {
						return int(totals[b] - totals[a])
					}
					return strings.Compare(a, b)
				})
				var want []string
				for _, k := range keys {
					var smp []string
					for _, b := range slices.Sorted(maps.Keys(counts[k])) {
						smp = append(smp, fmt.Sprintf("[%d,%d]", (rg[0]+b*step)/1e9, counts[k][b]))
					}
					kb, _ := json.Marshal(k)
					want = append(want, fmt.Sprintf(`{"pattern":%s,"samples":[%s]}`, kb, strings.Join(smp, ",")))
				}
				path := fmt.Sprintf("/loki/api/v1/patterns?query=%s&start=%d&end=%d&step=%ds", q(sel.q), rg[0], rg[1], step/1e9)
				code, body := e.get(path, "X-Scope-OrgID", "t1")
				if code != 200 {
					t.Fatalf("%s: %d %s", path, code, body)
				}
				wantJSON(t, path, body, `{"status":"success","data":[`+strings.Join(want, ",")+`]}`)
			}
		}
	}
	_, body := e.get("/loki/api/v1/patterns?query="+q(`{service_name=~".+"}`), "X-Scope-OrgID", "nobody")
	wantJSON(t, "no data", body, `{"status":"success","data":[]}`)
	for _, c := range []struct{ path, param string }{
		{"/loki/api/v1/patterns", "query"},
		{"/loki/api/v1/patterns?query=" + q(`{app="x"} |= "a"`), "query"},
		{"/loki/api/v1/patterns?query=" + q(`{app="x"}`) + "&step=-1s", "step"},
		{"/loki/api/v1/patterns?query=" + q(`{app="x"}`) + "&step=1s&start=0", "step"},
	} {
		code, body := e.get(c.path, "X-Scope-OrgID", "t1")
		if code != 400 || !strings.Contains(body, c.param) {
			t.Errorf("GET %s: %d %s; want 400 naming %q", c.path, code, body, c.param)
		}
	}
}

func TestDrilldownLimits(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.QueryTimeout = 90 * time.Second })
	code, body := e.get("/loki/api/v1/drilldown-limits")
	if code != 200 {
		t.Fatalf("drilldown-limits: %d %s", code, body)
	}
	var got struct {
		Limits                 map[string]any `json:"limits"`
		PatternIngesterEnabled *bool          `json:"pattern_ingester_enabled"`
		Version                string         `json:"version"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if got.PatternIngesterEnabled == nil || !*got.PatternIngesterEnabled || !strings.HasPrefix(got.Version, "haystack ") {
		t.Errorf("drilldown-limits: %s", body)
	}
	for k, want := range map[string]any{
		"query_timeout": "1m30s", "max_entries_limit_per_query": 5000.0, "volume_enabled": true,
		"volume_max_series": 5000.0, "retention_period": "0s", "discover_log_levels": true,
		"max_query_series": 500.0,
	} {
		if got.Limits[k] != want {
			t.Errorf("limits.%s = %v, want %v", k, got.Limits[k], want)
		}
	}
	// The labels service_name is derived from at push, as the server
	// does it (review 15c F4: it said [] while the server derived it).
	if d := fmt.Sprint(got.Limits["discover_service_name"]); d != fmt.Sprint(serviceNameSources) || !strings.Contains(d, "app") {
		t.Errorf("limits.discover_service_name = %s, want %v", d, serviceNameSources)
	}
	off := newEnv(t, func(c *Config) { c.NoServiceNameDiscovery = true })
	_, body = off.get("/loki/api/v1/drilldown-limits")
	if !strings.Contains(body, `"discover_service_name":[]`) {
		t.Errorf("drilldown-limits without service name discovery: %s", body)
	}
}

func TestDrilldownHelpers(t *testing.T) {
	for line, want := range map[string]string{
		"": "", "  \t": "", "12 34": "", "a": "a", "a=1 b2=3": "a=<_> <_>", "=5 x": "<_> x",
		"k==1 k=v": "k=<_> k=v", "\xff1 ok": "<_> ok", "x\r\ny": "x y",
	} {
		if got := lineTemplate([]byte(line)); got != want {
			t.Errorf("lineTemplate(%q) = %q, want %q", line, got, want)
		}
	}
	for v, want := range map[string]string{
		"200": "int", "-3": "int", "0.5": "float", "1e3": "float", "true": "boolean", "F": "boolean",
		"15ms": "duration", "1m30s": "duration", "10KB": "bytes", "3 MiB": "bytes", "512b": "bytes",
		"2k": "bytes", "1.5GiB": "bytes", "hello": "string", "": "string", "KB": "string", "1.2.3KB": "string",
		"10 xb": "string", "5kib": "bytes", "7ki": "bytes", "7kbb": "string",
	} {
		if got := fieldType(v); got != want {
			t.Errorf("fieldType(%q) = %s, want %s", v, got, want)
		}
	}
	for d, want := range map[time.Duration]string{
		0: "0s", time.Second: "1s", 90 * time.Second: "1m30s", 30*24*time.Hour + time.Hour: "4w2d1h",
		1500 * time.Millisecond: "1s500ms", 366 * 24 * time.Hour: "1y1d", time.Nanosecond: "0s",
	} {
		if got := promDuration(d); got != want {
			t.Errorf("promDuration(%s) = %s, want %s", d, got, want)
		}
	}
}

// benchDrilldownEnv is a store of 200,000 entries (~24 MB) of 16 streams
// over an hour, flushed to segments of default blocks: interleaved (most
// blocks hold many streams) or grouped (pushed stream by stream, so most
// blocks hold one).
func benchDrilldownEnv(b *testing.B, grouped bool) (*testEnv, int64) {
	e := newEnv(&testing.T{}, nil)
	b.Cleanup(func() { e.ts.Close(); e.srv.Close() })
	ts, err := e.srv.openTenant(DefaultTenant, true)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 200_000
	es := make([]store.LabeledEntry, n)
	var raw int64
	for i := range es {
		s := rng.IntN(16)
		line := fmt.Sprintf("level=info status=%d dur=%dms msg=\"request served\" path=/api/v%d/items/%d", 200+rng.IntN(3)*100, rng.IntN(900), s, rng.IntN(100000))
		es[i] = store.LabeledEntry{Labels: fmt.Sprintf(`{env="e%d", service_name="s%d"}`, s%4, s/4), Time: base - int64(time.Hour) + int64(i)*int64(time.Hour)/n, Line: []byte(line)}
		raw += int64(len(line))
	}
	if grouped {
		slices.SortStableFunc(es, func(a, b store.LabeledEntry) int { return strings.Compare(a.Labels, b.Labels) })
	}
	for i := 0; i < n; i += 5000 {
		if err := ts.w.Append(context.Background(), es[i:i+5000]); err != nil {
			b.Fatal(err)
		}
	}
	if err := ts.w.Flush(); err != nil {
		b.Fatal(err)
	}
	return e, raw
}

func BenchmarkDrilldown(b *testing.B) {
	rng := fmt.Sprintf("&start=%d&end=%d", base-int64(2*time.Hour), base)
	for _, grouped := range []bool{false, true} {
		e, raw := benchDrilldownEnv(b, grouped)
		for _, c := range []struct{ name, path string }{
			{"volume", "/loki/api/v1/index/volume?query=" + q(`{service_name=~".+"}`)},
			{"volume_range", "/loki/api/v1/index/volume_range?step=60s&query=" + q(`{service_name=~".+"}`)},
			{"detected_labels", "/loki/api/v1/detected_labels?query=" + q(`{service_name=~".+"}`)},
			{"index_stats", "/loki/api/v1/index/stats?query=" + q(`{service_name="s1"}`)},
			{"index_stats_scan", "/loki/api/v1/index/stats?query=" + q(`{service_name="s1"} |= ""`)},
			{"index_stats_all", "/loki/api/v1/index/stats?query=" + q(`{service_name=~".+"}`)},
			{"index_stats_all_scan", "/loki/api/v1/index/stats?query=" + q(`{service_name=~".+"} |= ""`)},
			{"detected_fields", "/loki/api/v1/detected_fields?query=" + q(`{service_name="s1"}`)},
		} {
			b.Run(fmt.Sprintf("grouped=%v/%s", grouped, c.name), func(b *testing.B) {
				b.SetBytes(raw)
				for b.Loop() {
					if code, body := e.get(c.path + rng); code != 200 {
						b.Fatalf("%d %s", code, body)
					}
				}
			})
		}
	}
}

// FuzzLineTemplate checks lineTemplate against its doc comment, token by
// token: a token without digits stays, key=value with a digit-free key
// becomes key=<_>, any other token with a digit becomes <_>, and a line
// without a kept word has no pattern.
func FuzzLineTemplate(f *testing.F) {
	for _, s := range []string{"", "GET /a/1 took 5ms", "a=1 b2=3", "=5 x", "k==1", "\xff1 ok", "x\r\ny", "12 34", "\u00a0a\u20281"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		got := lineTemplate([]byte(line))
		toks := strings.Fields(line)
		var want []string
		constant := false
		for _, tok := range toks {
			hasDigit := strings.IndexFunc(tok, func(r rune) bool { return r >= '0' && r <= '9' }) >= 0
			eq := strings.IndexByte(tok, '=')
			switch {
			case !hasDigit:
				want = append(want, tok)
				constant = true
			case eq > 0 && strings.IndexFunc(tok[:eq], func(r rune) bool { return r >= '0' && r <= '9' }) < 0:
				want = append(want, tok[:eq]+"=<_>")
				constant = true
			default:
				want = append(want, "<_>")
			}
		}
		w := strings.Join(want, " ")
		if !constant {
			w = ""
		}
		if got != w {
			t.Fatalf("lineTemplate(%q) = %q, want %q", line, got, w)
		}
	})
}

// FuzzFieldType checks the type guess against the parsers it names, in
// Loki's order, and isBytes against a regular expression of its comment.
func FuzzFieldType(f *testing.F) {
	for _, s := range []string{"", "1", "-1", "1.5", "NaN", "inf", "true", "T", "1h", "5ms", "10KB", "3 MiB", "2k", "1.2.3k", "KB", ".5b", "5 b", "5  b"} {
		f.Add(s)
	}
	bytesRE := regexp.MustCompile(`^(?i)[0-9.]*[0-9][0-9.]* ?(b|[kmgtpe](|b|i|ib))$`)
	f.Fuzz(func(t *testing.T, v string) {
		_, errInt := strconv.ParseInt(v, 10, 64)
		_, errFloat := strconv.ParseFloat(v, 64)
		_, errBool := strconv.ParseBool(v)
		_, errDur := time.ParseDuration(v)
		isB := bytesRE.MatchString(v) && strings.Count(v, ".") <= 1
		want := "string"
		switch {
		case errInt == nil:
			want = "int"
		case errFloat == nil:
			want = "float"
		case errBool == nil:
			want = "boolean"
		case errDur == nil:
			want = "duration"
		case isB:
			want = "bytes"
		}
		if got := fieldType(v); got != want {
			t.Fatalf("fieldType(%q) = %s, want %s", v, got, want)
		}
		if isBytes(v) != isB {
			t.Fatalf("isBytes(%q) = %v, want %v", v, !isB, isB)
		}
	})
}

// TestDrilldownAuth: the Drilldown endpoints sit behind auth like the
// other read endpoints, and a credential bound to a tenant reads only it.
func TestDrilldownAuth(t *testing.T) {
	auth, err := ParseAuth(strings.NewReader("token s3cret t1\ntoken other\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *Config) { c.Auth = auth })
	es := ddGen(8, 40)
	ddPush(e, "t1", es, "Authorization", "Bearer s3cret")
	ddPush(e, "t2", es[:5], "Authorization", "Bearer other")
	rg := fmt.Sprintf("&start=%d&end=%d", base-int64(3*time.Hour), base)
	paths := []string{
		"/loki/api/v1/index/volume?query=" + q(`{service_name=~".+"}`) + rg,
		"/loki/api/v1/index/volume_range?query=" + q(`{service_name=~".+"}`) + rg,
		"/loki/api/v1/detected_labels?query=" + q(`{service_name=~".+"}`) + rg,
		"/loki/api/v1/detected_fields?query=" + q(`{service_name=~".+"}`) + rg,
		"/loki/api/v1/detected_field/status/values?query=" + q(`{service_name=~".+"}`) + rg,
		"/loki/api/v1/patterns?query=" + q(`{service_name=~".+"}`) + rg,
		"/loki/api/v1/drilldown-limits?x=1",
	}
	for _, p := range paths {
		if code, body := e.get(p); code != 401 {
			t.Errorf("GET %s without credentials: %d %s; want 401", p, code, body)
		}
		if code, body := e.get(p, "Authorization", "Bearer s3cret", "X-Scope-OrgID", "t2"); code != 403 && code != 401 {
			t.Errorf("GET %s for another tenant: %d %s; want 401 or 403", p, code, body)
		}
	}
	_, body := e.get(paths[0], "Authorization", "Bearer s3cret")
	wantJSON(t, "t1's volume", dropStats(t, body), volumeOracle(es, ddSelectors[0], base-int64(3*time.Hour), base, 0, []string{"service_name"}, false, 100))
}

// TestDrilldownTimeout: the endpoints that read entries stop at the query
// timeout with a 504, as the other queries.
func TestDrilldownTimeout(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.QueryTimeout = time.Nanosecond
		c.Store = store.Options{HeadBytes: 4 << 10, Segment: segment.Options{BlockSize: 512}}
	})
	ddPush(e, DefaultTenant, ddGen(10, 200))
	rg := fmt.Sprintf("&start=%d&end=%d", base-int64(3*time.Hour), base-int64(time.Hour))
	for _, p := range []string{
		"/loki/api/v1/index/volume?query=" + q(`{service_name=~".+"}`) + rg,
		"/loki/api/v1/index/volume_range?query=" + q(`{service_name=~".+"}`) + rg,
		"/loki/api/v1/detected_labels?query=" + q(`{service_name=~".+"}`) + rg,
		"/loki/api/v1/detected_fields?query=" + q(`{service_name=~".+"}`) + rg,
		"/loki/api/v1/patterns?query=" + q(`{service_name=~".+"}`) + rg,
		"/loki/api/v1/index/stats?query=" + q(`{service_name=~".+"}`) + rg,
	} {
		if code, body := e.get(p); code != 504 {
			t.Errorf("GET %s with a 1 ns timeout: %d %s; want 504", p, code, body)
		}
	}
}
