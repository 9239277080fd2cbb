package logtest

import (
	"bytes"
	"math/bits"
	"regexp"
	"testing"
)

// idField matches an identifier field in logfmt (key=value) or JSON
// ("key":"value") form.
func idField(key string) *regexp.Regexp {
	return regexp.MustCompile(`(?:^|[ ,{])"?` + key + `"?[=:]"?([^\s",}]+)`)
}

// TestRequests checks the request structure of a default corpus: lines
// of one request share its request_id and trace_id within one stream and
// a bounded lifecycle, spans cover 1 to 4 lines of one trace, and users,
// client addresses, internal peers and deployments come from bounded,
// skewed populations.
func TestRequests(t *testing.T) {
	const n = 40_000
	g := NewGenerator(Config{Lines: n})
	reqRE, traceRE, spanRE := idField("request_id"), idField("trace_id"), idField("span_id")
	userRE, buildRE := idField("user_id"), idField("build")
	ipRE := regexp.MustCompile(`\b(\d+)\.(\d+)\.(\d+)\.(\d+)\b`)

	type seen struct {
		stream, lines, first, last int
		trace                      string
	}
	reqs := map[string]*seen{}
	spans := map[string]*seen{}
	traceStreams := map[string]map[int]bool{}
	users := map[string]int{}
	userTotal := 0
	public := map[string]bool{}
	peers := map[int]map[string]bool{}
	builds := map[int]map[string]bool{}
	var buf []byte
	for i := range n {
		var si int
		buf, si, _ = g.Next(buf[:0])
		if bytes.HasPrefix(buf, []byte("\tat ")) {
			continue
		}
		trace := ""
		if m := traceRE.FindSubmatch(buf); m != nil {
			trace = string(m[1])
			if traceStreams[trace] == nil {
				traceStreams[trace] = map[int]bool{}
			}
			traceStreams[trace][si] = true
		}
		if m := reqRE.FindSubmatch(buf); m != nil {
			r := reqs[string(m[1])]
			if r == nil {
				r = &seen{stream: si, first: i}
				reqs[string(m[1])] = r
			}
			if r.stream != si {
				t.Fatalf("line %d: request %s in streams %d and %d", i, m[1], r.stream, si)
			}
			r.lines++
			r.last = i
		}
		if m := spanRE.FindSubmatch(buf); m != nil {
			s := spans[string(m[1])]
			if s == nil {
				s = &seen{stream: si, trace: trace}
				spans[string(m[1])] = s
			}
			// (trace_id, like span_id, may be left out of a short line)
			if s.trace == "" {
				s.trace = trace
			}
			if s.stream != si || trace != "" && s.trace != trace {
				t.Fatalf("line %d: span %s in stream %d trace %s, before in stream %d trace %s", i, m[1], si, trace, s.stream, s.trace)
			}
			s.lines++
		}
		for _, m := range userRE.FindAllSubmatch(buf, -1) {
			users[string(m[1])]++
			userTotal++
		}
		for _, m := range ipRE.FindAllSubmatch(buf, -1) {
			switch {
			case string(m[1]) == "10":
				if peers[si] == nil {
					peers[si] = map[string]bool{}
				}
				peers[si][string(m[0])] = true
			case string(m[1]) != "131": // not "Chrome/131.0.0.0"
				public[string(m[0])] = true
			}
		}
		if m := buildRE.FindSubmatch(buf); m != nil {
			if builds[si] == nil {
				builds[si] = map[string]bool{}
			}
			builds[si][string(m[1])] = true
		}
	}

	lines, multi := 0, 0
	for id, r := range reqs {
		if r.lines > 10 {
			t.Errorf("request %s on %d lines, want at most 10", id, r.lines)
		}
		if r.lines > 1 {
			multi++
		}
		lines += r.lines
	}
	t.Logf("request_id: %d lines, %d distinct, %d on several lines", lines, len(reqs), multi)
	if len(reqs) == 0 || multi < len(reqs)/4 || lines < len(reqs)*3/2 {
		t.Errorf("request ids are not shared by a request's lines: %d lines, %d distinct, %d on several lines", lines, len(reqs), multi)
	}
	spanLines, spanMulti := 0, 0
	for id, s := range spans {
		if s.lines > 4 {
			t.Errorf("span %s on %d lines, want at most 4", id, s.lines)
		}
		if s.lines > 1 {
			spanMulti++
		}
		spanLines += s.lines
	}
	t.Logf("span_id: %d lines, %d distinct, %d on several lines", spanLines, len(spans), spanMulti)
	if spanMulti < len(spans)/10 {
		t.Errorf("spans do not cover several lines: %d of %d", spanMulti, len(spans))
	}
	crossing := 0
	for _, ss := range traceStreams {
		if len(ss) > 1 {
			crossing++
		}
	}
	t.Logf("trace_id: %d distinct, %d in several streams", len(traceStreams), crossing)
	if crossing < len(traceStreams)/20 {
		t.Errorf("only %d of %d traces cross services", crossing, len(traceStreams))
	}
	top := 0
	for _, n := range users {
		top = max(top, n)
	}
	t.Logf("user_id: %d occurrences, %d distinct, the hottest %d", userTotal, len(users), top)
	if len(users) > numUsers || len(users) > userTotal/3 || top < userTotal/100 {
		t.Errorf("users are not a skewed population: %d occurrences, %d distinct, the hottest %d", userTotal, len(users), top)
	}
	if len(public) == 0 || len(public) > numClientIPs {
		t.Errorf("%d distinct public addresses, want 1 to %d", len(public), numClientIPs)
	}
	for si, p := range peers {
		if len(p) > numPeers {
			t.Errorf("stream %d: %d internal addresses, want at most %d", si, len(p), numPeers)
		}
	}
	if len(builds) == 0 {
		t.Error("no build field")
	}
	for si, b := range builds {
		if len(b) != 1 {
			t.Errorf("stream %d runs %d builds, want 1", si, len(b))
		}
	}
}

