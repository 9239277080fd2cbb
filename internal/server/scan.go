package server

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"haystack/internal/query"
	"haystack/internal/search"
	"haystack/internal/segment"
	"haystack/internal/store"
)

// scanBlocks is the server's unordered scan: each block search.Scanner
// keeps is decoded and matched once (all its selected streams in one
// pass) on a pool of workers, and fn sees the matches in store order
// (parts, blocks, entries). The ordered
// search.Run decodes a block once per selected stream it holds (it merges
// streams by time), which costs up to S times more for S interleaved
// streams; every caller here either needs no order or sorts by time
// itself, so queries over several streams come here (see run).
// At most 2×workers decoded blocks are in flight.
func scanBlocks(ctx context.Context, v *store.View, sel *selection, fn func(*hit) bool) error {
	return scanBlocksOpt(ctx, v, sel, scanOpts{}, fn)
}

// scanOpts let a top-k query skip blocks that cannot contribute.
type scanOpts struct {
	// byTime visits blocks by MaxTime descending (-1) or MinTime
	// ascending (+1) instead of store order (0), so the best entries tend
	// to come first and skip can prune the rest.
	byTime int
	// skip, if set, is asked before a block is dispatched and again before
	// its hits are delivered; true drops the block.
	skip func(segment.BlockMeta) bool
	// blockDone, if set, is called after each block's hits are delivered
	// (or the block was skipped) with the time bounds of the next block
	// in visiting order (nil after the last); an error stops the scan.
	blockDone func(next *segment.BlockMeta) error
	// want, if set, is asked (on the goroutine that calls fn) for each
	// hit's time before the hit is made; false drops the hit, and a line
	// a stage rewrote is then never made again (see scanKeepBytes).
	want func(time int64) bool
	// keysOnly: fn reads only each hit's Time, Stream and Ord, so no
	// rewritten line or pipeline labels are kept for it.
	keysOnly bool
}

// scanKeepBytes bounds the lines and label texts a pipeline made
// (line_format, label_format...) beyond twice the entry's own line and
// stream labels, which a block's task keeps for the hits it delivers:
// about a block's own size. Once past it, the task no longer runs the
// pipeline past its line filters: each later candidate is delivered
// marked redo, and the pipeline decides it (and makes its line) on the
// delivering goroutine, only when the consumer wants its time
// (scanOpts.want); one it does not want is counted as a match (a top-k
// then says "more", as for a skipped block). A task kept every hit's: a
// block of tens of thousands of short lines that line_format makes
// 1 MiB each held gigabytes, 2 x GOMAXPROCS blocks at a time, and made
// them all before the top-k could refuse any.
const scanKeepBytes = 1 << 20

// hitLabels are a hit's label texts (see hit), computed in a worker.
// line is the line a stage rewrote (line_format...), nil when none did.
type hitLabels struct {
	labels, meta, parsed string
	line                 []byte
	// redo: past scanKeepBytes, none of the above was kept; the
	// pipeline runs again when the hit is delivered.
	redo bool
}

