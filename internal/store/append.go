package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"haystack/internal/attrs"
	"haystack/internal/segment"
)

// LabeledEntry is an entry whose stream is named by its canonical labels
// (ingest.Labels.String()), as an HTTP push delivers it.
type LabeledEntry struct {
	Labels string
	Time   int64
	Line   []byte
	// Attrs is the entry's structured metadata (package attrs' encoding;
	// empty for none). It is not part of the stream.
	Attrs []byte
}

// WriterOptions tune a Writer.
type WriterOptions struct {
	Options
	// OnCommit, if set, is called by the committer after each group
	// commit's fsync succeeded, before the appenders are acknowledged,
	// with every entry of the group (in commit order). The entries are
	// valid only during the call. Live tail hangs off it.
	OnCommit func([]LabeledEntry)
	// OnSync, if set, is told how long each fsync took.
	OnSync func(time.Duration)
	// CompactInterval, when positive, runs Compact (one segment at a
	// time) this often in the background until Close.
	CompactInterval time.Duration
	// CompactMergeBytes is the background compaction's
	// CompactOptions.MergeBytes (0: DefaultMergeBytes; negative: no
	// merging).
	CompactMergeBytes int64
	// OnCompact, if set, is told of each background compaction that did
	// something or failed.
	OnCompact func(CompactStats, error)
	// FlushIdle, when positive, flushes a head that has had no entry for
	// this long, and FlushAge one that has held entries for this long
	// (Loki's chunk_idle_period and max_chunk_age): without them a tenant
	// that pushed a little kept its head in memory, and its WAL to
	// replay, until it had pushed HeadBytes (finding E5). Checked every
	// FlushCheck (default a minute, or less when both are shorter).
	FlushIdle, FlushAge, FlushCheck time.Duration
	// OnFlush, if set, is told of each such flush (why: "idle" or "age").
	OnFlush func(why string, err error)
	// OnIndexDamage, if set, is told once per segment (its path inside
	// the data directory) that the segment's skip index is damaged:
	// searches scan its blocks in full, so results stay exact, but an
	// operator should run hay verify. A damaged head is told when a View
	// first opens the segment; a damaged group, which a search's lookup
	// finds, by the next View.
	OnIndexDamage func(segment string, err error)
}

// ErrWriterClosed is returned by Append after Close.
var ErrWriterClosed = errors.New("store is closed")

// maxGroupRecord splits one appender's entries into WAL records of at most
// about this many bytes, well under maxRecord.
const maxGroupRecord = 32 << 20

// Writer is a Store shared by concurrent appenders, with group commit:
// Append hands its entries to one committer goroutine, which takes every
// batch that is waiting, writes each as WAL records, fsyncs once for all
// of them and only then acknowledges them. A failed write or fsync fails
// every batch of that group and the Writer for good (the store is marked
// failed; nothing is retried, since after a failed fsync the kernel may
// have dropped the dirty pages and a retry could report success for data
// that is gone). The next Open recovers what the WAL holds.
//
// View gives searches the committed segments plus the in-memory head, so
// pushed entries are searchable without reopening anything.
type Writer struct {
	opt  WriterOptions
	reqs chan *appendReq // unbuffered: a send that succeeds is processed
	quit chan struct{}
	done chan struct{}
	once sync.Once

	compactDone chan struct{}   // closed when compactLoop returns; nil without one
	flushDone   chan struct{}   // closed when flushLoop returns; nil without one
	lastAppend  atomic.Int64    // when the committer last appended: ns since clock0 (monotonic)
	compactMu   sync.Mutex      // serialises Compact calls
	compactSkip map[string]bool // segments Compact failed to read (guarded by compactMu)

	cmu    sync.Mutex // held by a commit and by Flush: one WAL user at a time
	mu     sync.Mutex // guards s's head, manifest and stream table, segs, failed
	s      *Store
	segs   map[string]*SegmentPart
	failed error
	told   map[string]bool // segments whose index damage OnIndexDamage was told
	ix     *streamIndex    // the views' stream index, built by readers (View.Index)

	syncFn func() error // the WAL fsync; tests replace it
}

type appendReq struct {
	entries []LabeledEntry
	done    chan error
}

