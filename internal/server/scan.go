package server

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"haystack/internal/search"
	"haystack/internal/segment"
	"haystack/internal/store"
	"haystack/needle"
)

// scanBlocks is the server's unordered scan: each selected block is
// decoded and checked once, entry by entry, on a pool of workers, and fn
// sees the matches in store order (parts, blocks, entries). The ordered
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
}

func scanBlocksOpt(ctx context.Context, v *store.View, sel *selection, opt scanOpts, fn func(*hit) bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	infos := streamInfos(v, sel)
	type task struct {
		part, block int
		meta        segment.BlockMeta
		skipped     bool
		done        chan struct{}
		blk         *segment.Block
		hits        []int32
		labels      []string // per hit, when the plan extracts labels
		err         error
	}
	var tasks []*task
	req := search.Required(sel.plan, sel.pat, sel.fold)
	for pi, p := range v.Parts {
		sk, _ := p.(search.Skipper)
		for bi := range p.NumBlocks() {
			m := p.BlockMeta(bi)
			if m.Entries == 0 || m.MaxTime < sel.start || m.MinTime > sel.end {
				continue
			}
			if sk != nil && req != nil && !search.MayMatch(req, sk, bi) {
				continue // the skip index rules the block out
			}
			for _, id := range m.Streams {
				if int(id) < len(infos) && infos[id].ok {
					tasks = append(tasks, &task{part: pi, block: bi, meta: m, done: make(chan struct{})})
					break
				}
			}
		}
	}
	if len(tasks) == 0 {
		return nil
	}
	switch {
	case opt.byTime < 0:
		slices.SortStableFunc(tasks, func(a, b *task) int { return cmp.Compare(b.meta.MaxTime, a.meta.MaxTime) })
	case opt.byTime > 0:
		slices.SortStableFunc(tasks, func(a, b *task) int { return cmp.Compare(a.meta.MinTime, b.meta.MinTime) })
	}
	var srch *needle.Searcher
	if sel.plan == nil && len(sel.pat) > 0 {
		if sel.fold {
			srch = needle.NewFold(sel.pat)
		} else {
			srch = needle.New(sel.pat)
		}
	}
	extract := sel.plan != nil && hasStages(sel.plan)
	do := func(t *task) {
		if opt.skip != nil && opt.skip(t.meta) {
			t.skipped = true
			return
		}
		b := segment.GetBlock()
		if err := v.Parts[t.part].ReadBlock(t.block, b); err != nil {
			segment.PutBlock(b)
			t.err = fmt.Errorf("%s block %d: %w", v.Parts[t.part].Name(), t.block, err)
			return
		}
		t.blk = b
		keep := func(k int) bool {
			tm := b.Times[k]
			if tm < sel.start || tm > sel.end {
				return false
			}
			id := b.Streams[k]
			return int(id) < len(infos) && infos[id].ok
		}
		if srch != nil {
			t.hits = search.ScanBlock(b, srch, keep, t.hits)
			return
		}
		for k, tm := range b.Times {
			if tm < sel.start || tm > sel.end {
				continue
			}
			id := b.Streams[k]
			if int(id) >= len(infos) || !infos[id].ok {
				continue
			}
			line := b.Line(k)
			switch {
			case sel.plan != nil && !extract:
				if !sel.plan.MatchEntry(infos[id].labels, line) {
					continue
				}
			case extract:
				ext, ok := sel.plan.Labels(infos[id].labels, line)
				if !ok {
					continue
				}
				l := infos[id].text
				if len(ext) > 0 {
					l = mergeLabels(infos[id].labels, ext)
				}
				t.labels = append(t.labels, l)
			}
			t.hits = append(t.hits, int32(k))
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
			for {
				select {
				case <-ctx.Done():
					return
				case t := <-work:
					do(t)
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
			next = &tasks[i+1].meta
		}
		if t.skipped || opt.skip != nil && opt.skip(t.meta) {
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
		for j, k := range t.hits {
			id := b.Streams[k]
			h = hit{Time: b.Times[k], Stream: id, Labels: infos[id].text, Line: b.Line(int(k))}
			if extract {
				h.Labels = t.labels[j]
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

// streamInfos parses every stream's labels once and marks the ones the
// selection's stream selector admits.
func streamInfos(v *store.View, sel *selection) []streamInfo {
	infos := make([]streamInfo, len(v.Streams))
	for id := range infos {
		si := &infos[id]
		si.known = true
		si.text = v.Labels(uint32(id))
		si.labels = queryLabels(si.text)
		si.ok = sel.plan == nil || sel.plan.MatchStream(si.labels)
	}
	return infos
}
