package search

import (
	"errors"

	"haystack/internal/segment"
	"haystack/internal/store"
)

// A Scanner is Run's block scan without its scheduling, for callers that
// decode and order blocks themselves (the server's top-k visits blocks by
// their time bounds and skips the ones that cannot contribute). It keeps
// the blocks Run keeps (time range, selected streams, skip index), and
// finds a decoded block's matches as Run's workers do (driving needles
// over the whole buffer, then confirmation), for every selected stream of
// the block at once: one pass per block, whatever the number of streams.
// Match may be called concurrently, with a Scratch per goroutine.
type Scanner struct {
	e *exec
}

// BlockRef is a block a Scanner kept: block Block of part Part.
type BlockRef struct {
	Part, Block int
	Meta        segment.BlockMeta
}

// Scratch is reusable memory for Scanner.Match; one per goroutine.
type Scratch struct {
	sc scratch
}

// NewScanner prepares q over parts and returns the blocks to read, in
// store order (parts, then blocks). q's Order, Limit, Count and Workers
// play no part; context entries (Before, After) are refused. q.Stats, if
// set, receives the pruning counts (Decoded stays 0).
func NewScanner(parts []store.Part, q Query) (*Scanner, []BlockRef, error) {
	if q.Before != 0 || q.After != 0 {
		return nil, nil, errors.New("search: a Scanner delivers no context entries")
	}
	q.Order, q.Limit, q.Count = Oldest, 0, false
	e, err := newExec(parts, q)
	if err != nil {
		return nil, nil, err
	}
	e.report()
	refs := make([]BlockRef, len(e.tasks))
	for i, t := range e.tasks {
		refs[i] = BlockRef{Part: t.part, Block: t.block, Meta: parts[t.part].BlockMeta(t.block)}
	}
	return &Scanner{e: e}, refs, nil
}

// ReadBlock decodes the kept block r into b as Run would: without its
// structured metadata when the query's SkipAttrs allows (see
// Query.SkipAttrs), else whole.
func (s *Scanner) ReadBlock(r BlockRef, b *segment.Block) error {
	return s.e.readBlock(s.e.parts[r.Part], r.Block, b)
}

// Match appends to hits the matching entries of b, the decoded block r,
// ascending.
func (s *Scanner) Match(r BlockRef, b *segment.Block, sc *Scratch, hits []int32) []int32 {
	return s.MatchStages(r, b, sc, hits, nil)
}

// MatchStages is Match where, for a plan with parser or label stages,
// stages(k) decides whether entry k matches instead of Plan.MatchEntry:
// it is called at most once per entry, in ascending order, after every
// other check, and true makes k a match. A caller that wants the labels
// the pipeline extracts (Plan.Labels, which decides the same) gets them
// there without running the pipeline twice. Without stages in the plan,
// stages is not called.
func (s *Scanner) MatchStages(r BlockRef, b *segment.Block, sc *Scratch, hits []int32, stages func(k int) bool) []int32 {
	timeOK, allSel := s.e.whole(r.Meta)
	return s.e.match(b, timeOK, allSel, -1, &sc.sc, hits, stages)
}
