package store

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"haystack/internal/segment"
)

// Part is one ordered run of blocks a search scans: a segment file or the
// head. Parts, and blocks within a part, are in ingestion order.
type Part interface {
	Name() string
	NumBlocks() int
	BlockMeta(i int) segment.BlockMeta
	ReadBlock(i int, dst *segment.Block) error
	// MayContain reports whether block i may hold an entry containing lit
	// (ASCII case-insensitively when fold). False is certain; true is a
	// maybe (segment.Reader.MayContain: the skip index).
	MayContain(i int, lit []byte, fold bool) bool
}

// Snapshot is a read-only view of a data directory: the segments the
// manifest lists plus the WAL replayed into memory. It takes no lock, so it
// can be opened while `hay ingest` writes; it sees a consistent prefix.
type Snapshot struct {
	Dir      string
	Manifest *Manifest
	// Parts are the readable segments in manifest order, then the head.
	Parts []Part
	// Damaged lists segments that could not be opened (each error names
	// the file); the other parts are still searchable.
	Damaged []error
	// Skipped counts the segments OpenSnapshotRange left out: outside its
	// time range, not opened.
	Skipped int

	labels  map[uint32]string
	readers []*segment.Reader

	ixOnce sync.Once
	ix     *StreamIndex
}

// SegmentPart is an open segment file.
type SegmentPart struct {
	name string
	r    *segment.Reader
}

// Name is the segment's path inside the data directory.
func (p *SegmentPart) Name() string { return p.name }

// NumBlocks is the segment's block count.
func (p *SegmentPart) NumBlocks() int { return p.r.NumBlocks() }

// BlockMeta describes block i.
func (p *SegmentPart) BlockMeta(i int) segment.BlockMeta { return p.r.BlockMeta(i) }

// ReadBlock decodes block i into dst.
func (p *SegmentPart) ReadBlock(i int, dst *segment.Block) error {
	err := p.r.ReadBlock(i, dst)
	// A part a compaction replaced has its mapping closed by a cleanup
	// once p is unreachable (Writer.compactSwap): not while reading it.
	runtime.KeepAlive(p)
	return err
}

// ReadBlockLines decodes block i without its structured metadata
// (segment.Reader.ReadBlockLines: the attrs section is not decompressed
// nor validated), for searches that never look at metadata.
func (p *SegmentPart) ReadBlockLines(i int, dst *segment.Block) error {
	err := p.r.ReadBlockLines(i, dst)
	runtime.KeepAlive(p) // as in ReadBlock
	return err
}

// MayContain asks the segment's skip index whether block i may hold lit.
func (p *SegmentPart) MayContain(i int, lit []byte, fold bool) bool {
	ok := p.r.MayContain(i, lit, fold)
	runtime.KeepAlive(p) // as in ReadBlock
	return ok
}

// MayContainBlocks is MayContain for every block at once
// (segment.Reader.MayContainBlocks): nil means every block may; the
// bitmap must not be modified.
func (p *SegmentPart) MayContainBlocks(lit []byte, fold bool) []uint64 {
	bm := p.r.MayContainBlocks(lit, fold)
	runtime.KeepAlive(p)
	return bm
}

// EscapeIndexed reports whether the segment's lines' index holds escape
// grams (segment.Reader.EscapeIndexed: format 7).
func (p *SegmentPart) EscapeIndexed() bool {
	ok := p.r.EscapeIndexed()
	runtime.KeepAlive(p) // as in ReadBlock
	return ok
}

// MayHoldEscape asks the segment's lines' index whether block i may hold
// an entry with an escape spelling the ASCII character c
// (segment.Reader.MayHoldEscape; "maybe" before format 7).
func (p *SegmentPart) MayHoldEscape(i int, c byte) bool {
	ok := p.r.MayHoldEscape(i, c)
	runtime.KeepAlive(p) // as in ReadBlock
	return ok
}

// MetaIndexed reports whether the segment's skip index also covers its
// metadata values (segment.Reader.MetaIndexed: format 5).
func (p *SegmentPart) MetaIndexed() bool {
	ok := p.r.MetaIndexed()
	runtime.KeepAlive(p) // as in ReadBlock
	return ok
}

