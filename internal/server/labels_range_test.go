package server

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"haystack/internal/testseed"
)

// TestLabelValuesInRangeOracle: /label/<n>/values and /series list a
// stream only if it has an entry in [start, end], even when its block
// (in the head or a segment) spans far more than the range: a quiet
// tenant's block can cover hours (review 15c F1: a stream whose only
// entry was 50 minutes before the range was listed). Random entries of
// 12 streams over two hours; random ranges against the pushed entries.
func TestLabelValuesInRangeOracle(t *testing.T) {
	seed := testseed.Seed(t, "HAY_LABELRANGE_SEED")
	r := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	e := newEnv(t, func(c *Config) { c.Store.HeadBytes = 8 << 10 })
	times := map[string][]int64{} // job -> entry times
	span := int64(2 * time.Hour)
	for i := range 400 {
		job := fmt.Sprintf("j%02d", r.IntN(12))
		at := base - span + r.Int64N(span)
		if r.IntN(4) == 0 {
			// Some streams' entries bunch at the far ends.
			at = base - span + r.Int64N(int64(time.Minute))
		}
		e.mustPush("/loki/api/v1/push", jsonPush(fmt.Sprintf(`{"job":%q}`, job), at, fmt.Sprintf("entry %d of %s with some padding to fill blocks", i, job)))
		times[job] = append(times[job], at)
	}
	for round := range testseed.Scale(60, 20) {
		start := base - span + r.Int64N(span)
		end := start + r.Int64N(int64(30*time.Minute))
		if round%5 == 0 {
			end = start // one instant
		}
		var want []string
		for job, ts := range times {
			if slices.ContainsFunc(ts, func(t int64) bool { return t >= start && t <= end }) {
				want = append(want, job)
			}
		}
		slices.Sort(want)
		rng := fmt.Sprintf("start=%d&end=%d", start, end)
		code, body := e.get("/loki/api/v1/label/job/values?" + rng)
		var lv struct{ Data []string }
		if err := json.Unmarshal([]byte(body), &lv); code != 200 || err != nil {
			t.Fatalf("label values: %d %v %s", code, err, body)
		}
		if !slices.Equal(lv.Data, want) && !(len(lv.Data) == 0 && len(want) == 0) {
			t.Fatalf("round %d [%d, %d]: /label/job/values %q, want %q", round, start, end, lv.Data, want)
		}
		code, body = e.get("/loki/api/v1/series?match[]=" + q(`{job=~".+"}`) + "&" + rng)
		var sr struct{ Data []map[string]string }
		if err := json.Unmarshal([]byte(body), &sr); code != 200 || err != nil {
			t.Fatalf("series: %d %v %s", code, err, body)
		}
		var got []string
		for _, s := range sr.Data {
			got = append(got, s["job"])
		}
		slices.Sort(got)
		if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("round %d [%d, %d]: /series jobs %q, want %q", round, start, end, got, want)
		}
	}
}
