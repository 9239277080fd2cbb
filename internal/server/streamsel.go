package server

import (
	"slices"

	"haystack/internal/ingest"
	"haystack/internal/query"
	"haystack/internal/search"
	"haystack/internal/segment"
	"haystack/internal/store"
)

// streamSet is the streams of a view a selector admits, found from the
// view's stream index (search.SelectStreams) rather than by parsing every
// stream's labels: a one-stream query costs a postings lookup, whatever
// the number of streams in the tenant (E9).
type streamSet struct {
	all bool     // every stream of the view (no selector)
	ids []uint32 // ascending, unless all
	n   int      // the view's streams: ids below n
}

// selectStreams returns the streams of v that plan's selector admits
// (all of them when plan is nil).
func selectStreams(v *store.View, plan *query.Plan) *streamSet {
	if plan == nil || len(plan.Streams) == 0 {
		return &streamSet{all: true, n: len(v.Streams)}
	}
	return &streamSet{ids: search.SelectStreams(v.Index(), plan), n: len(v.Streams)}
}

// bitset is a set of stream ids below its length×64.
type bitset []uint64

func newBitset(n int) bitset           { return make(bitset, (n+63)/64) }
func (b bitset) has(id uint32) bool    { return int(id/64) < len(b) && b[id/64]&(1<<(id%64)) != 0 }
func (b bitset) add(id uint32)         { b[id/64] |= 1 << (id % 64) }
func (b bitset) addNew(id uint32) bool { ok := !b.has(id); b.add(id); return ok }

// members is s as a bitset (s not all).
func (s *streamSet) members() bitset { return idBits(s.n, s.ids) }

// bulk is the number of selected streams from which present tracks them
// in bitsets rather than as a list searched in each block's streams.
const bulk = 1024

// present calls fn once for each stream of s that has a block
// overlapping [start, end] in v, in no particular order, until fn returns
// false. Its cost is the blocks in the range times the smaller of the
// selected streams (binary searched) and the block's. The block index
// answers alone, so a stream whose entries in a block lie just outside
// the range may be called, unless exact: then the blocks inside the range
// answer first, and a block that reaches past the range and holds a
// selected stream not found yet is decoded, so that only its streams with
// an entry in the range count (review 15c F1: /series and /labels listed
// a stream whose only entry was 50 minutes before the range, in a quiet
// tenant's block spanning hours). Busy streams are found in the inner
// blocks, so few blocks are decoded: those of streams with few entries,
// at most maxEdgeBlocks.
func (s *streamSet) present(v *store.View, start, end int64, exact bool, fn func(id uint32) bool) {
	inRange := func(m *segment.BlockMeta) bool {
		return m.Entries > 0 && m.MaxTime >= start && m.MinTime <= end
	}
	// blocks calls visit with the streams of each block in the range,
	// until it returns false: with exact, the blocks inside the range
	// first, then the decoded streams of each block reaching past it
	// that holds a stream wanted still reports.
	blocks := func(visit func(ids []uint32) bool, wanted func(id uint32) bool) {
		type edge struct {
			p  store.Part
			bi int
			m  segment.BlockMeta
		}
		var edges []edge
		for _, p := range v.Parts {
			for bi := range p.NumBlocks() {
				m := p.BlockMeta(bi)
				if !inRange(&m) {
					continue
				}
				if exact && (m.MinTime < start || m.MaxTime > end) {
					edges = append(edges, edge{p, bi, m})
					continue
				}
				if !visit(m.Streams) {
					return
				}
			}
		}
		var dec edgeStreams
		defer dec.release()
		for _, e := range edges {
			if slices.ContainsFunc(e.m.Streams, wanted) && !visit(dec.in(e.p, e.bi, &e.m, start, end)) {
				return
			}
		}
	}
	if s.all || len(s.ids) >= bulk {
		var sel bitset
		if !s.all {
			sel = s.members()
		}
		seen := newBitset(s.n)
		wanted := func(id uint32) bool { return int(id) < s.n && (s.all || sel.has(id)) && !seen.has(id) }
		blocks(func(ids []uint32) bool {
			for _, id := range ids {
				if wanted(id) && seen.addNew(id) && !fn(id) {
					return false
				}
			}
			return true
		}, wanted)
		return
	}
	left := slices.Clone(s.ids) // not yet found, ascending
	blocks(func(ids []uint32) bool {
		// Both lists are ascending (segment.BlockMeta.Streams is):
		// binary search the block's for a few ids, else merge.
		search := len(left)*8 < len(ids)
		kept := left[:0]
		stop := false
		j := 0
		for _, id := range left {
			if !stop {
				var ok bool
				if search {
					_, ok = slices.BinarySearch(ids, id)
				} else {
					for j < len(ids) && ids[j] < id {
						j++
					}
					ok = j < len(ids) && ids[j] == id
				}
				if ok {
					stop = !fn(id)
					continue
				}
			}
			kept = append(kept, id)
		}
		left = kept
		return !stop && len(left) > 0
	}, func(id uint32) bool {
		_, ok := slices.BinarySearch(left, id)
		return ok
	})
}

