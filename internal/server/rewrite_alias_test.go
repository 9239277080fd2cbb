package server

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// TestRewriteKeepsOwnLines: a log query whose line stage gives most lines
// back unchanged (decolorize on lines without escapes, a line_format whose
// template fails on every entry) returns each entry's own line. The top-k
// keeps rewritten lines without a copy; when such a stage's "rewritten"
// line was the stored one, it pointed into a pooled block buffer that the
// next block overwrote, and 2,760-2,840 of 3,000 entries came back with
// another entry's line (review 13 R13-4).
func TestRewriteKeepsOwnLines(t *testing.T) {
	const n = 3000
	e := newEnv(t, nil)
	var b strings.Builder
	b.WriteString(`{"streams":[{"stream":{"app":"a"},"values":[`)
	want := map[string]string{}
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		ts := strconv.FormatInt(base-int64(i)*1e6, 10)
		line := fmt.Sprintf("id=%04d %s", i, strings.Repeat(string(rune('a'+i%26)), 40))
		fmt.Fprintf(&b, `[%q,%q]`, ts, line)
		want[ts] = line
	}
	b.WriteString(`]}]}`)
	e.mustPush("/loki/api/v1/push", []byte(b.String()), "Content-Type", "application/json")
	e.flushDefault(t, true) // small blocks: many of them, pooled buffers reused
	for _, q := range []string{`{app="a"} | decolorize`, `{app="a"} | line_format "{{ repeat 2000000 \"x\" }}"`} {
		for _, dir := range []string{"backward", "forward"} {
			p := url.Values{"query": {q}, "limit": {"5000"}, "start": {strconv.FormatInt(base-int64(n)*1e6, 10)}, "end": {strconv.FormatInt(base+1, 10)}, "direction": {dir}}
			code, body := e.get("/loki/api/v1/query_range?" + p.Encode())
			if code != 200 {
				t.Fatalf("%s: %d %.300s", q, code, body)
			}
			got, bad := 0, 0
			var ex []string
			eachStream(t, q, body, func(_ string, values [][2]string) {
				for _, v := range values {
					got++
					if ts, line := v[0], v[1]; want[ts] != line {
						bad++
						if len(ex) < 3 {
							ex = append(ex, fmt.Sprintf("at %s got %.50q want %.50q", ts, line, want[ts]))
						}
					}
				}
			})
			if got != n || bad > 0 {
				t.Errorf("%s %s: %d entries of %d, %d with another entry's line: %v", q, dir, got, n, bad, ex)
			}
		}
	}
}
