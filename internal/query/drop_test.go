package query

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestParseDropKeep(t *testing.T) {
	q, err := Parse("{app=\"api\"} | logfmt | drop __error__, __error_details__ | keep level, method=\"GET\", path=~`/api/.*`, host!=\"x\", x!~\"y\" | drop a:b")
	if err != nil {
		t.Fatal(err)
	}
	want := `{app="api"} | logfmt | drop __error__, __error_details__ | keep level, method="GET", path=~"/api/.*", host!="x", x!~"y" | drop a:b`
	if got := q.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	d := q.Stages[1].(*DropStage)
	wantD := &DropStage{Pos: 23, Labels: []*DropLabel{
		{Matcher: Matcher{Name: "__error__", Pos: 28}, Any: true},
		{Matcher: Matcher{Name: "__error_details__", Pos: 39}, Any: true},
	}}
	if !dropEqual(d, wantD) {
		t.Fatalf("drop stage %s, want %s", dumpDrop(d), dumpDrop(wantD))
	}
	k := q.Stages[2].(*DropStage)
	wantK := &DropStage{Keep: true, Pos: 59, Labels: []*DropLabel{
		{Matcher: Matcher{Name: "level", Pos: 64}, Any: true},
		{Matcher: Matcher{Name: "method", Type: MatchEqual, Value: "GET", Pos: 71}},
		{Matcher: Matcher{Name: "path", Type: MatchRegexp, Value: "/api/.*", Pos: 85}},
		{Matcher: Matcher{Name: "host", Type: MatchNotEqual, Value: "x", Pos: 102}},
		{Matcher: Matcher{Name: "x", Type: MatchNotRegexp, Value: "y", Pos: 113}},
	}}
	if !dropEqual(k, wantK) {
		t.Fatalf("keep stage %s, want %s", dumpDrop(k), dumpDrop(wantK))
	}
	// Keywords are label names when an operator follows; a label may be
	// named drop or keep.
	q, err = Parse(`{a="b"} | drop="x" | keep!="y" | drop drop, keep`)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := q.Stages[0].(*LabelFilter); !ok {
		t.Fatalf("drop=\"x\" parsed as %T", q.Stages[0])
	}
	if _, ok := q.Stages[1].(*LabelFilter); !ok {
		t.Fatalf("keep!=\"y\" parsed as %T", q.Stages[1])
	}
	if got := q.Stages[2].String(); got != `| drop drop, keep` {
		t.Fatalf("drop drop, keep printed as %s", got)
	}

	for _, tc := range []struct {
		q   string
		pos int
		msg string
	}{
		{`{a="b"} | drop`, 14, `expected a label name after drop, got end of query`},
		{`{a="b"} | keep | json`, 15, `expected a label name after keep, got "|"`},
		{`{a="b"} | drop a,`, 17, `expected a label name after drop, got end of query`},
		{`{a="b"} | drop a, "b"`, 18, `expected a label name after drop, got string "b"`},
		{`{a="b"} | drop a b`, 17, `expected |, |=, !=, |~ or !~, got identifier "b"`},
		{`{a="b"} | drop a == "b"`, 17, `drop takes label names and the matchers =, !=, =~ and !~, got "=="`},
		{`{a="b"} | keep a > 5`, 17, `keep takes label names and the matchers =, !=, =~ and !~, got ">"`},
		{`{a="b"} | drop a = 5`, 19, `expected a string after =, got number 5`},
		{`{a="b"} | drop a=~"("`, 18, `invalid regular expression`},
		{`{a="b"} | drop (a)`, 15, `expected a label name after drop, got "("`},
	} {
		_, err := Parse(tc.q)
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Pos != tc.pos || !strings.Contains(pe.Msg, tc.msg) {
			t.Errorf("Parse(%q) = %v, want at byte %d: %s", tc.q, err, tc.pos, tc.msg)
		}
	}
}

func dropEqual(a, b *DropStage) bool {
	return a.Keep == b.Keep && a.Pos == b.Pos && slices.EqualFunc(a.Labels, b.Labels, func(x, y *DropLabel) bool { return *x == *y })
}

