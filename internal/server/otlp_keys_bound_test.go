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

// otlpLongKeyPush is a protobuf request of one record whose attribute
// key (keyLen bytes) is a map of the given entries (string values), and
// a second record without attributes.
func otlpLongKeyPush(keyLen int, keys []string, val string) []byte {
	var m []byte
	for _, k := range keys {
		kv := append(pbLen(1, []byte(k)), pbLen(2, pbLen(1, []byte(val)))...)
		m = append(m, pbLen(1, kv)...)
	}
	attr := append(pbLen(1, []byte(strings.Repeat("k", keyLen))), pbLen(2, pbLen(6, m))...)
	r := append(pbFixed64(1, ns(time.Second)), pbLen(5, pbLen(1, []byte("x")))...)
	r = append(r, pbLen(6, attr)...)
	ok := append(pbFixed64(1, ns(2*time.Second)), pbLen(5, pbLen(1, []byte("small")))...)
	recs := append(pbLen(2, r), pbLen(2, ok)...)
	return pbLen(1, append(pbLen(1, pbLen(1, kvS("service.name", "svc").proto())), pbLen(2, recs)...))
}

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
		name     string
		keyLen   int
		keys     []string
		val      string
		code     int
		answer   string   // in the answer
		maxAlloc uint64   // over the push of the map's first entry alone
		ref      []string // keys of a push that stores the same
	}{
		// One name (20,002 bytes), stored: the answer is unchanged.
		{"one key", 20000, repeat("x", 4000), "v", 200, "", 2 << 20, []string{"x"}},
		// One name whose value is empty: no metadata.
		{"one key empty", 20000, repeat("x", 4000), "", 200, "", 2 << 20, []string{"x"}},
		// Two names alternating.
		{"two keys", 1000, append(repeat("x", 10000), repeat("y", 10000)...), "v", 200, "", 6 << 20, []string{"x", "y"}},
		// 20,000 names of 1,000 bytes: refused (it was for its 20,000
		// pairs) before 20 MB of names are built.
		{"distinct keys", 1000, distinct(20000), "v", 200, "the names of its maps' entries", 8 << 20, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			req := otlpLongKeyPush(tc.keyLen, tc.keys, tc.val)
			_, _, base := otlpAllocs(e, otlpLongKeyPush(tc.keyLen, tc.keys[:1], tc.val), "application/x-protobuf", "one")
			code, resp, alloc := otlpAllocs(e, req, "application/x-protobuf", "fake")
			t.Logf("a push of %d bytes: %d, allocated %d bytes (%d over one entry's push): %.200s", len(req), code, alloc, alloc-base, resp)
			if code != tc.code || !bytes.Contains(resp, []byte(tc.answer)) {
				t.Fatalf("answer %d %.300s, want %d with %q", code, resp, tc.code, tc.answer)
			}
			if alloc > base+tc.maxAlloc {
				t.Errorf("a push of %d bytes allocated %d MB more than a push of one entry, want under %d MB", len(req), (alloc-base)>>20, tc.maxAlloc>>20)
			}
			// A push of each name once stores the same.
			if tc.ref != nil {
				if code, _, resp := e.otlpPost(otlpLongKeyPush(tc.keyLen, tc.ref, tc.val), "Content-Type", "application/x-protobuf", "X-Scope-OrgID", "ref"); code != 200 {
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
