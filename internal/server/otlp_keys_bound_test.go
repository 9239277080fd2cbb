package server

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"haystack/internal/attrs"
)

// otlpLongKeyPush is a request (protobuf, or OTLP/JSON) of one record
// whose attribute key (keyLen bytes) is a map of the given entries
// (string values), and a second record without attributes.
func otlpLongKeyPush(json bool, keyLen int, keys []string, val string) []byte {
	kvs := make([]tkv, len(keys))
	for i, k := range keys {
		kvs[i] = kvS(k, val)
	}
	res := []tRes{{attrs: []tkv{kvS("service.name", "svc")}, scopes: []tScope{{recs: []tRec{
		{time: ns(time.Second), body: strBody("x"), attrs: []tkv{{strings.Repeat("k", keyLen), tMap(kvs...)}}},
		{time: ns(2 * time.Second), body: strBody("small")},
	}}}}}
	if json {
		return otlpJSONReq(res)
	}
	return otlpProtoReq(res)
}

// otlpLongKeyAlloc is how many bytes TestOTLPLongKeyMapBounded lets a
// byte of its pushes allocate (measured: 8x to 18x).
const otlpLongKeyAlloc = 30

// TestOTLPLongKeyMapBounded: a map attribute's entries are named its key
// joined to theirs; a long key over many entries built one copy of the
// key an entry (20 KB x 4,000 entries: 84 MB for a push of 60 KB) before
// encode kept one pair of the name. Now the entries of one key get one
// name, and the names built are bounded by otlpFlatFactor times the
// attribute's bytes (plus attrs.MaxBytes).
func TestOTLPLongKeyMapBounded(t *testing.T) {
	repeat := func(k string, n int) []string {
		ks := make([]string, n)
		for i := range ks {
			ks[i] = k
		}
		return ks
	}
	distinct := func(n int) []string {
		ks := make([]string, n)
		for i := range ks {
			ks[i] = fmt.Sprint(i)
		}
		return ks
	}
	for _, tc := range []struct {
		name   string
		keyLen int
		keys   []string
		val    string
		code   int
		answer string   // in the answer
		ref    []string // keys of a push that stores the same
	}{
		// One name (20,002 bytes), stored: the answer is unchanged.
		{"one key", 20000, repeat("x", 4000), "v", 200, "", []string{"x"}},
		// One name whose value is empty: no metadata.
		{"one key empty", 20000, repeat("x", 4000), "", 200, "", []string{"x"}},
		// Two names, 5,000 entries each.
		{"two keys", 4000, append(repeat("x", 5000), repeat("y", 5000)...), "v", 200, "", []string{"x", "y"}},
		// 20,000 names of 1,000 bytes: refused (it was for its 20,000
		// pairs) before 20 MB of names are built.
		{"distinct keys", 1000, distinct(20000), "v", 200, "the names of its maps' entries", nil},
	} {
		for _, json := range []bool{false, true} {
			ct := "application/x-protobuf"
			if json {
				ct = "application/json"
			}
			t.Run(fmt.Sprintf("%s/json=%v", tc.name, json), func(t *testing.T) {
				e := newEnv(t, nil)
				req := otlpLongKeyPush(json, tc.keyLen, tc.keys, tc.val)
				_, _, base := otlpAllocs(e, otlpLongKeyPush(json, tc.keyLen, tc.keys[:1], tc.val), ct, "one")
				code, resp, alloc := otlpAllocs(e, req, ct, "fake")
				t.Logf("a push of %d bytes: %d, allocated %d bytes (%d over one entry's push): %.200s", len(req), code, alloc, alloc-base, resp)
				if code != tc.code || !bytes.Contains(resp, []byte(tc.answer)) {
					t.Fatalf("answer %d %.300s, want %d with %q", code, resp, tc.code, tc.answer)
				}
				// Over the push of the map's first entry alone (storing it
				// costs the same): before, 30x to 1,400x the request.
				if limit := uint64(otlpLongKeyAlloc * len(req)); alloc > base+limit {
					t.Errorf("a push of %d bytes allocated %d KB more than a push of one entry (%.0fx), want under %d KB", len(req), (alloc-base)>>10, float64(alloc-base)/float64(len(req)), limit>>10)
				}
				// A push of each name once stores the same.
				if tc.ref != nil {
					if code, _, resp := e.otlpPost(otlpLongKeyPush(json, tc.keyLen, tc.ref, tc.val), "Content-Type", ct, "X-Scope-OrgID", "ref"); code != 200 {
						t.Fatalf("reference push: %d %s", code, resp)
					}
					got, want := e.rawRange("fake"), e.rawRange("ref")
					if got != want || !strings.Contains(got, "small") {
						t.Errorf("stored %.300s\nwant %.300s", got, want)
					}
				}
			})
		}
	}
}