// TestZipfCDF checks the inverse CDF against a linear scan on every
// boundary and that the head is heavy.
func TestZipfCDF(t *testing.T) {
	z := newZipfCDF(1000)
	total := z[len(z)-1]
	naive := func(x uint64) int {
		for i, c := range z {
			if x < c {
				return i
			}
		}
		return len(z) - 1
	}
	// u maps to x = u*total>>64; probe the u just around each boundary.
	for i := range z {
		for _, c := range []uint64{z[i] - 1, z[i], z[i] + 1} {
			if c >= total {
				continue
			}
			// Smallest u with u*total>>64 >= c.
			u, _ := bitsDiv(c, total)
			for _, uu := range []uint64{u - 1, u, u + 1} {
				x := mulHi(uu, total)
				if got, want := z.rank(uu), naive(x); got != want {
					t.Fatalf("rank(%#x) (x=%d) = %d, want %d", uu, x, got, want)
				}
			}
		}
	}
	if z.rank(0) != 0 || z.rank(^uint64(0)) != len(z)-1 {
		t.Errorf("rank(0) = %d, rank(max) = %d", z.rank(0), z.rank(^uint64(0)))
	}
	// Rank 0 has weight 1/2 against a sum of about ln(1000)+0.58-1.
	if share := (z[0] * 1000) / total; share < 70 || share > 90 {
		t.Errorf("top rank has %d per mille", share)
	}
}

func mulHi(a, b uint64) uint64 {
	hi, _ := bits.Mul64(a, b)
	return hi
}

// bitsDiv returns ceil(c<<64 / total), the smallest u with
// u*total>>64 >= c (for c < total).
func bitsDiv(c, total uint64) (uint64, uint64) {
	q, r := bits.Div64(c, 0, total)
	if r != 0 {
		q++
	}
	return q, r
}
