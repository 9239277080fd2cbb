package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"haystack/internal/dirfs"
	"haystack/internal/segment"
)

// CompactSegment is the layout Compact rewrites segments into: blocks of
// 512 KiB instead of ingest's 1 MiB, so a needle that the skip index
// finds in a few blocks decodes half as much, at zstd's "better" level,
// which pays for the smaller blocks' weaker compression and larger index
// and decodes ~10% faster. Ingest cannot afford that level: it compresses
// at ~70 MB/s a core where ingest must sustain 100 MB/s per CPU-second.
// Measured on 1M generated lines in docs/BENCHMARKS.md, "Compaction".
var CompactSegment = segment.Options{BlockSize: 512 << 10, Level: 3}

// DefaultMergeBytes is how many raw bytes of consecutive segments Compact
// merges into one by default: eight of ingest's 32 MiB heads. Every
// search opens each segment it cannot rule out by time and probes its
// skip index, so fewer segments make the searches the index answers
// cheaper at scale (20M lines: 157 segments 14 ms, 21 segments 6.5 ms for
// an absent needle), and one gram table serves them all.
const DefaultMergeBytes = 256 << 20

// CompactOptions tune Compact. The zero value selects CompactSegment,
// DefaultMergeBytes and one worker per core.
type CompactOptions struct {
	// Segment is the layout of the rewritten segments; nil means
	// CompactSegment.
	Segment *segment.Options
	// MergeBytes bounds the raw bytes of consecutive segments merged into
	// one (a larger segment is rewritten alone); 0 means
	// DefaultMergeBytes, a negative value rewrites each segment alone.
	MergeBytes int64
	// Workers write that many new segments at once; 0 means GOMAXPROCS.
	Workers int
	// Progress, when set, is called after each group of new segments is
	// in place, with the raw bytes done and the total to do.
	Progress func(done, total int64)
}

func (o CompactOptions) layout() segment.Options {
	if o.Segment != nil {
		return *o.Segment
	}
	return CompactSegment
}

func (o CompactOptions) merge() int64 {
	switch {
	case o.MergeBytes == 0:
		return DefaultMergeBytes
	case o.MergeBytes < 0:
		return 0
	}
	return o.MergeBytes
}

