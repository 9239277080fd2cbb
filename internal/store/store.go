package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"haystack/internal/attrs"
	"haystack/internal/dirfs"
	"haystack/internal/segment"
)

const (
	manifestName = "MANIFEST"
	lockName     = "LOCK"
	walDir       = "wal"
	segDir       = "segments"
	walExt       = ".wal"
	segExt       = ".seg"
)

// Defaults for Options.
const (
	DefaultFsyncInterval = time.Second
	DefaultFsyncBytes    = 32 << 20
	DefaultHeadBytes     = 32 << 20
)

// Options tune a writable Store. The zero value gives the defaults.
type Options struct {
	// FsyncInterval bounds how long an appended batch may stay unsynced
	// (it is checked at each Append). 0 means DefaultFsyncInterval; a
	// negative value syncs only at Sync, Flush and Close.
	FsyncInterval time.Duration
	// FsyncBytes syncs the WAL once this many bytes are unsynced.
	// 0 means DefaultFsyncBytes.
	FsyncBytes int64
	// HeadBytes is the head size (raw bytes plus 16 bytes an entry) at
	// which Append hands the head to a background flush into a segment.
	// While it runs a new head fills, so the heads take at most twice
	// HeadBytes. 0 means DefaultHeadBytes.
	HeadBytes int64
	// Segment is passed to segment.Create.
	Segment segment.Options
}

// Store is a data directory open for writing. It is not safe for
// concurrent use; readers use OpenSnapshot, which needs no lock.
type Store struct {
	dir     string
	dirInfo os.FileInfo // dir when opened, for CheckDir
	// root is dir opened once, at Open: every file the store creates,
	// writes, renames or removes goes through it, so that it stays in
	// this directory (inode) even if dir is renamed and another put in
	// its place; by path, a flush would write into the other.
	root *dirfs.Dir
	opt  Options
	lock *os.File
	man  *Manifest // last written manifest

	streams   map[string]uint32 // labels -> id
	streamDef []StreamDef       // all, in id order
	pending   []StreamDef       // defined since the last WAL record
	sources   map[string]Source

	head     head
	wal      walWriter
	walDirty bool      // the current WAL file holds records
	job      *flushJob // the flush in flight, if any
	err      error     // sticky failure of a flush
	lastSync time.Time
	closed   bool
	// shared is set when the head's blocks may be referenced after their
	// flush (a Writer's views share them), so that they are not reused.
	shared bool
}

