package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func (e *mexpr) String() string {
	switch e.kind {
	case "const":
		if e.vec {
			return fmt.Sprintf("vector(%v)", e.val)
		}
		return fmt.Sprint(e.val)
	case "range":
		return fmt.Sprintf("%s(%s[%s])", e.fn, e.log, e.rng)
	case "unwrap":
		u := e.unwrap
		if e.conv != "" {
			u = e.conv + "(" + u + ")"
		}
		if e.post != nil {
			u += " | post"
		}
		q, g := "", ""
		if e.fn == "quantile_over_time" {
			q = fmt.Sprint(e.q) + ", "
		}
		if e.by != nil {
			g = fmt.Sprintf(" %s (%s)", map[bool]string{true: "without", false: "by"}[e.without], strings.Join(e.by, ","))
		}
		return fmt.Sprintf("%s(%s%s | unwrap %s[%s])%s", e.fn, q, e.log, u, e.rng, g)
	case "binop":
		mod := ""
		if e.boolMod {
			mod = " bool"
		}
		if e.matching {
			w := "ignoring"
			if e.on {
				w = "on"
			}
			mod += fmt.Sprintf(" %s (%s)", w, strings.Join(e.match, ","))
		}
		return fmt.Sprintf("(%s %s%s %s)", e.l, e.fn, mod, e.r)
	case "topk":
		g := ""
		if e.by != nil {
			g = fmt.Sprintf(" %s (%s)", map[bool]string{true: "without", false: "by"}[e.without], strings.Join(e.by, ","))
		}
		return fmt.Sprintf("%s%s(%d, %s)", e.fn, g, e.k, e.inner)
	}
	g := ""
	if e.by != nil {
		w := "by"
		if e.without {
			w = "without"
		}
		g = fmt.Sprintf(" %s (%s)", w, strings.Join(e.by, ","))
	}
	return fmt.Sprintf("%s%s(%s)", e.fn, g, e.inner)
}

func TestParseMetric(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`vector(1)+vector(1)`, "vector(2)"},
		{` ( vector(2) * 3 - 1 ) / 2 `, "vector(2.5)"},
		{`1 + 2 * 2 ^ 3 ^ 2 % 5`, "5"}, // 2^9 = 512, 1024 % 5 = 4
		{`2 > bool 1`, "1"},
		{`vector(2) >= bool 3`, "vector(0)"},
		{`vector(1) / 0`, "vector(NaN)"},
		{`vector(1) > 0`, "(vector(1) > 0)"},
		{`sum(rate({a="b"}[1m])) > 0 or vector(0)`, `((sum(rate({a="b"}[1m0s])) > 0) or vector(0))`},
		{`count_over_time({a="b"}[1m]) == bool on (a, b) count_over_time({a="c"}[1m]) and ignoring() vector(1) unless vector(2)`,
			`(((count_over_time({a="b"}[1m0s]) == bool on (a,b) count_over_time({a="c"}[1m0s])) and ignoring () vector(1)) unless vector(2))`},
		{`sum(vector(1))`, "sum(vector(1))"},
		{`sum_over_time({a="b"} | logfmt | unwrap latency [1m])`, `sum_over_time({a="b"} | logfmt | unwrap latency[1m0s])`},
		{`quantile_over_time(0.99, {a="b"} | json | unwrap duration(d) | __error__="" [5m]) by (x, y)`, `quantile_over_time(0.99, {a="b"} | json | unwrap duration(d) | post[5m0s]) by (x,y)`},
		{`max_over_time({a="b"}[1m] | unwrap bytes(size)) without (x)`, `max_over_time({a="b"} | unwrap bytes(size)[1m0s]) without (x)`},
		{`rate({a="b"} |= "| unwrap x" | unwrapped="1" | unwrap duration_seconds (d) [1m])`, `rate({a="b"} |= "| unwrap x" | unwrapped="1" | unwrap duration_seconds(d)[1m0s])`},
		{`rate({a="b"} |= "| unwrap x" [1m])`, `rate({a="b"} |= "| unwrap x"[1m0s])`},
		{`topk(3, sum by (a) (rate({a="b"}[1m])))`, `topk(3, sum by (a)(rate({a="b"}[1m0s])))`},
		{`bottomk by (x) (1, count_over_time({a="b"}[1m])) > 2`, `(bottomk by (x)(1, count_over_time({a="b"}[1m0s])) > 2)`},
		{`topk(2, count_over_time({a="b"}[1m]) or vector(0)) without (a)`, `topk without (a)(2, (count_over_time({a="b"}[1m0s]) or vector(0)))`},
		{`count_over_time({app="x"}[5m])`, `count_over_time({app="x"}[5m0s])`},
		{`rate({app="x"} |= "a[b]" [30s])`, `rate({app="x"} |= "a[b]"[30s])`},
		{"bytes_rate({app=\"x\"} |~ `[0-9]+` [1h])", "bytes_rate({app=\"x\"} |~ `[0-9]+`[1h0m0s])"},
		{`sum by (level, app) (count_over_time({app="x"} | json [1d]))`, `sum by (level,app)(count_over_time({app="x"} | json[24h0m0s]))`},
		{`sum(count_over_time({app="x"}[1m])) by (level)`, `sum by (level)(count_over_time({app="x"}[1m0s]))`},
		{`max without (host) (bytes_over_time({a="b"}[2w]))`, `max without (host)(bytes_over_time({a="b"}[336h0m0s]))`},
		{`avg by () (rate({a="\"]"}[1s]))`, `avg by ()(rate({a="\"]"}[1s]))`},
		// The range right after the selector, the pipeline after it.
		{`count_over_time({app="x"}[5m] |= "b")`, `count_over_time({app="x"} |= "b"[5m0s])`},
		{`sum(rate({a="b"} [1m]  | json | (level="error" or level="warn") |= ")[" ))`, `sum(rate({a="b"} | json | (level="error" or level="warn") |= ")["[1m0s]))`},
	} {
		e, err := parseMetric(c.in)
		if err != nil {
			t.Errorf("parseMetric(%q): %v", c.in, err)
			continue
		}
		if got := e.String(); got != c.want {
			t.Errorf("parseMetric(%q) = %s, want %s", c.in, got, c.want)
		}
	}
	for _, c := range []struct{ in, msg string }{
		{``, "unexpected end"},
		{`vector(1) + `, "unexpected end"},
		{`count_over_time({app="x"})`, "missing [range]"},
		{`count_over_time({app="x"}[5x])`, "bad range"},
		{`count_over_time({app="x"}[5m]`, "missing )"},
		{`count_over_time({app="x"}[5m] |= "b"`, "missing )"},
		{`count_over_time({a="b"}[1m] |= "x" [2m])`, "a second [range]"},
		{`sum(1)`, "wants a vector"},
		{`1 > 2`, "must use bool"},
		{`topk(0, count_over_time({a="b"}[1m]))`, "invalid parameter"},
		{`topk(1, 2)`, "wants a vector"},
		{`vector(1) orx`, "unexpected"},
		{`vector(1) or 0`, "set operator"},
		{`vector(1) + bool vector(1)`, "bool modifier"},
		{`vector(1) + on (a) 2`, "vector matching"},
		{`vector(1) * group_left (b) vector(2)`, "group_left must follow on"},
		{`vector(1) * on (b) group_left (b) vector(2)`, "must not occur in ON and GROUP clause"},
		{`vector(1) > on (a vector(2)`, "bad label list"},
		{`quantile_over_time(0.9, {a="b"} [1m])`, "without unwrap"},
		{`quantile_over_time({a="b"} | unwrap x [1m])`, "wants a number"},
		{`bytes_rate({a="b"} | unwrap x [1m])`, "bytes_rate with unwrap"},
		{`sum_over_time({a="b"} | unwrap [1m])`, "wants a label"},
		{`sum_over_time({a="b"} | unwrap x | json [1m])`, "only label filters"},
		{`sum_over_time({a="b"} | unwrap x y [1m])`, "after unwrap x"},
		{`sum_over_time({a="b"} | unwrap bytes(x [1m])`, "wants a label and )"},
		{`sum_over_time({a="b"} | unwrap x [1m]) by (a)`, "does not take by"},
		{`rate({a="b"} | unwrap x [1m]) without (a)`, "does not take by"},
		{`avg_over_time({a="b"} | unwrap x | y > [1m])`, "after unwrap x"},
		{`topz(1, vector(1))`, "unsupported function"},
		{`vector(1) vector(2)`, "unexpected"},
		{`sum by (a (count_over_time({a="b"}[1m]))`, "bad label list"},
	} {
		_, err := parseMetric(c.in)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("parseMetric(%q): %v, want error containing %q", c.in, err, c.msg)
		}
	}
	if d, err := parsePromDuration("3d"); err != nil || d != 72*time.Hour {
		t.Errorf("3d: %v %v", d, err)
	}
}

