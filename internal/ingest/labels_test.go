package ingest

import (
	"strings"
	"testing"
)

func TestParseLabels(t *testing.T) {
	tests := []struct {
		in   string
		want string // canonical String(), or "" for an error
		err  string // substring of the error
	}{
		{"", "{}", ""},
		{"{}", "{}", ""},
		{" { } ", "{}", ""},
		{"app=api", `{app="api"}`, ""},
		{"source=a.log,app=api", `{app="api", source="a.log"}`, ""},
		{" app = api , source = a.log ", `{app="api", source="a.log"}`, ""},
		{"app=api,", `{app="api"}`, ""},
		{"path=/var/log/x=y.log", `{path="/var/log/x=y.log"}`, ""},
		{"home=~/logs", `{home="~/logs"}`, ""},
		{`q="a,b",r=c`, `{q="a,b", r="c"}`, ""},
		{"q=`a\\b`", `{q="a\\b"}`, ""},
		{`q=" padded "`, `{q=" padded "}`, ""},
		{"_x1=1", `{_x1="1"}`, ""},
		{"a=ü", `{a="ü"}`, ""},
		{`{app="api", source="a.log"}`, `{app="api", source="a.log"}`, ""},
		{`{source="a.log",app="api",}`, `{app="api", source="a.log"}`, ""},
		{`{q="tab\there \"quoted\" back\\slash \x00 \xff"}`, `{q="tab\there \"quoted\" back\\slash \x00 \xff"}`, ""},
		{"{q=`raw`}", `{q="raw"}`, ""},

		{"app", "", `column 4: expected '=' after label name "app"`},
		{"app=", "", `column 5: label "app" has an empty value`},
		{"app=api,,x=y", "", "column 9: expected a label name"},
		{"=api", "", "column 1: expected a label name"},
		{"1app=x", "", "column 1: label name must not start with a digit"},
		{"ap-p=x", "", `column 3: invalid character '-' in label name "ap"`},
		{"app=a,app=b", "", `duplicate label "app"`},
		{"a=1,b=2,a=3", "", `duplicate label "a"`},
		{`app="api`, "", "column 5: unterminated quoted value"},
		{`app="a\qb"`, "", "column 5: bad quoted value"},
		{`app="a"b`, "", "column 8: expected ',' between labels"},
		{`app=a"b`, "", `column 6: label "app": quote inside an unquoted value`},
		{`{app="api"`, "", "column 11: missing closing '}'"},
		{`{app=api}`, "", `column 6: label "app": value must be quoted inside {}`},
		{`{app=~"api"}`, "", "not a matcher"},
		{`{app!="api"}`, "", `invalid character '!'`},
		{`{app="api"} x`, "", `column 13: unexpected "x" after '}'`},
		{`{app="api" source="x"}`, "", "column 12: expected ',' between labels"},
	}
	for _, tc := range tests {
		ls, err := ParseLabels(tc.in)
		if tc.want == "" {
			if err == nil {
				t.Errorf("ParseLabels(%q) = %v, want error %q", tc.in, ls, tc.err)
			} else if !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseLabels(%q) error %q, want it to contain %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseLabels(%q): %v", tc.in, err)
			continue
		}
		if got := ls.String(); got != tc.want {
			t.Errorf("ParseLabels(%q).String() = %s, want %s", tc.in, got, tc.want)
		}
		back, err := ParseLabels(ls.String())
		if err != nil || !back.Equal(ls) {
			t.Errorf("round trip of %s: %v, %v", ls, back, err)
		}
	}
}

