package query

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// The expected line numbers (1-based) in testdata/structured.log were
// worked out by hand from Loki's documented semantics; see the comments
// for the reasoning on the surprising ones.
var structuredCases = []struct {
	q    string
	want []int
}{
	{`{app="structured"} | json | level="error"`, []int{1, 4, 10}},
	// Lines that are not JSON carry __error__, and numeric predicates do not
	// filter such lines; "n/a" fails conversion and is kept too.
	{`{app="structured"} | json | status >= 500`, []int{1, 4, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}},
	{`{app="structured"} | json | status >= 500 | __error__=""`, []int{1, 4, 7, 10}},
	{`{app="structured"} | json | req_method="GET" and req_duration > 1s`, []int{1, 6}},
	{`{app="structured"} | json | __error__="" | req_path=~"/api/orders.*" or status == 201`, []int{3, 4, 5, 6}},
	{`{app="structured"} | json | nested_deep_x="y", ok="true", none=""`, []int{8}},
	{`{app="structured"} | json | __error__="" | user_id == 42`, []int{5}},
	{`{app="structured"} | json | __error__="" | size > 1KB`, []int{1, 3, 4}},
	{`{app="structured"} | json | level=~"(?i)error"`, []int{1, 4, 7, 10}},
	{`{app="structured"} |= "timeout" | json | level="error"`, []int{1}},
	{`{app="structured"} |~ "(?i)timeout" | logfmt | level=~"(?i)error"`, []int{11, 19}},
	{`{app="structured"} | logfmt | status >= 500`, []int{9, 11, 14, 15, 17, 19}},
	{`{app="structured"} | logfmt --strict | __error__=""`, []int{9, 11, 12, 13, 14, 15, 18, 19}},
	{`{app="structured"} | logfmt | msg="db \"down\""`, []int{14}},
	{`{app="structured"} | logfmt | foo="bar=buzz"`, nil},
	{`{app="structured"} | logfmt | method="GET"`, []int{11, 12, 16, 18, 19}},
	{`{app="structured"} | logfmt | duration >= 1s`, []int{11, 14, 19}},
	{`{app="structured"} | logfmt | size <= 10KB`, []int{11, 12}},
	{`{app="structured"} | logfmt | service < 10ms and host="grafana.net"`, []int{18}},
	// app is a stream label: the extracted one is renamed.
	{`{app="structured"} | json | app="payments"`, nil},
	{`{app="structured"} | json | app_extracted="payments"`, []int{7}},
	{`{app="structured"} | logfmt | app_extracted="payments"`, []int{14}},
	// and/or fold left to right: (error or warn) and status < 500.
	{`{app="structured"} | json | level="error" or level="warn" and status < 500`, []int{3}},
	{`{app="structured"} | json | level="error" or (level="warn" and status < 500)`, []int{1, 3, 4, 10}},
	{`{app="structured"} | json | __error__="" | status > 200, status < 500`, []int{3, 5, 6, 8}},
	{`{app="structured"} | json | __error__!="" | __error__="JSONParserErr"`, []int{9, 11, 12, 13, 14, 15, 16, 17, 18, 19}},
	{`{app="structured"} | logfmt | level="error" | json`, []int{9, 11, 14, 17}},
	{`{app="structured"} | json | msg="cache \"miss\""`, []int{6}},
	{`{app="structured"} != "json" | logfmt | level="info" status="200"`, []int{12, 16}},
	// drop and keep change the labels later stages see, never the lines.
	{`{app="structured"} | json | drop __error__ | __error__=""`, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}},
	{`{app="structured"} | json | drop __error__="LogfmtParserErr" | __error__=""`, []int{1, 2, 3, 4, 5, 6, 7, 8, 10}},
	{`{app="structured"} | json | drop __error__=~"JSON.*" | __error_details__!=""`, []int{9, 11, 12, 13, 14, 15, 16, 17, 18, 19}},
	// Without __error__ the numeric predicate filters again: a missing
	// status drops the line, "n/a" fails conversion and keeps it (line 6).
	{`{app="structured"} | json | drop __error__, __error_details__ | status >= 500`, []int{1, 4, 6, 7, 10}},
	{`{app="structured"} | json | drop level | level=""`, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}},
	{`{app="structured"} | json | drop level="error" | level=""`, []int{1, 4, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}},
	{`{app="structured"} | json | drop level!~"(?i)error" | level!=""`, []int{1, 4, 7, 10}},
	{`{app="structured"} | json | keep level | status=""`, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}},
	{`{app="structured"} | json | keep status=~"5.." | status!=""`, []int{1, 4, 7}},
	// keep leaves __error__ alone.
	{`{app="structured"} | json | keep level | __error__!=""`, []int{9, 11, 12, 13, 14, 15, 16, 17, 18, 19}},
	// Stream labels go too; an extracted app is still app_extracted.
	{`{app="structured"} | drop app | app="structured"`, nil},
	{`{app="structured"} | keep source | app=""`, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}},
	{`{app="structured"} | json | drop app | app_extracted="payments"`, []int{7}},
	{`{app="structured"} | drop app | json | app_extracted="payments"`, []int{7}},
	{`{app="structured"} | drop app | json | app="payments"`, nil},
	// A later parser runs on the line, not on the dropped labels.
	{`{app="structured"} | logfmt | drop level | logfmt | level="error"`, []int{9, 11, 14, 17}},
	{"{app=\"structured\"} # all of it\n | json # parse\n | level=\"error\" # errors", []int{1, 4, 10}},
}

