package search

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"haystack/internal/attrs"
	"haystack/internal/ingest"
	"haystack/internal/query"
	"haystack/internal/segment"
	"haystack/internal/store"
	"haystack/internal/testseed"
)

// Label filters after a parser answered for a whole part at once
// (needBlocks, review F7): the requirement tree of a stream
// (query.Plan.LabelIndex) is evaluated once per part, each literal
// looked up once, not once per block.

// perBlockPart hides a segment's whole-part answers: a search must ask
// it block by block (MayMatchNeed), as any part that lacks them.
type perBlockPart struct{ sp *store.SegmentPart }

func (p perBlockPart) Name() string                      { return p.sp.Name() }
func (p perBlockPart) NumBlocks() int                    { return p.sp.NumBlocks() }
func (p perBlockPart) BlockMeta(i int) segment.BlockMeta { return p.sp.BlockMeta(i) }
func (p perBlockPart) ReadBlock(i int, dst *segment.Block) error {
	return p.sp.ReadBlock(i, dst)
}
func (p perBlockPart) MayContain(i int, lit []byte, fold bool) bool {
	return p.sp.MayContain(i, lit, fold)
}
func (p perBlockPart) MetaIndexed() bool { return p.sp.MetaIndexed() }
func (p perBlockPart) MayContainValue(i int, lit []byte, fold bool) bool {
	return p.sp.MayContainValue(i, lit, fold)
}
func (p perBlockPart) ValueFiltered() bool               { return p.sp.ValueFiltered() }
func (p perBlockPart) MayHaveValue(i int, v []byte) bool { return p.sp.MayHaveValue(i, v) }
func (p perBlockPart) EscapeIndexed() bool               { return p.sp.EscapeIndexed() }
func (p perBlockPart) MayHoldEscape(i int, c byte) bool  { return p.sp.MayHoldEscape(i, c) }

// labelValue is the pool's k-th user id.
func labelValue(k int) string { return fmt.Sprintf("u%05d", k*7919%100000) }

// buildLabelStore writes n entries in a run per format (4: no index of
// metadata values, 5: one, 6: value filters, 0: the current, with escape
// grams) in 512-byte blocks (more than 64 a segment: bitmaps of several
// words): logfmt and JSON lines whose user_id, from a pool of 400 ids
// that changes slowly over time (so that blocks differ), is sometimes
// escaped (\u0075, \x31, \061, ...), and some with user_id or trace in
// their structured metadata instead; streams without and with a
// user_id label.
func buildLabelStore(t *testing.T, seed uint64, n int) *store.Snapshot {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 104))
	levels := []string{"info", "warn", "error", "debug"}
	return buildVersioned(t, t.TempDir(), []int{4, 5, 6, 0}, n, 200,
		store.Options{Segment: segment.Options{BlockSize: 512}},
		func(st *store.Store, i int) store.Entry {
			k := (i/25 + rng.IntN(6)) % 400
			v := labelValue(k)
			esc := rng.IntN(30) == 0
			lvl := levels[rng.IntN(len(levels))]
			var line string
			switch {
			case i%3 == 0:
				line = fmt.Sprintf(`{"level":"%s","user_id":%s,"msg":"op %d \u003cb\u003e"}`, lvl, escapeValue(rng, v, false, esc), i)
			case esc:
				line = fmt.Sprintf(`level=%s user_id=%s msg="op %d"`, lvl, escapeValue(rng, v, true, true), i)
			default:
				line = fmt.Sprintf(`level=%s user_id=%s msg="op %d"`, lvl, v, i)
			}
			var a []byte
			switch rng.IntN(10) {
			case 0:
				a = attrs.MustPairs("user_id", labelValue((k+200)%400))
			case 1:
				a = attrs.MustPairs("trace", fmt.Sprintf("%016x", rng.Uint64()))
			}
			stream := []string{`{app="a"}`, `{app="b"}`, `{app="c", user_id="u00000"}`}[rng.IntN(3)]
			return store.Entry{Time: int64(i) * 1e6, Stream: st.Stream(stream), Line: []byte(line), Attrs: a}
		})
}

// labelQuery is a random label filter on user_id (and level) after a
// parser: single values that occur or not, ORs of a few or of 1,100
// values (more than a segment Reader caches literals), ANDs, regexes
// that list exact values (case-folded too), a prefix regex, and a filter
// before any parser (metadata only).
func labelQuery(rng *rand.Rand, big bool) string {
	val := func() string {
		if rng.IntN(4) == 0 {
			return fmt.Sprintf("u9%04d", rng.IntN(10000)) // in no entry
		}
		return labelValue(rng.IntN(400))
	}
	ors := func(n int) string {
		ms := make([]string, n)
		for i := range ms {
			ms[i] = "user_id=" + strconv.Quote(val())
		}
		return strings.Join(ms, " or ")
	}
	parser := []string{"logfmt", "json", `regexp "user_id=(?P<user_id>\\S+)"`}[rng.IntN(3)]
	sel := []string{`{app=~"a|b|c"}`, `{app="a"}`, `{app="c"}`}[rng.IntN(3)]
	var f string
	switch k := rng.IntN(9); {
	case big:
		f = ors(1100)
	case k == 0:
		f = "user_id=" + strconv.Quote(val())
	case k == 1:
		f = ors(2 + rng.IntN(40))
	case k == 2:
		f = "user_id=" + strconv.Quote(val()) + ` and level="` + []string{"info", "warn", "nope"}[rng.IntN(3)] + `"`
	case k == 3:
		f = "(" + ors(2+rng.IntN(5)) + `) and level=~"warn|error"`
	case k == 4:
		f = "user_id=~" + strconv.Quote(regexp.QuoteMeta(val())+"|"+regexp.QuoteMeta(val()))
	case k == 5:
		f = "user_id=~" + strconv.Quote("(?i)"+strings.ToUpper(val()))
	case k == 6:
		f = "user_id=~" + strconv.Quote(val()[:4]+".*")
	case k == 7:
		f = "user_id=" + strconv.Quote(val()) + " or level=" + strconv.Quote("nope")
	default:
		// Before the parser: the value must be in the metadata.
		return sel + " | user_id=" + strconv.Quote(val()) + " | " + parser
	}
	return sel + " | " + parser + " | " + f
}

