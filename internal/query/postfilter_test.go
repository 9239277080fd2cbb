package query

import (
	"slices"
	"testing"
)

// TestFilterLabels: label filters run on a whole label set whose
// __error__ is the entry's error state, as after a metric query's unwrap.
func TestFilterLabels(t *testing.T) {
	errSet := []Label{{"__error__", "SampleExtractionErr"}, {"__error_details__", "d"}, {"app", "a"}}
	plain := []Label{{"app", "a"}, {"n", "x7"}}
	for _, c := range []struct {
		filters string
		in      []Label
		want    []Label // nil: dropped
	}{
		{`| __error__=""`, errSet, nil},
		{`| __error__=""`, plain, plain},
		{`| __error__!="SampleExtractionErr"`, errSet, nil},
		{`| __error__=~"Sample.*"`, errSet, errSet},
		{`| app="a" | __error__=""`, plain, plain},
		{`| app="b" or n="x7"`, plain, plain},
		{`| app!="a"`, plain, nil},
		// A number filter that cannot convert sets LabelFilterErr (and
		// keeps the set); with an error already set it does not filter.
		{`| n > 3`, plain, []Label{{"__error__", "LabelFilterErr"}, {"__error_details__", `cannot convert "x7" of label n`}, {"app", "a"}, {"n", "x7"}}},
		{`| n > 3 | __error__=""`, plain, nil},
		{`| missing > 3`, plain, nil},
		{`| app > 3`, errSet, errSet},
	} {
		ast, err := Parse(`{x="y"} ` + c.filters)
		if err != nil {
			t.Fatalf("%s: %v", c.filters, err)
		}
		if st, ok := OnlyLabelFilters(ast); !ok {
			t.Fatalf("%s: %v is not a label filter", c.filters, st)
		}
		p, err := Compile(ast)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := p.FilterLabels(slices.Clone(c.in))
		if ok != (c.want != nil) || !slices.Equal(got, c.want) {
			t.Errorf("%s on %v: %v %v, want %v", c.filters, c.in, got, ok, c.want)
		}
	}
	for _, q := range []string{`{x="y"} | json`, `{x="y"} |= "a"`, `{x="y"} | drop a`, `{x="y"} | app="a" | logfmt`} {
		ast, err := Parse(q)
		if err != nil {
			t.Fatal(err)
		}
		if st, ok := OnlyLabelFilters(ast); ok || st == nil {
			t.Errorf("OnlyLabelFilters(%s) = %v, %v; want the first other stage", q, st, ok)
		}
	}
}

func TestParseBytesValue(t *testing.T) {
	for s, want := range map[string]float64{"42": 42, "42B": 42, "7 B": 7, "10KB": 10000, "1.5KiB": 1536, "3MB": 3e6, "2k": 2000, "1Gi": 1 << 30, "0": 0} {
		if v, ok := ParseBytesValue(s); !ok || v != want {
			t.Errorf("ParseBytesValue(%q) = %v, %v; want %v", s, v, ok, want)
		}
	}
	for _, s := range []string{"", "x", "1.2.3", "10 parsecs", "KB", "1e3"} {
		if v, ok := ParseBytesValue(s); ok {
			t.Errorf("ParseBytesValue(%q) = %v, want failure", s, v)
		}
	}
}
