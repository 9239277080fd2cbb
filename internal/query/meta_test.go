package query

import (
	"fmt"
	"testing"

	"haystack/internal/attrs"
)

func fmtLabels(ls []Label) string {
	if ls == nil {
		return "nil"
	}
	s := "{"
	for i, l := range ls {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf("%s=%q", l.Name, l.Value)
	}
	return s + "}"
}

// TestMetadataLabels runs pipelines over entries with structured metadata
// and compares the whole result (pass, All, Meta, and Split's stream and
// parsed parts) with what Loki 3's LabelsBuilder gives: metadata are
// labels of the entry; a metadata name the stream has is suffixed
// _extracted; a parsed key replaces a metadata label of its name; drop and
// keep remove metadata like any label.
func TestMetadataLabels(t *testing.T) {
	stream := []Label{{"app", "api"}, {"env", "prod"}}
	for _, tc := range []struct {
		name, q, line string
		meta          []string
		ok            bool
		changed       bool
		all, meta2    string // fmtLabels of All and Meta
		kept, parsed  string // fmtLabels of Split's parts
	}{
		{name: "no metadata, no stage", q: `{a="b"}`, line: "x", ok: true,
			all: "nil", meta2: "nil", kept: "nil", parsed: "nil"},
		{name: "metadata, no stage", q: `{a="b"}`, line: "x", meta: []string{"trace_id", "t1", "span_id", "s1"}, ok: true, changed: true,
			all:   `{app="api",env="prod",span_id="s1",trace_id="t1"}`,
			meta2: `{span_id="s1",trace_id="t1"}`, kept: `{app="api",env="prod"}`, parsed: "nil"},
		{name: "filter on metadata passes", q: `{a="b"} | trace_id="t1"`, line: "x", meta: []string{"trace_id", "t1"}, ok: true, changed: true,
			all:   `{app="api",env="prod",trace_id="t1"}`,
			meta2: `{trace_id="t1"}`, kept: `{app="api",env="prod"}`, parsed: "nil"},
		{name: "filter on metadata fails", q: `{a="b"} | trace_id="t2"`, line: "x", meta: []string{"trace_id", "t1"}},
		{name: "filter on missing metadata", q: `{a="b"} | trace_id="t1"`, line: "x"},
		{name: "negated filter on missing metadata", q: `{a="b"} | trace_id!="t1"`, line: "x", ok: true,
			all: "nil", meta2: "nil", kept: "nil", parsed: "nil"},
		{name: "regex and number filters", q: `{a="b"} | trace_id=~"t.*" | duration_ms > 100`, line: "x",
			meta: []string{"trace_id", "t9", "duration_ms", "250"}, ok: true, changed: true,
			all:   `{app="api",duration_ms="250",env="prod",trace_id="t9"}`,
			meta2: `{duration_ms="250",trace_id="t9"}`, kept: `{app="api",env="prod"}`, parsed: "nil"},
		{name: "number filter below", q: `{a="b"} | duration_ms > 100`, line: "x", meta: []string{"duration_ms", "99"}},
		{name: "stream conflict gets _extracted", q: `{a="b"} | app_extracted="m"`, line: "x", meta: []string{"app", "m"}, ok: true, changed: true,
			all:   `{app="api",app_extracted="m",env="prod"}`,
			meta2: `{app_extracted="m"}`, kept: `{app="api",env="prod"}`, parsed: "nil"},
		{name: "stream label wins its name", q: `{a="b"} | app="m"`, line: "x", meta: []string{"app", "m"}},
		{name: "parsed replaces metadata", q: `{a="b"} | logfmt | trace_id="p"`, line: "trace_id=p level=info", meta: []string{"trace_id", "m", "user", "u"}, ok: true, changed: true,
			all:   `{app="api",env="prod",level="info",trace_id="p",user="u"}`,
			meta2: `{user="u"}`, kept: `{app="api",env="prod"}`, parsed: `{level="info",trace_id="p"}`},
		{name: "metadata before the parser", q: `{a="b"} | trace_id="m" | logfmt`, line: "trace_id=p", meta: []string{"trace_id", "m"}, ok: true, changed: true,
			all:   `{app="api",env="prod",trace_id="p"}`,
			meta2: "nil", kept: `{app="api",env="prod"}`, parsed: `{trace_id="p"}`},
		{name: "parsed stream name vs metadata stream name", q: `{a="b"} | logfmt`, line: "app=p", meta: []string{"app", "m"}, ok: true, changed: true,
			all:   `{app="api",app_extracted="p",env="prod"}`,
			meta2: "nil", kept: `{app="api",env="prod"}`, parsed: `{app_extracted="p"}`},
		{name: "all three origins", q: `{a="b"} | logfmt`, line: "level=info env=y", meta: []string{"trace_id", "t", "app", "m", "empty", ""}, ok: true, changed: true,
			all:   `{app="api",app_extracted="m",env="prod",env_extracted="y",level="info",trace_id="t"}`,
			meta2: `{app_extracted="m",trace_id="t"}`, kept: `{app="api",env="prod"}`, parsed: `{env_extracted="y",level="info"}`},
		{name: "drop metadata", q: `{a="b"} | drop trace_id`, line: "x", meta: []string{"trace_id", "t", "span_id", "s"}, ok: true, changed: true,
			all:   `{app="api",env="prod",span_id="s"}`,
			meta2: `{span_id="s"}`, kept: `{app="api",env="prod"}`, parsed: "nil"},
		{name: "drop all metadata", q: `{a="b"} | drop trace_id`, line: "x", meta: []string{"trace_id", "t"}, ok: true,
			all: "nil", meta2: "nil", kept: "nil", parsed: "nil"},
		{name: "drop metadata by value", q: `{a="b"} | drop trace_id="t", span_id="x"`, line: "x", meta: []string{"trace_id", "t", "span_id", "s"}, ok: true, changed: true,
			all:   `{app="api",env="prod",span_id="s"}`,
			meta2: `{span_id="s"}`, kept: `{app="api",env="prod"}`, parsed: "nil"},
		{name: "drop stream label, metadata stays", q: `{a="b"} | drop env`, line: "x", meta: []string{"trace_id", "t"}, ok: true, changed: true,
			all:   `{app="api",trace_id="t"}`,
			meta2: `{trace_id="t"}`, kept: `{app="api"}`, parsed: "nil"},
		{name: "keep one metadata label", q: `{a="b"} | keep app, span_id`, line: "x", meta: []string{"trace_id", "t", "span_id", "s"}, ok: true, changed: true,
			all:   `{app="api",span_id="s"}`,
			meta2: `{span_id="s"}`, kept: `{app="api"}`, parsed: "nil"},
		{name: "filter after drop", q: `{a="b"} | drop trace_id | trace_id="t"`, line: "x", meta: []string{"trace_id", "t"}},
		{name: "error names are renamed", q: `{a="b"} | __error__=""`, line: "x", meta: []string{"__error__", "e"}, ok: true, changed: true,
			all:   `{__error___extracted="e",app="api",env="prod"}`,
			meta2: `{__error___extracted="e"}`, kept: `{app="api",env="prod"}`, parsed: "nil"},
		{name: "parser error is parsed", q: `{a="b"} | json`, line: "not json", meta: []string{"trace_id", "t"}, ok: true, changed: true,
			all:   `{__error__="JSONParserErr",__error_details__="invalid JSON",app="api",env="prod",trace_id="t"}`,
			meta2: `{trace_id="t"}`, kept: `{app="api",env="prod"}`, parsed: `{__error__="JSONParserErr",__error_details__="invalid JSON"}`},
		{name: "line filter never sees metadata", q: `{a="b"} |= "t1"`, line: "x", meta: []string{"trace_id", "t1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPlan(t, tc.q)
			var meta []byte
			if tc.meta != nil {
				meta = attrs.MustPairs(tc.meta...)
			}
			if got := p.MatchEntryAttrs(stream, meta, []byte(tc.line)); got != tc.ok {
				t.Fatalf("MatchEntryAttrs = %v, want %v", got, tc.ok)
			}
			l, changed, ok := p.LabelSetAttrs(stream, meta, []byte(tc.line))
			if ok != tc.ok || changed != tc.changed {
				t.Fatalf("LabelSetAttrs ok=%v changed=%v, want %v %v", ok, changed, tc.ok, tc.changed)
			}
			if !ok {
				return
			}
			kept, parsed := l.Split(stream)
			got := [4]string{fmtLabels(l.All), fmtLabels(l.Meta), fmtLabels(kept), fmtLabels(parsed)}
			want := [4]string{tc.all, tc.meta2, tc.kept, tc.parsed}
			if got != want {
				t.Fatalf("All, Meta, kept, parsed:\n got %q\nwant %q", got, want)
			}
			if meta == nil {
				// Without metadata LabelSet is the same function.
				set, c2, ok2 := p.LabelSet(stream, []byte(tc.line))
				if fmtLabels(set) != tc.all || c2 != changed || !ok2 {
					t.Fatalf("LabelSet = %s %v %v", fmtLabels(set), c2, ok2)
				}
			}
		})
	}
}