func dumpDrop(d *DropStage) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{Keep:%v Pos:%d", d.Keep, d.Pos)
	for _, l := range d.Labels {
		fmt.Fprintf(&b, " %+v", *l)
	}
	return b.String() + "}"
}

// TestDropKeepPlan: drop and keep leave the plan's line side alone, so the
// skip index and the kernels see the same required literals.
func TestDropKeepPlan(t *testing.T) {
	for _, tc := range []struct{ with, without string }{
		{`{a="b"} |= "timeout" | drop __error__`, `{a="b"} |= "timeout"`},
		{`{a="b"} |~ "err(or)?" | logfmt | drop level, __error__ |= "x" | keep a`, `{a="b"} |~ "err(or)?" | logfmt |= "x"`},
		{`{a="b"} != "y" | keep x="1" |= "z" or "w"`, `{a="b"} != "y" |= "z" or "w"`},
	} {
		p1, p2 := oraclePlan(tc.with), oraclePlan(tc.without)
		if p1.Required.String() != p2.Required.String() || len(p1.Filters) != len(p2.Filters) {
			t.Errorf("%s: Required %v, %d filters; without drop/keep %v, %d filters", tc.with, p1.Required, len(p1.Filters), p2.Required, len(p2.Filters))
		}
	}
}

// The examples of Loki's LogQL documentation (Drop and Keep Labels
// expressions), on a stream {job="varlogs"}, as whole label sets.
func TestDropKeepLabelSet(t *testing.T) {
	stream := []Label{{"job", "varlogs"}}
	const (
		get   = `{"level": "info", "method": "GET", "path": "/", "host": "grafana.net", "status": "200"}`
		post  = `{"level": "info", "method": "POST", "path": "/", "host": "grafana.net", "status": "200"}`
		api   = `{"app": "some-api-service", "level": "info", "method": "GET", "path": "/", "host": "grafana.net", "status": "200"}`
		other = `{"app": "other-service", "level": "info", "method": "GET", "path": "/", "host": "grafana.net", "status": "200"}`
	)
	none := []Label(nil)
	for _, tc := range []struct {
		q, line string
		want    []Label // nil: unchanged (the stream's labels)
	}{
		{`{job="varlogs"} | json | drop level, method="GET"`, get,
			[]Label{{"host", "grafana.net"}, {"job", "varlogs"}, {"path", "/"}, {"status", "200"}}},
		{`{job="varlogs"} | json | drop level, method="GET"`, post,
			[]Label{{"host", "grafana.net"}, {"job", "varlogs"}, {"method", "POST"}, {"path", "/"}, {"status", "200"}}},
		{`{job="varlogs"} | json | drop __error__`, `INFO GET / loki.net 200`,
			[]Label{{"__error_details__", "invalid JSON"}, {"job", "varlogs"}}},
		{`{job="varlogs"} | json | drop __error__, __error_details__`, `INFO GET / loki.net 200`, none},
		{`{job="varlogs"} | json | drop __error_details__`, `INFO GET / loki.net 200`,
			[]Label{{"__error__", ErrJSON}, {"job", "varlogs"}}},
		{`{job="varlogs"} | json | drop __error__="LogfmtParserErr", __error_details__`, `INFO GET / loki.net 200`,
			[]Label{{"__error__", ErrJSON}, {"job", "varlogs"}}},
		{`{job="varlogs"} | json | drop level, path, app=~"some-api.*"`, api,
			[]Label{{"host", "grafana.net"}, {"job", "varlogs"}, {"method", "GET"}, {"status", "200"}}},
		{`{job="varlogs"} | json | drop level, path, app=~"some-api.*"`, other,
			[]Label{{"app", "other-service"}, {"host", "grafana.net"}, {"job", "varlogs"}, {"method", "GET"}, {"status", "200"}}},
		{`{job="varlogs"} | json | keep level, method="GET"`, get, []Label{{"level", "info"}, {"method", "GET"}}},
		{`{job="varlogs"} | json | keep level, method="GET"`, post, []Label{{"level", "info"}}},
		{`{job="varlogs"} | json | keep level, tenant, app=~"some-api.*"`, api, []Label{{"app", "some-api-service"}, {"level", "info"}}},
		{`{job="varlogs"} | json | keep level, tenant, app=~"some-api.*"`, other, []Label{{"level", "info"}}},
		// keep does not remove the pipeline's error labels.
		{`{job="varlogs"} | json | keep job`, `INFO`,
			[]Label{{"__error__", ErrJSON}, {"__error_details__", "invalid JSON"}, {"job", "varlogs"}}},
		{`{job="varlogs"} | json | keep nothing`, `INFO`,
			[]Label{{"__error__", ErrJSON}, {"__error_details__", "invalid JSON"}}},
		// Nothing extracted, nothing dropped: unchanged.
		{`{job="varlogs"} | drop level`, get, none},
		{`{job="varlogs"} | keep job`, get, none},
		{`{job="varlogs"} | drop job!="varlogs"`, get, none},
		{`{job="varlogs"} | drop job=~"var.*"`, get, []Label{}},
		{`{job="varlogs"} | keep job="x"`, get, []Label{}},
		// A matcher on a label the entry does not have selects nothing,
		// even one that accepts "".
		{`{job="varlogs"} | keep job, tenant=""`, get, none},
		{`{job="varlogs"} | json | drop __error__=""`, get,
			[]Label{{"host", "grafana.net"}, {"job", "varlogs"}, {"level", "info"}, {"method", "GET"}, {"path", "/"}, {"status", "200"}}},
		// A dropped error stays dropped; a later stage can set a new one.
		{`{job="varlogs"} | json | drop __error__, __error_details__ | logfmt --strict`, `a=1 "b`,
			[]Label{{"__error__", ErrLogfmt}, {"__error_details__", `unexpected '"' in key at byte 4`}, {"a", "1"}, {"job", "varlogs"}}},
	} {
		p := oraclePlan(tc.q)
		set, changed, ok := p.LabelSet(stream, []byte(tc.line))
		if !ok {
			t.Errorf("%s on %s: entry dropped", tc.q, tc.line)
			continue
		}
		if changed != (tc.want != nil) || !slices.Equal(set, tc.want) {
			t.Errorf("%s on %s:\n got %q changed=%v\nwant %q", tc.q, tc.line, set, changed, tc.want)
		}
		if !p.MatchEntry(stream, []byte(tc.line)) {
			t.Errorf("%s on %s: MatchEntry false", tc.q, tc.line)
		}
	}
}