// rawRange is the tenant's query_range answer (categorize-labels) for
// the service svc.
func (e *testEnv) rawRange(tenant string) string {
	e.t.Helper()
	code, body := e.get(fmt.Sprintf("/loki/api/v1/query_range?query=%s&start=%d&end=%d&direction=forward&limit=5000",
		q(`{service_name="svc"}`), base-3600e9, base+1), "X-Scope-OrgID", tenant, "X-Loki-Response-Encoding-Flags", "categorize-labels")
	if code != 200 {
		e.t.Fatalf("query_range: %d %s", code, body)
	}
	// The statistics differ from one query to the next.
	if i := strings.Index(body, `"stats"`); i >= 0 {
		body = body[:i]
	}
	return body
}

// TestOTLPSharedRefusalOracle: the refusal of a record whose resource's
// and scope's pairs alone are over attrs.MaxPairs names (otlpShared) is
// encode's for the record's pairs, the resource's and the scope's, with
// the same collisions counted.
func TestOTLPSharedRefusalOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 85))
	vals := []string{"", "v", "w"}
	gen := func(n, names int) []attrs.Pair {
		ps := make([]attrs.Pair, n)
		for i := range ps {
			ps[i] = attrs.Pair{Name: fmt.Sprint("n", r.IntN(names)), Value: vals[r.IntN(len(vals))]}
		}
		return ps
	}
	tested := 0
	for i := range 2000 {
		names := 100 + r.IntN(300)
		rp := gen(r.IntN(400), names)
		sp := gen(r.IntN(200), names)
		rec := gen(r.IntN(20), names+20)
		if r.IntN(3) == 0 {
			rec = append(rec, attrs.Pair{Name: "a.b", Value: "x"}, attrs.Pair{Name: "1a", Value: ""})
		}
		var me1, me2 metaEncoder
		_, want := me1.encode(concatPairs(rec, rp, sp))
		rp2, sp2 := append([]attrs.Pair(nil), rp...), append([]attrs.Pair(nil), sp...)
		sortPairs(rp2)
		sortPairs(sp2)
		sh := newOTLPShared(rp2, sp2)
		if sh == nil {
			continue
		}
		tested++
		_, got := sh.refuse(&me2, append([]attrs.Pair(nil), rec...))
		if want == nil || *got != *want || me1.collisions != me2.collisions {
			t.Fatalf("case %d: got %v %d, want %v %d", i, got, me2.collisions, want, me1.collisions)
		}
		// Encoding the sorted shared pairs keeps encode's result.
		var me3 metaEncoder
		if _, w := me3.encode(concatPairs(rec, rp2, sp2)); *w != *want || me3.collisions != me1.collisions {
			t.Fatalf("case %d: sorted shared pairs encode to %v %d, want %v %d", i, w, me3.collisions, want, me1.collisions)
		}
	}
	if tested < 200 {
		t.Fatalf("only %d cases over the limit", tested)
	}
}

func concatPairs(ps ...[]attrs.Pair) []attrs.Pair {
	var out []attrs.Pair
	for _, p := range ps {
		out = append(out, p...)
	}
	return out
}

func sortPairs(ps []attrs.Pair) {
	// Stable, as otlpStreams sorts them.
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && ps[j].Name < ps[j-1].Name; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}

