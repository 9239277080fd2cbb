package query

import (
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"testing"
)

func TestExactValues(t *testing.T) {
	for _, c := range []struct {
		re   string
		want []string // nil: not a few literal values
	}{
		{"abc", []string{"abc"}},
		{"a|b", []string{"a", "b"}},
		{"(get|put)_ok", []string{"get_ok", "put_ok"}},
		{"id-[12]", []string{"id-1", "id-2"}},
		{"abc|abd", []string{"abc", "abd"}}, // factored by the parser: ab[cd]
		{"x(y)?", []string{"x", "xy"}},
		{"(?:a|b)(?:c|d)", []string{"ac", "ad", "bc", "bd"}},
		{"5f89b9dc03bdc1981f886353c7c0df13", []string{"5f89b9dc03bdc1981f886353c7c0df13"}},
		{"a.c", nil},
		{"a*", nil},
		{"a+", nil},
		{"(?i)abc", nil},
		{"^abc$", []string{"abc"}}, // the matcher is anchored: these change nothing
		{`\Aabc\z`, []string{"abc"}},
		{"(?m)^abc$", []string{"abc"}},
		{"^(a|b)c$", []string{"ac", "bc"}},
		{"a^b", nil},
		{"^a|b$", nil},
		{"a$b", nil},
		{"a{2}", []string{"aa"}},
		{"(a|b){2}", []string{"aa", "ab", "ba", "bb"}},
		{"x{1,3}", []string{"x", "xx", "xxx"}},
		{"x{0,2}y", []string{"xxy", "xy", "y"}},
		{"x{2,}", nil},
		{"[ab]{5}", nil}, // 32 values
		{"[a-z]", nil},   // 26 values: more than maxExactValues
		{"(a|b|c|d)(e|f|g|h)(i|j)", nil},
		{"\uFFFD", nil}, // an invalid byte of a value matches it too
		{"[\uFFF0-\uFFFF]", nil},
	} {
		re, err := syntax.Parse(c.re, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := exactValues(re)
		if ok != (c.want != nil) || !slices.Equal(got, c.want) {
			t.Errorf("exactValues(%q) = %q, %v; want %q", c.re, got, ok, c.want)
		}
	}
}

// FuzzExactValues checks exactValues, and exactValuesUpTo with a label
// filter set's limit, against the regexp engine: each value listed
// matches the anchored pattern, and any string the anchored pattern
// matches (s, and the values with a byte changed) is listed.
func FuzzExactValues(f *testing.F) {
	for _, s := range []string{"a|b", "(get|put)_ok", "id-[12]", "x(y)?", "\uFFFD|a", "(?i)k", "a\\x{212A}", "^a{2}$", "(?m)^(a|b){1,2}$", "[0-9]{3}", "u(1|2|3|40|41|5)x?|[a-z]{2}", "x{0,16}"} {
		f.Add(s, "a")
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		re, err := syntax.Parse(pattern, syntax.Perl)
		if err != nil {
			return
		}
		m, err := regexp.Compile(anchored(pattern))
		if err != nil {
			return
		}
		// The index's few values, and a label filter's set (labelsets.go).
		for _, limit := range []int{maxExactValues, maxSetValues} {
			vals, ok := exactValuesUpTo(re, limit)
			if limit == maxExactValues {
				v, ok2 := exactValues(re)
				if ok2 != ok || !slices.Equal(v, vals) {
					t.Fatalf("%q: exactValues %q, %v; exactValuesUpTo %q, %v", pattern, v, ok2, vals, ok)
				}
			}
			if ok {
				checkExactValues(t, pattern, m, s, vals, limit)
			}
		}
	})
}

// checkExactValues fails t unless vals (at most limit) are exactly the
// strings of the candidates that the anchored pattern m matches.
func checkExactValues(t *testing.T, pattern string, m *regexp.Regexp, s string, vals []string, limit int) {
	t.Helper()
	if len(vals) > limit {
		t.Fatalf("%q: %d values", pattern, len(vals))
	}
	cands := []string{s, "", "\xff", s + "\xff"}
	for _, v := range vals {
		if !m.MatchString(v) {
			t.Fatalf("%q: value %q does not match", pattern, v)
		}
		for i := range len(v) {
			cands = append(cands, v[:i]+"\xff"+v[i+1:], v[:i]+v[i+1:], v[:i]+strings.ToUpper(v[i:i+1])+v[i+1:])
		}
	}
	for _, c := range cands {
		if m.MatchString(c) && !slices.Contains(vals, c) {
			t.Fatalf("%q matches %q, which exactValues %q leaves out", pattern, c, vals)
		}
	}
}