func TestLabelsGetWith(t *testing.T) {
	ls, err := ParseLabels("b=2,d=4")
	if err != nil {
		t.Fatal(err)
	}
	if ls.Get("b") != "2" || ls.Get("d") != "4" || ls.Get("a") != "" || ls.Get("c") != "" || ls.Get("e") != "" {
		t.Fatalf("Get on %s wrong", ls)
	}
	for _, tc := range []struct{ name, value, want string }{
		{"a", "1", `{a="1", b="2", d="4"}`},
		{"c", "3", `{b="2", c="3", d="4"}`},
		{"e", "5", `{b="2", d="4", e="5"}`},
		{"b", "x", `{b="x", d="4"}`},
		{"d", "x", `{b="2", d="x"}`},
		{"b", "", `{d="4"}`},
		{"c", "", `{b="2", d="4"}`},
	} {
		if got := ls.With(tc.name, tc.value).String(); got != tc.want {
			t.Errorf("With(%q, %q) = %s, want %s", tc.name, tc.value, got, tc.want)
		}
	}
	if ls.String() != `{b="2", d="4"}` {
		t.Fatalf("With modified its receiver: %s", ls)
	}
	if got := Labels(nil).With("source", "a.log").String(); got != `{source="a.log"}` {
		t.Fatalf("nil With = %s", got)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("With with an invalid name did not panic")
		}
	}()
	ls.With("bad-name", "x")
}

func FuzzParseLabels(f *testing.F) {
	f.Add(`app=api,source=a.log`)
	f.Add(`{app="api", source="a.log"}`)
	f.Add(`{q="tab\there \"q\" \\ \xff"}`)
	f.Add("q=`raw,x`, r = s ")
	f.Fuzz(func(t *testing.T, s string) {
		ls, err := ParseLabels(s)
		if err != nil {
			return
		}
		for i, l := range ls {
			if !validName(l.Name) || l.Value == "" || (i > 0 && ls[i-1].Name >= l.Name) {
				t.Fatalf("ParseLabels(%q) = %#v breaks the invariants", s, ls)
			}
		}
		str := ls.String()
		back, err := ParseLabels(str)
		if err != nil {
			t.Fatalf("ParseLabels(%q) of String of ParseLabels(%q): %v", str, s, err)
		}
		if !back.Equal(ls) || back.String() != str {
			t.Fatalf("round trip of %q: %#v became %#v", s, ls, back)
		}
	})
}

// TestParsePushLabels: pushed labels with an empty value are dropped, as
// Loki and Prometheus read them (and as a JSON map push always did); the
// other rules stay those of ParseLabels.
func TestParsePushLabels(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{`{app="x", env=""}`, `{app="x"}`, ""},
		{`{env="", app="x"}`, `{app="x"}`, ""},
		{`{env=""}`, `{}`, ""},
		{`app=x,env=`, `{app="x"}`, ""},
		{`{app="x", app=""}`, "", "duplicate label"},
		{`{app=x}`, "", "must be quoted"},
		{`{app="x",}`, `{app="x"}`, ""},
	} {
		ls, err := ParsePushLabels(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParsePushLabels(%q) = %v, %v; want an error containing %q", c.in, ls, err, c.err)
			}
			continue
		}
		if err != nil || ls.String() != c.want {
			t.Errorf("ParsePushLabels(%q) = %s, %v; want %s", c.in, ls, err, c.want)
		}
		if _, err := ParseLabels(c.in); err == nil && strings.Contains(c.in, `=""`) {
			t.Errorf("ParseLabels(%q) accepted an empty value", c.in)
		}
	}
}

// TestLabelsCompare: label by label, name then value, a prefix first (as
// Prometheus' labels.Compare), not by the labels' text.
func TestLabelsCompare(t *testing.T) {
	l := func(s string) Labels {
		ls, err := ParseLabels(s)
		if err != nil {
			t.Fatal(err)
		}
		return ls
	}
	for _, c := range []struct {
		a, b string
		want int
	}{
		{`{app="a"}`, `{app="a b"}`, -1}, // the text order is the reverse
		{`{app="a"}`, `{app="a", level="x"}`, -1},
		{`{app="a", level="x"}`, `{app="b"}`, -1},
		{`{a="z"}`, `{b="a"}`, -1},
		{`{app="a"}`, `{app="a"}`, 0},
		{`{}`, `{}`, 0},
	} {
		if got := l(c.a).Compare(l(c.b)); got != c.want {
			t.Errorf("%s.Compare(%s) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := l(c.b).Compare(l(c.a)); got != -c.want {
			t.Errorf("%s.Compare(%s) = %d, want %d", c.b, c.a, got, -c.want)
		}
	}
}