// oracleDrop is one operand of a drop or keep: a bare name (op "") or a
// matcher.
type oracleDrop struct{ name, op, val string }

// admits is the rule of Loki's documentation: a bare name selects the
// label whatever its value, a matcher when the value matches (regexes
// anchored).
func (d oracleDrop) admits(name, value string) bool {
	if d.name != name {
		return false
	}
	switch d.op {
	case "":
		return true
	case "=":
		return value == d.val
	case "!=":
		return value != d.val
	}
	m := regexp.MustCompile("^(?:" + d.val + ")$").MatchString(value)
	return m == (d.op == "=~")
}

// applyOracle applies a drop (keep false) or keep stage to a label map:
// drop removes what some operand admits, keep removes what none admits
// except the pipeline's error labels.
func applyOracle(labels map[string]string, keep bool, ops []oracleDrop) {
	for name, v := range labels {
		admitted := false
		for _, d := range ops {
			if d.admits(name, v) {
				admitted = true
			}
		}
		if keep && (name == "__error__" || name == "__error_details__") {
			continue
		}
		if admitted != keep {
			delete(labels, name)
		}
	}
}

// TestDropKeepOracle runs random drop/keep chains, each followed by a
// label filter, on random logfmt entries of random streams, and compares
// the label set and the filter's decision with applyOracle on the labels
// the same pipeline has without the drop and keep stages.
func TestDropKeepOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	names := []string{"app", "level", "status", "__error__", "__error_details__", "x", "app_extracted"}
	values := []string{"", "api", "error", "500", "x", "LogfmtParserErr"}
	valueRes := []string{".*", "", "e.*", "5..", "(api|x)", "Logfmt.*"}
	for iter := range 3000 {
		// A stream of up to two labels, a logfmt line of up to four pairs
		// (sometimes malformed, which under --strict sets __error__).
		var stream []Label
		for _, n := range []string{"app", "level"} {
			if r.IntN(2) == 0 {
				stream = append(stream, Label{n, values[1+r.IntN(len(values)-1)]})
			}
		}
		var line []string
		for range r.IntN(5) {
			switch r.IntN(6) {
			case 0:
				line = append(line, `"bad`)
			default:
				line = append(line, names[r.IntN(3)]+"="+values[1+r.IntN(len(values)-1)])
			}
		}
		// Without a parser the plan takes the drop-only shortcut.
		base := [...]string{`{src="t"}`, `{src="t"} | logfmt`, `{src="t"} | logfmt --strict`}[r.IntN(3)]
		var stages []string
		type stage struct {
			keep bool
			ops  []oracleDrop
		}
		var chain []stage
		for range 1 + r.IntN(3) {
			st := stage{keep: r.IntN(3) == 0}
			var parts []string
			for range 1 + r.IntN(3) {
				d := oracleDrop{name: names[r.IntN(len(names))]}
				switch r.IntN(5) {
				case 0:
					d.op, d.val = "=", values[r.IntN(len(values))]
				case 1:
					d.op, d.val = "!=", values[r.IntN(len(values))]
				case 2:
					d.op, d.val = "=~", valueRes[r.IntN(len(valueRes))]
				case 3:
					d.op, d.val = "!~", valueRes[r.IntN(len(valueRes))]
				}
				st.ops = append(st.ops, d)
				if d.op == "" {
					parts = append(parts, d.name)
				} else {
					parts = append(parts, fmt.Sprintf("%s%s%q", d.name, d.op, d.val))
				}
			}
			kw := "drop"
			if st.keep {
				kw = "keep"
			}
			stages = append(stages, "| "+kw+" "+strings.Join(parts, ", "))
			chain = append(chain, st)
		}
		fName, fVal := names[r.IntN(len(names))], values[r.IntN(len(values))]
		filter := fmt.Sprintf("| %s=%q", fName, fVal)
		lineS := strings.Join(line, " ")

		// What the parser alone gives, then the oracle's drop and keep.
		before, _, ok := oraclePlan(base).LabelSet(stream, []byte(lineS))
		if !ok {
			t.Fatalf("%s dropped %q", base, lineS)
		}
		if before == nil {
			before = stream
		}
		want := map[string]string{}
		for _, l := range before {
			want[l.Name] = l.Value
		}
		for _, st := range chain {
			applyOracle(want, st.keep, st.ops)
		}
		q := base + " " + strings.Join(stages, " ")
		set, changed, ok := oraclePlan(q).LabelSet(stream, []byte(lineS))
		if !ok {
			t.Fatalf("iter %d: %s dropped %q", iter, q, lineS)
		}
		if !changed {
			set = stream
		}
		got := map[string]string{}
		for _, l := range set {
			got[l.Name] = l.Value
		}
		if !mapsEqual(got, want) || len(set) != len(got) {
			t.Fatalf("iter %d: %s on stream %v line %q:\n got %q\nwant %q", iter, q, stream, lineS, set, want)
		}
		if !changed && !slices.Equal(set, stream) {
			t.Fatalf("iter %d: %s: changed=false but labels differ", iter, q)
		}
		// The label filter after the chain sees the oracle's labels
		// (a missing label is "").
		wantPass := want[fName] == fVal
		if got := oraclePlan(q+" "+filter).MatchEntry(stream, []byte(lineS)); got != wantPass {
			t.Fatalf("iter %d: %s %s on stream %v line %q: MatchEntry %v, want %v (labels %q)",
				iter, q, filter, stream, lineS, got, wantPass, want)
		}
	}
}