func scanBlocksOpt(ctx context.Context, v *store.View, sel *selection, opt scanOpts, fn func(*hit) bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// internal/search keeps the blocks (time range, selected streams,
	// skip index) and matches each one; this scan only orders them.
	scanner, refs, err := search.NewScanner(v.Parts, searchQuery(v, sel))
	if err != nil {
		return err
	}
	// A stream the view does not name (id >= known) is never selected.
	known := uint32(len(v.Streams))
	// ords[p][b] is the store-order position of block b's first entry
	// in part p: compaction keeps every entry's position, so ties
	// ordered by it do not depend on where blocks are cut. Only the
	// ordered scan (topK) orders ties.
	var ords [][]int64
	if opt.byTime != 0 {
		ords = make([][]int64, len(v.Parts))
		var ord int64
		for pi, p := range v.Parts {
			ords[pi] = make([]int64, p.NumBlocks())
			for bi := range ords[pi] {
				ords[pi][bi] = ord
				ord += int64(p.BlockMeta(bi).Entries)
			}
		}
	}
	type task struct {
		ref     search.BlockRef
		skipped bool
		done    chan struct{}
		blk     *segment.Block
		hits    []int32
		labels  []hitLabels // per hit, when the plan extracts labels or the block has metadata
		kept    int         // bytes of labels' texts and lines (scanKeepBytes)
		over    bool        // kept reached scanKeepBytes: later hits are redone
		err     error
	}
	if len(refs) == 0 {
		return nil
	}
	tasks := make([]*task, len(refs))
	for i, r := range refs {
		tasks[i] = &task{ref: r, done: make(chan struct{})}
	}
	switch {
	case opt.byTime < 0:
		slices.SortStableFunc(tasks, func(a, b *task) int { return cmp.Compare(b.ref.Meta.MaxTime, a.ref.Meta.MaxTime) })
	case opt.byTime > 0:
		slices.SortStableFunc(tasks, func(a, b *task) int { return cmp.Compare(a.ref.Meta.MinTime, b.ref.Meta.MinTime) })
	}
	extract := sel.plan != nil && hasStages(sel.plan)
	// Without stages search does not parse the streams' labels; metadata
	// still merge with them (Loki 3), so they are parsed here when an
	// entry has some, once per stream, shared by the workers.
	var streamMu sync.Mutex
	parsed := map[uint32][]query.Label{}
	streamLabels := func(id uint32) []query.Label {
		if extract {
			return scanner.StreamLabels(id)
		}
		streamMu.Lock()
		defer streamMu.Unlock()
		ls, ok := parsed[id]
		if !ok {
			ls = queryLabels(v.Labels(id))
			parsed[id] = ls
		}
		return ls
	}
	do := func(t *task, sc *search.Scratch) {
		if opt.skip != nil && opt.skip(t.ref.Meta) {
			t.skipped = true
			return
		}
		b := segment.GetBlock()
		p := v.Parts[t.ref.Part]
		if err := scanner.ReadBlock(t.ref, b); err != nil { // without metadata when sel.skipAttrs allows
			segment.PutBlock(b)
			t.err = fmt.Errorf("%s block %d: %w", p.Name(), t.ref.Block, err)
			return
		}
		t.blk = b
		var stages func(int) bool
		if extract {
			// The pipeline decides and gives the labels in one run. search
			// asks stages exactly when the plan has stages beyond line
			// filters (hasStages), so t.labels matches t.hits.
			stages = func(k int) bool {
				id := b.Streams[k]
				if id >= known {
					return false
				}
				if t.over {
					// Past scanKeepBytes: the pipeline runs when the hit
					// is delivered, if the consumer wants its time.
					t.labels = append(t.labels, hitLabels{redo: true})
					return true
				}
				var h hit
				if !sel.labelHit(&h, streamLabels(id), v.Labels(id), b.Attrs(k), b.Line(k)) {
					return false
				}
				// h.Line is set only when a stage rewrote the line.
				l := hitLabels{labels: h.Labels, meta: h.Meta, parsed: h.Parsed, line: h.Line}
				if opt.keysOnly {
					l = hitLabels{}
				} else if n := len(l.labels) + len(l.meta) + len(l.parsed) + len(l.line); n > 2*(len(b.Line(k))+len(v.Labels(id)))+256 {
					// More than a parser makes of the entry: a rewrite
					// (line_format, label_format) that may be far larger
					// than the block; those share scanKeepBytes.
					if t.kept+n > scanKeepBytes {
						l, t.over = hitLabels{redo: true}, true
					} else {
						t.kept += n
					}
				}
				t.labels = append(t.labels, l)
				return true
			}
		}
		t.hits = scanner.MatchStages(t.ref, b, sc, t.hits, stages)
		withLabels := extract
		if !extract && sel.plan != nil && len(b.AttrOffsets) > 0 {
			// No stages, but entries with metadata: their labels.
			withLabels = true
			t.labels = t.labels[:0]
			for _, k := range t.hits {
				id := b.Streams[k]
				var h hit
				if id < known && len(b.Attrs(int(k))) > 0 {
					sel.labelHit(&h, streamLabels(id), v.Labels(id), b.Attrs(int(k)), b.Line(int(k)))
				} else if id < known {
					h.Labels = v.Labels(id)
				}
				t.labels = append(t.labels, hitLabels{labels: h.Labels, meta: h.Meta, parsed: h.Parsed})
			}
		}
		// search reads a zero Since or Until as no bound (see
		// searchQuery): re-check the range. A stream the view does not
		// name is never selected.
		kept, labels := t.hits[:0], t.labels[:0]
		for j, k := range t.hits {
			id := b.Streams[k]
			if tm := b.Times[k]; tm < sel.start || tm > sel.end || id >= known {
				continue
			}
			kept = append(kept, k)
			if withLabels {
				labels = append(labels, t.labels[j])
			}
		}
		t.hits, t.labels = kept, labels
		if !withLabels {
			t.labels = nil
		}
	}

	workers := runtime.GOMAXPROCS(0)
	work := make(chan *task)
	window := make(chan struct{}, 2*workers)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for range workers {
		wg.Go(func() {
			var sc search.Scratch
			for {
				select {
				case <-ctx.Done():
					return
				case t := <-work:
					do(t, &sc)
					close(t.done)
				}
			}
		})
	}
	wg.Go(func() {
		for _, t := range tasks {
			select {
			case window <- struct{}{}:
			case <-ctx.Done():
				return
			}
			select {
			case work <- t:
			case <-ctx.Done():
				return
			}
		}
	})
	var h hit
	for i, t := range tasks {
		select {
		case <-t.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		<-window
		if t.err != nil {
			return t.err
		}
		var next *segment.BlockMeta
		if i+1 < len(tasks) {
			next = &tasks[i+1].ref.Meta
		}
		if t.skipped || opt.skip != nil && opt.skip(t.ref.Meta) {
			if t.blk != nil {
				segment.PutBlock(t.blk)
			}
			tasks[i] = nil
			if opt.blockDone != nil {
				if err := opt.blockDone(next); err != nil {
					return err
				}
			}
			continue
		}
		b := t.blk
		stop := false
		for jj := range t.hits {
			// Newest first when the top-k wants the newest: a block holds
			// its entries oldest first, and once the answer is full the
			// older ones are refused by time (want) before a deferred
			// pipeline rewrites them. (Ties are ordered by Ord, not by
			// arrival: the answer is the same.)
			j := jj
			if opt.byTime < 0 {
				j = len(t.hits) - 1 - jj
			}
			k := t.hits[j]
			if opt.want != nil && !opt.want(b.Times[k]) {
				continue
			}
			id := b.Streams[k]
			if opt.keysOnly {
				h = hit{Time: b.Times[k], Stream: id}
			} else {
				h = hit{Time: b.Times[k], Stream: id, Labels: v.Labels(id), Line: b.Line(int(k)), Attrs: b.Attrs(int(k))}
			}
			if ords != nil {
				h.Ord = ords[t.ref.Part][t.ref.Block] + int64(k)
			}
			if t.labels != nil && !opt.keysOnly {
				l := &t.labels[j]
				if l.redo {
					// The same pipeline on the same entry: it passes again.
					if !sel.labelHit(&h, streamLabels(id), v.Labels(id), h.Attrs, h.Line) {
						continue
					}
				} else {
					h.Labels, h.Meta, h.Parsed = l.labels, l.meta, l.parsed
					if l.line != nil {
						h.Line, h.ownLine = l.line, true
					}
				}
			}
			if !fn(&h) {
				stop = true
				break
			}
		}
		segment.PutBlock(b)
		tasks[i] = nil
		if stop {
			return nil
		}
		if opt.blockDone != nil {
			if err := opt.blockDone(next); err != nil {
				return err
			}
		}
	}
	return nil
}
