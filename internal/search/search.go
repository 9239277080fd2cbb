// Package search runs a literal substring search over a store snapshot.
//
// The executor works block by block. Blocks whose time range misses the
// query's are skipped from the block index alone. A kept block is decoded
// and the needle kernel runs over its whole Data buffer, not line by line:
// a hit is mapped to the entry that contains it through the block's
// offsets (a binary search from the current entry), a hit that runs past
// its entry's end is rejected (entries may contain '\n', so the buffer has
// no separators to stop it), and the scan resumes at the next entry's start,
// since an entry matches at most once.
//
// Blocks are decoded and scanned by a bounded pool of workers (one per
// core by default) and their results reassembled in order, so output order
// is the store's order whatever the parallelism. At most 2×workers decoded
// blocks are in flight, which bounds memory. The scan stops
// early at the limit or when the context is cancelled. Merging S streams
// (below) needs one current block per stream, so it holds at most
// max(2×workers, S) decoded blocks.
//
// # Order
//
// Oldest first: each stream in ingestion order, streams merged by time.
// Within a stream, ingestion order is the order of parts (segments, then
// the head) and of blocks and entries within them, so one stream is a
// single ordered run. Several streams are scanned as one run each and
// merged by entry time, ties going to the stream with the lower id (the
// one ingested first): a stable merge. Counting needs no order and always
// uses a single run.
package search

import (
	"container/heap"
	"context"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"

	"haystack/internal/segment"
	"haystack/internal/store"
	"haystack/needle"
)

// Query is a literal search.
type Query struct {
	Pattern []byte // literal; empty matches every entry
	Fold    bool   // ASCII case-insensitive
	// Entries with Since <= time < Until match. Zero values mean no bound.
	Since, Until int64
	Limit        int64 // stop after this many matches; 0 means no limit
	Count        bool  // only count: Run's emit is not called
	Workers      int   // 0 means GOMAXPROCS
}

// Match is a matching entry. Line is valid only during the emit call.
type Match struct {
	Time   int64
	Stream uint32
	Line   []byte
}

// Run searches parts (in ingestion order) and calls emit for each match in
// order, unless q.Count. It returns the number of matches. A damaged block
// is reported to onErr (the error names the file and block) and skipped;
// the search goes on. An error from emit or the context stops the search
// and is returned.
func Run(ctx context.Context, parts []store.Part, q Query, emit func(*Match) error, onErr func(error)) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if q.Until == 0 {
		q.Until = math.MaxInt64
	}
	if q.Since == 0 {
		q.Since = math.MinInt64
	}
	workers := q.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	e := &exec{q: q, parts: parts, work: make(chan *task, workers)}
	if q.Fold {
		e.s = needle.NewFold(q.Pattern)
	} else {
		e.s = needle.New(q.Pattern)
	}

	// The blocks the time range keeps, and the streams in them.
	var tasks []task
	streamSet := map[uint32]bool{}
	for pi, p := range parts {
		for bi := range p.NumBlocks() {
			m := p.BlockMeta(bi)
			if m.Entries == 0 || m.MaxTime < q.Since || m.MinTime >= q.Until {
				continue
			}
			tasks = append(tasks, task{part: pi, block: bi, stream: -1})
			for _, s := range m.Streams {
				streamSet[s] = true
			}
		}
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // runs before wg.Wait: stop the workers first
	for range workers {
		wg.Go(func() { e.worker(ctx) })
	}

	if q.Count || len(streamSet) <= 1 {
		r := e.start(ctx, &wg, tasks, 2*workers)
		return e.drain(ctx, r, emit, onErr)
	}

	streams := make([]uint32, 0, len(streamSet))
	for s := range streamSet {
		streams = append(streams, s)
	}
	slices.Sort(streams)
	// Each run needs its current block decoded to take part in the merge,
	// so merging S streams holds max(2×workers, S) decoded blocks.
	window := max(1, 2*workers/len(streams))
	h := &runHeap{}
	for _, s := range streams {
		var st []task
		for _, t := range tasks {
			if _, ok := slices.BinarySearch(parts[t.part].BlockMeta(t.block).Streams, s); ok {
				t.stream = int64(s)
				st = append(st, t)
			}
		}
		r := e.start(ctx, &wg, st, window)
		ok, err := r.advance(ctx, onErr)
		if err != nil {
			return 0, err
		}
		if ok {
			h.rs = append(h.rs, r)
		}
	}
	heap.Init(h)
	var n int64
	for h.Len() > 0 {
		r := h.rs[0]
		if err := emit(r.match()); err != nil {
			return n, err
		}
		n++
		if q.Limit > 0 && n >= q.Limit {
			return n, nil
		}
		ok, err := r.advance(ctx, onErr)
		if err != nil {
			return n, err
		}
		if ok {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
	}
	return n, nil
}

type exec struct {
	q     Query
	parts []store.Part
	s     *needle.Searcher
	work  chan *task
}

type task struct {
	part, block int
	stream      int64 // -1: every stream
	done        chan struct{}
	res         result
}

type result struct {
	blk   *segment.Block // nil when counting
	hits  []int32        // matching entries, ascending
	count int64
	err   error
}

func (e *exec) worker(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case t := <-e.work:
			e.do(t)
			close(t.done)
		}
	}
}