func FuzzParseMetric(f *testing.F) {
	for _, s := range []string{`vector(1)+vector(1)`, `sum by (a) (rate({a="b"} |= "x" [5m]))`, `count_over_time({a="b"}[1m])`, `(((`, `sum(`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := parseMetric(s)
		if err != nil {
			return
		}
		// What parses has a shape the evaluator handles.
		var check func(*mexpr)
		check = func(e *mexpr) {
			switch e.kind {
			case "const":
			case "range":
				if e.rng <= 0 {
					t.Fatalf("range %v", e.rng)
				}
			case "agg":
				if e.inner == nil || e.inner.scalar() {
					t.Fatalf("agg over %v", e.inner)
				}
				check(e.inner)
			case "unwrap":
				if e.rng <= 0 || e.unwrap == "" {
					t.Fatalf("unwrap %v", e)
				}
			case "topk":
				if e.k < 1 || e.inner == nil || e.inner.scalar() {
					t.Fatalf("topk %d over %v", e.k, e.inner)
				}
				check(e.inner)
			case "binop":
				if e.l == nil || e.r == nil || isSetOp(e.fn) && (e.l.scalar() || e.r.scalar()) {
					t.Fatalf("binop %v", e)
				}
				check(e.l)
				check(e.r)
			case "fn", "offset", "absent":
				if e.inner == nil || e.inner.scalar() || e.fn == "label_replace" && e.lrep == nil || e.kind == "offset" && e.off <= 0 {
					t.Fatalf("%s %v", e.kind, e)
				}
				check(e.inner)
			default:
				t.Fatalf("kind %q", e.kind)
			}
		}
		check(e)
		// And it evaluates without a panic (no store: range functions
		// give nothing, constants and operators on them still run).
		if _, err := evalMetric(context.Background(), nil, e, base, base+10e9, 1e9); err != nil {
			var he *httpError
			if !errors.As(err, &he) || he.status != 400 {
				t.Fatalf("%q: %v", s, err)
			}
		}
	})
}

func FuzzParseAuth(f *testing.F) {
	for _, s := range []string{"token abc\n", "basic u p tenant\n# c\n", "token a sha256:5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8", "bogus"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAuth(strings.NewReader(s))
		if err != nil {
			return
		}
		for _, c := range a.creds {
			if c.tenant != "" && !validTenant(c.tenant) {
				t.Fatalf("accepted tenant %q", c.tenant)
			}
		}
	})
}