// MayContainValue asks the segment's index of metadata values whether
// block i may hold an entry with a value containing lit
// (segment.Reader.MayContainValue; "maybe" before format 5).
func (p *SegmentPart) MayContainValue(i int, lit []byte, fold bool) bool {
	ok := p.r.MayContainValue(i, lit, fold)
	runtime.KeepAlive(p) // as in ReadBlock
	return ok
}

// ValueFiltered reports whether the segment has per-block filters of
// whole metadata values (segment.Reader.ValueFiltered: format 6).
func (p *SegmentPart) ValueFiltered() bool {
	ok := p.r.ValueFiltered()
	runtime.KeepAlive(p) // as in ReadBlock
	return ok
}

// MayHaveValue asks the segment's value filter of block i whether an
// entry may have a metadata value equal to v
// (segment.Reader.MayHaveValue; "maybe" before format 6).
func (p *SegmentPart) MayHaveValue(i int, v []byte) bool {
	ok := p.r.MayHaveValue(i, v)
	runtime.KeepAlive(p) // as in ReadBlock
	return ok
}

// MayHoldEscapeBlocks is MayHoldEscape for every block at once
// (segment.Reader.MayHoldEscapeBlocks): nil means every block may; the
// bitmap must not be modified.
func (p *SegmentPart) MayHoldEscapeBlocks(c byte) []uint64 {
	bm := p.r.MayHoldEscapeBlocks(c)
	runtime.KeepAlive(p) // as in ReadBlock
	return bm
}

// MayContainValueBlocks is MayContainValue for every block at once
// (segment.Reader.MayContainValueBlocks): nil means every block may; the
// bitmap must not be modified.
func (p *SegmentPart) MayContainValueBlocks(lit []byte, fold bool) []uint64 {
	bm := p.r.MayContainValueBlocks(lit, fold)
	runtime.KeepAlive(p) // as in ReadBlock
	return bm
}

// MayHaveValueBlocks is MayHaveValue for every block at once
// (segment.Reader.MayHaveValueBlocks): nil means every block may.
func (p *SegmentPart) MayHaveValueBlocks(v []byte) []uint64 {
	bm := p.r.MayHaveValueBlocks(v)
	runtime.KeepAlive(p) // as in ReadBlock
	return bm
}

// ErrNoStore reports a data directory that does not exist.
var ErrNoStore = errors.New("no store")

// OpenSnapshot opens dir for reading.
func OpenSnapshot(dir string) (*Snapshot, error) {
	return OpenSnapshotRange(dir, math.MinInt64, math.MaxInt64)
}

// OpenSnapshotRange opens dir for reading the entries with lo <= time <=
// hi: a segment whose time range (in the manifest) misses that is not
// opened and not in Parts, only counted in Skipped. Opening a segment
// validates its indexes, so a search with --since need not pay for every
// segment of the store (nor notice damage in one it does not open: hay
// verify reads them all). The WAL's entries are all in the head part, as
// with OpenSnapshot.
func OpenSnapshotRange(dir string, lo, hi int64) (*Snapshot, error) {
	if err := checkStore(dir); err != nil {
		return nil, err
	}
	// A writer may flush between our reading the manifest and the WAL
	// files it names, or Compact may replace a segment it names; then a
	// file is gone and we start over with the new manifest.
	// A busy writer (small heads, many segments to open) can move the
	// store under several attempts in a row: retry for a while, not a
	// fixed number of times (review 15 H100-3: five attempts within
	// ~10 ms failed 4 of 495 searches during an ingest at 1 MiB heads).
	// A writer that moves files replaces MANIFEST too, so only while
	// MANIFEST keeps changing is a missing file worth waiting for: when
	// it stays the same over a few quick attempts, the file is missing
	// for good, which is damage, said after a quarter of a second (review
	// 15d F5: a search of a store with a lost segment waited the whole
	// 2 s; before a9192cb, ~10 ms).
	start := time.Now()
	prev, since := manifestIdentity(dir), start
	for a := 0; ; a++ {
		// On the last attempt a segment still missing is damage, as
		// any other segment that cannot be opened.
		last := time.Since(start) >= snapshotRetryFor || a >= 4 && time.Since(since) >= snapshotStableFor
		s, err := openSnapshot(dir, lo, hi, last)
		if err == nil {
			return s, nil
		}
		if last || !errors.Is(err, os.ErrNotExist) && !errors.Is(err, errStoreMoved) {
			return nil, err
		}
		// Give a writer replacing files a moment to list its new ones.
		time.Sleep(min(time.Duration(a+1)*time.Millisecond, 20*time.Millisecond))
		if id := manifestIdentity(dir); id != prev {
			prev, since = id, time.Now()
		}
	}
}