func TestStructuredQueries(t *testing.T) {
	data, err := os.ReadFile("testdata/structured.log")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	stream := []Label{{"source", "structured.log"}, {"app", "structured"}}
	for _, tc := range structuredCases {
		t.Run(tc.q, func(t *testing.T) {
			q, err := Parse(tc.q)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Compile(q)
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for i, l := range lines {
				if p.MatchEntry(stream, []byte(l)) {
					got = append(got, i+1)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("lines %v, want %v", got, tc.want)
			}
		})
	}
}

func TestExtractedLabels(t *testing.T) {
	for _, tc := range []struct {
		q, line string
		want    []Label
	}{
		{`{a="b"} | json`, `{"a.b":{"c":"d"},"e":"f","arr":[1,{"x":2}],"n":-1.5e3,"t":true,"z":null,"9x":"y","é":"u"}`,
			[]Label{{"a_b_c", "d"}, {"e", "f"}, {"n", "-1.5e3"}, {"t", "true"}, {"z", ""}, {"_9x", "y"}, {"_", "u"}}},
		{`{a="b"} | json`, `{"s":"tab\there \u00e9 \ud83d\ude00 \"q\" \\ \/"}`,
			[]Label{{"s", "tab\there é 😀 \"q\" \\ /"}}},
		{`{a="b"} | json`, `{"k":"first","k":"second","a":"x"}`,
			[]Label{{"k", "first"}, {"a_extracted", "x"}}},
		{`{a="b"} | json`, `["not","an","object"]`,
			[]Label{{"__error__", ErrJSON}, {"__error_details__", "not a JSON object"}}},
		{`{a="b"} | json`, ``,
			[]Label{{"__error__", ErrJSON}, {"__error_details__", "invalid JSON"}}},
		{`{a="b"} | logfmt`, `x=1 y="two words" flag z= w="esc\"aped"`,
			[]Label{{"x", "1"}, {"y", "two words"}, {"z", ""}, {"w", `esc"aped`}}},
		{`{a="b"} | logfmt --keep-empty`, `x=1 flag y=2`,
			[]Label{{"x", "1"}, {"flag", ""}, {"y", "2"}}},
		{`{a="b"} | logfmt --strict`, `x=1 =bad y=2`,
			[]Label{{"x", "1"}, {"__error__", ErrLogfmt}, {"__error_details__", "missing key before '=' at byte 4"}}},
		{`{a="b"} | logfmt`, "x=1\r\ny=2\r", []Label{{"x", "1"}, {"y", "2"}}},
		{`{a="b"} | logfmt`, "k\xff=v", []Label{{"k_", "v"}}},
		{`{a="b"} | logfmt | n > 5`, `n=abc`,
			[]Label{{"n", "abc"}, {"__error__", ErrLabelFilter}, {"__error_details__", `cannot convert "abc" of label n`}}},
	} {
		q, err := Parse(tc.q)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Compile(q)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := p.Labels([]Label{{"a", "b"}}, []byte(tc.line))
		if !ok || !slices.Equal(got, tc.want) {
			t.Errorf("%s on %q:\n got %q %v\nwant %q", tc.q, tc.line, got, ok, tc.want)
		}
	}
}

func TestTypedValues(t *testing.T) {
	for _, tc := range []struct {
		lit  string
		kind ValueKind
		v    float64
	}{
		{"500", KindNumber, 500}, {"-2.5", KindNumber, -2.5}, {"10s", KindDuration, 10},
		{"1h30m", KindDuration, 5400}, {"300ms", KindDuration, 0.3}, {"5µs", KindDuration, 5e-6},
		{"20MB", KindBytes, 20e6}, {"1.5KiB", KindBytes, 1536}, {"20B", KindBytes, 20}, {"3kb", KindBytes, 3000},
	} {
		k, v, ok := parseTypedValue(tc.lit)
		if !ok || k != tc.kind || v != tc.v {
			t.Errorf("parseTypedValue(%q) = %v %v %v, want %v %v", tc.lit, k, v, ok, tc.kind, tc.v)
		}
	}
	for _, bad := range []string{"1e3", "Inf", "0x10", "10k", "1.", ".5", "5xb", "1..2"} {
		if _, _, ok := parseTypedValue(bad); ok {
			t.Errorf("parseTypedValue(%q) accepted", bad)
		}
	}
	for _, tc := range []struct {
		s string
		v float64
	}{{"42", 42}, {"42 MB", 42e6}, {"1.5KiB", 1536}, {"10k", 1e4}, {"2Gi", 2 << 30}} {
		if v, ok := parseBytes(tc.s, true); !ok || v != tc.v {
			t.Errorf("parseBytes(%q) = %v %v, want %v", tc.s, v, ok, tc.v)
		}
	}
}

// The oracle of FuzzPipeline must actually compare on ordinary objects.
func TestJSONOracleAgrees(t *testing.T) {
	data, err := os.ReadFile("testdata/structured.log")
	if err != nil {
		t.Fatal(err)
	}
	pq, _ := Parse(`{a="b"} | json`)
	p, _ := Compile(pq)
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		want, ok := flattenJSONOracle(line)
		if !ok {
			continue
		}
		n++
		got, _ := p.Labels(nil, []byte(line))
		if len(got) != len(want) {
			t.Fatalf("%q: got %v, want %v", line, got, want)
		}
		for _, l := range got {
			if want[l.Name] != l.Value {
				t.Fatalf("%q: label %s = %q, want %q", line, l.Name, l.Value, want[l.Name])
			}
		}
	}
	if n != 9 {
		t.Fatalf("oracle accepted %d JSON lines, want 9", n)
	}
}