// Open opens (creating if needed) the data directory dir for writing. It
// takes an exclusive flock on dir/LOCK, so a second writer fails at once,
// then recovers: segments the manifest does not list (a crash between a
// segment's commit and the manifest swap) are deleted, the WAL from
// Manifest.WALStart on is replayed into the head, and a torn record at its
// end, with everything after it, is cut off.
func Open(dir string, opt Options) (*Store, error) {
	if opt.FsyncInterval == 0 {
		opt.FsyncInterval = DefaultFsyncInterval
	}
	if opt.FsyncBytes <= 0 {
		opt.FsyncBytes = DefaultFsyncBytes
	}
	if opt.HeadBytes <= 0 {
		opt.HeadBytes = DefaultHeadBytes
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	root, err := dirfs.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := checkSubdirs(root); err != nil {
		root.Close()
		return nil, err
	}
	for _, d := range []string{walDir, segDir} {
		if err := root.MkdirAll(d, 0o755); err != nil {
			root.Close()
			return nil, err
		}
	}
	lock, err := lockDir(root)
	if err != nil {
		root.Close()
		return nil, err
	}
	dirInfo, err := root.Stat(".")
	if err != nil {
		lock.Close()
		root.Close()
		return nil, err
	}
	s := &Store{
		dirInfo:  dirInfo,
		dir:      dir,
		root:     root,
		opt:      opt,
		lock:     lock,
		streams:  map[string]uint32{},
		sources:  map[string]Source{},
		lastSync: time.Now(),
	}
	s.head.blockSize = opt.Segment.BlockSize
	if err := s.recover(); err != nil {
		lock.Close()
		root.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) recover() error {
	m, err := readManifestIn(s.root)
	if err != nil {
		return err
	}
	s.man = m
	for _, d := range m.Streams {
		s.defineStream(d)
	}
	for _, src := range m.Sources {
		s.sources[src.Key] = src
	}

	// A manifest replacement that died before its rename left a partial
	// copy; the manifest read above is the one that stands. So does its
	// stream table: what a flush appended to STREAMS before it died is
	// cut off (those streams are defined again by the WAL).
	if err := s.root.Remove(manifestName + ".tmp"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := trimStreams(s.root, m); err != nil {
		return err
	}

	// Segments not in the manifest were never committed to the store.
	live := map[string]bool{}
	for _, sm := range m.Segments {
		live[sm.Name] = true
	}
	names, err := readDirNamesIn(s.root, segDir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if !live[n] {
			if err := s.root.Remove(filepath.Join(segDir, n)); err != nil {
				return err
			}
		}
	}

	seqs, err := walSeqsIn(s.root)
	if err != nil {
		return err
	}
	next := m.WALStart
	// The length of file next-1 as recovery leaves it (-1: none), which
	// the new WAL file records in its header.
	prevSeq, prevLen := uint64(0), int64(-1)
	torn := false
	for _, seq := range seqs {
		path := walPath(s.dir, seq)
		if seq < m.WALStart || torn {
			// Covered by segments, or after the first torn record: not
			// part of the valid prefix.
			if err := s.root.Remove(walName(seq)); err != nil {
				return err
			}
			continue
		}
		next = seq + 1
		data, err := s.root.ReadFile(walName(seq))
		if err != nil {
			return err
		}
		r := NewWALReader(data)
		records := 0
		last := seq == seqs[len(seqs)-1]
		// Only the last WAL file can end in a crash's torn write: each
		// file's header and records are fsynced before the next file is
		// made (startWAL, and the fsync of replayed files below), and
		// each header records its predecessor's length. Damage anywhere
		// else would have us drop acknowledged entries, those after it
		// and those of every later file: refuse to open instead, naming
		// the file.
		if err := checkWALLink(seq, r.Prev, prevSeq, prevLen, m.WALStart); err != nil {
			return fmt.Errorf("%s: %w", walPath(s.dir, seq-1), errWALDamaged(err.Error()))
		}
		if !last && r.Short {
			return fmt.Errorf("%s: %w", path, errWALDamaged("short wal file"))
		}
		for {
			b, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				if walDamaged(data, r, last) {
					return fmt.Errorf("%s: %w", path, errWALDamaged(err.Error()))
				}
				// Torn tail (or a file whose magic never made it to
				// disk): the valid prefix ends here.
				torn = true
				if records > 0 {
					if err := truncateSync(s.root, walName(seq), r.Valid); err != nil {
						return err
					}
				}
				break
			}
			if err := s.apply(b); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			records++
			s.walDirty = true
		}
		if records == 0 && last {
			// The process died before anything was appended to it: the
			// new WAL file takes its place (and its number, so that no
			// gap hides a missing file).
			next = seq
			break
		}
		// An empty file that is not the last stays: the next one records
		// its length, and the next flush deletes both.
		prevSeq, prevLen = seq, r.Valid
		// The killed writer may not have fsynced its last records. The
		// new WAL file will be, so make this one durable first: else a
		// power loss could tear this file under a whole newer one, and
		// its tear would not be the last file's.
		if !torn {
			if err := syncFile(s.root, walName(seq)); err != nil {
				return err
			}
		}
	}
	if err := s.root.SyncDir(walDir); err != nil {
		return err
	}
	return s.startWAL(next, max(lenBefore(next, prevSeq, prevLen), 0))
}

// apply adds a batch read from the WAL to the in-memory state.
func (s *Store) apply(b *Batch) error {
	if err := applyStreamDefs(s.streams, &s.streamDef, b); err != nil {
		return err
	}
	for _, e := range b.Entries {
		s.head.add(e)
	}
	for _, src := range b.Sources {
		s.sources[src.Key] = src
	}
	return nil
}

// applyStreamDefs adds b's stream definitions to a stream table (labels
// to id, and the definitions in id order) as recovery replays them, and
// checks that b's entries use defined streams. RepairWAL runs it too, to
// find the records recovery would refuse.
func applyStreamDefs(streams map[string]uint32, defs *[]StreamDef, b *Batch) error {
	for _, d := range b.Streams {
		if old, ok := streams[d.Labels]; ok {
			if old != d.ID {
				return fmt.Errorf("stream %s defined twice", d.Labels)
			}
			continue // already in the manifest
		}
		if int(d.ID) != len(*defs) {
			return fmt.Errorf("stream id %d out of sequence", d.ID)
		}
		streams[d.Labels] = d.ID
		*defs = append(*defs, d)
	}
	for _, e := range b.Entries {
		if int(e.Stream) >= len(*defs) {
			return fmt.Errorf("entry of undefined stream %d", e.Stream)
		}
	}
	return nil
}

// lockDir takes the writer's exclusive flock on LOCK in the directory
// root is open on.
func lockDir(root *dirfs.Dir) (*os.File, error) {
	dir := root.Name()
	lock, err := root.OpenFile(lockName, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s is in use by another writer", dir)
		}
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return lock, nil
}

// syncFile fsyncs the file name inside root.
func syncFile(root *dirfs.Dir, name string) error {
	f, err := root.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// errWALDamaged is the error for a WAL file damaged where no crash can
// leave it: in any but the last file, or followed by whole records.
func errWALDamaged(what string) error {
	return fmt.Errorf("%s: damaged, not the torn end of a crashed write; not opened, so that no acknowledged entry is dropped (hay verify lists the damage; hay verify --repair keeps what can be read and moves the rest to lost+found)", what)
}

// truncateSync cuts a file to size durably: a cut that a power loss
// could undo would bring the torn record back in front of newer ones.
func truncateSync(root *dirfs.Dir, name string, size int64) error {
	f, err := root.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return err
	}
	return f.Sync()
}

func (s *Store) defineStream(d StreamDef) {
	s.streams[d.Labels] = d.ID
	s.streamDef = append(s.streamDef, d)
}

func walPath(dir string, seq uint64) string {
	return filepath.Join(dir, walName(seq))
}

// walName is WAL file seq's name inside the data directory.
func walName(seq uint64) string {
	return filepath.Join(walDir, fmt.Sprintf("%016x%s", seq, walExt))
}

// walSeqs lists the WAL file numbers in dir/wal, ascending.
func walSeqs(dir string) ([]uint64, error) {
	return walSeqsIn(dirfs.At(dir))
}

// walSeqsIn is walSeqs in d (the writer's handle, or a path).
func walSeqsIn(d *dirfs.Dir) ([]uint64, error) {
	names, err := readDirNamesIn(d, walDir)
	if err != nil {
		return nil, err
	}
	var seqs []uint64
	for _, n := range names {
		base, ok := strings.CutSuffix(n, walExt)
		if !ok {
			continue
		}
		seq, err := strconv.ParseUint(base, 16, 64)
		if err != nil {
			continue
		}
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	return seqs, nil
}

func readDirNames(dir string) ([]string, error) {
	return sortedNames(os.ReadDir(dir))
}

// readDirNamesIn is readDirNames of the directory name inside root.
func readDirNamesIn(root *dirfs.Dir, name string) ([]string, error) {
	d, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return sortedNames(d.ReadDir(-1))
}

func sortedNames(ents []os.DirEntry, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names, nil
}

// startWAL makes WAL file seq, whose predecessor (file seq-1) is prev
// bytes long (0: none), and makes it the current one.
func (s *Store) startWAL(seq uint64, prev int64) error {
	f, err := s.root.OpenFile(walName(seq), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, walFileMode)
	if err != nil {
		return err
	}
	if _, err := f.Write(walHeaderFor(prev)); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := s.root.SyncDir(walDir); err != nil {
		f.Close()
		return err
	}
	s.wal.f, s.wal.seq, s.wal.size, s.wal.unsynced = f, seq, int64(walHeader), 0
	return nil
}

// Dir is the data directory.
func (s *Store) Dir() string { return s.dir }

// CheckDir fails when the data directory was removed or replaced while
// the store is open: the WAL file it appends to then has no name (or not
// the one a restart reads), and whatever is written to it is lost at the
// next restart, so it must not be acknowledged.
func (s *Store) CheckDir() error {
	fi, err := s.wal.f.Stat()
	if err != nil {
		return fmt.Errorf("stat wal: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink == 0 {
		return fmt.Errorf("%s: removed while in use: the data directory %s was deleted or moved", walPath(s.dir, s.wal.seq), s.dir)
	}
	return sameDir(s.dir, s.dirInfo)
}

// sameDir fails unless dir is still the directory fi describes.
func sameDir(dir string, fi os.FileInfo) error {
	di, err := os.Stat(dir)
	if err != nil || !os.SameFile(di, fi) {
		return fmt.Errorf("data directory %s was removed or replaced while in use", dir)
	}
	return nil
}

// Stream returns the id of the stream with canonical labels, defining a
// new one if needed. A new definition is written to the WAL with the next
// Append, so it is durable exactly when its first entries are.
func (s *Store) Stream(labels string) uint32 {
	if id, ok := s.streams[labels]; ok {
		return id
	}
	d := StreamDef{ID: uint32(len(s.streamDef)), Labels: labels}
	s.defineStream(d)
	s.pending = append(s.pending, d)
	return d.ID
}

// Source returns the recorded progress of input key.
func (s *Store) Source(key string) (Source, bool) {
	src, ok := s.sources[key]
	return src, ok
}

// HasStream reports whether the store defines a stream of these labels
// (canonical text, as Stream takes them), without defining one.
func (s *Store) HasStream(labels string) bool {
	_, ok := s.streams[labels]
	return ok
}

// SourceKeys returns the keys of every recorded input, sorted.
func (s *Store) SourceKeys() []string {
	keys := make([]string, 0, len(s.sources))
	for k := range s.sources {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Append writes b (entries and source progress) to the WAL as one record
// and adds its entries to the head; the batch is durable after the next
// sync. An error from a background flush is returned by the next Append
// or Close, possibly after that call's batch reached the WAL; either way
// the directory holds a prefix of what was appended, and the next Open
// recovers it. Stream definitions made with Stream since the last Append are added
// to the record. When the head reaches Options.HeadBytes it is flushed.
// b's slices are not retained. A batch with an entry whose Attrs fail
// attrs.Validate is refused whole, before anything is written.
func (s *Store) Append(b *Batch) error {
	if err := checkAttrs(b.Entries); err != nil {
		return err // nothing written: a record recovery would refuse
	}
	return s.append(b)
}

// append is Append for a batch whose metadata is known to be valid
// (Writer.Append checked it): checking it again cost a fifth of the
// append path's CPU with OTel trace and span ids.
func (s *Store) append(b *Batch) error {
	if s.closed {
		return errors.New("store is closed")
	}
	if s.err != nil {
		return s.err
	}
	if len(b.Entries) == 0 && len(b.Sources) == 0 && len(s.pending) == 0 {
		return nil
	}
	b.Streams = s.pending
	size := s.wal.size
	_, err := s.wal.write(b)
	b.Streams = nil
	if err != nil {
		// Part of the record may be in the file (ENOSPC mid-write): cut
		// it off, which needs no free space; the batch is refused and
		// the next one may find room. If the cut fails too, accept
		// nothing more: above all Close must not start another WAL file
		// after this one, where the partial record would no longer be
		// the last file's torn tail, which Open cuts, but damage Open
		// refuses.
		if terr := s.wal.truncate(size); terr != nil {
			if s.err == nil {
				s.err = fmt.Errorf("store: %w; nothing more is written until the data directory is opened again (what was stored before stays)", errors.Join(err, terr))
			}
			return s.err
		}
		return err
	}
	s.pending = nil
	s.walDirty = true
	for _, e := range b.Entries {
		s.head.add(e)
	}
	for _, src := range b.Sources {
		s.sources[src.Key] = src
	}
	if s.wal.unsynced >= s.opt.FsyncBytes ||
		(s.opt.FsyncInterval > 0 && time.Since(s.lastSync) >= s.opt.FsyncInterval) {
		if err := s.Sync(); err != nil {
			return err
		}
	}
	if s.head.bytes >= s.opt.HeadBytes {
		// Flush in the background: the head's segment is compressed on
		// another core while Append fills the next head. One flush at a
		// time, so the head's memory is at most twice HeadBytes.
		if err := s.wait(); err != nil {
			return err
		}
		j, err := s.beginFlush()
		var re *rotateError
		if errors.As(err, &re) {
			// The batch is in the WAL (and synced as asked); the head
			// flushes at a later Append, once a WAL file can be started.
			return nil
		}
		if err != nil {
			return err
		}
		go j.run(s.root, s.dir, s.opt.Segment)
	}
	return nil
}

// checkAttrs refuses entries whose metadata is not package attrs'
// encoding: the WAL would hold a record its reader rejects.
func checkAttrs(es []Entry) error {
	for i := range es {
		if a := es[i].Attrs; len(a) > 0 {
			if err := attrs.Validate(a); err != nil {
				return fmt.Errorf("store: entry %d: %w", i, err)
			}
		}
	}
	return nil
}

// rotateError is a failure to start the next WAL file, which left the
// store as it was: the flush can be tried again.
type rotateError struct{ err error }

func (e *rotateError) Error() string { return "start the next wal file: " + e.err.Error() }
func (e *rotateError) Unwrap() error { return e.err }

// Sync makes every appended batch durable.
func (s *Store) Sync() error {
	s.lastSync = time.Now()
	return s.wal.sync()
}

// HeadBytes is the head's current size as counted against Options.HeadBytes.
func (s *Store) HeadBytes() int64 { return s.head.bytes }

// Flush writes the head into a new segment, swaps the manifest to include
// it (with the stream table and source progress) and deletes the WAL files
// it covers; it first waits for a background flush Append started. The
// order makes every crash safe: the segment is complete (fsynced, renamed,
// directory fsynced) before the manifest names it, and the WAL is deleted
// only after the manifest no longer needs it.
func (s *Store) Flush() error {
	if err := s.wait(); err != nil {
		return err
	}
	j, err := s.beginFlush()
	if j == nil {
		// Nothing to flush, or the next WAL file could not be started
		// (the head stays in the WAL and memory), or a failure.
		return err
	}
	j.run(s.root, s.dir, s.opt.Segment)
	return s.wait()
}

// beginFlush starts a flush of the head: the caller runs the job (in the
// background, or without the locks it holds) and then calls wait. It
// returns nil when there is nothing to flush or a flush is already in
// flight, and with a *rotateError when the next WAL file could not be
// started (nothing changed: try again later). Append, Flush and the
// Writer's idle flush all start theirs here.
func (s *Store) beginFlush() (*flushJob, error) {
	if s.err != nil {
		return nil, s.err
	}
	if s.job != nil || !s.walDirty && s.head.entries == 0 {
		return nil, nil
	}
	j, err := s.rotate()
	var re *rotateError
	if errors.As(err, &re) {
		return nil, err // nothing changed: tried again later
	}
	if err != nil {
		return nil, s.fail(err)
	}
	s.job = j
	return j, nil
}

// flushJob is one flush: the head as it was when the WAL was rotated,
// written as a segment, then the manifest that covers it.
type flushJob struct {
	blocks   []*headBlock
	entries  int64
	base     *Manifest // the manifest to extend; not modified
	dirInfo  os.FileInfo
	walStart uint64 // the WAL file started at the rotation
	streams  []StreamDef
	sources  []Source
	done     chan struct{}
	man      *Manifest // the manifest written, when err is nil
	err      error
}

// rotate closes the current WAL file and starts the next, so that the
// head is exactly the WAL files below the new one, and hands the head to
// a flush job with the stream table and source progress of that moment.
func (s *Store) rotate() (*flushJob, error) {
	// A flush writes by path: into a directory that replaced ours it
	// would overwrite another store's segments and manifest.
	if err := s.CheckDir(); err != nil {
		return nil, err
	}
	if err := s.wal.sync(); err != nil {
		return nil, err
	}
	// The next WAL file first, the current one closed after: a failure
	// to start it (out of file descriptors, EMFILE) then changes nothing,
	// and the flush is tried again later instead of failing the store.
	old, seq := s.wal.f, s.wal.seq
	if err := s.startWAL(seq+1, s.wal.size); err != nil {
		s.root.Remove(walName(seq + 1)) // a file made before the failure
		return nil, &rotateError{err}
	}
	// Synced above and never written again: a close error loses nothing.
	_ = old.Close()
	j := &flushJob{
		blocks:   s.head.blocks,
		entries:  s.head.entries,
		base:     s.man,
		dirInfo:  s.dirInfo,
		walStart: s.wal.seq,
		streams:  s.streamDef[:len(s.streamDef):len(s.streamDef)], // never written below its length
		done:     make(chan struct{}),
	}
	for _, src := range s.sources {
		j.sources = append(j.sources, src)
	}
	sort.Slice(j.sources, func(a, b int) bool { return j.sources[a].Key < j.sources[b].Key })
	for _, hb := range j.blocks {
		hb.sortStreams() // before views share them with the flush
	}
	s.head.reset()
	s.walDirty = false
	return j, nil
}

// run writes the job's segment and manifest and deletes the covered WAL
// files. It touches nothing of the Store, so it can run on its own
// goroutine while Append fills the next head. It writes through root (the
// store's directory even if dir now names another); dir is for checking
// that the store is still at dir, so that a flush of a store moved away
// fails rather than succeed unseen.
func (j *flushJob) run(root *dirfs.Dir, dir string, opt segment.Options) {
	defer close(j.done)
	m := *j.base
	m.Segments = slices.Clone(j.base.Segments)
	if err := sameDir(dir, j.dirInfo); err != nil {
		j.err = err
		return
	}
	runFlushHook("segment")
	if j.entries > 0 {
		sm, err := writeSegment(root, opt, m.NextSeq, j.blocks)
		if err != nil {
			j.err = err
			return
		}
		m.Segments = append(m.Segments, sm)
		m.NextSeq++
	}
	m.WALStart, m.Streams, m.Sources = j.walStart, j.streams, j.sources
	if err := sameDir(dir, j.dirInfo); err != nil {
		j.err = err
		return
	}
	runFlushHook("manifest")
	if err := writeManifest(root, &m); err != nil {
		j.err = err
		return
	}
	j.man = &m
	seqs, err := walSeqsIn(root)
	if err != nil {
		j.err = err
		return
	}
	for _, seq := range seqs {
		if seq < m.WALStart {
			if err := root.Remove(walName(seq)); err != nil {
				j.err = err
				return
			}
		}
	}
}

// flushHook, when set by a test, runs in a flush right after each check
// that the directory is still the store's ("segment": before the segment
// is written; "manifest": before STREAMS and the manifest are), where a
// rename of the directory would make writes by path go astray.
var flushHook func(step string)

func runFlushHook(step string) {
	if flushHook != nil {
		flushHook(step)
	}
}

// wait waits for the flush in flight, if any, and takes its manifest.
// It waits even when the store has failed: the job writes through the
// directory handle and through descriptors it already holds (the segment,
// the STREAMS append), so Close, which calls it, must not release the
// lock and the handle under it; a second writer could open the store and
// write the same files meanwhile (review 12, R12-3). The job takes no
// lock of the Store's or a Writer's, so it ends, if with an error.
func (s *Store) wait() error {
	if s.job != nil {
		<-s.job.done
	}
	if s.err != nil {
		return s.err
	}
	if s.job == nil {
		return nil
	}
	j := s.job
	if j.err != nil {
		// Keep the job: its blocks are in no segment, yet acknowledged
		// (they are in the WAL, and the next Open recovers them), so a
		// Writer's views must go on showing them. s.err makes every
		// later wait return before reaching it again.
		return s.fail(j.err)
	}
	s.job = nil
	if j.man != nil {
		s.man = j.man
	}
	if !s.shared {
		// The flushed head's blocks take the next head's entries.
		s.head.recycle(j.blocks)
	}
	return nil
}

// fail makes err sticky: after a failed flush the WAL below the current
// file is not covered by a segment, so nothing more may be flushed past
// it; the next Open recovers it from the WAL.
func (s *Store) fail(err error) error {
	if s.err == nil {
		s.err = fmt.Errorf("store: flush failed, the data directory needs a reopen: %w", err)
	}
	return s.err
}

func writeSegment(root *dirfs.Dir, opt segment.Options, seq uint64, blocks []*headBlock) (SegmentMeta, error) {
	name := fmt.Sprintf("%016x%s", seq, segExt)
	w, err := segment.CreateIn(root, filepath.Join(segDir, name), opt)
	if err != nil {
		return SegmentMeta{}, err
	}
	sm := SegmentMeta{Name: name, MinTime: blocks[0].meta.MinTime, MaxTime: blocks[0].meta.MaxTime}
	for _, hb := range blocks {
		// A head block is cut as the writer cuts blocks: it is written
		// as one, from the head's buffers.
		if err := w.AddBlock(&hb.b); err != nil {
			w.Abort()
			return SegmentMeta{}, fmt.Errorf("write segment %s: %w", name, err)
		}
		sm.Entries += int64(hb.meta.Entries)
		sm.RawBytes += int64(hb.meta.RawBytes)
		sm.MinTime = min(sm.MinTime, hb.meta.MinTime)
		sm.MaxTime = max(sm.MaxTime, hb.meta.MaxTime)
	}
	info, err := w.Commit()
	if err != nil {
		return SegmentMeta{}, fmt.Errorf("commit segment %s: %w", name, err)
	}
	sm.Size = info.FileBytes
	return sm, nil
}

// Close flushes the head and releases the directory. The store is closed
// even when the flush fails; what the WAL holds is recovered next time.
func (s *Store) Close() error {
	if s.closed {
		return nil
	}
	err := s.Flush() // waits for a flush in flight, whatever s.err says
	s.closed = true
	if cerr := s.wal.f.Close(); err == nil {
		err = cerr
	}
	if err == nil && !s.walDirty {
		// The current WAL file holds nothing: leave no empty files behind.
		err = s.root.Remove(walName(s.wal.seq))
		if err == nil {
			err = s.root.SyncDir(walDir)
		}
	}
	s.lock.Close() // releases the flock
	s.root.Close()
	return err
}

// Stats summarises the committed store.
type Stats struct {
	Segments int
	Entries  int64
	RawBytes int64
	Size     int64 // bytes of segment files
}

// Stats reports the size of what the manifest holds (after Flush, all of it).
func (s *Store) Stats() Stats { return s.man.stats() }

func (m *Manifest) stats() Stats {
	st := Stats{Segments: len(m.Segments)}
	for _, sm := range m.Segments {
		st.Entries += sm.Entries
		st.RawBytes += sm.RawBytes
		st.Size += sm.Size
	}
	return st
}