// snapshotRetryFor is how long OpenSnapshotRange retries a snapshot that
// a writer's flush or compaction moved while it was read, and
// snapshotStableFor how long MANIFEST must stay the same (over at least
// five attempts) before a missing file is damage: a busy writer replaces
// it far more often.
const (
	snapshotRetryFor  = 2 * time.Second
	snapshotStableFor = 250 * time.Millisecond
)

// manifestIdentity tells one MANIFEST file from another: a writer
// replaces it by a rename (a new inode) with a new modification time.
func manifestIdentity(dir string) string {
	fi, err := os.Stat(filepath.Join(dir, manifestName))
	if err != nil {
		return err.Error()
	}
	id := fmt.Sprint(fi.Size(), fi.ModTime().UnixNano())
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id += fmt.Sprint(" ", st.Ino)
	}
	return id
}

func openSnapshot(dir string, lo, hi int64, missingIsDamage bool) (*Snapshot, error) {
	m, err := readManifest(dir)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Dir: dir, Manifest: m, labels: map[uint32]string{}}
	for _, d := range m.Streams {
		s.labels[d.ID] = d.Labels
	}
	var segs []SegmentMeta
	for _, sm := range m.Segments {
		// The manifest's range is that of the segment's blocks (written
		// together at flush); a segment without entries, or with an
		// empty range, is opened to let its blocks speak.
		if sm.Entries > 0 && sm.MinTime <= sm.MaxTime && (sm.MaxTime < lo || sm.MinTime > hi) {
			s.Skipped++
			continue
		}
		segs = append(segs, sm)
	}
	// Opening a segment validates its footer, block index and the head
	// of its skip index (checksums; the postings are checked lazily, per
	// group): the largest part of a search the skip index answers. Open
	// them on all cores.
	readers := make([]*segment.Reader, len(segs))
	errs := make([]error, len(segs))
	parallel(len(segs), func(i int) {
		readers[i], errs[i] = segment.Open(filepath.Join(dir, segDir, segs[i].Name))
	})
	for i, sm := range segs {
		name := filepath.Join(segDir, sm.Name)
		if !missingIsDamage && errors.Is(errs[i], os.ErrNotExist) {
			// Compact replaced it after we read the manifest: start over
			// with the new one (OpenSnapshotRange retries).
			for _, r := range readers {
				if r != nil {
					r.Close()
				}
			}
			return nil, fmt.Errorf("%s: %w", name, errs[i])
		}
		if errs[i] != nil {
			s.Damaged = append(s.Damaged, fmt.Errorf("%s: %w", name, errs[i]))
			continue
		}
		s.readers = append(s.readers, readers[i])
		s.Parts = append(s.Parts, &SegmentPart{name: name, r: readers[i]})
	}
	if testHookSnapshotRead != nil {
		testHookSnapshotRead()
	}
	seqs, err := walSeqs(dir)
	if err != nil {
		s.Close()
		return nil, err
	}
	var h head
	prevSeq, prevLen := uint64(0), int64(-1) // the WAL file read last
replay:
	for _, seq := range seqs {
		if seq < m.WALStart {
			continue
		}
		data, err := os.ReadFile(walPath(dir, seq))
		if err != nil {
			s.Close()
			return nil, err
		}
		r := NewWALReader(data)
		last := seq == seqs[len(seqs)-1]
		// Damage where no crash or live writer leaves a partial record
		// (see walDamaged) is reported: the entries from there on, and
		// those of later WAL files (which may use streams it defines),
		// are not read.
		damaged := func(err error) {
			name := filepath.Join(walDir, filepath.Base(walPath(dir, seq)))
			s.Damaged = append(s.Damaged, fmt.Errorf("%s: %w (damaged: its entries from there on and those of later WAL files are not read)", name, err))
		}
		if err := checkWALLink(seq, r.Prev, prevSeq, prevLen, m.WALStart); err != nil {
			seq-- // the predecessor is what is damaged
			damaged(err)
			break replay
		}
		prevSeq, prevLen = seq, int64(len(data))
		if !last && r.Short {
			damaged(errors.New("short wal file"))
			break replay
		}
		for {
			b, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				if walDamaged(data, r, last) {
					damaged(err)
				}
				// Otherwise the valid prefix ends here: a crash's torn
				// tail, or a writer in the middle of a record.
				break replay
			}
			for _, d := range b.Streams {
				s.labels[d.ID] = d.Labels
			}
			for _, e := range b.Entries {
				h.add(e)
			}
		}
	}
	// A flush between our reading the manifest and listing wal/ wrote a
	// manifest with a later WALStart, then deleted the WAL files its new
	// segment holds: they were not listed, so their entries are in
	// neither the segments we opened nor the head. Every flush moves
	// WALStart and writes the manifest before deleting a WAL file, so a
	// manifest read again now shows whether one ran: then start over.
	if m2, err := readManifestOnly(dir); err != nil || m2.WALStart != m.WALStart {
		s.Close()
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("a flush moved the WAL start from %d to %d while the snapshot was read: %w", m.WALStart, m2.WALStart, errStoreMoved)
	}
	if len(h.blocks) > 0 {
		s.Parts = append(s.Parts, newHeadPart(h.blocks))
	}
	return s, nil
}

