package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"haystack/internal/ingest"
	"haystack/internal/store"
)

func init() {
	register(&command{
		name:    "ingest",
		summary: "store log files (or stdin) durably in the data directory",
		run:     runIngest,
	})
}

// defaultDataDir is --data's default: $HAY_DATA, else ./hay-data.
func defaultDataDir() string {
	if d := os.Getenv("HAY_DATA"); d != "" {
		return d
	}
	return "hay-data"
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// Ingest batching: a batch is one WAL record, the unit of durability and
// of resumption. About 1 MiB amortises the record's write call and CRC
// while keeping the memory small.
const (
	batchBytes   = 1 << 20
	batchEntries = 1 << 15
	// maxLine is the longest line kept as one entry; longer lines are
	// stored as consecutive entries of at most maxLine bytes (with a
	// warning). It bounds the line reader's buffer.
	maxLine = 16 << 20
)

func runIngest(args []string) error {
	fs := flag.NewFlagSet("ingest", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: hay ingest [flags] [FILE|-]...")
		fmt.Fprintln(fs.Output(), "\nStores each line of the files (stdin when none) as an entry. Running it")
		fmt.Fprintln(fs.Output(), "again on a file resumes after what was already stored. A file is known by")
		fmt.Fprintln(fs.Output(), "its device and inode, so a symlink, hard link or rename (logrotate) of it")
		fmt.Fprintln(fs.Output(), "resumes too, and by a checksum of its first and last stored bytes, so a")
		fmt.Fprintln(fs.Output(), "truncated or rewritten file is stored from its start. Standard input and")
		fmt.Fprintln(fs.Output(), "pipes are never resumed: feeding them again stores them again.")
		fmt.Fprintln(fs.Output(), "\nCtrl-C stops at a batch boundary, keeps what was read and exits 130 (a")
		fmt.Fprintln(fs.Output(), "second Ctrl-C kills at once, which is safe: the next run repairs the store);")
		fmt.Fprintln(fs.Output(), "1 is a failure, 2 a bad argument.")
		fmt.Fprintln(fs.Output(), "\nFlags:")
		fs.PrintDefaults()
	}
	data := fs.String("data", defaultDataDir(), "data `dir`ectory ($HAY_DATA when set)")
	streamFlag := fs.String("stream", "", "stream `labels` k=v,k2=v2 (a source=<file name> label is added unless given; two different files with one name are refused, each needs its own source=NAME)")
	formatFlag := fs.String("format", "auto", "where each line's time is read (the line is stored as is): auto (a JSON line's time/ts/timestamp/@timestamp key, else a leading timestamp), plain (a leading timestamp only) or jsonl (the JSON key only)")
	fsyncInterval := fs.Duration("fsync-interval", store.DefaultFsyncInterval, "fsync the write-ahead log at least this often (0: only at the end)")
	headBytes := int64(store.DefaultHeadBytes)
	fs.Var(byteSizeFlag{&headBytes}, "head-bytes", "flush entries from memory into a segment at this `size`, e.g. 32MiB (the memory bound: about twice it)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	format, err := ingest.ParseFormat(*formatFlag)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	var labels ingest.Labels
	if *streamFlag != "" {
		if labels, err = ingest.ParseLabels(*streamFlag); err != nil {
			return fmt.Errorf("%w: --stream: %v", errUsage, err)
		}
	}
	files := fs.Args()
	if len(files) == 0 {
		files = []string{"-"}
	}
	opt := store.Options{FsyncInterval: *fsyncInterval, HeadBytes: headBytes}
	if *fsyncInterval == 0 {
		opt.FsyncInterval = -1
	}
	if err := store.CheckStore(*data); err != nil && len(tenantStores(*data)) > 0 {
		// Not a store: Open would make one in hay serve's directory of
		// tenant stores, which serve then refuses.
		return tenantLayoutHint(*data, err)
	}
	if err := checkInputs(files); err != nil {
		return err
	}
	namedBySource := labels.Get("source") == "" // each file's stream is source=<its base name>
	if namedBySource {
		if err := checkSameNames(files); err != nil {
			return err
		}
	}
	release, err := checkNotServed("ingest", *data)
	if err != nil {
		return err
	}
	defer release()
	st, err := store.Open(*data, opt)
	if err != nil {
		return err
	}
	if namedBySource {
		if err := checkStoredNames(st, files, labels); err != nil {
			st.Close()
			return err
		}
	}
	before := st.Stats()
	pr := newIngestProgress(os.Stderr)
	start := time.Now()
	// The first Ctrl-C stops reading at a batch boundary and flushes what
	// was read, so the store is complete up to there and a re-run resumes;
	// a second one kills at once (safe too, see docs/STORE.md).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()
	var ierr error
	for _, f := range files {
		if ierr = ingestOne(ctx, st, f, labels, format, pr, *fsyncInterval); ierr != nil {
			break
		}
	}
	pr.stop()
	if err := st.Close(); ierr == nil {
		ierr = err
	}
	if errors.Is(ierr, context.Canceled) {
		// 130, a shell's status for a command SIGINT stopped, as hay
		// search: a script can tell it from a failure (1).
		ierr = &exitError{code: 130, err: errors.New("interrupted; everything read so far is stored (running the same command again resumes files)")}
	}
	if ierr != nil {
		return ierr
	}
	after := st.Stats()
	el := time.Since(start).Seconds()
	in := pr.bytes.Load()
	stored := after.Size - before.Size
	var sizeNote string
	switch {
	case stored <= 0:
		sizeNote = "stored nothing new"
	case in >= stored:
		sizeNote = fmt.Sprintf("stored %s, %.1fx smaller than the input", fmtBytes(stored), float64(in)/float64(stored))
	default:
		// A "0.3x smaller" read as nonsense: a few lines cost a segment's
		// fixed overhead.
		sizeNote = fmt.Sprintf("stored %s (a small input costs more than its size: a segment has fixed overhead)", fmtBytes(stored))
	}
	fmt.Fprintf(os.Stderr, "ingested %d lines, %s in %.2fs (%.1f MB/s); %s\n",
		pr.lines.Load(), fmtBytes(in), el, float64(in)/1e6/max(el, 1e-9), sizeNote)
	if stored > 64<<20 && isTerminal(os.Stderr) {
		fmt.Fprintf(os.Stderr, "hint: hay compact --data %s halves what selective searches decode (they run ~1.4x faster; it costs ~1.5x this ingest's CPU, once)\n", *data)
	}
	return nil
}

// compressedMagic are the first bytes of compressed files hay ingest
// would otherwise store as binary "lines" that no search finds.
var compressedMagic = []struct {
	magic, name, cat string
}{
	{"\x1f\x8b", "gzip", "zcat"},
	{"\x28\xb5\x2f\xfd", "zstd", "zstdcat"},
	{"BZh", "bzip2", "bzcat"},
	{"\xfd7zXZ\x00", "xz", "xzcat"},
}

// checkInputs refuses, before anything is stored, inputs that are missing,
// directories, or compressed: with several inputs, the ones before a bad
// one would be stored and the rest not, and a rotated, gzipped log
// (app.log.1.gz) was stored as binary that no search matched, exit 0.
func checkInputs(files []string) error {
	var errs []error
	for _, path := range files {
		if path == "-" {
			continue
		}
		fi, err := os.Stat(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if fi.IsDir() {
			errs = append(errs, fmt.Errorf("%s is a directory: give the files in it (%s/*.log)", path, path))
			continue
		}
		if !fi.Mode().IsRegular() {
			continue // a pipe or device: read as it comes
		}
		f, err := os.Open(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		head := make([]byte, 6)
		n, _ := io.ReadFull(f, head)
		f.Close()
		for _, c := range compressedMagic {
			if strings.HasPrefix(string(head[:n]), c.magic) {
				base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
				errs = append(errs, fmt.Errorf("%s is %s-compressed, and hay ingest stores text: %s %s | hay ingest --stream source=%s", path, c.name, c.cat, path, base))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w (nothing was stored)", errors.Join(errs...))
	}
	return nil
}

// fileIdentity is a file's device and inode (symlinks followed), or
// false where the system has none.
func fileIdentity(fi os.FileInfo) ([2]uint64, bool) {
	sys, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return [2]uint64{}, false
	}
	return [2]uint64{uint64(sys.Dev), uint64(sys.Ino)}, true
}

// checkSameNames refuses, before anything is stored, two different files
// with the same base name when the stream is named by it (no source label
// in --stream): a/0.log and b/0.log (every Kubernetes container's log is
// 0.log; nginx/access.log and apache2/access.log) would be one stream
// source="0.log", their lines interleaved, so that -A/-B showed one
// file's lines as the other's context and -l named one source (review 15
// H100-2). The same file reached by two paths (a symlink, a hard link)
// is not two files.
func checkSameNames(files []string) error {
	type seen struct {
		path string
		id   [2]uint64
	}
	first := map[string]seen{}
	var errs []error
	for _, path := range files {
		if path == "-" {
			continue
		}
		fi, err := os.Stat(path)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		id, ok := fileIdentity(fi)
		if !ok {
			continue
		}
		base := filepath.Base(path)
		prev, dup := first[base]
		if !dup {
			first[base] = seen{path, id}
			continue
		}
		if prev.id != id {
			errs = append(errs, fmt.Errorf("%s and %s would be one stream, source=%q, their lines interleaved: store each under its own name, hay ingest --stream source=NAME FILE", prev.path, path, base))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w (nothing was stored)", errors.Join(errs...))
	}
	return nil
}

// checkStoredNames is checkSameNames against the files an earlier run
// stored: a file new to the store whose stream (labels and source=<its
// base name>) the store has, and whose base name is that of another file
// the store holds (one that still exists, at another path, with another
// identity), would join that file's stream. A file the store holds
// already (resumed, moved, renamed) is not checked: its stream is what it
// was; nor is one whose stream is new (the other file was stored under
// another source label: review 15d F3).
func checkStoredNames(st *store.Store, files []string, labels ingest.Labels) error {
	stored := map[string][]string{} // base name -> recorded paths
	for _, k := range st.SourceKeys() {
		if filepath.IsAbs(k) {
			stored[filepath.Base(k)] = append(stored[filepath.Base(k)], k)
		}
	}
	var errs []error
	for _, path := range files {
		if path == "-" {
			continue
		}
		fi, err := os.Stat(path)
		if err != nil || !fi.Mode().IsRegular() || len(stored[filepath.Base(path)]) == 0 ||
			!st.HasStream(labels.With("source", filepath.Base(path)).String()) {
			continue
		}
		id, ok := fileIdentity(fi)
		if !ok {
			continue
		}
		record, lookup, err := sourceKeys(path, fi)
		if err != nil {
			continue
		}
		if slices.ContainsFunc(lookup, func(k string) bool { _, ok := st.Source(k); return ok }) {
			continue // stored before: its stream is what it was
		}
		for _, other := range stored[filepath.Base(path)] {
			if other == record[len(record)-1] {
				continue
			}
			ofi, err := os.Stat(other)
			if err != nil {
				continue // gone: nothing to tell apart any more
			}
			if oid, ok := fileIdentity(ofi); ok && oid != id {
				errs = append(errs, fmt.Errorf("%s would join the stream source=%q of %s, which this store holds: store it under its own name, hay ingest --stream source=NAME %s (or --stream source=%s to add it to that stream)",
					path, filepath.Base(path), other, path, filepath.Base(path)))
				break
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w (nothing was stored)", errors.Join(errs...))
	}
	return nil
}

// ingestOne stores one input. For a regular file it resumes after the
// prefix a previous run stored (see package store, "Re-running ingest").
//
// An input that can block (stdin, a pipe, a terminal) is read through an
// idleReader, so that lines that arrived are stored when the input goes
// quiet, rather than when a 1 MiB batch fills, and an interrupt is seen
// even while a read is blocked.
func ingestOne(ctx context.Context, st *store.Store, path string, labels ingest.Labels, format ingest.Format, pr *ingestProgress, syncEvery time.Duration) error {
	var r io.Reader
	var keys []string // the Source keys this input's progress is recorded under
	var start int64
	var prefix []byte    // the first CheckLen bytes, for Source.Check
	var regular *os.File // the input, when it is a regular file
	name := "stdin"
	size := int64(-1)
	if path == "-" {
		r = os.Stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
		name = filepath.Base(path)
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			size = fi.Size()
			var lookup []string
			if keys, lookup, err = sourceKeys(path, fi); err != nil {
				return err
			}
			prefix = make([]byte, store.CheckLen)
			n, err := f.ReadAt(prefix, 0)
			if err != nil && err != io.EOF {
				return err
			}
			prefix = prefix[:n]
			regular = f
			if src, ok := resumeSource(st, f, prefix, size, lookup); ok {
				start = src.Offset
				if start > 0 {
					// Progress found by identity that this path's own key
					// lacks: a symlink target, hard link or rename stored it.
					other := ""
					if p, ok := st.Source(keys[len(keys)-1]); src.Key == keys[0] && (!ok || p.Offset != start) {
						other = " (stored before under another name: same device and inode)"
					}
					fmt.Fprintf(os.Stderr, "hay ingest: %s: resuming after the %d bytes already stored%s\n", path, start, other)
				}
				if _, err := f.Seek(start, io.SeekStart); err != nil {
					return err
				}
			}
		}
	}
	if labels.Get("source") == "" {
		labels = labels.With("source", name)
	}
	stream := st.Stream(labels.String())
	pr.startFile(path, size, start)

	var idle *idleReader
	if size < 0 {
		idle = newIdleReader(ctx, r, syncEvery, st.Sync)
		r = idle
	}
	lr := ingest.NewLineReader(r, maxLine)
	p := ingest.NewParser(format, nil)
	var (
		arena    []byte
		ends     []int
		batch    store.Batch
		warned   bool
		consumed = start // input offset already counted in the progress
		// The time of the last line with a timestamp, for lines without.
		lastTime int64
		haveTime bool
		// Lines without a timestamp before the first one with: they wait
		// in the batch for the next timestamp (see below), from here on.
		leading = -1
		// The time given to the last line, for the pieces after it.
		pieceTime int64
		entries   = make([]store.Entry, 0, 1024)
	)
	flush := func() error {
		if len(entries) == 0 {
			return nil
		}
		prev := 0
		for i := range entries {
			entries[i].Line = arena[prev:ends[i]:ends[i]]
			prev = ends[i]
		}
		batch.Entries = entries
		batch.Sources = batch.Sources[:0]
		if len(keys) > 0 {
			off := start + lr.Offset()
			chk, err := sourceCheck(regular, prefix, off)
			if err != nil {
				return err
			}
			for _, k := range keys {
				batch.Sources = append(batch.Sources, store.Source{Key: k, Offset: off, Check: chk})
			}
		}
		if err := st.Append(&batch); err != nil {
			return err
		}
		pr.add(start+lr.Offset()-consumed, int64(len(entries)), start+lr.Offset())
		consumed = start + lr.Offset()
		arena, ends, entries = arena[:0], ends[:0], entries[:0]
		leading = -1
		return nil
	}
	if idle != nil {
		idle.onIdle = flush
	}
	for {
		line, err := lr.Next()
		if err != nil && !errors.Is(err, ingest.ErrLineTooLong) {
			if ferr := flush(); ferr != nil {
				return ferr
			}
			if cerr := ctx.Err(); cerr != nil {
				return cerr // the read failed because of the interrupt
			}
			if err == io.EOF {
				return nil
			}
			return fmt.Errorf("%s: %w", path, err)
		}
		if err != nil && !warned {
			warned = true
			fmt.Fprintf(os.Stderr, "hay ingest: %s: %v; storing it in pieces\n", path, err)
		}
		var e ingest.Entry
		var tl *ingest.LineTooLongError
		piece := errors.As(err, &tl) && tl.Offset > 0
		if piece {
			// A later piece of a long line is the same entry's text: it
			// takes the line's time (the first piece's), never a time
			// that happens to start the piece.
			e = ingest.Entry{Line: line, Time: pieceTime}
		} else {
			e = p.Parse(line)
		}
		switch {
		case piece:
			// Nothing to decide: a first piece still waiting for a
			// timestamp (leading >= 0) has this one after it in the
			// batch, and the back-fill covers both; a first piece
			// already flushed with the ingestion time (16 MiB fills a
			// batch) must not have its later pieces start a new leading
			// run, which gave them the next timestamp instead.
		case e.HasTime:
			lastTime, haveTime = e.Time, true
			// Lines without a timestamp before the first one with (a
			// banner at the top of a file, or the rest of an entry cut
			// where an earlier run stopped) take its time rather than the
			// ingestion time: otherwise the stream's times would go
			// backwards after them, and the merge of streams by time has
			// no single order for such a stream. Those flushed before a
			// timestamp came (over a batch of them, or stdin's idle flush)
			// keep the ingestion time: holding them longer would let a file
			// without timestamps grow the batch without bound.
			if leading >= 0 {
				for i := leading; i < len(entries); i++ {
					entries[i].Time = e.Time
				}
				leading = -1
			}
		case haveTime:
			// A line without a timestamp (a stack trace's continuation, a
			// message split over lines) belongs with the entry before it:
			// it takes that entry's time rather than the ingestion time,
			// which would sort it after every other stream's entries.
			e.Time = lastTime
		case leading < 0:
			leading = len(entries)
		}
		pieceTime = e.Time
		arena = append(arena, e.Line...)
		ends = append(ends, len(arena))
		entries = append(entries, store.Entry{Time: e.Time, Stream: stream})
		if len(arena) >= batchBytes || len(entries) >= batchEntries {
			if err := flush(); err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
}

// sourceKeys returns the keys a regular file's progress is recorded under
// (record, the identity first) and those a re-run looks up (lookup).
//
// The first key is the file's identity, "inode:DEV:INO" from fi (an fstat
// of the opened file, so symlinks are followed): a file reached through a
// symlink or another hard link, or renamed by logrotate (app.log to
// app.log.1), is the file already stored, and resumes instead of being
// stored again; log shippers (Filebeat, Promtail) key files the same way.
// The second is the absolute path with symlinks resolved: an older hay
// (which looks paths up) still resumes, and so does a file whose device
// number changed (a reboot, a container's overlay), since the path is
// checked against the same checksum. Lookup also tries the absolute path
// as given, what versions before the identity key recorded.
func sourceKeys(path string, fi os.FileInfo) (record, lookup []string, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil, err
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		resolved = abs // gone since it was opened: the path as given
	}
	if id, ok := fileIdentity(fi); ok {
		record = append(record, fmt.Sprintf("inode:%d:%d", id[0], id[1]))
	}
	record = append(record, resolved)
	lookup = record
	if abs != resolved {
		lookup = append(slices.Clip(lookup), abs)
	}
	return record, lookup, nil
}

// resumeSource returns the recorded progress to resume f (size bytes, its
// first bytes prefix) from: the furthest of those under keys whose offset
// is within the file and whose check still matches (sameSource), the
// earliest key on a tie. A key whose check fails is a different file now:
// an inode reused after a delete, a file truncated (copytruncate) or
// rewritten in place. The furthest rather than the first: every match is
// this file's content, and a key can be behind the others (an identity
// recorded before the device number changed and back, an old path key).
// None: the file is new content, stored from its start.
func resumeSource(st *store.Store, f *os.File, prefix []byte, size int64, keys []string) (store.Source, bool) {
	var best store.Source
	found := false
	for _, k := range keys {
		if src, ok := st.Source(k); ok && src.Offset <= size && (!found || src.Offset > best.Offset) && sameSource(f, prefix, src) {
			best, found = src, true
		}
	}
	return best, found
}

var crc32cTable = crc32.MakeTable(crc32.Castagnoli)

// sourceCheck is Source.Check for the first off bytes of f: the CRC-32C of
// its first min(off, CheckLen) bytes (prefix) followed by the CheckLen
// bytes before off, where those are past the prefix. The bytes before
// off tell a file that grew from one rewritten with the same first
// kilobyte (a fixed header, a banner) and grown past the old length,
// which the prefix alone took for the same file and resumed in the middle
// of, losing the start of the new content.
func sourceCheck(f *os.File, prefix []byte, off int64) (uint32, error) {
	chk := crc32.Checksum(prefix[:min(int64(len(prefix)), off)], crc32cTable)
	from := max(off-store.CheckLen, store.CheckLen)
	if from >= off {
		return chk, nil
	}
	tail := make([]byte, off-from)
	if _, err := f.ReadAt(tail, from); err != nil {
		return 0, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return crc32.Update(chk, crc32cTable, tail), nil
}

// sameSource reports whether f still starts with the src.Offset bytes a
// previous run stored: sourceCheck matches, or (a source recorded before
// the check covered the bytes before the offset) the prefix's CRC alone.
func sameSource(f *os.File, prefix []byte, src store.Source) bool {
	if chk, err := sourceCheck(f, prefix, src.Offset); err == nil && chk == src.Check {
		return true
	}
	return crc32.Checksum(prefix[:min(int64(len(prefix)), src.Offset)], crc32cTable) == src.Check
}

// ingestProgress draws a one-line progress bar on stderr when it is a terminal.
type ingestProgress struct {
	w     *os.File
	tty   bool
	bytes atomic.Int64 // input bytes consumed (with newlines), all inputs
	lines atomic.Int64

	file     atomic.Pointer[fileProgress]
	done     chan struct{}
	finished chan struct{}
	t0       time.Time
}

type fileProgress struct {
	name      string
	size, pos int64 // pos: input offset reached
	t0        time.Time
	start     int64
}

func newIngestProgress(w *os.File) *ingestProgress {
	p := &ingestProgress{w: w, tty: isTerminal(w), done: make(chan struct{}), finished: make(chan struct{}), t0: time.Now()}
	if !p.tty {
		close(p.finished)
		return p
	}
	go func() {
		defer close(p.finished)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.done:
				fmt.Fprint(p.w, "\r\033[K")
				return
			case <-t.C:
				p.draw()
			}
		}
	}()
	return p
}

func (p *ingestProgress) startFile(name string, size, start int64) {
	p.file.Store(&fileProgress{name: name, size: size, pos: start, start: start, t0: time.Now()})
}

func (p *ingestProgress) add(input, lines, pos int64) {
	p.bytes.Add(input)
	p.lines.Add(lines)
	if f := p.file.Load(); f != nil {
		nf := *f
		nf.pos = pos
		p.file.Store(&nf)
	}
}

func (p *ingestProgress) draw() {
	el := time.Since(p.t0).Seconds()
	lines := p.lines.Load()
	s := fmt.Sprintf("%.1f MB, %d lines, %.0f lines/s", float64(p.bytes.Load())/1e6, lines, float64(lines)/max(el, 1e-9))
	if f := p.file.Load(); f != nil && f.size > 0 {
		frac := float64(f.pos) / float64(f.size)
		const width = 30
		n := min(width, int(frac*width))
		bar := ""
		for i := range width {
			if i < n {
				bar += "#"
			} else {
				bar += "."
			}
		}
		eta := "?"
		if done := f.pos - f.start; done > 0 {
			rate := float64(done) / time.Since(f.t0).Seconds()
			eta = time.Duration(float64(f.size-f.pos) / rate * float64(time.Second)).Round(time.Second).String()
		}
		s = fmt.Sprintf("%s [%s] %3.0f%% %s, ETA %s", filepath.Base(f.name), bar, 100*frac, s, eta)
	}
	fmt.Fprintf(p.w, "\r\033[K%s", s)
}

func (p *ingestProgress) stop() {
	if p.tty {
		close(p.done)
	}
	<-p.finished
}

// fmtBytes formats n bytes for people: B, kB, MB or GB (powers of 1000).
func fmtBytes(n int64) string {
	switch {
	case n < 1e3:
		return fmt.Sprintf("%d B", n)
	case n < 1e6:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	case n < 1e9:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.2f GB", float64(n)/1e9)
}

// idleReader reads from a source that may block, on its own goroutine, in
// chunks. When no chunk is ready it calls onIdle (which stores the lines
// read so far) before waiting, then sync every syncEvery while the input
// stays quiet; a cancelled context ends a blocked Read at once.
type idleReader struct {
	ctx       context.Context
	ch        chan chunk
	cur       []byte
	err       error
	onIdle    func() error
	sync      func() error
	syncEvery time.Duration
}

type chunk struct {
	b   []byte
	err error
}

func newIdleReader(ctx context.Context, src io.Reader, syncEvery time.Duration, sync func() error) *idleReader {
	r := &idleReader{ctx: ctx, ch: make(chan chunk, 4), sync: sync, syncEvery: syncEvery}
	go func() {
		// This goroutine may stay blocked in Read after an interrupt;
		// the process is about to exit then.
		for {
			b := make([]byte, 64<<10)
			n, err := src.Read(b)
			if n > 0 {
				select {
				case r.ch <- chunk{b: b[:n]}:
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				select {
				case r.ch <- chunk{err: err}:
				case <-ctx.Done():
				}
				return
			}
		}
	}()
	return r
}

func (r *idleReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		var c chunk
		select {
		case c = <-r.ch:
		default:
			if r.onIdle != nil {
				if err := r.onIdle(); err != nil {
					return 0, err
				}
			}
			var tick <-chan time.Time
			if r.syncEvery > 0 {
				t := time.NewTimer(r.syncEvery)
				defer t.Stop()
				tick = t.C
			}
		wait:
			for {
				select {
				case c = <-r.ch:
					break wait
				case <-tick:
					tick = nil
					if err := r.sync(); err != nil {
						return 0, err
					}
				case <-r.ctx.Done():
					return 0, r.ctx.Err()
				}
			}
		}
		r.cur, r.err = c.b, c.err
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}