// TestLabelBlocksOracle: random label filters after a parser give with
// the skip index exactly what NoIndex gives (entries, metadata, order,
// counts) on a store of formats 4 to 7, its segments answering for all
// their blocks at once or (every other one, perBlockPart) block by
// block; and for every stream's requirement and segment, the whole-part
// answer (needBlocks.eval) equals MayMatchNeed asked block by block.
func TestLabelBlocksOracle(t *testing.T) {
	seed := testseed.Seed(t, "HAY_LABELBLOCKS_SEED")
	t.Logf("seed %d (HAY_LABELBLOCKS_SEED)", seed)
	snap := buildLabelStore(t, seed, 6000)
	var parts []store.Part
	wholeParts := 0
	for i, p := range snap.Parts {
		sp, ok := p.(*store.SegmentPart)
		if !ok {
			parts = append(parts, p)
			continue
		}
		if sp.NumBlocks() <= 64 {
			t.Fatalf("%s: %d blocks, want more than 64 (bitmaps of several words)", sp.Name(), sp.NumBlocks())
		}
		if i%2 == 1 {
			parts = append(parts, perBlockPart{sp})
			continue
		}
		wholeParts++
		parts = append(parts, sp)
	}
	if len(snap.Parts) < 4 || wholeParts < 2 {
		t.Fatalf("%d parts, %d answering for all blocks: want 4 formats, both kinds", len(snap.Parts), wholeParts)
	}
	// The streams' labels, as the executor parses them.
	var streams [][]query.Label
	for id := uint32(0); ; id++ {
		s := snap.Labels(id)
		if s == "" {
			if id > 0 {
				break
			}
			continue
		}
		ls, err := ingest.ParseLabels(s)
		if err != nil {
			t.Fatal(err)
		}
		ql := make([]query.Label, len(ls))
		for i, l := range ls {
			ql[i] = query.Label(l)
		}
		streams = append(streams, ql)
	}
	if len(streams) != 3 {
		t.Fatalf("%d streams, want 3", len(streams))
	}
	rng := rand.New(rand.NewPCG(seed, 105))
	queries := testseed.Scale(100, 30)
	pruned, found, partial := 0, 0, 0
	for i := range queries {
		src := labelQuery(rng, i < 2)
		p := mustPlan(t, src)
		// The whole-part answer against the per-block one, every
		// segment format, every stream's requirement.
		for _, ls := range streams {
			x := p.LabelIndex(ls)
			if x == nil {
				continue
			}
			for _, part := range snap.Parts {
				sp, ok := part.(*store.SegmentPart)
				if !ok {
					continue
				}
				pn := newPartNeeds(sp, sp)
				if pn.whole == nil {
					t.Fatalf("%s: a segment does not answer for all its blocks", sp.Name())
				}
				bm := pn.whole.eval(x)
				kept := 0
				for bi := range sp.NumBlocks() {
					got := bm == nil || bm[bi/64]&(1<<(bi%64)) != 0
					if want := MayMatchNeed(x, pn.lines, pn.values, bi); got != want {
						t.Fatalf("%s, stream %v, %s block %d: whole-part %v, per block %v\nrequirement %.500s", src, ls, sp.Name(), bi, got, want, x)
					}
					if got {
						kept++
					}
				}
				if kept > 0 && kept < sp.NumBlocks() {
					partial++
				}
			}
		}
		q := Query{Plan: p, Labels: snap.Labels, Order: []Order{Oldest, Newest}[i%2]}
		_, wn, st := sameWithoutIndex(t, parts, src, q)
		if _, cn := runMetaIdx(t, parts, Query{Plan: p, Labels: snap.Labels, Count: true}); cn != wn {
			t.Fatalf("%s: count %d with the index, %d entries listed", src, cn, wn)
		}
		if st.PrunedIndex > 0 {
			pruned++
		}
		if wn > 0 {
			found++
		}
	}
	blocks := 0
	for _, p := range parts {
		blocks += p.NumBlocks()
	}
	t.Logf("%d blocks; %d queries: %d skipped blocks, %d found entries; %d whole-part answers kept some blocks, not all", blocks, queries, pruned, found, partial)
	if found*100 < 30*queries || pruned*100 < 40*queries || partial < queries {
		t.Errorf("%d queries found entries, %d skipped blocks, %d partial answers: the test would prove little", found, pruned, partial)
	}
}