// errStoreMoved says a writer changed the store under a snapshot being
// opened; OpenSnapshotRange starts over.
var errStoreMoved = errors.New("store changed during the snapshot")

// testHookSnapshotRead runs, when set by a test, after openSnapshot has
// read the manifest and opened the segments, before it lists the WAL.
var testHookSnapshotRead func()

// CheckStore reports ErrNoStore unless dir holds a store: a manifest or a
// WAL directory (a store that crashed before its first flush has only the
// WAL). Open would make a store in any directory.
func CheckStore(dir string) error { return checkStore(dir) }

// HasStore reports whether dir itself holds a store's files: a manifest,
// or WAL files, as regular files. Unlike CheckStore it does not take a
// bare wal directory for one, and a directory of tenant stores with a
// tenant named "wal" or "MANIFEST" (a directory) is not mistaken for a
// store: one push to tenant MANIFEST made hay serve refuse to start.
func HasStore(dir string) bool {
	if fi, err := os.Stat(filepath.Join(dir, manifestName)); err == nil && fi.Mode().IsRegular() {
		return true
	}
	wals, _ := filepath.Glob(filepath.Join(dir, walDir, "*"+walExt))
	for _, w := range wals {
		if fi, err := os.Stat(w); err == nil && fi.Mode().IsRegular() {
			return true
		}
	}
	return false
}

func checkStore(dir string) error {
	for _, name := range []string{manifestName, walDir} {
		_, err := os.Stat(filepath.Join(dir, name))
		if err == nil {
			return nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return fmt.Errorf("%w at %s", ErrNoStore, dir)
}

// Labels returns the canonical label string of stream id.
func (s *Snapshot) Labels(id uint32) string { return s.labels[id] }

// Index returns the snapshot's stream index (see StreamIndex), built at
// the first call. An id below the largest known one that the snapshot
// does not define has no labels.
func (s *Snapshot) Index() *StreamIndex {
	s.ixOnce.Do(func() {
		n := 0
		for id := range s.labels {
			n = max(n, int(id)+1)
		}
		defs := make([]StreamDef, n)
		for id, l := range s.labels {
			defs[id] = StreamDef{ID: id, Labels: l}
		}
		s.ix = newStreamIndexFor(newStreamIndex(), defs)
	})
	return s.ix
}

// NumStreams is the number of streams the snapshot knows.
func (s *Snapshot) NumStreams() int { return len(s.labels) }

// IndexDamage returns, for each open segment whose skip index a lookup
// found damaged (segment.Reader.IndexDamage), that *segment.CorruptError.
// Such a segment's blocks were not pruned by the index for the needles
// that reached the damage: results stay exact, only slower.
func (s *Snapshot) IndexDamage() []error {
	var errs []error
	for _, r := range s.readers {
		if err := r.IndexDamage(); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Close releases the segment mappings.
func (s *Snapshot) Close() error {
	var first error
	for _, r := range s.readers {
		if err := r.Close(); err != nil && first == nil {
			first = err
		}
	}
	s.readers = nil
	return first
}

// parallel calls f(0) .. f(n-1) on up to GOMAXPROCS goroutines, this one
// included, and returns when all have returned.
func parallel(n int, f func(int)) {
	var next atomic.Int64
	work := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			f(i)
		}
	}
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}