// TestOTLPFlattenOracle: otlpStreams keeps the metadata, refusals and
// collisions of flattening every map entry into its own name and
// encoding each record's pairs with its resource's and scope's (the code
// before the flattened names' budget and otlpShared), for requests of
// long and repeated keys, nested maps, empty values and resources of
// more than attrs.MaxPairs names, in protobuf and OTLP/JSON.
func TestOTLPFlattenOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(85, 11))
	keys := []string{"a", "b", "a.b", "a_b", "", "1", "_x", strings.Repeat("L", 40), strings.Repeat("M", 300)}
	key := func() string {
		if r.IntN(3) == 0 {
			return fmt.Sprint("k", r.IntN(200))
		}
		return keys[r.IntN(len(keys))]
	}
	vals := []string{"", "v", "w"}
	var gen func(depth, n int) []tkv
	gen = func(depth, n int) []tkv {
		kvs := make([]tkv, n)
		for i := range kvs {
			kvs[i] = tkv{key(), tStr(vals[r.IntN(len(vals))])}
			if depth < 3 && r.IntN(4) == 0 {
				kvs[i].v = tMap(gen(depth+1, r.IntN(8))...)
			}
		}
		return kvs
	}
	// wide is a map of n entries of up to 400 names.
	wide := func(n int) tv {
		kvs := make([]tkv, n)
		for i := range kvs {
			kvs[i] = tkv{fmt.Sprint("w", r.IntN(400)), tStr(vals[r.IntN(len(vals))])}
		}
		return tMap(kvs...)
	}
	// flatten is otlpAttrPair before the budget: one pair a leaf.
	var flatten func(dst []attrs.Pair, k string, v tv, prefix string) ([]attrs.Pair, error)
	flatten = func(dst []attrs.Pair, k string, v tv, prefix string) ([]attrs.Pair, error) {
		name := k
		if prefix != "" {
			name = prefix + "_" + k
		}
		n, err := metaName(name)
		if err != nil {
			return dst, err
		}
		if v.kind != "kv" {
			return append(dst, attrs.Pair{Name: n, Value: v.s}), nil
		}
		for _, kv := range v.kvs {
			if dst, err = flatten(dst, kv.k, kv.v, n); err != nil {
				return dst, err
			}
		}
		return dst, nil
	}
	list := func(kvs []tkv, skip map[string]bool) ([]attrs.Pair, error) {
		var ps []attrs.Pair
		var err error
		for _, kv := range kvs {
			if !skip[kv.k] {
				if ps, err = flatten(ps, kv.k, kv.v, ""); err != nil {
					return nil, err
				}
			}
		}
		return ps, nil
	}
	for i := range 150 {
		var res []tRes
		nrec := 0
		for range 1 + r.IntN(2) {
			ra := append(gen(0, r.IntN(6)), kvS("service.name", "svc"))
			if r.IntN(3) == 0 {
				// Over attrs.MaxPairs names, some emptied by the scope.
				ra = append(ra, tkv{keys[r.IntN(len(keys))], wide(100 + r.IntN(400))})
			}
			var scs []tScope
			for range 1 + r.IntN(2) {
				sc := tScope{attrs: gen(0, r.IntN(4))}
				if r.IntN(3) == 0 {
					sc.attrs = append(sc.attrs, tkv{keys[r.IntN(len(keys))], wide(r.IntN(300))})
				}
				for range 1 + r.IntN(4) {
					nrec++
					sc.recs = append(sc.recs, tRec{time: ns(time.Duration(nrec) * time.Millisecond), body: strBody("x"), attrs: gen(0, r.IntN(5))})
				}
				scs = append(scs, sc)
			}
			res = append(res, tRes{attrs: ra, scopes: scs})
		}
		// The old way. A record is "resource/number" (its time: the
		// number in the request), its metadata or "refused"; msgs are
		// the first refusals' messages (pushRejects keeps 3), of an
		// error only the start.
		var want, wantMsgs []string
		var me metaEncoder
		num := 0
		for ri, rs := range res {
			rp, rerr := list(rs.attrs, otlpIndexAttributes)
			j := 0
			for _, sc := range rs.scopes {
				sp, serr := list(sc.attrs, nil)
				for _, rec := range sc.recs {
					j++
					num++
					pfx := fmt.Sprintf("resource %d, log record %d: ", ri, j-1)
					ps, err := list(rec.attrs, nil)
					switch {
					case rerr != nil:
						err = rerr
					case serr != nil:
						err = serr
					}
					if err != nil {
						want = append(want, fmt.Sprintf("%d/%d refused", ri, num))
						wantMsgs = append(wantMsgs, pfx+"structured metadata:")
						continue
					}
					enc, ref := me.encode(concatPairs(ps, rp, sp))
					if ref != nil {
						want = append(want, fmt.Sprintf("%d/%d refused", ri, num))
						wantMsgs = append(wantMsgs, pfx+ref.msg)
						continue
					}
					want = append(want, fmt.Sprintf("%d/%d %q", ri, num, enc))
				}
			}
			want = append(want, fmt.Sprint("collisions ", me.takeCollisions()))
		}
		wantMsgs = wantMsgs[:min(3, len(wantMsgs))]
		for _, format := range []string{"protobuf", "json"} {
			var dec []otlpResource
			var err error
			if format == "protobuf" {
				dec, err = decodeOTLPProto(otlpProtoReq(res))
			} else {
				dec, err = decodeOTLPJSON(otlpJSONReq(res))
			}
			if err != nil {
				t.Fatal(err)
			}
			var rj pushRejects
			var got []string
			num := 0
			for ri, ps := range otlpStreams(dec, 0, -1, &rj) {
				stored := map[int64][]byte{}
				for _, e := range ps.entries {
					stored[e.Time] = e.Attrs
				}
				for _, sc := range res[ri].scopes {
					for _, rec := range sc.recs {
						num++
						if a, ok := stored[int64(rec.time)]; ok {
							got = append(got, fmt.Sprintf("%d/%d %q", ri, num, a))
						} else {
							got = append(got, fmt.Sprintf("%d/%d refused", ri, num))
						}
					}
				}
				got = append(got, fmt.Sprint("collisions ", ps.collisions))
			}
			if len(rj.msgs) != len(wantMsgs) {
				t.Fatalf("request %d (%s): refusals %q, want %q", i, format, rj.msgs, wantMsgs)
			}
			for k, m := range rj.msgs {
				if w := wantMsgs[k]; !(m == w || strings.HasSuffix(w, ":") && strings.HasPrefix(m, w)) {
					t.Fatalf("request %d (%s): refusal %q, want %q", i, format, m, w)
				}
			}
			if g, w := strings.Join(got, "\n"), strings.Join(want, "\n"); g != w {
				t.Fatalf("request %d (%s):\n%.3000s\nwant\n%.3000s", i, format, g, w)
			}
		}
	}
}
