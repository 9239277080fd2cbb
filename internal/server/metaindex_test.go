package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"haystack/internal/attrs"
	"haystack/internal/segment"
	"haystack/internal/store"
)

// TestMetaIndexLokiQueries: the Loki API's answers to a trace id filter
// (query_range in both encodings, and a metric over it) over segments
// of format 5, whose index of metadata values lets the search skip
// blocks, and of format 4, which it must read whole, equal metaOracle's
// (Loki's semantics computed naively): ids present, absent, in other
// case, a prefix of one; the stream has a label (env) that metadata also
// names (read as env_extracted).
func TestMetaIndexLokiQueries(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	trace := func(k int) string {
		r := rand.New(rand.NewPCG(uint64(k), 5))
		return fmt.Sprintf("%016x%016x", r.Uint64(), r.Uint64())
	}
	var es []store.LabeledEntry
	const n = 3000
	for i := range n {
		e := store.LabeledEntry{Labels: `{app="api", env="prod"}`, Time: base - int64(n-i)*int64(time.Millisecond), Line: fmt.Appendf(nil, "line %d took %dms", i, rng.IntN(500))}
		if i%3 == 1 {
			e.Labels = `{app="api", env="dev"}`
		}
		var kv []string
		if i%9 != 4 {
			kv = append(kv, "trace_id", trace(i/25), "span_id", fmt.Sprintf("%016x", rng.Uint64()))
		}
		if i%7 == 0 {
			kv = append(kv, "env", "meta-"+trace(i))
		}
		e.Attrs = attrs.MustPairs(kv...)
		es = append(es, e)
	}
	for _, version := range []int{0, 4} {
		t.Run(fmt.Sprint("version-", version), func(t *testing.T) {
			e := newEnv(t, func(c *Config) {
				c.Store.Segment = segment.Options{BlockSize: 4 << 10, Version: version}
			})
			ts, err := e.srv.openTenant(DefaultTenant, true)
			if err != nil {
				t.Fatal(err)
			}
			if err := ts.w.Append(context.Background(), es); err != nil {
				t.Fatal(err)
			}
			if err := ts.w.Flush(); err != nil {
				t.Fatal(err)
			}
			ids := []string{trace(3), trace(57), trace(119), trace(500), strings.ToUpper(trace(3)), trace(57)[:20], trace(7)}
			for _, id := range ids {
				qs := `{app="api"} | trace_id="` + id + `"`
				for _, cat := range []bool{false, true} {
					var hdr []string
					if cat {
						hdr = []string{categorizeHdr, categorizeFlag}
					}
					path := fmt.Sprintf("/loki/api/v1/query_range?query=%s&start=%d&end=%d&limit=1000", q(qs), base-int64(time.Hour), base+1)
					code, body := e.get(path, hdr...)
					if code != 200 {
						t.Fatalf("%s: %d %s", qs, code, body)
					}
					wantJSON(t, fmt.Sprintf("%s categorize=%v", qs, cat), dropStats(t, body), metaOracle(t, es, id, cat))
				}
				want := 0
				for _, x := range es {
					if v, _ := attrs.Get(x.Attrs, "trace_id"); string(v) == id {
						want++
					}
				}
				code, body := e.get(fmt.Sprintf("/loki/api/v1/query?query=%s&time=%d", q(`sum(count_over_time(`+qs+` [1h]))`), base))
				if code != 200 {
					t.Fatalf("%s metric: %d %s", qs, code, body)
				}
				res := "[]"
				if want > 0 {
					res = fmt.Sprintf(`[{"metric":{},"value":[%d,"%d"]}]`, base/1e9, want)
				}
				wantJSON(t, qs+" metric", dropStats(t, body), `{"status":"success","data":{"resultType":"vector","result":`+res+`}}`)
			}
		})
	}
}