// OpenWriter opens dir for concurrent appending (see Open for recovery).
// Its Options.FsyncInterval is ignored: every group is fsynced before it
// is acknowledged.
func OpenWriter(dir string, opt WriterOptions) (*Writer, error) {
	so := opt.Options
	so.FsyncInterval = -1   // the committer syncs every group
	so.FsyncBytes = 1 << 62 // never inside Store.Append
	s, err := Open(dir, so)
	if err != nil {
		return nil, err
	}
	s.shared = true // View hands out the head's blocks
	w := &Writer{
		opt:  opt,
		reqs: make(chan *appendReq),
		quit: make(chan struct{}),
		done: make(chan struct{}),
		s:    s,
		segs: map[string]*SegmentPart{},
		told: map[string]bool{},
		ix:   newStreamIndex(),

		compactSkip: map[string]bool{},
	}
	w.syncFn = s.Sync
	go w.commitLoop()
	if opt.CompactInterval > 0 {
		w.compactDone = make(chan struct{})
		go w.compactLoop(opt.CompactInterval)
	}
	if opt.FlushIdle > 0 || opt.FlushAge > 0 {
		w.flushDone = make(chan struct{})
		go w.flushLoop()
	}
	return w, nil
}

// clock0 is the origin of Writer.lastAppend: times since it are on the
// monotonic clock, which a step of the wall clock does not move.
var clock0 = time.Now()

// flushLoop flushes the head when it has been idle for FlushIdle or has
// held entries for FlushAge (see WriterOptions).
func (w *Writer) flushLoop() {
	// A head replayed from the WAL at open is as idle as its age: count
	// from the open, not from the zero time.
	w.lastAppend.CompareAndSwap(0, int64(time.Since(clock0)))
	defer close(w.flushDone)
	check := w.opt.FlushCheck
	if check <= 0 {
		check = time.Minute
		for _, d := range []time.Duration{w.opt.FlushIdle, w.opt.FlushAge} {
			if d > 0 {
				check = min(check, max(d/4, time.Second))
			}
		}
	}
	t := time.NewTicker(check)
	defer t.Stop()
	var since time.Time // when a tick first saw the current head hold entries
	var seq uint64      // that head's WAL file
	for {
		select {
		case <-w.quit:
			return
		case now := <-t.C:
			w.mu.Lock()
			entries, walSeq, failed := w.s.head.entries, w.s.wal.seq, w.failed
			w.mu.Unlock()
			if failed != nil {
				return
			}
			if entries == 0 {
				since = time.Time{}
				continue
			}
			if since.IsZero() || walSeq != seq {
				since, seq = now, walSeq
			}
			why := ""
			switch {
			case w.opt.FlushIdle > 0 && time.Since(clock0)-time.Duration(w.lastAppend.Load()) >= w.opt.FlushIdle:
				why = "idle"
			case w.opt.FlushAge > 0 && now.Sub(since) >= w.opt.FlushAge:
				why = "age"
			default:
				continue
			}
			err := w.flushInBackground()
			since = time.Time{}
			if w.opt.OnFlush != nil {
				w.opt.OnFlush(why, err)
			}
		}
	}
}