func (e *exec) do(t *task) {
	p := e.parts[t.part]
	m := p.BlockMeta(t.block)
	timeOK := m.MinTime >= e.q.Since && m.MaxTime < e.q.Until
	if e.q.Count && e.s.Len() == 0 && timeOK && t.stream < 0 {
		// Every entry matches: the (checksummed) block index has the count.
		t.res.count = int64(m.Entries)
		return
	}
	b := segment.GetBlock()
	if err := p.ReadBlock(t.block, b); err != nil {
		segment.PutBlock(b)
		t.res.err = err
		return
	}
	stream := t.stream
	if stream >= 0 && len(m.Streams) == 1 {
		stream = -1 // the whole block is that stream
	}
	t.res.hits = scanBlock(b, e.s, &e.q, timeOK, stream, t.res.hits[:0])
	t.res.count = int64(len(t.res.hits))
	if e.q.Count {
		segment.PutBlock(b)
		t.res.hits = nil
		return
	}
	t.res.blk = b
}

// scanBlock appends to hits the entries of b that match: they contain the
// needle, are in the time range (checked only when !timeOK) and belong to
// stream (when >= 0).
func scanBlock(b *segment.Block, s *needle.Searcher, q *Query, timeOK bool, stream int64, hits []int32) []int32 {
	keep := func(k int) bool {
		if !timeOK && (b.Times[k] < q.Since || b.Times[k] >= q.Until) {
			return false
		}
		return stream < 0 || int64(b.Streams[k]) == stream
	}
	n := len(b.Times)
	m := s.Len()
	if m == 0 {
		for k := range n {
			if keep(k) {
				hits = append(hits, int32(k))
			}
		}
		return hits
	}
	data, offs := b.Data, b.Offsets
	pos, k := 0, 0
	for pos < len(data) {
		i := s.IndexFrom(data, pos)
		if i < 0 {
			break
		}
		// The entry holding byte i: the first k with offs[k+1] > i.
		// Empty entries hold no byte and are passed over. Frequent
		// needles hit the next few entries: step there linearly, and
		// binary-search only a long jump.
		for step := 0; step < 8 && int(offs[k+1]) <= i; step++ {
			k++
		}
		if int(offs[k+1]) <= i {
			k += sort.Search(n-k, func(j int) bool { return int(offs[k+j+1]) > i })
		}
		end := int(offs[k+1])
		if i+m <= end && keep(k) {
			hits = append(hits, int32(k))
		}
		// Whether it matched, spanned into the next entry or was filtered
		// out, nothing more in entry k matters.
		pos = end
		k++
	}
	return hits
}

// run is one ordered sequence of tasks being executed.
type run struct {
	pending chan *task
	cur     *task
	hit     int // index into cur.res.hits
	order   int // tie-break in merges: lower first
	e       *exec
	m       Match
}

