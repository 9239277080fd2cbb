package metricstest

import (
	"os"
	"strings"
	"testing"
)

func TestParseValid(t *testing.T) {
	text := "# HELP a_total Help with \\\\ and \\n.\n# TYPE a_total counter\n" +
		"a_total{k=\"q\\\"b\\\\s\\nn\",z=\"\"} 1.5 1700000000000\n" +
		"a_total{k=\"x\"} 2\n" +
		"# TYPE h histogram\n" +
		"h_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 3\nh_sum 7\nh_count 3\n" +
		"# TYPE s summary\ns{quantile=\"0.5\"} 0.1\ns_sum 1\ns_count 4\n" +
		"untyped_one -Inf\n"
	fams, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(fams) != 4 {
		t.Fatalf("%d families, want 4: %+v", len(fams), fams)
	}
	a := fams[0]
	if a.Name != "a_total" || a.Type != "counter" || a.Help != "Help with \\ and \n." || len(a.Samples) != 2 {
		t.Errorf("family a: %+v", a)
	}
	if v, _ := a.Samples[0].Get("k"); v != "q\"b\\s\nn" {
		t.Errorf("label value %q", v)
	}
	if s := a.Samples[0]; s.Value != 1.5 || !s.HasTimestamp || s.Timestamp != 1700000000000 {
		t.Errorf("sample %+v", s)
	}
	if fams[1].Type != "histogram" || len(fams[1].Samples) != 4 || fams[2].Type != "summary" || fams[3].Type != "untyped" {
		t.Errorf("families %+v", fams[1:])
	}
	if fams, err := Parse(""); err != nil || len(fams) != 0 {
		t.Errorf("empty: %v %v", fams, err)
	}
}

// TestParseInvalid checks each rule with a text that breaks only it.
func TestParseInvalid(t *testing.T) {
	for _, c := range []struct{ name, text string }{
		{"no final newline", "a 1"},
		{"empty line", "a 1\n\nb 2\n"},
		{"invalid UTF-8", "a{k=\"\xff\"} 1\n"},
		{"other comment", "# hello\na 1\n"},
		{"HELP without text", "# HELP a\na 1\n"},
		{"bad escape in HELP", "# HELP a x\\ty\na 1\n"},
		{"quote escape in HELP", "# HELP a x\\\"y\na 1\n"},
		{"second HELP", "# HELP a x\n# HELP a y\na 1\n"},
		{"second TYPE", "# TYPE a gauge\n# TYPE a gauge\na 1\n"},
		{"unknown type", "# TYPE a meter\na 1\n"},
		{"TYPE after samples", "a 1\n# TYPE a gauge\n"},
		{"family twice", "a 1\nb 1\na{x=\"1\"} 2\n"},
		{"metadata only", "# TYPE a gauge\n"},
		{"bad name", "1a 1\n"},
		{"no value", "a\n"},
		{"two spaces", "a  1\n"},
		{"bad value", "a one\n"},
		{"hex value", "a 0x10\n"},
		{"inf spelled", "a Inf\n"},
		{"bad timestamp", "a 1 1.5\n"},
		{"trailing space", "a 1 \n"},
		{"empty braces", "a{} 1\n"},
		{"no comma", "a{x=\"1\" y=\"2\"} 1\n"},
		{"trailing comma", "a{x=\"1\",} 1\n"},
		{"unquoted value", "a{x=1} 1\n"},
		{"unterminated value", "a{x=\"1} 1\n"},
		{"unknown escape", "a{x=\"\\t\"} 1\n"},
		{"label twice", "a{x=\"1\",x=\"2\"} 1\n"},
		{"reserved label", "a{__x=\"1\"} 1\n"},
		{"duplicate series", "a{x=\"1\",y=\"2\"} 1\na{y=\"2\",x=\"1\"} 2\n"},
		{"counter sample name", "# TYPE a counter\na_sum 1\n"},
		{"bucket without le", "# TYPE h histogram\nh_bucket 1\nh_sum 1\nh_count 1\n"},
		{"le on sum", "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum{le=\"1\"} 1\nh_count 1\n"},
		{"no +Inf", "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n"},
		{"+Inf != count", "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 2\n"},
		{"le not increasing", "# TYPE h histogram\nh_bucket{le=\"2\"} 1\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n"},
		{"not cumulative", "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n"},
		{"no count", "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\n"},
		{"bad le", "# TYPE h histogram\nh_bucket{le=\"x\"} 1\nh_sum 1\nh_count 1\n"},
		{"fractional bucket", "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1.5\nh_sum 1\nh_count 1.5\n"},
		{"quantile > 1", "# TYPE s summary\ns{quantile=\"2\"} 1\ns_sum 1\ns_count 1\n"},
		{"summary without quantile", "# TYPE s summary\ns 1\ns_sum 1\ns_count 1\n"},
		{"summary no sum", "# TYPE s summary\ns{quantile=\"1\"} 1\ns_count 1\n"},
	} {
		if fams, err := Parse(c.text); err == nil {
			t.Errorf("%s: %q parsed: %+v", c.name, c.text, fams)
		}
	}
}

// TestParseClientGolang parses what client_golang v1.25 wrote for the
// server before this package replaced it: a second producer's output.
func TestParseClientGolang(t *testing.T) {
	b, err := os.ReadFile("testdata/client_golang.txt")
	if err != nil {
		t.Fatal(err)
	}
	fams, err := Parse(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(fams) != strings.Count(string(b), "# TYPE ") {
		t.Errorf("%d families, want one per TYPE line", len(fams))
	}
}

func FuzzParse(f *testing.F) {
	f.Add("# HELP a x\n# TYPE a counter\na{k=\"v\"} 1\n")
	f.Add("# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 3\nh_sum 7\nh_count 3\n")
	f.Fuzz(func(t *testing.T, s string) {
		fams, err := Parse(s)
		if err != nil {
			return
		}
		for _, f := range fams {
			if len(f.Samples) == 0 {
				t.Fatalf("family %s accepted without samples", f.Name)
			}
		}
	})
}
