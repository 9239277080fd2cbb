package query

// Cases found by oracle_test.go's exploration that broke doc.go's
// contract (each failed before its fix).

import "testing"

// an extracted key named __error__ is reported by Labels next to the
// pipeline's own __error__ (two labels with one name), and __error__
// predicates do not see the value Labels reports.
func TestExtractedErrorLabel(t *testing.T) {
	p := oraclePlan(`{app="web"} | logfmt --strict`)
	ls, _ := p.Labels(nil, []byte(`__error__=x "`))
	n := 0
	for _, l := range ls {
		if l.Name == "__error__" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("Labels = %q: %d labels named __error__, want 1", ls, n)
	}
	p = oraclePlan(`{app="web"} | logfmt | __error__=""`)
	ls, ok := p.Labels(nil, []byte(`__error__=x`))
	if ok {
		for _, l := range ls {
			if l.Name == "__error__" && l.Value != "" {
				t.Errorf("line passed __error__=\"\" but its labels say %q", ls)
			}
		}
	}
}

// bytes literals in a query accept units doc.go does not list (Ki, Mi,
// Gi, Ti, Pi, Ei, any case); parser.go's own comment says only label values
// get the forms without B.
func TestBytesLiteralUnits(t *testing.T) {
	for _, v := range []string{"10Ki", "10ki", "10Mi", "10GI"} {
		if _, err := Parse(`{a="b"} | x > ` + v); err == nil {
			t.Errorf("%s parsed; doc.go's Bytes units are B kB KB MB GB TB PB EB KiB MiB GiB TiB PiB EiB", v)
		}
	}
}

// doc.go's grammar lets Bytes start with "-" (Number Unit, Number =
// [ "-" ] Digits ...), as durations may, but the parser refuses it.
func TestNegativeBytesLiteral(t *testing.T) {
	if _, err := Parse(`{a="b"} | x > -10KB`); err != nil {
		t.Errorf("-10KB: %v; doc.go's grammar allows Bytes = Number Unit with a negative Number", err)
	}
}