// TestMetadataCorrupt: metadata that does not decode adds no label (the
// segment reader validates it; a prefix must never be half-applied).
func TestMetadataCorrupt(t *testing.T) {
	stream := []Label{{"app", "api"}}
	good := attrs.MustPairs("a", "1", "b", "2")
	for _, bad := range [][]byte{good[:len(good)-1], append(append([]byte(nil), good...), 0), {0}, {2, 1, 'b', 0, 1, 'a', 0}} {
		p := mustPlan(t, `{a="b"} | a!="1"`)
		l, changed, ok := p.LabelSetAttrs(stream, bad, []byte("x"))
		if !ok || changed || l.All != nil {
			t.Fatalf("%q: %s %v %v", bad, fmtLabels(l.All), changed, ok)
		}
	}
}

// FuzzMetadataLabels runs pipelines on a line with arbitrary metadata
// bytes (valid encodings and not) and checks what holds for every entry:
// LabelSetAttrs and MatchEntryAttrs agree; All is sorted with each name
// once and no empty value; Meta, Split's stream and parsed parts
// partition it; each Meta label is a stored pair (its name maybe
// suffixed _extracted) unless dropped; corrupt metadata adds nothing.
func FuzzMetadataLabels(f *testing.F) {
	f.Add("level=info trace_id=p", attrs.MustPairs("trace_id", "t", "app", "m"))
	f.Add(`{"a":"b","app":1}`, attrs.MustPairs("a", "", "b", "\xff"))
	f.Add("x", []byte{1, 1, 'a', 0})
	stream := []Label{{"app", "api"}, {"env", "prod"}}
	var plans []*Plan
	for _, q := range []string{`{a="b"}`, `{a="b"} | logfmt`, `{a="b"} | json | drop trace_id`, `{a="b"} | trace_id=~"t.*" | keep app, trace_id, a`} {
		plans = append(plans, mustPlan(f, q))
	}
	f.Fuzz(func(t *testing.T, line string, meta []byte) {
		pairs, err := attrs.Decode(meta)
		valid := err == nil
		for _, p := range plans {
			l, changed, ok := p.LabelSetAttrs(stream, meta, []byte(line))
			if ok != p.MatchEntryAttrs(stream, meta, []byte(line)) {
				t.Fatalf("%s: LabelSetAttrs ok=%v, MatchEntryAttrs disagrees", p.Query, ok)
			}
			if !ok {
				continue
			}
			if !changed {
				if l.All != nil || l.Meta != nil {
					t.Fatalf("%s: unchanged with labels %s %s", p.Query, fmtLabels(l.All), fmtLabels(l.Meta))
				}
				continue
			}
			for i, x := range l.All {
				if x.Value == "" || i > 0 && l.All[i-1].Name >= x.Name {
					t.Fatalf("%s: All not sorted, unique, non-empty: %s", p.Query, fmtLabels(l.All))
				}
			}
			kept, parsed := l.Split(stream)
			if len(kept)+len(parsed)+len(l.Meta) != len(l.All) {
				t.Fatalf("%s: %s is not %s + %s + %s", p.Query, fmtLabels(l.All), fmtLabels(kept), fmtLabels(l.Meta), fmtLabels(parsed))
			}
			if !valid && l.Meta != nil {
				t.Fatalf("%s: corrupt metadata gave %s", p.Query, fmtLabels(l.Meta))
			}
			for _, m := range l.Meta {
				if !hasName(l.All, m.Name) {
					t.Fatalf("%s: Meta %s not in All", p.Query, m.Name)
				}
				found := false
				for _, p := range pairs {
					if (p.Name == m.Name || p.Name+"_extracted" == m.Name) && p.Value == m.Value {
						found = true
					}
				}
				if !found {
					t.Fatalf("%s: Meta label %s=%q is no stored pair", p.Query, m.Name, m.Value)
				}
			}
		}
	})
}
