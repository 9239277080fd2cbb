package query

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParse: no input panics; errors are *ParseError inside the input;
// accepted queries compile, print back to themselves, parse the same with
// a comment after them, and their plans run with Required a necessary
// condition of the line filters; drop and keep stages change neither
// Required nor the filters, and LabelSet gives sorted, distinct names.
func FuzzParse(f *testing.F) {
	for _, c := range loghubCases {
		f.Add(c.q)
	}
	for _, c := range structuredCases {
		f.Add(c.q)
	}
	lines := [][]byte{
		nil, []byte("error timeout kernel \u212aernel ſsh"), []byte(`{"a":{"b":1},"level":"error","status":503}`),
		[]byte(`level=error status=500 msg="x y" d=1s size=3KB`), []byte("\xff\xfe\r\n"),
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := Parse(s)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			if pe.Pos < 0 || (pe.Pos > len(s) && pe.Pos != MaxQueryLen) {
				t.Fatalf("position %d outside the query of %d bytes", pe.Pos, len(s))
			}
			return
		}
		p, err := Compile(q)
		if err != nil {
			t.Fatalf("Compile after Parse: %v", err)
		}
		q2, err := Parse(q.String())
		if err != nil {
			t.Fatalf("reparse of %q: %v", q.String(), err)
		}
		if q2.String() != q.String() {
			t.Fatalf("round trip %q -> %q", q.String(), q2.String())
		}
		if c, err := Parse(s + " # comment \" ` #"); err != nil || c.String() != q.String() {
			t.Fatalf("%q with a comment after it: %v %v", s, c, err)
		}
		var noDrop Query
		noDrop.Selector = q.Selector
		for _, st := range q.Stages {
			if _, ok := st.(*DropStage); !ok {
				noDrop.Stages = append(noDrop.Stages, st)
			}
		}
		if len(noDrop.Stages) != len(q.Stages) {
			p2, err := Compile(&noDrop)
			if err != nil {
				t.Fatalf("Compile without drop/keep: %v", err)
			}
			if p2.Required.String() != p.Required.String() || len(p2.Filters) != len(p.Filters) {
				t.Fatalf("%q: drop/keep changed the plan: Required %v, %d filters; without %v, %d", s, p.Required, len(p.Filters), p2.Required, len(p2.Filters))
			}
		}
		stream := []Label{{"app", "x"}, {"level", "error"}}
		for _, l := range append(lines, []byte(s)) {
			if p.MatchLine(l) && !p.Required.Eval(l) {
				t.Fatalf("line %q passes the filters of %q but not Required %v", l, s, p.Required)
			}
			match := p.MatchEntry(stream, l)
			p.Labels(nil, l)
			set, changed, ok := p.LabelSet(stream, l)
			if ok != match || (!changed && set != nil) {
				t.Fatalf("%q on %q: LabelSet ok=%v changed=%v set=%q, MatchEntry %v", s, l, ok, changed, set, match)
			}
			for i := 1; i < len(set); i++ {
				if set[i-1].Name >= set[i].Name {
					t.Fatalf("%q on %q: LabelSet not sorted or repeats a name: %q", s, l, set)
				}
			}
		}
	})
}

// FuzzPipeline feeds arbitrary lines to the json and logfmt parsers: no
// panic, and for valid UTF-8 JSON objects the labels equal a flattening
// done with encoding/json.
func FuzzPipeline(f *testing.F) {
	for _, s := range []string{
		`{"a":{"b":1},"level":"error","status":503,"arr":[1,{"x":2}],"n":null,"t":true}`,
		`{"s":"\u00e9\ud83d\ude00\"\\","a.b":{"c-d":"e"}}`,
		`level=error status=500 msg="x \"y\"" flag =bad foo=bar=baz`,
		"x=1\r\ny=\"unterminated", `{"a":`, `[]`, ``, "\xff=\xfe",
	} {
		f.Add(s)
	}
	plans := map[string]*Plan{}
	for _, q := range []string{`{a="b"} | json`, `{a="b"} | logfmt`, `{a="b"} | logfmt --strict --keep-empty`} {
		pq, err := Parse(q)
		if err != nil {
			f.Fatal(err)
		}
		p, err := Compile(pq)
		if err != nil {
			f.Fatal(err)
		}
		plans[q] = p
	}
	f.Fuzz(func(t *testing.T, line string) {
		for _, p := range plans {
			if _, ok := p.Labels([]Label{{"a", "b"}}, []byte(line)); !ok {
				t.Fatalf("a parser stage dropped %q", line)
			}
		}
		got, _ := plans[`{a="b"} | json`].Labels(nil, []byte(line))
		want, ok := flattenJSONOracle(line)
		if !ok {
			return
		}
		gm := map[string]string{}
		for _, l := range got {
			gm[l.Name] = l.Value
		}
		if len(gm) != len(want) {
			t.Fatalf("json labels of %q: got %q, want %q", line, got, want)
		}
		for k, v := range want {
			if gm[k] != v {
				t.Fatalf("json label %s of %q: got %q, want %q", k, line, gm[k], v)
			}
		}
	})
}

// flattenJSONOracle flattens a JSON object with encoding/json's token
// stream, keeping the first value of a repeated name. It declines (false)
// invalid UTF-8, where encoding/json substitutes U+FFFD.
func flattenJSONOracle(line string) (map[string]string, bool) {
	if !utf8.ValidString(line) || !json.Valid([]byte(line)) {
		return nil, false
	}
	d := json.NewDecoder(strings.NewReader(line))
	d.UseNumber()
	tok, err := d.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, false
	}
	out := map[string]string{}
	set := func(key, v string) {
		k := sanitizeKey([]byte(key))
		if _, dup := out[k]; !dup && k != "" {
			out[k] = v
		}
	}
	var object func(prefix string) bool
	// skip consumes the rest of an array or object whose opening
	// delimiter was read.
	skip := func() bool {
		depth := 1
		for depth > 0 {
			t, err := d.Token()
			if err != nil {
				return false
			}
			switch t {
			case json.Delim('{'), json.Delim('['):
				depth++
			case json.Delim('}'), json.Delim(']'):
				depth--
			}
		}
		return true
	}
	object = func(prefix string) bool {
		for {
			t, err := d.Token()
			if err != nil {
				return false
			}
			if t == json.Delim('}') {
				return true
			}
			key := prefix + t.(string)
			v, err := d.Token()
			if err != nil {
				return false
			}
			switch v := v.(type) {
			case json.Delim:
				if v == '{' {
					if !object(key + "_") {
						return false
					}
				} else if !skip() {
					return false
				}
			case string:
				set(key, v)
			case json.Number:
				set(key, string(v))
			case bool:
				set(key, strconv.FormatBool(v))
			case nil:
				set(key, "")
			}
		}
	}
	if !object("") {
		return nil, false
	}
	return out, true
}
