package server

// Out-of-order entries within a stream (Loki accepts them within a
// window; a push can carry them), stored in arrival order across heads,
// segments and compacted blocks: /loki/api/v1/query_range and
// /api/v1/search must still answer with the first limit entries by time
// in the requested direction, ties in store order (collect), and paging
// /api/v1/search by end/start and skip must visit every entry once, in
// that order. HAY_ORDER_SEED=N replays one seed.

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"haystack/internal/testdiff"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
)

type ooEntry struct {
	t      int64
	stream int
	line   string
	pos    int // store order: the order pushed (one stream a request)
}

// ooOracle is the entries that contain pat in start..end (inclusive), by
// time (descending when backward), ties by store order, cut at limit.
func ooOracle(es []ooEntry, pat string, start, end int64, backward bool, limit int) []ooEntry {
	var out []ooEntry
	for _, e := range es {
		if e.t >= start && e.t <= end && strings.Contains(e.line, pat) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b ooEntry) int {
		c := cmp.Compare(a.t, b.t)
		if backward {
			c = -c
		}
		return cmp.Or(c, cmp.Compare(a.pos, b.pos))
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// ooGen draws n entries over 3 streams whose times go back by up to a
// minute (many equal), and pushes them one stream a request, in runs of
// 1 to 20, flushing and compacting into small blocks now and then; the
// last requests stay in the head.
func ooGen(t *testing.T, env *testEnv, r *rand.Rand, n int) []ooEntry {
	hi := []int64{base - 3600e9, base - 3600e9, base - 3600e9}
	var es []ooEntry
	for len(es) < n {
		s := r.IntN(3)
		var ps []PushEntry
		for range 1 + r.IntN(20) {
			var tm int64
			switch r.IntN(10) {
			case 0:
				tm = hi[s] - r.Int64N(60e9) // out of order, within Loki's window
			case 1, 2:
				tm = hi[s] // equal
			default:
				tm = hi[s] + r.Int64N(3e9)
			}
			hi[s] = max(hi[s], tm)
			w := []string{"ok", "err", "warn"}[r.IntN(3)]
			e := ooEntry{t: tm, stream: s, line: fmt.Sprintf("%s id=%d %s", w, len(es), strings.Repeat("x", r.IntN(60))), pos: len(es)}
			es = append(es, e)
			ps = append(ps, PushEntry{Time: e.t, Line: e.line})
		}
		env.mustPush("/loki/api/v1/push", protoBody([]PushStream{{Labels: fmt.Sprintf(`{app="oo", s="%d"}`, s), Entries: ps}}), "Content-Type", "application/x-protobuf")
		if len(es) < n-50 {
			switch r.IntN(12) {
			case 0:
				env.flushDefault(t, true)
			case 1, 2:
				env.flushDefault(t, false)
			}
		}
	}
	return es
}

func TestOrderOutOfOrderServer(t *testing.T) {
	seed := envSeed(t, "HAY_ORDER_SEED")
	t.Logf("seed %d (rerun with HAY_ORDER_SEED=%d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 11))
	env := newEnv(t, nil)
	es := ooGen(t, env, r, 1200)
	lo, hi := es[0].t, es[0].t
	for _, e := range es {
		lo, hi = min(lo, e.t), max(hi, e.t)
	}
	for _, pat := range []string{"", "err"} {
		for _, backward := range []bool{true, false} {
			all := ooOracle(es, pat, lo, hi, backward, 0)
			tie := 0 // a limit that cuts between two entries of equal time
			for i := 1; i < len(all); i++ {
				if all[i].t == all[i-1].t {
					tie = i
					break
				}
			}
			dir := map[bool]string{true: "backward", false: "forward"}[backward]
			for _, limit := range []int{1, 2, 3, 50, tie} {
				for _, rng := range [][2]int64{{lo, hi}, {lo + (hi-lo)/3, hi - (hi-lo)/3}} {
					want := ooOracle(es, pat, rng[0], rng[1], backward, limit)
					query := `{app="oo"}`
					if pat != "" {
						query += fmt.Sprintf(` |= %q`, pat)
					}
					// The Loki API: streams in order of first appearance, each
					// stream's values in the answer's order.
					p := url.Values{"query": {query}, "start": {strconv.FormatInt(rng[0], 10)}, "end": {strconv.FormatInt(rng[1]+1, 10)}, "limit": {strconv.Itoa(limit)}, "direction": {dir}}
					code, body := env.get("/loki/api/v1/query_range?" + p.Encode())
					if code != 200 {
						t.Fatalf("query_range %s: %d %s", p.Encode(), code, body)
					}
					var resp struct {
						Data struct {
							Result []struct {
								Stream map[string]string
								Values [][2]string
							}
						}
					}
					if err := json.Unmarshal([]byte(body), &resp); err != nil {
						t.Fatal(err)
					}
					var got, exp []string
					for _, st := range resp.Data.Result {
						key := st.Stream["s"]
						if l, ok := st.Stream["detected_level"]; ok {
							key += "/" + l
						}
						for _, v := range st.Values {
							got = append(got, key+" "+v[0]+" "+v[1])
						}
					}
					// An answer's stream is the entry's stream and, with
					// detected_level, the level wantLevel expects (its
					// metadata): "warn ..." lines are a stream apart.
					streamKey := func(e ooEntry) string {
						key := strconv.Itoa(e.stream)
						if env.levelsOn() {
							key += "/" + wantLevel(map[string]string{"app": "oo", "s": key}, nil, e.line)
						}
						return key
					}
					seen := map[string]bool{}
					var order []string
					for _, e := range want {
						if k := streamKey(e); !seen[k] {
							seen[k] = true
							order = append(order, k)
						}
					}
					for _, k := range order {
						for _, e := range want {
							if streamKey(e) == k {
								exp = append(exp, fmt.Sprintf("%s %d %s", k, e.t, e.line))
							}
						}
					}
					if d := testdiff.First(got, exp); d >= 0 {
						t.Errorf("seed %d query_range %s: value %d of %d/%d: got %q want %q", seed, p.Encode(), d, len(got), len(exp), testdiff.At(got, d), testdiff.At(exp, d))
					}

					// The native API: one NDJSON line an entry, in order.
					np := url.Values{"q": {pat}, "start": {strconv.FormatInt(rng[0], 10)}, "end": {strconv.FormatInt(rng[1], 10)}, "limit": {strconv.Itoa(limit)}, "direction": {dir}}
					got = nativeRows(t, env, np)
					exp = exp[:0]
					for _, e := range want {
						exp = append(exp, fmt.Sprintf("%d %s", e.t, e.line))
					}
					if d := testdiff.First(got, exp); d >= 0 {
						t.Errorf("seed %d /api/v1/search %s: row %d of %d/%d: got %q want %q", seed, np.Encode(), d, len(got), len(exp), testdiff.At(got, d), testdiff.At(exp, d))
					}
				}
			}
			// Paging /api/v1/search as the UI does: the next page ends (or,
			// forward, starts) at the last time shown, skipping the rows at
			// that time already shown.
			for _, page := range []int{1, 7, 100} {
				var rows []string
				edge, skip := hi, 0
				if !backward {
					edge = lo
				}
				for len(rows) <= len(all) {
					np := url.Values{"q": {pat}, "limit": {strconv.Itoa(page)}, "direction": {dir}, "skip": {strconv.Itoa(skip)}}
					if backward {
						np.Set("start", strconv.FormatInt(lo, 10))
						np.Set("end", strconv.FormatInt(edge, 10))
					} else {
						np.Set("start", strconv.FormatInt(edge, 10))
						np.Set("end", strconv.FormatInt(hi, 10))
					}
					got := nativeRows(t, env, np)
					if len(got) == 0 {
						break
					}
					rows = append(rows, got...)
					last, _, _ := strings.Cut(got[len(got)-1], " ")
					lt, _ := strconv.ParseInt(last, 10, 64)
					if lt != edge {
						edge, skip = lt, 0
					}
					for _, g := range got {
						if strings.HasPrefix(g, last+" ") {
							skip++
						}
					}
				}
				var exp []string
				for _, e := range all {
					exp = append(exp, fmt.Sprintf("%d %s", e.t, e.line))
				}
				if d := testdiff.First(rows, exp); d >= 0 {
					t.Errorf("seed %d paging %q %s by %d: row %d of %d/%d: got %q want %q", seed, pat, dir, page, d, len(rows), len(exp), testdiff.At(rows, d), testdiff.At(exp, d))
				}
			}
		}
	}
}

// nativeRows asks /api/v1/search and returns its rows as "ts line".
func nativeRows(t *testing.T, env *testEnv, p url.Values) []string {
	t.Helper()
	code, body := env.get("/api/v1/search?" + p.Encode())
	if code != 200 {
		t.Fatalf("/api/v1/search %s: %d %s", p.Encode(), code, body)
	}
	var rows []string
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l nativeLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s: %v", sc.Text(), err)
		}
		if l.TS == "" {
			continue // the trailing summary line, if any
		}
		rows = append(rows, l.TS+" "+l.Line)
	}
	return rows
}
