package search

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"haystack/internal/attrs"
	"haystack/internal/logtest"
	"haystack/internal/segment"
	"haystack/internal/store"
)

// TestManyValuesListing searches with label filters of 1,100 ORed values
// after logfmt and json (a pasted list of ids, which query evaluates as
// one set lookup), with the empty value and a regex listing values among
// them, over generated lines in two streams, one with a user_id label
// (the parsed one is then user_id_extracted), and structured metadata
// user_id on some entries. Oracle: each entry holds one value of the
// name, so the listing must be the union of the listings of the
// single-value filters (name="v", one matcher, no set), in time order,
// and the count its length, with and without the index.
func TestManyValuesListing(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{Segment: segment.Options{BlockSize: 16 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	g := logtest.NewGenerator(logtest.Config{Lines: 6000, Seed: 5})
	var lines []string
	for range 6000 {
		l, _, _ := g.Next(nil)
		lines = append(lines, string(l))
	}
	// The values: 11 of each name the lines hold, the rest in no line.
	pick := func(re string) []string {
		var found []string
		rx := regexp.MustCompile(re)
		for _, l := range lines {
			if m := rx.FindStringSubmatch(l); m != nil && !slices.Contains(found, m[1]) {
				found = append(found, m[1])
			}
		}
		if len(found) < 30 {
			t.Fatalf("%s: only %d values in the lines", re, len(found))
		}
		var vals []string
		for i := range 1100 {
			if i%100 == 0 {
				vals = append(vals, found[i/100*2])
			} else {
				vals = append(vals, fmt.Sprintf("%d", 90000000+i))
			}
		}
		return vals
	}
	users, traces := pick(` user_id=(\d+)`), pick(`"trace_id":"([0-9a-f]+)"`)
	plain := st.Stream(`{source="gen.log"}`)
	withLabel := st.Stream(`{source="gen.log", user_id="` + users[300] + `"}`)
	meta, err := attrs.Encode(nil, []attrs.Pair{{Name: "user_id", Value: users[500]}, {Name: "trace_id", Value: traces[700]}})
	if err != nil {
		t.Fatal(err)
	}
	for half := range 2 { // two segments
		var b store.Batch
		for i := half * 3000; i < (half+1)*3000; i++ {
			e := store.Entry{Time: int64(i), Stream: plain, Line: []byte(lines[i])}
			if i%5 == 0 {
				e.Stream = withLabel
			}
			if i%7 == 0 {
				e.Attrs = meta
			}
			b.Entries = append(b.Entries, e)
		}
		if err := st.Append(&b); err != nil {
			t.Fatal(err)
		}
		if err := st.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	snap := closeAndSnapshot(t, st, dir)

	search := func(src string, noIndex bool) ([]string, int64) {
		plan := mustPlan(t, src)
		var got []string
		_, err := Run(context.Background(), snap.Parts, Query{Plan: plan, Labels: snap.Labels, NoIndex: noIndex},
			func(m *Match) error {
				got = append(got, fmt.Sprintf("%06d %d %s", m.Time, m.Stream, m.Line))
				return nil
			}, func(err error) { t.Error(err) })
		if err != nil {
			t.Fatal(err)
		}
		n, err := Run(context.Background(), snap.Parts, Query{Plan: plan, Labels: snap.Labels, NoIndex: noIndex, Count: true},
			func(*Match) error { return nil }, func(err error) { t.Error(err) })
		if err != nil {
			t.Fatal(err)
		}
		return got, n
	}
	single := map[string][]string{}
	union := func(parser, name string, vals []string) []string {
		var all []string
		for _, v := range vals {
			src := fmt.Sprintf(`{source="gen.log"} | %s | %s=%q`, parser, name, v)
			got, ok := single[src]
			if !ok {
				got, _ = search(src, false)
				single[src] = got
			}
			all = append(all, got...)
		}
		slices.Sort(all) // times are distinct: time order
		return slices.Compact(all)
	}
	or := func(name string, vals []string) string {
		var ms []string
		for _, v := range vals {
			ms = append(ms, fmt.Sprintf("%s=%q", name, v))
		}
		return strings.Join(ms, " or ")
	}
	withEmpty := append(slices.Clone(users), "")
	for _, c := range []struct {
		parser, name, filter string
		vals                 []string // the values the filter passes
	}{
		{"logfmt", "user_id", or("user_id", users), users},
		{"json", "trace_id", or("trace_id", traces), traces},
		{"logfmt", "user_id", or("user_id", withEmpty), withEmpty},
		{"logfmt", "user_id_extracted", or("user_id_extracted", users), users},
		{"logfmt", "user_id", `user_id=~"` + strings.Join(users[:12], "|") + `" or ` + or("user_id", users[12:]), users},
	} {
		src := fmt.Sprintf(`{source="gen.log"} | %s | %s`, c.parser, c.filter)
		want := union(c.parser, c.name, c.vals)
		if len(want) == 0 {
			t.Fatalf("%.70s...: the single-value filters find nothing", src)
		}
		for _, noIndex := range []bool{false, true} {
			got, n := search(src, noIndex)
			if !slices.Equal(got, want) || n != int64(len(want)) {
				t.Fatalf("%.70s... (NoIndex %v): %d entries, count %d; the single-value filters find %d\ngot  %.300q\nwant %.300q",
					src, noIndex, len(got), n, len(want), got, want)
			}
		}
		t.Logf("%.60s...: %d entries", src, len(want))
	}
}