// Append stores entries durably: it returns nil only once they are in the
// WAL and the WAL is fsynced. An error means they may or may not be stored
// (a crash-recovery prefix), and the Writer accepts nothing more; except
// that a batch with an entry whose Attrs fail attrs.Validate is refused
// whole, nothing of it stored, and the Writer goes on. ctx
// bounds only the wait for the committer to take the batch; once taken, it
// is committed or failed as a whole with its group. entries are not
// retained after Append returns.
func (w *Writer) Append(ctx context.Context, entries []LabeledEntry) error {
	if len(entries) == 0 {
		return w.Err()
	}
	// Checked here, not by the committer: bad input is the caller's
	// error, which must not fail the Writer (and the group) for good.
	for i := range entries {
		if a := entries[i].Attrs; len(a) > 0 {
			if err := attrs.Validate(a); err != nil {
				return fmt.Errorf("store: entry %d (stream %s): %w", i, entries[i].Labels, err)
			}
		}
	}
	r := &appendReq{entries: entries, done: make(chan error, 1)}
	select {
	case w.reqs <- r:
	case <-w.quit:
		return ErrWriterClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-r.done
}

// Err is the Writer's sticky failure, if any.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

func (w *Writer) commitLoop() {
	defer close(w.done)
	var group []*appendReq
	for {
		select {
		case r := <-w.reqs:
			group = append(group[:0], r)
		case <-w.quit:
			return
		}
		// Take every batch that is already waiting: they share the fsync.
	more:
		for {
			select {
			case r := <-w.reqs:
				group = append(group, r)
			default:
				break more
			}
		}
		err := w.commit(group)
		for _, r := range group {
			r.done <- err
		}
		clear(group)
	}
}

func (w *Writer) commit(group []*appendReq) error {
	w.cmu.Lock()
	defer w.cmu.Unlock()
	w.mu.Lock()
	err := w.failed
	if err == nil {
		for _, r := range group {
			if err = w.appendLocked(r.entries); err != nil {
				break
			}
		}
	}
	w.mu.Unlock()
	w.lastAppend.Store(int64(time.Since(clock0)))
	if err == nil {
		// Outside mu: searches need not wait for the disk. cmu keeps
		// Flush off the WAL file meanwhile.
		t := time.Now()
		err = w.syncFn()
		if w.opt.OnSync != nil {
			w.opt.OnSync(time.Since(t))
		}
		if err == nil {
			// An fsync into a removed directory succeeds too.
			err = w.s.CheckDir()
		}
	}
	if err != nil {
		w.mu.Lock()
		if w.failed == nil {
			w.failed = fmt.Errorf("store failed, writes are refused until a restart: %w", err)
			if w.s.err == nil {
				w.s.err = w.failed // no flush may cover a WAL we could not sync
			}
		}
		err = w.failed
		w.mu.Unlock()
		return err
	}
	if w.opt.OnCommit != nil {
		var all []LabeledEntry
		if len(group) == 1 {
			all = group[0].entries
		} else {
			for _, r := range group {
				all = append(all, r.entries...)
			}
		}
		w.opt.OnCommit(all)
	}
	return nil
}

// appendLocked writes entries as WAL records of at most maxGroupRecord
// bytes each and adds them to the head.
func (w *Writer) appendLocked(entries []LabeledEntry) error {
	// Sized once: a record holds at most maxGroupRecord bytes at 16 or
	// more an entry. Grown by append, the batch was over half of a
	// push's memory per entry (214 of 402 bytes for one-byte lines).
	b := Batch{Entries: make([]Entry, 0, min(len(entries), maxGroupRecord/16+1))}
	size := 0
	for i, e := range entries {
		defs := len(w.s.pending)
		b.Entries = append(b.Entries, Entry{Time: e.Time, Stream: w.s.Stream(e.Labels), Line: e.Line, Attrs: e.Attrs})
		size += len(e.Line) + len(e.Attrs) + 16
		if len(w.s.pending) > defs {
			// A new stream's definition rides in the same record: many
			// new streams with long labels must split records too.
			size += len(e.Labels) + 16
		}
		if size >= maxGroupRecord || i == len(entries)-1 {
			if err := w.s.append(&b); err != nil { // metadata checked by Append
				return err
			}
			b.Entries, size = b.Entries[:0], 0
		}
	}
	return nil
}

// Flush writes the head into a segment (see Store.Flush).
func (w *Writer) Flush() error {
	w.cmu.Lock()
	defer w.cmu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil {
		return w.failed
	}
	return w.s.Flush()
}

// flushInBackground flushes the head as a head that reached HeadBytes
// does: the segment is written without the Writer's locks, so the
// tenant's appends and views go on meanwhile (a synchronous Flush held
// them for the ~80 ms of a 24 MiB head).
func (w *Writer) flushInBackground() error {
	w.cmu.Lock()
	w.mu.Lock()
	var j *flushJob
	err := w.failed
	if err == nil {
		j, err = w.s.beginFlush()
	}
	w.mu.Unlock()
	w.cmu.Unlock()
	if j == nil || err != nil {
		return err
	}
	j.run(w.s.root, w.s.dir, w.s.opt.Segment)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.s.wait()
}

// Close stops accepting appends (Append returns ErrWriterClosed), lets the
// committer finish the group in hand, flushes the head and releases the
// directory.
func (w *Writer) Close() error {
	w.once.Do(func() { close(w.quit) })
	<-w.done
	if w.compactDone != nil {
		<-w.compactDone // it stops at the next segment boundary
	}
	if w.flushDone != nil {
		<-w.flushDone // a flush in hand finishes first
	}
	// A Compact called by someone else writes its segments without the
	// Writer's locks: wait for it (quit cancelled it at its next block),
	// so that its writes and removals end before the lock and the
	// directory handle are released. Held to the end: a later Compact
	// then finds the Writer closed.
	w.compactMu.Lock()
	defer w.compactMu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.s.Close()
	for _, p := range w.segs {
		p.r.Close()
	}
	w.segs = nil
	return err
}

// View is a consistent read-only view of a Writer's store at one moment:
// the committed segments, the head being flushed, if any, and the head.
type View struct {
	Parts   []Part
	Streams []StreamDef // index = stream id

	ix *streamIndex
}

// Index returns the view's stream index (see StreamIndex). The first
// call after streams were added indexes them, outside the Writer's lock:
// the first query after an open pays for parsing the stream table once.
func (v *View) Index() *StreamIndex {
	x := v.ix
	if x == nil {
		x = newStreamIndex() // a View not made by Writer.View
	}
	return newStreamIndexFor(x, v.Streams)
}

// Labels returns the canonical labels of stream id ("" if unknown).
func (v *View) Labels(id uint32) string {
	if int(id) < len(v.Streams) {
		return v.Streams[id].Labels
	}
	return ""
}

// View returns the current view. Entries of a group being committed may
// be visible a moment before the group's fsync completes.
func (w *Writer) View() (*View, error) {
	v, damaged, err := w.view()
	for _, d := range damaged {
		w.opt.OnIndexDamage(d.name, d.err)
	}
	return v, err
}

// indexDamage is a segment's damaged skip index, for OnIndexDamage.
type indexDamage struct {
	name string
	err  error
}

// view is View under w.mu. It also returns the segments whose skip index
// it finds damaged and OnIndexDamage was not told of: every view looks,
// as it goes over the segments anyway, so a damaged head is found when
// a view opens the segment and a damaged group an earlier view's search
// met is found by the next one (review 15d: told only by the background
// compaction, it went untold with --compact-interval 0).
func (w *Writer) view() (*View, []indexDamage, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.s
	if w.segs == nil {
		return nil, nil, ErrWriterClosed
	}
	v := &View{Streams: s.streamDef[:len(s.streamDef):len(s.streamDef)], ix: w.ix}
	var damaged []indexDamage
	for _, sm := range s.man.Segments {
		p, ok := w.segs[sm.Name]
		if !ok {
			name := filepath.Join(segDir, sm.Name)
			r, err := segment.OpenIn(s.root, name) // the segment this store wrote
			if err != nil {
				return nil, damaged, err // names the file in full
			}
			p = &SegmentPart{name: name, r: r}
			w.segs[sm.Name] = p
		}
		if w.opt.OnIndexDamage != nil && !w.told[sm.Name] {
			if err := p.r.IndexDamage(); err != nil {
				w.told[sm.Name] = true
				damaged = append(damaged, indexDamage{p.name, err})
			}
		}
		v.Parts = append(v.Parts, p)
	}
	if s.job != nil {
		// Its blocks are no longer appended to: share them.
		v.Parts = append(v.Parts, newHeadPart(s.job.blocks))
	}
	if len(s.head.blocks) > 0 {
		// The last block still grows: copy the block headers, so the
		// view sees a fixed prefix. Appends write beyond the copied
		// lengths, and a full block's arrays are never written again.
		blocks := make([]*headBlock, len(s.head.blocks))
		for i, hb := range s.head.blocks {
			c := headBlock{b: hb.b, meta: hb.meta}
			c.meta.Streams = slices.Clone(hb.meta.Streams)
			if hb.unsorted {
				slices.Sort(c.meta.Streams)
			}
			blocks[i] = &c
		}
		v.Parts = append(v.Parts, &HeadPart{blocks: blocks})
	}
	return v, damaged, nil
}

// WriterStats reports the committed segments and the head.
type WriterStats struct {
	Segments    int
	HeadEntries int64
	Streams     int
}

// Stats returns counts for metrics.
func (w *Writer) Stats() WriterStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return WriterStats{Segments: len(w.s.man.Segments), HeadEntries: w.s.head.entries, Streams: len(w.s.streamDef)}
}