// start begins dispatching tasks with at most window in flight (dispatched
// and not yet consumed), returning the run that delivers them in order.
func (e *exec) start(ctx context.Context, wg *sync.WaitGroup, tasks []task, window int) *run {
	r := &run{pending: make(chan *task, window), e: e}
	if len(tasks) > 0 {
		r.order = int(tasks[0].stream)
	}
	wg.Go(func() {
		defer close(r.pending)
		for i := range tasks {
			t := &tasks[i]
			t.done = make(chan struct{})
			// pending's capacity is the window: this blocks until the
			// consumer has taken an earlier task.
			select {
			case r.pending <- t:
			case <-ctx.Done():
				return
			}
			select {
			case e.work <- t:
			case <-ctx.Done():
				return
			}
		}
	})
	return r
}

// next waits for the next task's result in order; nil at the end.
func (r *run) next(ctx context.Context) (*task, error) {
	var t *task
	select {
	case t = <-r.pending:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if t == nil {
		return nil, ctx.Err() // closed: the end, or cancelled
	}
	select {
	case <-t.done:
		return t, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// drain consumes a single run: the count-only and one-stream case.
func (e *exec) drain(ctx context.Context, r *run, emit func(*Match) error, onErr func(error)) (int64, error) {
	var n int64
	limit := e.q.Limit
	for {
		t, err := r.next(ctx)
		if err != nil || t == nil {
			return n, err
		}
		if t.res.err != nil {
			onErr(t.res.err)
			continue
		}
		if e.q.Count {
			n += t.res.count
			if limit > 0 && n >= limit {
				return limit, nil
			}
			continue
		}
		b := t.res.blk
		for _, k := range t.res.hits {
			if err := emit(&Match{Time: b.Times[k], Stream: b.Streams[k], Line: b.Line(int(k))}); err != nil {
				return n, err
			}
			n++
			if limit > 0 && n >= limit {
				return n, nil
			}
		}
		segment.PutBlock(b)
		t.res = result{}
	}
}

// advance moves the run to its next hit; false at the end.
func (r *run) advance(ctx context.Context, onErr func(error)) (bool, error) {
	if r.cur != nil {
		r.hit++
		if r.hit < len(r.cur.res.hits) {
			r.fill()
			return true, nil
		}
		segment.PutBlock(r.cur.res.blk)
		r.cur.res = result{}
		r.cur = nil
	}
	for {
		t, err := r.next(ctx)
		if err != nil || t == nil {
			return false, err
		}
		if t.res.err != nil {
			// In a merge several runs may read the same damaged block;
			// each reports it. Rare enough not to deduplicate.
			onErr(t.res.err)
			continue
		}
		if len(t.res.hits) == 0 {
			segment.PutBlock(t.res.blk)
			t.res = result{}
			continue
		}
		r.cur, r.hit = t, 0
		r.fill()
		return true, nil
	}
}

func (r *run) fill() {
	b, k := r.cur.res.blk, int(r.cur.res.hits[r.hit])
	r.m = Match{Time: b.Times[k], Stream: b.Streams[k], Line: b.Line(k)}
}

func (r *run) match() *Match { return &r.m }

// runHeap orders runs by their current match's time, then by stream.
type runHeap struct{ rs []*run }

func (h *runHeap) Len() int { return len(h.rs) }
func (h *runHeap) Less(i, j int) bool {
	a, b := h.rs[i], h.rs[j]
	if a.m.Time != b.m.Time {
		return a.m.Time < b.m.Time
	}
	return a.order < b.order
}
func (h *runHeap) Swap(i, j int) { h.rs[i], h.rs[j] = h.rs[j], h.rs[i] }
func (h *runHeap) Push(x any)    { h.rs = append(h.rs, x.(*run)) }
func (h *runHeap) Pop() any {
	x := h.rs[len(h.rs)-1]
	h.rs = h.rs[:len(h.rs)-1]
	return x
}
