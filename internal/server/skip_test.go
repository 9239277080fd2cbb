package server

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"haystack/internal/segment"
)

// TestScanSkipsBlocks checks that the multi-stream scan (native search,
// facets) asks the skip index: a rare needle's query reads few of many
// blocks, and still finds exactly what the brute-force oracle finds.
func TestScanSkipsBlocks(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Store.HeadBytes = 16 << 10
		c.Store.Segment.BlockSize = 1 << 10
	})
	r := rand.New(rand.NewPCG(3, 4))
	const rare = "needle-7f3a9c"
	for round := range 40 {
		var streams []PushStream
		for _, app := range []string{"api", "auth", "db"} {
			ps := PushStream{Labels: fmt.Sprintf(`{app=%q, env="prod"}`, app)}
			for i := range 10 {
				line := fmt.Sprintf("level=info msg=%016x user=%d", r.Uint64(), r.IntN(1000))
				if round == 17 && app == "auth" && i == 3 || round == 31 && app == "db" && i == 0 {
					line += " " + rare + " last"
				}
				ps.Entries = append(ps.Entries, PushEntry{Time: base - int64(40-round)*1e9 + int64(i), Line: line})
			}
			streams = append(streams, ps)
		}
		e.mustPush("/loki/api/v1/push", protoBody(streams), "Content-Type", "application/x-protobuf")
	}
	ts, err := e.srv.openTenant(DefaultTenant, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.w.Flush(); err != nil {
		t.Fatal(err)
	}
	v, err := ts.w.View()
	if err != nil {
		t.Fatal(err)
	}
	blocks := 0
	for _, p := range v.Parts {
		blocks += p.NumBlocks()
	}
	if blocks < 40 {
		t.Fatalf("test setup: %d blocks, want many", blocks)
	}
	for _, c := range []struct {
		q    string
		fold bool
		all  bool // nothing required: every block is read
		want int
	}{
		{q: rare, want: 2},
		{q: "NEEDLE-7F3A9C", fold: true, want: 2},
		{q: `{env="prod"} |= "` + rare + `"`, want: 2},
		{q: `{app="db"} |= "` + rare + `" |= "last"`, want: 1},
		{q: `{app=~"a.*"} |= "` + rare + `" or "absent-0d5e"`, want: 1},
		{q: `{app="db"} |~ "needle-7f3a9c|absent-0d5e"`, want: 1},
		{q: "absent-0d5e"},
		{q: "", all: true, want: 1200},
		{q: `{env="prod"}`, all: true, want: 1200},
	} {
		sel, err := parseSelection(c.q, c.fold)
		if err != nil {
			t.Fatal(err)
		}
		sel.start, sel.end = math.MinInt64, math.MaxInt64
		visited := 0
		var got []string
		opt := scanOpts{blockDone: func(*segment.BlockMeta) error { visited++; return nil }}
		err = scanBlocksOpt(context.Background(), v, sel, opt, func(h *hit) bool {
			got = append(got, hitKey(*h))
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, h := range oracleScan(t, v, sel, e.levelsOn()) {
			want = append(want, hitKey(h))
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) || len(want) != c.want {
			t.Fatalf("q=%q: %d hits, oracle %d, want %d", c.q, len(got), len(want), c.want)
		}
		if c.all && visited != blocks {
			t.Errorf("q=%q: %d of %d blocks read, want all", c.q, visited, blocks)
		}
		if !c.all && visited > blocks/5 {
			t.Errorf("q=%q: %d of %d blocks read; the skip index should rule out most", c.q, visited, blocks)
		}
	}
}
