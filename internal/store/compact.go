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
