package query

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzPattern checks the pattern matcher against Go's regexp: it finds
// every literal exactly when the equivalent regex,
// ^prefix(.*?)lit(.*?)lit...(.*), matches, and then its captures equal the
// regex's (lazy groups end at the first occurrence of the next literal).
func FuzzPattern(f *testing.F) {
	for _, s := range [][2]string{
		{`<_> - <user> [<ts>] "<method> <path> <_>" <status> <size>`, `1.2.3.4 - bob [10/Oct/2000:13:55:36 -0700] "GET /a HTTP/1.0" 200 2326`},
		{`<a> <b>;<c>`, `1 2 3`}, {`x=<v>`, `y=1 x=2`}, {`<a>,<b>`, `,x`}, {`<a> < <b>`, "1 < 2\r\n"},
		{`<a>:<b>:`, "k:v:w:"}, {`[<a>]`, "[\xff]"}, {`<a><`, `x<`}, {`<_>a<b>a`, `aaaa`},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, expr, line string) {
		pe, err := compilePattern(expr, 0)
		if err != nil {
			if _, ok := err.(*ParseError); !ok {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			return
		}
		if !utf8.ValidString(expr) {
			return // regexp cannot spell invalid bytes; the matcher is byte-wise anyway
		}
		var re strings.Builder
		re.WriteString(`(?s)^` + regexp.QuoteMeta(string(pe.prefix)))
		for _, p := range pe.parts {
			if len(p.lit) == 0 {
				re.WriteString(`(.*)`)
			} else {
				re.WriteString(`(.*?)` + regexp.QuoteMeta(string(p.lit)))
			}
		}
		m := regexp.MustCompile(re.String()).FindStringSubmatch(line)
		got := map[string]string{}
		full := pe.match([]byte(line), func(n string, v []byte) {
			if _, dup := got[n]; dup {
				t.Fatalf("%q on %q: capture %s given twice", expr, line, n)
			}
			got[n] = string(v)
		})
		// Taking each literal's first occurrence leaves the longest rest
		// for the next: the pattern finds every literal exactly when the
		// regex matches.
		if full != (m != nil) {
			t.Fatalf("%q on %q: pattern full=%v (%q), regex %q matches: %v", expr, line, full, got, re.String(), m != nil)
		}
		if !full {
			return
		}
		for i, p := range pe.parts {
			if p.name == "" {
				continue
			}
			if got[p.name] != m[i+1] {
				t.Fatalf("%q on %q: %s=%q, the regex says %q", expr, line, p.name, got[p.name], m[i+1])
			}
		}
	})
}

// FuzzUnpack: unpack never drops a line, and on valid UTF-8 objects it
// agrees with encoding/json:
// the string members become labels (first of a repeated key wins), _entry
// the line.
func FuzzUnpack(f *testing.F) {
	for _, s := range []string{`{"_entry":"x \"y\"","a":"b","n":1,"o":{"c":"d"}}`, `{"a":"\u00e9\ud83d\ude00"}`, `{}`, `[1]`, `x`, `{"_entry":""}`} {
		f.Add(s)
	}
	pq, err := Parse(`{a="b"} | unpack`)
	if err != nil {
		f.Fatal(err)
	}
	p, err := Compile(pq)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line string) {
		l, _, ok := p.LabelSetAttrs(nil, nil, []byte(line))
		if !ok {
			t.Fatalf("unpack dropped %q", line)
		}
		var m map[string]any
		// encoding/json turns invalid UTF-8 into U+FFFD; unpack keeps the bytes.
		if !utf8.ValidString(line) || !json.Valid([]byte(line)) || json.Unmarshal([]byte(line), &m) != nil || m == nil || !strings.Contains(line, `"`) {
			return
		}
		dec := json.NewDecoder(strings.NewReader(line))
		// Keys repeat in the text but not in the map: skip those lines.
		var keys int
		tok, _ := dec.Token()
		if tok != json.Delim('{') {
			return
		}
		for dec.More() {
			if _, err := dec.Token(); err != nil {
				return
			}
			var v json.RawMessage
			if dec.Decode(&v) != nil {
				return
			}
			keys++
		}
		if keys != len(m) {
			return
		}
		want := map[string]string{}
		names := map[string]bool{}
		entry, hasEntry := "", false
		for k, v := range m {
			name := sanitizeKey([]byte(k))
			if name == "__error__" || name == "__error_details__" {
				name += "_extracted"
			}
			if names[name] {
				return // two keys of one label name: the first in the text wins
			}
			names[name] = true
			s, isStr := v.(string)
			switch {
			case !isStr:
			case k == "_entry":
				entry, hasEntry = s, true
			case name != "" && s != "":
				want[name] = s
			}
		}
		if hasEntry != (l.Line != nil) || string(l.Line) != entry {
			t.Fatalf("%q: line %q (set %v), want %q (%v)", line, l.Line, l.Line != nil, entry, hasEntry)
		}
		got := map[string]string{}
		for _, x := range l.All {
			got[x.Name] = x.Value
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("%q: label %s=%q, want %q (all %q)", line, k, got[k], v, l.All)
			}
		}
	})
}