func (o CompactOptions) workers() int {
	if o.Workers > 0 {
		return o.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// CompactStats reports what Compact did.
type CompactStats struct {
	Segments int   // segments rewritten
	Written  int   // segments they were merged into
	RawBytes int64 // their entries' bytes
	Before   int64 // their file sizes before
	After    int64 // and after
}

func (st *CompactStats) add(runs [][]SegmentMeta, out []SegmentMeta) {
	for k, run := range runs {
		for _, sm := range run {
			st.Segments++
			st.RawBytes += sm.RawBytes
			st.Before += sm.Size
		}
		st.Written++
		st.After += out[k].Size
	}
}

// compactHook, when set by a test, runs at each step of a compaction
// ("merging": a new segment's temp file created, nothing copied yet;
// "written": new segments committed, manifest not yet replaced;
// "listed": manifest replaced, old segments not yet deleted); an error
// stops Compact right there, as a crash would.
var compactHook func(step string) error

func runCompactHook(step string) error {
	if compactHook == nil {
		return nil
	}
	return compactHook(step)
}

// Compact flushes the head, then rewrites every segment it has not
// rewritten before into the CompactSegment layout, merging runs of
// consecutive such segments (ingestion order) into one of up to
// MergeBytes: same entries, same order, same streams and times. Then it
// merges runs of small compacted segments, left by earlier calls that
// found little to compact, once they add up to half of MergeBytes (see
// planMerges). Searches give the same results before and after, only
// faster for selective needles.
//
// Up to Workers runs at a time are written as new files (temp, fsync,
// rename), then one manifest replacement swaps them in, then the old
// files are deleted. A crash at any point leaves either the old or the
// new segments listed, and Open deletes the unlisted ones. A reader that
// read the old manifest and finds a segment gone re-reads it
// (OpenSnapshotRange retries). A damaged segment stops Compact with an
// error naming the file; what was swapped in before stays, the rest is
// as it was.
//
// Compact must not run concurrently with the store's other methods.
func (s *Store) Compact(ctx context.Context, opt CompactOptions) (CompactStats, error) {
	if err := s.Flush(); err != nil {
		return CompactStats{}, err
	}
	return compact(ctx, s.root, opt, storeSteps{s})
}

// compactSteps are the parts of a compaction that depend on who owns the
// store and how it is locked; compact runs the rest.
type compactSteps interface {
	// plan picks the next runs (opt.plan) and reserves a file number for
	// each, from base on. The first call, with plan.target 0, sets the
	// target and the total raw bytes to compact.
	plan(opt CompactOptions, pl *compactPlan) (runs [][]SegmentMeta, base uint64, err error)
	// swap puts each run's merged segment in its place in the manifest;
	// swapped reports whether the manifest was written (or may have been).
	swap(runs [][]SegmentMeta, out []SegmentMeta) (swapped bool, err error)
	// unreadable is told of the runs whose writing failed, errs[k] for
	// runs[k] (nil for those that did not fail).
	unreadable(runs [][]SegmentMeta, errs []error)
}

// compactPlan is what a compaction fixes when it starts.
type compactPlan struct {
	target int64  // opt.target of the segments at the start
	total  int64  // their raw bytes not compacted yet, then also of merges planned
	newest string // the last segment at the start ("" if none)
}

func (pl *compactPlan) start(opt CompactOptions, segs []SegmentMeta, skip map[string]bool) {
	if pl.target != 0 {
		return
	}
	pl.target = opt.target(segs, skip)
	if len(segs) > 0 {
		pl.newest = segs[len(segs)-1].Name
	}
	for _, sm := range segs {
		if !sm.Compacted && !skip[sm.Name] {
			pl.total += sm.RawBytes
		}
	}
}

// next starts the plan at its first call and returns the runs to write
// next (CompactOptions.plan over the segments bound keeps).
func (pl *compactPlan) next(opt CompactOptions, segs []SegmentMeta, skip map[string]bool) [][]SegmentMeta {
	pl.start(opt, segs, skip)
	return opt.plan(pl.bound(segs), pl.target, skip)
}

// bound drops the segments flushed since the compaction started. Under
// steady ingest a flush may land faster than a run is written, and a call
// that took those too would not return while ingest goes on: no report
// of what it did, and no merges, which wait until no segment is left to
// compact. Flushes append, and compaction replaces runs in place, so the
// new segments are the tail from the first one not compacted and named
// after the newest at the start (names are fixed-width hex sequence
// numbers, ordered as numbers).
func (pl *compactPlan) bound(segs []SegmentMeta) []SegmentMeta {
	for i, sm := range segs {
		if !sm.Compacted && sm.Name > pl.newest {
			return segs[:i]
		}
	}
	return segs
}

// compact plans, writes and swaps in runs until none is left: the loop of
// Store.Compact and Writer.Compact.
// compact reads, writes, renames and removes segments through root, the
// store's directory even if it was renamed and another put in its place.
func compact(ctx context.Context, root *dirfs.Dir, opt CompactOptions, steps compactSteps) (CompactStats, error) {
	var st CompactStats
	var pl compactPlan
	for {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		runs, base, err := steps.plan(opt, &pl)
		if err != nil || len(runs) == 0 {
			return st, err
		}
		// Merges of compacted segments were not in the total at the start.
		var planned int64
		for _, run := range runs {
			for _, sm := range run {
				planned += sm.RawBytes
			}
		}
		pl.total = max(pl.total, st.RawBytes+planned)
		out, errs, err := writeRuns(ctx, root, opt.layout(), runs, base)
		if err != nil {
			if ctx.Err() == nil {
				steps.unreadable(runs, errs)
			}
			return st, err
		}
		swapped, err := steps.swap(runs, out)
		if !swapped {
			removeOutputs(root, out)
		}
		if err != nil {
			return st, err
		}
		if err := removeRuns(root, runs); err != nil {
			return st, err
		}
		st.add(runs, out)
		if opt.Progress != nil {
			opt.Progress(st.RawBytes, pl.total)
		}
	}
}

// storeSteps compacts a Store that nothing else uses meanwhile.
type storeSteps struct{ s *Store }

func (c storeSteps) plan(opt CompactOptions, pl *compactPlan) ([][]SegmentMeta, uint64, error) {
	runs := pl.next(opt, c.s.man.Segments, nil)
	if len(runs) == 0 {
		return nil, 0, nil
	}
	return runs, c.s.reserveSeqs(len(runs)), nil
}

// reserveSeqs takes n file numbers for new segments and returns the first.
// The reservation lives in memory until a manifest is written: a flush's
// manifest starts from this one, and a crash before any manifest leaves
// the reserved files unlisted, to be deleted.
func (s *Store) reserveSeqs(n int) uint64 {
	m := *s.man
	base := m.NextSeq
	m.NextSeq += uint64(n)
	s.man = &m
	return base
}

func (c storeSteps) swap(runs [][]SegmentMeta, out []SegmentMeta) (bool, error) {
	return swapManifest(c.s, runs, out)
}

// unreadable: a Store compaction stops at the first failure.
func (storeSteps) unreadable([][]SegmentMeta, []error) {}

// swapManifest writes the manifest with the runs replaced by out.
// swapped reports whether it was written (or may have been: a failed
// write makes the store refuse further work, and the next Open sorts the
// files out).
func swapManifest(s *Store, runs [][]SegmentMeta, out []SegmentMeta) (swapped bool, err error) {
	m := *s.man
	if m.Segments, err = swapRuns(s.man.Segments, runs, out); err != nil {
		return false, err
	}
	if err := runCompactHook("written"); err != nil {
		return true, err // a simulated crash: leave the files to Open
	}
	if err := writeManifest(s.root, &m); err != nil {
		var kept *manifestKeptError
		if errors.As(err, &kept) {
			// The old manifest stands: nothing changed; compact
			// removes the new segments, and the compaction is tried
			// again later while the store goes on.
			return false, fmt.Errorf("compact: %w; the store is unchanged", err)
		}
		return true, s.fail(err)
	}
	s.man = &m
	return true, runCompactHook("listed")
}

// target bounds the runs of a Compact call that starts with segs below
// MergeBytes when there is little to compact, so that there are runs for
// every worker (a run is written on one core): the bytes to compact over
// Workers, plus half the largest segment, so that segments of equal size
// split into Workers runs rather than one more.
func (o CompactOptions) target(segs []SegmentMeta, skip map[string]bool) int64 {
	var left, largest int64
	for _, sm := range segs {
		if !sm.Compacted && !skip[sm.Name] {
			left += sm.RawBytes
			largest = max(largest, sm.RawBytes)
		}
	}
	w := int64(o.workers())
	return max(min(o.merge(), (left+w-1)/w+largest/2), 1)
}

// plan returns the runs to write next, up to Workers of them: runs of
// the segments not compacted yet (planRuns), and once there are none,
// runs of small compacted segments to merge again (planMerges). Segments
// named in skip (they could not be read) join no run.
func (o CompactOptions) plan(segs []SegmentMeta, target int64, skip map[string]bool) [][]SegmentMeta {
	runs := planRuns(segs, min(o.merge(), target), skip)
	if len(runs) == 0 {
		runs = planMerges(segs, o.merge(), skip)
	}
	return runs[:min(o.workers(), len(runs))]
}

// planRuns groups the segments not compacted yet into runs to merge: each
// run is consecutive in segs and holds at most limit raw bytes unless it
// is a single segment (limit 0: every run is one segment).
func planRuns(segs []SegmentMeta, limit int64, skip map[string]bool) [][]SegmentMeta {
	var runs [][]SegmentMeta
	var cur []SegmentMeta
	var raw int64
	end := func() {
		if len(cur) > 0 {
			runs, cur, raw = append(runs, cur), nil, 0
		}
	}
	for _, sm := range segs {
		if sm.Compacted || skip[sm.Name] {
			end()
			continue
		}
		if len(cur) > 0 && raw+sm.RawBytes > limit {
			end()
		}
		cur = append(cur, sm)
		raw += sm.RawBytes
	}
	end()
	return runs
}

// planMerges groups small compacted segments into runs to merge again, so
// that a store compacted a little at a time does not keep a segment per
// compaction. Under hay serve each compaction usually finds one new
// segment of ingest's 32 MiB head and rewrites it alone, and every search
// pays for each segment it opens (see DefaultMergeBytes).
//
// A compacted segment is small below limit/4. A run is consecutive small
// segments of at most limit raw bytes, and is merged once it holds at
// least limit/2: so such a merged segment is never small again, and its
// entries are rewritten twice in all (their first compaction, then one
// merge) instead of each time a neighbour arrives. A run of
// maxSmallRun segments is merged too, however small: a quiet tenant's
// heads are flushed small (after --head-flush-idle, at a restart, when
// --max-open-tenants closes it), and they waited for good, so its segment
// count, and every search's work, grew with time rather than data (2,835
// segments for 52 MB in a 14-minute soak). Such an entry is rewritten
// once more for each 16-fold growth of its segment. Until then the small
// segments wait: fewer than limit/2 bytes and maxSmallRun of them at a
// time between two larger ones. limit 0 merges nothing.
func planMerges(segs []SegmentMeta, limit int64, skip map[string]bool) [][]SegmentMeta {
	if limit <= 0 {
		return nil
	}
	var runs [][]SegmentMeta
	var cur []SegmentMeta
	var raw int64
	end := func() {
		if len(cur) >= 2 && (raw >= limit/2 || len(cur) >= maxSmallRun) {
			runs = append(runs, cur)
		}
		cur, raw = nil, 0
	}
	for _, sm := range segs {
		if !sm.Compacted || skip[sm.Name] || sm.RawBytes >= limit/4 {
			end()
			continue
		}
		if raw+sm.RawBytes > limit {
			end()
		}
		cur = append(cur, sm)
		raw += sm.RawBytes
		if len(cur) == maxSmallRun {
			end()
		}
	}
	end()
	return runs
}

// maxSmallRun is how many small compacted segments are merged into one
// whatever their size (see planMerges).
const maxSmallRun = 16

// writeRuns writes run k as segment base+k, all at once, and returns their
// manifest entries. On failure it removes those it wrote, and errs holds
// each run's error.
func writeRuns(ctx context.Context, root *dirfs.Dir, opt segment.Options, runs [][]SegmentMeta, base uint64) (out []SegmentMeta, errs []error, err error) {
	out = make([]SegmentMeta, len(runs))
	errs = make([]error, len(runs))
	var wg sync.WaitGroup
	for k, run := range runs {
		wg.Go(func() {
			out[k], errs[k] = mergeSegments(ctx, root, opt, run, base+uint64(k))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for k := range runs {
			if errs[k] == nil {
				root.Remove(filepath.Join(segDir, out[k].Name))
			}
		}
		return nil, errs, err
	}
	return out, errs, nil
}

// removeOutputs deletes merged segments that were not swapped in.
func removeOutputs(root *dirfs.Dir, out []SegmentMeta) {
	for _, sm := range out {
		root.Remove(filepath.Join(segDir, sm.Name))
	}
}

// swapRuns returns a copy of segs with each run replaced by its output.
// Each run must still be in segs, consecutive (segments only ever get
// appended after it meanwhile).
func swapRuns(segs []SegmentMeta, runs [][]SegmentMeta, out []SegmentMeta) ([]SegmentMeta, error) {
	first := map[string]int{} // first segment of a run -> run index
	inRun := map[string]bool{}
	for k, run := range runs {
		first[run[0].Name] = k
		for _, sm := range run {
			inRun[sm.Name] = true
		}
	}
	var next []SegmentMeta
	for i := 0; i < len(segs); {
		k, ok := first[segs[i].Name]
		if !ok {
			if inRun[segs[i].Name] {
				return nil, fmt.Errorf("compact: segment %s is no longer where it was", segs[i].Name)
			}
			next = append(next, segs[i])
			i++
			continue
		}
		for _, sm := range runs[k] {
			if i >= len(segs) || segs[i].Name != sm.Name {
				return nil, fmt.Errorf("compact: segment %s is no longer where it was", sm.Name)
			}
			i++
		}
		next = append(next, out[k])
		delete(first, runs[k][0].Name)
	}
	if len(first) > 0 {
		return nil, errors.New("compact: a segment to replace left the manifest")
	}
	return next, nil
}

// removeRuns deletes the files of the segments the runs replaced.
func removeRuns(root *dirfs.Dir, runs [][]SegmentMeta) error {
	for _, run := range runs {
		for _, sm := range run {
			if err := root.Remove(filepath.Join(segDir, sm.Name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// mergeSegments copies the entries of the segments of run, in order, into
// a new segment numbered seq, written with opt, and returns its manifest
// entry. It checks every block (segment.Reader.ReadBlock verifies the
// checksums) and that each segment's entry count and bytes match the
// manifest's.
func mergeSegments(ctx context.Context, root *dirfs.Dir, opt segment.Options, run []SegmentMeta, seq uint64) (SegmentMeta, error) {
	name := fmt.Sprintf("%016x%s", seq, segExt)
	w, err := segment.CreateIn(root, filepath.Join(segDir, name), opt)
	if err != nil {
		return SegmentMeta{}, err
	}
	if err := runCompactHook("merging"); err != nil {
		w.Abort()
		return SegmentMeta{}, err
	}
	out := SegmentMeta{Name: name, MinTime: run[0].MinTime, MaxTime: run[0].MaxTime, Compacted: true}
	b := segment.GetBlock()
	defer segment.PutBlock(b)
	for _, sm := range run {
		if err := copySegment(ctx, root, w, sm, b); err != nil {
			w.Abort()
			return SegmentMeta{}, err
		}
		out.Entries += sm.Entries
		out.RawBytes += sm.RawBytes
		out.MinTime = min(out.MinTime, sm.MinTime)
		out.MaxTime = max(out.MaxTime, sm.MaxTime)
	}
	info, err := w.Commit()
	if err != nil {
		return SegmentMeta{}, fmt.Errorf("commit segment %s: %w", name, err)
	}
	out.Size = info.FileBytes
	return out, nil
}

// sourceError is a segment Compact could not read (as opposed to a
// failure to write the new one).
type sourceError struct{ err error }

func (e *sourceError) Error() string { return e.err.Error() }
func (e *sourceError) Unwrap() error { return e.err }

// copySegment adds every entry of segment sm to w, using b as scratch.
// A failure to read sm is a *sourceError.
func copySegment(ctx context.Context, root *dirfs.Dir, w *segment.Writer, sm SegmentMeta, b *segment.Block) error {
	rel := filepath.Join(segDir, sm.Name)
	r, err := segment.OpenIn(root, rel)
	if err != nil {
		return &sourceError{fmt.Errorf("compact: %w", err)} // names the file in full
	}
	defer r.Close()
	var entries, raw int64
	for i := range r.NumBlocks() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := r.ReadBlock(i, b); err != nil {
			return &sourceError{fmt.Errorf("compact %s: %w", rel, err)}
		}
		for k := range b.Len() {
			if err := w.Add(b.Entry(k)); err != nil {
				return err // names the file written and the cause
			}
		}
		entries += int64(b.Len())
		raw += int64(len(b.Data))
	}
	if entries != sm.Entries || raw != sm.RawBytes {
		return &sourceError{fmt.Errorf("compact %s: %d entries of %d bytes, the manifest says %d of %d",
			rel, entries, raw, sm.Entries, sm.RawBytes)}
	}
	return nil
}

// Compact rewrites the committed segments as Store.Compact does, while
// appends and searches go on: it takes the locks only to pick the runs
// (after any flush in flight, reserving their new file numbers) and to
// swap the merged segments into the manifest; the writing runs without
// them. It does not flush the head. Views taken before a swap keep
// reading the old segments, whose mappings are released once no view
// holds them. Calls are serialised. A segment that could not be read is
// left out of later calls (it stays as it is, and searches report it).
// Close cancels a call in flight and waits for it.
func (w *Writer) Compact(ctx context.Context, opt CompactOptions) (CompactStats, error) {
	w.compactMu.Lock()
	defer w.compactMu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-w.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	return compact(ctx, w.s.root, opt, writerSteps{w})
}

// writerSteps compacts a Writer's store under its locks.
type writerSteps struct{ w *Writer }

func (c writerSteps) plan(opt CompactOptions, pl *compactPlan) ([][]SegmentMeta, uint64, error) {
	return c.w.compactPlan(opt, pl)
}

func (c writerSteps) swap(runs [][]SegmentMeta, out []SegmentMeta) (bool, error) {
	return c.w.compactSwap(runs, out)
}

func (c writerSteps) unreadable(runs [][]SegmentMeta, errs []error) {
	for k, err := range errs {
		// Only a segment that could not be read is left out; a failed
		// write (a full disk) is retried at the next call.
		var se *sourceError
		if errors.As(err, &se) {
			for _, sm := range runs[k] {
				c.w.compactSkip[sm.Name] = true
			}
		}
	}
}

// compactPlan picks up to opt.Workers runs (CompactOptions.plan) and
// reserves a file number for each. It first waits for a flush in
// flight: that flush's manifest was copied before the reservation.
func (w *Writer) compactPlan(opt CompactOptions, pl *compactPlan) ([][]SegmentMeta, uint64, error) {
	w.cmu.Lock()
	defer w.cmu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil {
		return nil, 0, w.failed
	}
	if w.segs == nil {
		return nil, 0, ErrWriterClosed
	}
	if err := w.s.wait(); err != nil {
		w.failed = err // /ready and the next push say so at once
		return nil, 0, err
	}
	// Segments that failed to read before join no run: they stay as they
	// are, between the runs before and after them.
	runs := pl.next(opt, w.s.man.Segments, w.compactSkip)
	if len(runs) == 0 {
		return nil, 0, nil
	}
	return runs, w.s.reserveSeqs(len(runs)), nil
}

// compactSwap replaces the runs by their merged segments in the manifest
// and drops the old readers from the Writer's cache. swapped reports
// whether the new manifest was written.
func (w *Writer) compactSwap(runs [][]SegmentMeta, out []SegmentMeta) (swapped bool, err error) {
	w.cmu.Lock()
	defer w.cmu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil {
		return false, w.failed
	}
	if w.segs == nil {
		return false, ErrWriterClosed
	}
	if err := w.s.wait(); err != nil {
		w.failed = err
		return false, err
	}
	swapped, err = swapManifest(w.s, runs, out)
	if swapped && err != nil && w.s.err != nil {
		w.failed = w.s.err // the manifest write failed: accept nothing more
	}
	if !swapped || w.failed != nil {
		return swapped, err
	}
	for _, run := range runs {
		for _, sm := range run {
			if p, ok := w.segs[sm.Name]; ok {
				delete(w.segs, sm.Name)
				delete(w.told, sm.Name)
				// Views may still read it: close its mapping only when
				// none holds the part any more (SegmentPart keeps itself
				// alive while it reads).
				runtime.AddCleanup(p, func(r *segment.Reader) { r.Close() }, p.r)
			}
		}
	}
	return true, err
}

// compactLoop runs Compact every interval until quit closes. A failure is
// not fatal to the Writer (the store is unchanged); it is retried at the
// next tick, and reported through WriterOptions.OnCompact.
func (w *Writer) compactLoop(interval time.Duration) {
	defer close(w.compactDone)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-w.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTicker(interval)
	defer t.Stop()
	// Each run comes before its wait, the first at once: a store reopened
	// often (hay serve closes idle tenants under --max-open-tenants) was
	// closed before its first tick, again and again, and never compacted
	// (soak audit S4).
	for {
		// One run at a time: appends and searches keep the other core.
		st, err := w.Compact(ctx, CompactOptions{Workers: 1, MergeBytes: w.opt.CompactMergeBytes})
		if w.opt.OnCompact != nil && (err != nil || st.Segments > 0) && ctx.Err() == nil {
			w.opt.OnCompact(st, err)
		}
		if w.Err() != nil {
			return // the Writer failed: nothing more will be written
		}
		select {
		case <-w.quit:
			return
		case <-t.C:
		}
	}
}
