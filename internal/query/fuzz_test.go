package query

import (
	"errors"
	"testing"
)

// FuzzParse: no input panics; errors are *ParseError inside the input;
// accepted queries compile, print back to themselves, and their plans run
// with Required a necessary condition of the line filters.
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
		for _, l := range append(lines, []byte(s)) {
			if p.MatchLine(l) && !p.Required.Eval(l) {
				t.Fatalf("line %q passes the filters of %q but not Required %v", l, s, p.Required)
			}
			p.MatchEntry([]Label{{"app", "x"}}, l)
			p.Labels(nil, l)
		}
	})
}