// maxEdgeBlocks bounds the blocks one exact present decodes: entries
// pushed out of time order make every block reach past any range, and a
// /labels request would then read the whole range (review 15d F2). Past
// it, a block counts all its streams, as the block index says.
const maxEdgeBlocks = 256

// edgeStreams decodes blocks that reach past a range, reusing one buffer.
type edgeStreams struct {
	b       *segment.Block
	decoded int
}

// in returns, ascending, the streams of block bi of p (m) with an entry
// in [start, end]; m.Streams past maxEdgeBlocks, or when the block cannot
// be read (a query names a damaged block; this only lists).
func (e *edgeStreams) in(p store.Part, bi int, m *segment.BlockMeta, start, end int64) []uint32 {
	if e.decoded >= maxEdgeBlocks {
		return m.Streams
	}
	e.decoded++
	if e.b == nil {
		e.b = segment.GetBlock()
	}
	if err := p.ReadBlock(bi, e.b); err != nil {
		return m.Streams
	}
	var out []uint32
	for k, t := range e.b.Times {
		if t >= start && t <= end {
			out = append(out, e.b.Streams[k])
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (e *edgeStreams) release() {
	if e.b != nil {
		segment.PutBlock(e.b)
	}
}

// presentIDs is present as an ascending list, at most limit long (0: no
// limit).
func (s *streamSet) presentIDs(v *store.View, start, end int64, limit int, exact bool) []uint32 {
	var out []uint32
	s.present(v, start, end, exact, func(id uint32) bool {
		out = append(out, id)
		return limit <= 0 || len(out) < limit
	})
	slices.Sort(out)
	return out
}

// parsedLabels parses the labels of streams ids of v; a stream whose
// labels do not parse is left out.
func parsedLabels(v *store.View, ids []uint32) []ingest.Labels {
	out := make([]ingest.Labels, 0, len(ids))
	for _, id := range ids {
		if ls, err := ingest.ParseLabels(v.Labels(id)); err == nil {
			out = append(out, ls)
		}
	}
	return out
}

// labelNames returns, sorted, the label names of streams ids (ascending)
// of v: from the stream index when they are many of the view's streams
// (a name's postings are read until one is in ids), else by parsing
// their labels.
func labelNames(v *store.View, ids []uint32) []string {
	names := []string{}
	if len(ids)*8 < len(v.Streams) {
		for _, ls := range parsedLabels(v, ids) {
			for _, l := range ls {
				names = append(names, l.Name)
			}
		}
		slices.Sort(names)
		return slices.Compact(names)
	}
	in := idBits(len(v.Streams), ids)
	ix := v.Index()
	for _, name := range ix.Names() {
		found := false
		ix.Values(name, func(_ string, vids []uint32) bool {
			for _, id := range vids {
				if in.has(id) {
					found = true
					return false
				}
			}
			return true
		})
		if found {
			names = append(names, name)
		}
	}
	return names
}

// labelValues returns, sorted, the values of label name among streams
// ids (ascending) of v, as labelNames finds names.
func labelValues(v *store.View, ids []uint32, name string) []string {
	vals := []string{}
	if len(ids)*8 < len(v.Streams) {
		for _, ls := range parsedLabels(v, ids) {
			if x := ls.Get(name); x != "" {
				vals = append(vals, x)
			}
		}
	} else {
		in := idBits(len(v.Streams), ids)
		v.Index().Values(name, func(x string, vids []uint32) bool {
			for _, id := range vids {
				if in.has(id) {
					vals = append(vals, x)
					break
				}
			}
			return true
		})
	}
	slices.Sort(vals)
	return slices.Compact(vals)
}

func idBits(n int, ids []uint32) bitset {
	b := newBitset(n)
	for _, id := range ids {
		if int(id) < n {
			b.add(id)
		}
	}
	return b
}

// labelCardinalities returns, for each label name of streams ids
// (ascending) of v, its number of distinct values among them, as
// labelNames finds names: from the stream index when the streams are
// many of the view's (Grafana's detected_labels asks for every service),
// else by parsing their labels.
func labelCardinalities(v *store.View, ids []uint32) map[string]int {
	card := map[string]int{}
	if len(ids)*8 < len(v.Streams) {
		values := map[string]map[string]bool{}
		for _, ls := range parsedLabels(v, ids) {
			for _, l := range ls {
				if values[l.Name] == nil {
					values[l.Name] = map[string]bool{}
				}
				values[l.Name][l.Value] = true
			}
		}
		for name, vals := range values {
			card[name] = len(vals)
		}
		return card
	}
	in := idBits(len(v.Streams), ids)
	ix := v.Index()
	for _, name := range ix.Names() {
		n := 0
		ix.Values(name, func(_ string, vids []uint32) bool {
			for _, id := range vids {
				if in.has(id) {
					n++
					break
				}
			}
			return true
		})
		if n > 0 {
			card[name] = n
		}
	}
	return card
}
