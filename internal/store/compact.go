package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

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

// CompactOptions tune Compact. The zero value selects CompactSegment and
// one worker per core.
type CompactOptions struct {
	// Segment is the layout of the rewritten segments; its zero value
	// means CompactSegment.
	Segment *segment.Options
	// Workers rewrite that many segments at once; 0 means GOMAXPROCS.
	Workers int
	// Progress, when set, is called after each rewritten segment with the
	// raw bytes done and the total to do.
	Progress func(done, total int64)
}

// CompactStats reports what Compact did.
type CompactStats struct {
	Segments int   // segments rewritten
	RawBytes int64 // their entries' bytes
	Before   int64 // their file sizes before
	After    int64 // and after
}

// compactHook, when set by a test, runs at each step of a compaction
// ("written": new segments committed, manifest not yet replaced;
// "listed": manifest replaced, old segments not yet deleted); an error
// stops Compact right there, as a crash would.
var compactHook func(step string) error

// Compact flushes the head, then rewrites every segment it has not
// rewritten before into the CompactSegment layout: same entries, same
// order, same streams and times. Searches give the same results before
// and after, only faster for selective needles.
//
// Each group of up to Workers segments is written as new files (temp,
// fsync, rename), then one manifest replacement swaps them in, then the
// old files are deleted. A crash at any point leaves either the old or
// the new segments listed, and Open deletes the unlisted ones. A reader
// that read the old manifest and finds a segment gone re-reads it
// (OpenSnapshotRange retries). A damaged segment stops Compact with an
// error naming the file; the store is left as it was.
//
// Compact must not run concurrently with the store's other methods.
func (s *Store) Compact(ctx context.Context, opt CompactOptions) (CompactStats, error) {
	var st CompactStats
	if err := s.Flush(); err != nil {
		return st, err
	}
	target := CompactSegment
	if opt.Segment != nil {
		target = *opt.Segment
	}
	workers := opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var todo []int // indexes into s.man.Segments
	var total int64
	for i, sm := range s.man.Segments {
		if !sm.Compacted {
			todo = append(todo, i)
			total += sm.RawBytes
		}
	}
	var done int64
	for len(todo) > 0 {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		group := todo[:min(workers, len(todo))]
		todo = todo[len(group):]
		base := s.man.NextSeq
		out := make([]SegmentMeta, len(group))
		errs := make([]error, len(group))
		var wg sync.WaitGroup
		for k, i := range group {
			wg.Go(func() {
				out[k], errs[k] = rewriteSegment(ctx, s.dir, target, s.man.Segments[i], base+uint64(k))
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			for k := range group {
				if errs[k] == nil {
					os.Remove(filepath.Join(s.dir, segDir, out[k].Name))
				}
			}
			return st, err
		}
		if err := runCompactHook("written"); err != nil {
			return st, err
		}
		m := *s.man
		m.Segments = slices.Clone(s.man.Segments)
		m.NextSeq = base + uint64(len(group))
		var old []string
		for k, i := range group {
			old = append(old, m.Segments[i].Name)
			st.Segments++
			st.RawBytes += m.Segments[i].RawBytes
			st.Before += m.Segments[i].Size
			st.After += out[k].Size
			done += m.Segments[i].RawBytes
			m.Segments[i] = out[k]
		}
		if err := writeManifest(s.dir, &m); err != nil {
			return st, s.fail(err)
		}
		s.man = &m
		if err := runCompactHook("listed"); err != nil {
			return st, err
		}
		for _, name := range old {
			if err := os.Remove(filepath.Join(s.dir, segDir, name)); err != nil {
				return st, err
			}
		}
		if opt.Progress != nil {
			opt.Progress(done, total)
		}
	}
	return st, nil
}

func runCompactHook(step string) error {
	if compactHook == nil {
		return nil
	}
	return compactHook(step)
}

// rewriteSegment copies the entries of segment sm into a new segment
// numbered seq, written with opt, and returns its manifest entry. It
// checks every block (segment.Reader.ReadBlock verifies the checksums)
// and that the entry count and bytes match the manifest's.
func rewriteSegment(ctx context.Context, dir string, opt segment.Options, sm SegmentMeta, seq uint64) (SegmentMeta, error) {
	oldPath := filepath.Join(dir, segDir, sm.Name)
	r, err := segment.Open(oldPath)
	if err != nil {
		return SegmentMeta{}, fmt.Errorf("compact %s: %w", filepath.Join(segDir, sm.Name), err)
	}
	defer r.Close()
	name := fmt.Sprintf("%016x%s", seq, segExt)
	w, err := segment.Create(filepath.Join(dir, segDir, name), opt)
	if err != nil {
		return SegmentMeta{}, err
	}
	out := SegmentMeta{Name: name, MinTime: sm.MinTime, MaxTime: sm.MaxTime, Compacted: true}
	b := segment.GetBlock()
	defer segment.PutBlock(b)
	for i := range r.NumBlocks() {
		if err := ctx.Err(); err != nil {
			w.Abort()
			return SegmentMeta{}, err
		}
		if err := r.ReadBlock(i, b); err != nil {
			w.Abort()
			return SegmentMeta{}, fmt.Errorf("compact %s: %w", filepath.Join(segDir, sm.Name), err)
		}
		for k := range b.Len() {
			if err := w.Add(b.Entry(k)); err != nil {
				w.Abort()
				return SegmentMeta{}, fmt.Errorf("compact %s into %s: %w", sm.Name, name, err)
			}
		}
		out.Entries += int64(b.Len())
		out.RawBytes += int64(len(b.Data))
	}
	if out.Entries != sm.Entries || out.RawBytes != sm.RawBytes {
		w.Abort()
		return SegmentMeta{}, fmt.Errorf("compact %s: %d entries of %d bytes, the manifest says %d of %d",
			filepath.Join(segDir, sm.Name), out.Entries, out.RawBytes, sm.Entries, sm.RawBytes)
	}
	info, err := w.Commit()
	if err != nil {
		return SegmentMeta{}, fmt.Errorf("commit segment %s: %w", name, err)
	}
	out.Size = info.FileBytes
	return out, nil
}

// Compact rewrites the committed segments as Store.Compact does, while
// appends and searches go on: it takes the locks only to pick a group of
// segments (after any flush in flight, reserving their new file numbers)
// and to swap the rewritten ones into the manifest; the rewriting runs
// without them. It does not flush the head. Views taken before a swap
// keep reading the old segments, whose mappings are released once no view
// holds them.
func (w *Writer) Compact(ctx context.Context, opt CompactOptions) (CompactStats, error) {
	var st CompactStats
	target := CompactSegment
	if opt.Segment != nil {
		target = *opt.Segment
	}
	workers := opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	for {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		group, base, err := w.compactGroup(workers)
		if err != nil || len(group) == 0 {
			return st, err
		}
		out := make([]SegmentMeta, len(group))
		errs := make([]error, len(group))
		var wg sync.WaitGroup
		for k, sm := range group {
			wg.Go(func() {
				out[k], errs[k] = rewriteSegment(ctx, w.s.dir, target, sm, base+uint64(k))
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			for k := range group {
				if errs[k] == nil {
					os.Remove(filepath.Join(w.s.dir, segDir, out[k].Name))
				}
			}
			return st, err
		}
		if err := w.compactSwap(group, out); err != nil {
			return st, err
		}
		for k, sm := range group {
			st.Segments++
			st.RawBytes += sm.RawBytes
			st.Before += sm.Size
			st.After += out[k].Size
			if err := os.Remove(filepath.Join(w.s.dir, segDir, sm.Name)); err != nil {
				return st, err
			}
		}
	}
}

// compactGroup picks up to n segments not compacted yet and reserves n
// file numbers for their rewrites. It first waits for a flush in flight:
// that flush's manifest was copied before the reservation.
func (w *Writer) compactGroup(n int) ([]SegmentMeta, uint64, error) {
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
		return nil, 0, err
	}
	var group []SegmentMeta
	for _, sm := range w.s.man.Segments {
		if !sm.Compacted && len(group) < n {
			group = append(group, sm)
		}
	}
	if len(group) == 0 {
		return nil, 0, nil
	}
	// The reservation lives in memory until a manifest is written: a
	// flush's manifest starts from this one, and a crash before any
	// manifest leaves the reserved files unlisted, to be deleted.
	m := *w.s.man
	base := m.NextSeq
	m.NextSeq += uint64(len(group))
	w.s.man = &m
	return group, base, nil
}

// compactSwap replaces the group's segments by their rewrites in the
// manifest and drops their readers from the Writer's cache.
func (w *Writer) compactSwap(group, out []SegmentMeta) error {
	w.cmu.Lock()
	defer w.cmu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil {
		return w.failed
	}
	if err := w.s.wait(); err != nil {
		return err
	}
	m := *w.s.man
	m.Segments = slices.Clone(w.s.man.Segments)
	for k, sm := range group {
		i := slices.IndexFunc(m.Segments, func(x SegmentMeta) bool { return x.Name == sm.Name })
		if i < 0 {
			return fmt.Errorf("compact: segment %s left the manifest", sm.Name)
		}
		m.Segments[i] = out[k]
	}
	if err := runCompactHook("written"); err != nil {
		return err
	}
	if err := writeManifest(w.s.dir, &m); err != nil {
		w.failed = w.s.fail(err)
		return w.failed
	}
	w.s.man = &m
	for _, sm := range group {
		if p, ok := w.segs[sm.Name]; ok {
			delete(w.segs, sm.Name)
			// Views may still read it: close its mapping only when none
			// holds the part any more.
			runtime.AddCleanup(p, func(r *segment.Reader) { r.Close() }, p.r)
		}
	}
	return runCompactHook("listed")
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
	for {
		select {
		case <-w.quit:
			return
		case <-t.C:
		}
		// One segment at a time: appends and searches keep the other core.
		st, err := w.Compact(ctx, CompactOptions{Workers: 1})
		if w.opt.OnCompact != nil && (err != nil || st.Segments > 0) && ctx.Err() == nil {
			w.opt.OnCompact(st, err)
		}
	}
}
