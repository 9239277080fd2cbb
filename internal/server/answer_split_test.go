package server

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAnswerSplitTimeWarning: when --max-query-bytes cuts a Loki answer
// inside its first time (the entries of that one time alone are over the
// bound), the client cannot page to the entries of that time left out
// (Loki's API pages by time, with no skip), so the warning says so and
// names the time; a cut between two times keeps the ordinary warning
// (review 13 R13-1: 2 of 6 entries were lost with a warning that said
// paging would return them).
func TestAnswerSplitTimeWarning(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxQueryBytes = 64 << 10 })
	var b strings.Builder
	b.WriteString(`{"streams":[{"stream":{"app":"a"},"values":[`)
	for i := range 6 {
		if i > 0 {
			b.WriteByte(',')
		}
		ts := base - int64(i/3)*1e9 // three entries of 30 KiB at each of two times
		fmt.Fprintf(&b, `["%d",%q]`, ts, fmt.Sprintf("id=%d ", i)+strings.Repeat("p", 30<<10))
	}
	// and at a third time, two entries that fit together
	fmt.Fprintf(&b, `,["%d","x=1 small"],["%d","x=2 small"]`, base-5e9, base-6e9)
	b.WriteString(`]}]}`)
	e.mustPush("/loki/api/v1/push", []byte(b.String()), "Content-Type", "application/json")

	ask := func(q string, backward bool, start, end int64) (n int, warnings []string) {
		t.Helper()
		p := url.Values{"query": {q}, "limit": {"100"}, "start": {strconv.FormatInt(start, 10)}, "end": {strconv.FormatInt(end, 10)}, "direction": {"forward"}}
		if backward {
			p.Set("direction", "backward")
		}
		code, body := e.get("/loki/api/v1/query_range?" + p.Encode())
		if code != 200 {
			t.Fatalf("%s: %d %.300s", q, code, body)
		}
		eachStream(t, q, body, func(_ string, values [][2]string) { n += len(values) })
		var r struct{ Warnings []string }
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatal(err)
		}
		return n, r.Warnings
	}
	for _, backward := range []bool{true, false} {
		// Entries at base and base-1s only: the first time's three are
		// 90 KiB, over the 64 KiB bound: two fit.
		n, w := ask(`{app="a"} |= "id="`, backward, base-1e9, base+1)
		if n != 2 || len(w) != 1 || !strings.Contains(w[0], "other entries of that same time were left out") {
			t.Errorf("backward=%v, one time over the bound: %d entries, warnings %q; want 2 and the split warning", backward, n, w)
		}
		tm := base - 1e9 // forward: the older time comes first
		if backward {
			tm = base
		}
		if at := time.Unix(0, tm).UTC().Format(time.RFC3339Nano); len(w) == 1 && !strings.Contains(w[0], at) {
			t.Errorf("backward=%v: the warning %q does not name the time %s", backward, w[0], at)
		}
		// Every entry: the cut ends between two times (or inside the
		// first, as above); the small ones never split.
		n, w = ask(`{app="a"} |= "small"`, backward, base-10e9, base+1)
		if n != 2 || len(w) != 0 {
			t.Errorf("backward=%v, small entries: %d, warnings %q; want 2, none", backward, n, w)
		}
	}
	// A cut between two times: 30 KiB entries one per time.
	e2 := newEnv(t, func(c *Config) { c.MaxQueryBytes = 64 << 10 })
	b.Reset()
	b.WriteString(`{"streams":[{"stream":{"app":"a"},"values":[`)
	for i := range 4 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `["%d",%q]`, base-int64(i)*1e9, fmt.Sprintf("id=%d ", i)+strings.Repeat("p", 30<<10))
	}
	b.WriteString(`]}]}`)
	e2.mustPush("/loki/api/v1/push", []byte(b.String()), "Content-Type", "application/json")
	e = e2
	n, w := ask(`{app="a"}`, true, base-10e9, base+1)
	if n != 2 || len(w) != 1 || strings.Contains(w[0], "same time") || !strings.Contains(w[0], "ask again from the last entry's time") {
		t.Errorf("cut between two times: %d entries, warnings %q; want 2 and the paging warning", n, w)
	}
}
