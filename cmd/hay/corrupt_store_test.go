package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"haystack/internal/ingest"
	"haystack/internal/logtest"
	"haystack/internal/query"
	"haystack/internal/segment"
	"haystack/internal/store"
)

// TestCorruptStore damages a whole data directory at random, many times,
// and holds hay search and hay verify to docs/STORE.md's promises.
//
// The base store is built as users build one: hay ingest of four
// generated files (each its own stream), hay compact with a small
// --merge-bytes (compacted segments of small blocks), two more ingests
// (segments not compacted, one of two 1 MiB blocks), then two `hay
// ingest` runs from a pipe killed with SIGKILL after a few idle flushes,
// which leave two WAL files of several records each above wal_start.
//
// Each case copies the store (hard links for the undamaged segments) and
// damages one file (a segment, a WAL file, MANIFEST or LOCK): flips 1-8
// bytes, zeroes a range, truncates, or appends junk, at offsets biased
// toward structure (header, block, index, skip index and footer
// boundaries of a segment; magic and record boundaries of a WAL file; the
// header line of MANIFEST; the first and last 64 bytes of any file). Then:
//
// hay search (a battery of literal, -c, -v, --order newest, --limit,
// --no-index queries) never panics or hangs; every line it writes to
// stderr names the damaged file; and its output is exactly the brute
// force oracle (searchOracle over the entries read from the undamaged
// files) over every entry except those it reported skipped: a block or
// segment of the damaged segment file ("skips a damaged block or
// unreadable segment, names it on stderr, prints everything else, and
// exits 2"). Nothing reported means the exact output and exit status of
// the undamaged store (a damaged skip index gives exact results with a
// warning). A damaged MANIFEST may instead fail the whole search (exit 2,
// nothing printed, MANIFEST named). WAL damage that a crash can leave (the
// end of the last WAL file: cut short, junk appended, its last record or
// everything from some point on zeroed) may silently lose the records
// from the first bad one on, as recovery will; WAL damage a crash cannot
// leave (in a WAL file that is not the last, or followed by a whole
// record) must not lose entries without exit 2 and the file named; the
// cases in between may take either treatment (corruptWALEither).
//
// hay verify never panics or hangs, never calls an undamaged file (or
// block) damaged, and fails naming the file for any changed byte of a
// segment, of MANIFEST's checksummed body, or of a WAL file other than a
// crash's tail (which it reports as a note and passes). MANIFEST's header
// line is outside its checksum: a change there that verify passes must
// leave the body as it was (and searches exact).
//
// Then, for damage to a WAL file or MANIFEST, what a user runs next: hay
// ingest, whose recovery must keep the exact prefix before a crash's torn
// tail (docs/STORE.md), and otherwise fail naming the file or keep all
// but the damaged part with a message naming it: never delete
// acknowledged entries in silence. A damaged MANIFEST must stop it.
//
// Each case runs 8 to 10 short hay processes (the four queries that read
// every block, three of the seven others, verify; ingest and a search
// for WAL and MANIFEST damage); 100 cases take about 11 s of CPU, half
// of it in the kernel starting processes: about 6 s on two idle cores.
//
// HAY_CORRUPT_SEED=N reruns a seed, HAY_CORRUPT_CASE=K only its case K,
// HAY_CORRUPT_CASES=N sets the number of cases, HAY_CORRUPT_KEEP=DIR keeps
// every failing case's damaged store under DIR.
func TestCorruptStore(t *testing.T) {
	seed := envSeed(t, "HAY_CORRUPT_SEED")
	cases := envInt(t, "HAY_CORRUPT_CASES", 100)
	only := -1
	if v := os.Getenv("HAY_CORRUPT_CASE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			t.Fatalf("HAY_CORRUPT_CASE=%q: want a case number", v)
		}
		only = n
		cases = max(cases, n+1)
	}
	t.Logf("seed %d (rerun: HAY_CORRUPT_SEED=%d go test -run 'TestCorruptStore$' ./cmd/hay)", seed, seed)

	start := time.Now()
	base := corruptBaseStore(t)
	cat := corruptCatalog(t, base)
	t.Logf("base store built in %v: %d files, %d entries in %d streams", time.Since(start).Round(time.Millisecond),
		len(cat.files), cat.total, len(cat.labels))
	before := corruptHashes(t, base, cat)

	// The oracle of the undamaged store: searchOracle must agree with hay
	// search on it, or the comparisons below mean nothing.
	qs := corruptQueries(t, cat)
	for _, q := range qs {
		r := corruptRun(t, "search", base, q.args)
		if r.timeout || r.code != q.code || !bytes.Equal(r.out, q.out) || r.stderr != "" {
			t.Fatalf("undamaged store: hay search %q: exit %d, %d bytes, stderr %q; oracle: exit %d, %d bytes",
				q.args, r.code, len(r.out), r.stderr, q.code, len(q.out))
		}
	}
	if r := corruptRun(t, "verify", base, nil); r.code != 0 || r.stderr != "" {
		t.Fatalf("undamaged store: hay verify exit %d\n%s", r.code, r.stderr)
	}

	var (
		mu       sync.Mutex
		failed   int
		next     atomic.Int64
		wg       sync.WaitGroup
		kinds    = map[string]int{}
		outcomes = map[string]int{}
		classes  = map[string][]int{} // kind of failure -> cases
	)
	work := t.TempDir()
	for range 2 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= cases {
					return
				}
				if only >= 0 && i != only {
					continue
				}
				c := corruptCase(t, cat, seed, i, filepath.Join(work, strconv.Itoa(i), "data"))
				if keep := os.Getenv("HAY_CORRUPT_KEEP"); keep != "" {
					c.keep = filepath.Join(keep, fmt.Sprintf("seed%d-case%d", seed, i))
				}
				probs, outcome := c.check(t, cat, qs)
				if len(probs) == 0 && c.keep != "" {
					os.RemoveAll(c.keep)
				}
				mu.Lock()
				kinds[c.kind]++
				outcomes[outcome]++
				if len(probs) > 0 {
					failed++
					seen := map[string]bool{}
					for _, p := range probs {
						k := corruptFailureClass(p)
						if !seen[k] {
							seen[k] = true
							classes[k] = append(classes[k], i)
						}
					}
					if failed <= 25 {
						t.Errorf("case %d (HAY_CORRUPT_SEED=%d HAY_CORRUPT_CASE=%d): %s %s:\n  %s",
							i, seed, i, c.file.rel, c.desc, strings.Join(probs, "\n  "))
					}
				}
				mu.Unlock()
				os.RemoveAll(filepath.Dir(c.dir))
			}
		})
	}
	wg.Wait()
	ran := 0
	for _, n := range kinds {
		ran += n
	}
	if failed > 0 {
		var ks []string
		for k := range classes {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		var b strings.Builder
		for _, k := range ks {
			fmt.Fprintf(&b, "\n  %4d cases (first: %d): %s", len(classes[k]), slices.Min(classes[k]), k)
		}
		t.Errorf("%d of %d cases failed (seed %d):%s", failed, ran, seed, b.String())
	}
	if after := corruptHashes(t, base, cat); !slices.Equal(before, after) {
		t.Errorf("the undamaged store changed while damaged copies were searched (hard links written through)")
	}
	t.Logf("%d cases in %v; damage %v; outcomes %v", ran, time.Since(start).Round(time.Millisecond), kinds, outcomes)
}

// Kinds of files in a store.
const (
	corruptSeg = iota
	corruptWAL
	corruptManifest
	corruptLock
)

// corruptFile is one file of the base store and its structure.
type corruptFile struct {
	rel  string // path inside the data directory
	kind int
	data []byte
	// marks are offsets where structure begins or ends, in groups of a
	// kind (block starts, block CRCs, record headers, ...): damage picks
	// a group, then a mark, so that the many skip index groups of a
	// segment do not drown its few footer fields.
	marks [][]int
	// blocks are a segment's block extents.
	blocks [][2]int
	// WAL files: record extents (header included) in file order, the
	// file's place among the WAL files replayed, and whether it is last.
	records [][2]int
	walIdx  int
	lastWAL bool
}

// corruptEntry is an entry with where the undamaged store keeps it: a
// segment file and block, or a WAL file and record.
type corruptEntry struct {
	storedEntry
	file   string
	unit   int
	walIdx int // -1 in a segment
}

type corruptStore struct {
	dir    string
	files  []*corruptFile
	byRel  map[string]*corruptFile
	per    map[uint32][]corruptEntry
	labels map[uint32][]query.Label
	total  int

	mu    sync.Mutex
	cache map[string]corruptOut // oracle outputs by query and entries dropped
}

type corruptOut struct {
	out  []byte
	code int
}

type corruptQuery struct {
	args []string // after `hay search --data DIR`
	full bool     // reads every block: run in every case
	o    oracleArgs
	out  []byte // oracle over the undamaged store
	code int
}

// corruptBaseStore builds the base store and returns its directory.
func corruptBaseStore(t *testing.T) string {
	t.Helper()
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "data")
	gen := func(name string, cfg logtest.Config) string {
		var b bytes.Buffer
		if _, _, err := logtest.Generate(&b, cfg); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hay := func(args ...string) {
		t.Helper()
		if _, code := hayInProcess(t, args...); code != 0 {
			t.Fatalf("hay %q: exit %d", args, code)
		}
	}
	hay("ingest", "--data", dir, gen("a1.log", logtest.Config{Lines: 900, Seed: 11, Streams: 3}))
	hay("ingest", "--data", dir, "--stream", "app=api,env=prod", gen("a2.log", logtest.Config{Lines: 700, Seed: 12, Streams: 2, MeanLen: 180}))
	hay("ingest", "--data", dir, gen("a3.log", logtest.Config{Lines: 800, Seed: 13, Streams: 4}))
	hay("ingest", "--data", dir, "--stream", "app=web", gen("b.log", logtest.Config{Lines: 1500, Seed: 14, Streams: 5, MeanLen: 300}))
	// Two workers whatever the machine: the plan splits a small store
	// into one run per worker, and the layout must not depend on cores.
	hay("compact", "--data", dir, "--merge-bytes", "600000", "--block-size", "32768", "--workers", "2")
	// Not compacted: one segment of two 1 MiB head blocks, one small.
	hay("ingest", "--data", dir, gen("c.log", logtest.Config{Lines: 6000, Seed: 15, Streams: 6}))
	hay("ingest", "--data", dir, "--stream", "app=db", gen("d.log", logtest.Config{Lines: 400, Seed: 16, Streams: 2, MeanLen: 120}))

	// The WAL: a pipe's lines are stored as a record each time the input
	// goes quiet. Chunks of at most PIPE_BUF bytes reach the reader in one
	// read, so each chunk is one record.
	for k, n := range []int{6, 4} {
		var b bytes.Buffer
		if _, _, err := logtest.Generate(&b, logtest.Config{Lines: 200, Seed: int64(20 + k), Streams: 3}); err != nil {
			t.Fatal(err)
		}
		lines := bytes.SplitAfter(b.Bytes(), []byte("\n"))
		cmd := hayCommand("ingest", "--data", dir, "--stream", fmt.Sprintf("source=live%d", k))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		want := corruptWALEntries(t, dir)
		for range n {
			var chunk []byte
			for len(lines) > 0 && len(lines[0]) > 0 && (len(chunk) == 0 || len(chunk)+len(lines[0]) <= 4096) {
				chunk = append(chunk, lines[0]...)
				lines = lines[1:]
				want++
			}
			if _, err := in.Write(chunk); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(20 * time.Second)
			for corruptWALEntries(t, dir) < want {
				if time.Now().After(deadline) {
					t.Fatalf("the WAL did not reach %d entries; ingest stderr:\n%s", want, stderr.Bytes())
				}
				time.Sleep(2 * time.Millisecond)
			}
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		in.Close()
	}
	return dir
}

// corruptWALEntries counts the entries of the WAL files from wal_start on
// (0 while there is no store).
func corruptWALEntries(t *testing.T, dir string) int {
	t.Helper()
	snap, err := store.OpenSnapshot(dir)
	if err != nil {
		return 0
	}
	defer snap.Close()
	seqs := corruptWALFiles(t, dir, snap.Manifest.WALStart)
	n := 0
	for _, p := range seqs {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		r := store.NewWALReader(data)
		for {
			b, err := r.Next()
			if err != nil {
				break
			}
			n += len(b.Entries)
		}
	}
	return n
}

// corruptWALFiles lists dir's WAL files numbered from start on, in order.
func corruptWALFiles(t *testing.T, dir string, start uint64) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "wal"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		seq, err := strconv.ParseUint(strings.TrimSuffix(e.Name(), ".wal"), 16, 64)
		if err == nil && strings.HasSuffix(e.Name(), ".wal") && seq >= start {
			out = append(out, filepath.Join(dir, "wal", e.Name()))
		}
	}
	slices.Sort(out) // 16 hex digits: name order is number order
	return out
}

// corruptCatalog reads the base store: every file with its structure,
// every entry with its place, the stream labels.
func corruptCatalog(t *testing.T, dir string) *corruptStore {
	t.Helper()
	snap, err := store.OpenSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	m := snap.Manifest
	cs := &corruptStore{dir: dir, byRel: map[string]*corruptFile{}, per: map[uint32][]corruptEntry{}, labels: map[uint32][]query.Label{}}
	add := func(rel string, kind int) *corruptFile {
		data, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		f := &corruptFile{rel: rel, kind: kind, data: data, walIdx: -1}
		f.marks = [][]int{{0, len(data)}}
		cs.files = append(cs.files, f)
		cs.byRel[rel] = f
		return f
	}
	mf := add("MANIFEST", corruptManifest)
	header := []int{bytes.IndexByte(mf.data, '\n') + 1}
	for i, c := range mf.data[:bytes.IndexByte(mf.data, '\n')] {
		if c == ' ' {
			header = append(header, i)
		}
	}
	mf.marks = append(mf.marks, header)
	add("LOCK", corruptLock)

	compacted, plain := 0, 0
	for _, sm := range m.Segments {
		if sm.Compacted {
			compacted++
		} else {
			plain++
		}
		rel := filepath.Join("segments", sm.Name)
		f := add(rel, corruptSeg)
		marks, blocks := corruptSegmentMarks(t, f.data)
		f.marks, f.blocks = append(f.marks, marks...), blocks
		r, err := segment.Open(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		var b segment.Block
		for i := range r.NumBlocks() {
			if err := r.ReadBlock(i, &b); err != nil {
				t.Fatal(err)
			}
			for k := range b.Len() {
				s := b.Streams[k]
				cs.per[s] = append(cs.per[s], corruptEntry{storedEntry{b.Times[k], s, bytes.Clone(b.Line(k))}, rel, i, -1})
			}
		}
		r.Close()
	}
	if m.StreamsBytes > 0 {
		// The stream table: damage there stops readers and writers as a
		// damaged MANIFEST does.
		add("STREAMS", corruptManifest)
	}
	wals := corruptWALFiles(t, dir, m.WALStart)
	for wi, p := range wals {
		rel := filepath.Join("wal", filepath.Base(p))
		f := add(rel, corruptWAL)
		f.walIdx, f.lastWAL = wi, wi == len(wals)-1
		f.marks = append(f.marks, []int{8}, nil, nil)
		r := store.NewWALReader(f.data)
		for {
			from := int(r.Valid)
			b, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", rel, err)
			}
			f.records = append(f.records, [2]int{from, int(r.Valid)})
			f.marks[2] = append(f.marks[2], from+4, from+8)
			f.marks[3] = append(f.marks[3], int(r.Valid))
			for _, e := range b.Entries {
				cs.per[e.Stream] = append(cs.per[e.Stream], corruptEntry{storedEntry{e.Time, e.Stream, bytes.Clone(e.Line)}, rel, len(f.records) - 1, wi})
			}
		}
		if int(r.Valid) != len(f.data) {
			t.Fatalf("%s: %d bytes after its last record", rel, len(f.data)-int(r.Valid))
		}
	}
	if compacted < 2 || plain < 2 || len(wals) != 2 || len(cs.byRel[filepath.Join("wal", filepath.Base(wals[0]))].records) < 4 {
		t.Fatalf("the base store lacks a part: %d compacted and %d other segments, WAL files %q", compacted, plain, wals)
	}
	if a, b := len(cs.files[len(cs.files)-2].records), len(cs.files[len(cs.files)-1].records); a != 6 || b != 4 {
		// One record per chunk written (corruptBaseStore) is what makes
		// the store, and so a seed's damage, the same on every run.
		t.Logf("note: the WAL files hold %d and %d records, not 6 and 4: a seed's cases differ from other runs'", a, b)
	}

	// The catalog must read the store as hay does: per stream, the same
	// entries in the same order.
	want := crashEntries(t, dir)
	n := 0
	for s, es := range cs.per {
		n += len(es)
		ls, err := ingest.ParseLabels(snap.Labels(s))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			cs.labels[s] = append(cs.labels[s], query.Label(l))
		}
	}
	cs.total = n
	if n != len(want) {
		t.Fatalf("catalog: %d entries, the store %d", n, len(want))
	}
	perWant := map[string][]string{}
	for _, w := range want {
		l := w[:strings.Index(w, "} ")+1]
		perWant[l] = append(perWant[l], w)
	}
	for s, es := range cs.per {
		l := snap.Labels(s)
		if len(perWant[l]) != len(es) {
			t.Fatalf("catalog: stream %s has %d entries, the store %d", l, len(es), len(perWant[l]))
		}
		for i, e := range es {
			if w := fmt.Sprintf("%s %d %s", l, e.time, e.line); w != perWant[l][i] {
				t.Fatalf("catalog: stream %s entry %d is %q, the store's %q", l, i, w, perWant[l][i])
			}
		}
	}
	return cs
}

// corruptSegmentMarks returns the structure boundaries of a segment file (format
// versions 3 to 7, internal/segment/doc.go): header and footer fields, block
// starts, block CRCs, the block and skip indexes, the skip index's groups
// of postings; and the blocks' extents.
func corruptSegmentMarks(t *testing.T, data []byte) ([][]int, [][2]int) {
	t.Helper()
	size := len(data)
	ft := data[size-72:]
	v := binary.LittleEndian.Uint32(ft[44:])
	if v < 3 || v > 7 { // 7 has 6's layout
		t.Fatalf("segment version %d", v)
	}
	idxOff, idxLen := int(binary.LittleEndian.Uint64(ft[0:])), int(binary.LittleEndian.Uint64(ft[8:]))
	skipOff, skipLen := int(binary.LittleEndian.Uint64(ft[24:])), int(binary.LittleEndian.Uint64(ft[32:]))
	fields := []int{8, 12, 16, size - 72, size - 72 + 16, size - 72 + 40, size - 72 + 44, size - 72 + 48, size - 72 + 60, size - 8}
	var starts, crcs []int
	var blocks [][2]int
	idx := data[idxOff : idxOff+idxLen]
	uv := func(b *[]byte) uint64 {
		v, n := binary.Uvarint(*b)
		if n <= 0 {
			t.Fatal("bad varint in a segment's index")
		}
		*b = (*b)[n:]
		return v
	}
	nb := int(uv(&idx))
	off := 16
	for range nb {
		l := int(uv(&idx))
		uv(&idx) // minTime, zig-zag: read as uvarint, only its length counts
		uv(&idx)
		uv(&idx)
		uv(&idx)
		for range uv(&idx) {
			uv(&idx)
		}
		starts = append(starts, off, off+2)
		crcs = append(crcs, off+l-4)
		blocks = append(blocks, [2]int{off, off + l})
		off += l
	}
	if off != idxOff {
		t.Fatalf("blocks end at %d, the index starts at %d", off, idxOff)
	}
	// One postings index (versions 3 and 4: the whole skip section;
	// version 5: the lines' index, framed by its length, then the
	// metadata values' index; version 6 frames that too and adds value
	// filters): its group table, area and groups.
	var postings []int
	index := func(off, end int) (table, area int) {
		b := data[off:end]
		uv(&b)
		for range uv(&b) {
			uv(&b)
		}
		groups := int(uv(&b)+31) / 32
		table = end - len(b)
		area = table + 12*groups
		for k := range groups {
			postings = append(postings, area+int(binary.LittleEndian.Uint32(data[table+12*k+4:])))
		}
		return table, area
	}
	marks := []int{idxOff, idxOff + idxLen/2, skipOff}
	linesOff, linesEnd := skipOff, skipOff+skipLen
	if v >= 5 {
		l, n := binary.Uvarint(data[skipOff:])
		if n <= 0 {
			t.Fatal("bad varint in a segment's skip index")
		}
		linesOff, linesEnd = skipOff+n, skipOff+n+int(l)
		valsOff, valsEnd := linesEnd, skipOff+skipLen
		if v >= 6 {
			// Version 6 frames the values' index too; the value
			// filters (their count and table in the head) follow.
			vl, vn := binary.Uvarint(data[linesEnd:])
			if vn <= 0 {
				t.Fatal("bad varint in a segment's skip index")
			}
			valsOff, valsEnd = linesEnd+vn, linesEnd+vn+int(vl)
			marks = append(marks, valsEnd)
		}
		table, area := index(valsOff, valsEnd)
		marks = append(marks, linesOff, linesEnd, table, area)
	}
	table, area := index(linesOff, linesEnd)
	marks = append(marks, table, area)
	return [][]int{fields, starts, crcs, marks, postings}, blocks
}

// corruptQueries is the battery, each with its oracle over the undamaged
// store; the needles come from entries in a compacted segment, a segment
// not compacted and the WAL.
func corruptQueries(t *testing.T, cs *corruptStore) []*corruptQuery {
	t.Helper()
	rare := func(pred func(e corruptEntry) bool) string {
		var ids []uint32
		for s := range cs.per {
			ids = append(ids, s)
		}
		slices.Sort(ids)
		re := regexp.MustCompile(`[0-9a-f]{32}`)
		for _, s := range ids {
			es := cs.per[s]
			for i := len(es) / 3; i < len(es); i++ {
				if pred(es[i]) {
					if id := re.Find(es[i].line); id != nil {
						return string(id[:20])
					}
				}
			}
		}
		t.Fatal("no entry with a trace id where wanted")
		return ""
	}
	comp := cs.files[2].rel // the first segment in the manifest is compacted
	inWAL := rare(func(e corruptEntry) bool { return e.walIdx == 0 && e.unit == 2 })
	inComp := rare(func(e corruptEntry) bool { return e.file == comp })
	inPlain := rare(func(e corruptEntry) bool {
		f := cs.byRel[e.file]
		return f.kind == corruptSeg && f.rel != comp && len(f.blocks) == 2 && e.unit == 1
	})
	var qs []*corruptQuery
	for i, args := range [][]string{
		// Every block: count, -v, brute force.
		{"-c", "--", ""},
		{"-c", "-v", "trace_id="},
		{"-v", "GET", "--", "payments"},
		{"--no-index", "-i", "--", "Timeout"},
		// Some blocks: the skip index and --limit choose.
		{"--", "ERROR"},
		{"--", inWAL},
		{"--", inComp},
		{"--", inPlain},
		{"--", "needle-absent-7c3e9a"},
		{"--order", "newest", "--limit", "25", "--", "WARN"},
		{"--limit", "7", "--", "INFO"},
	} {
		var oargs []string
		for _, a := range args {
			if a != "--no-index" {
				oargs = append(oargs, a)
			}
		}
		q := &corruptQuery{args: args, full: i < 4, o: parseOracleArgs(t, oargs)}
		q.out, q.code = cs.oracle(q, "", nil)
		qs = append(qs, q)
	}
	return qs
}

// oracle renders q over every entry for which drop is false (nil: all);
// key names drop, for the cache.
func (cs *corruptStore) oracle(q *corruptQuery, key string, drop func(e *corruptEntry) bool) ([]byte, int) {
	key = fmt.Sprintf("%q %s", q.args, key)
	cs.mu.Lock()
	o, ok := cs.cache[key]
	cs.mu.Unlock()
	if ok {
		return o.out, o.code
	}
	per := map[uint32][]storedEntry{}
	for s, es := range cs.per {
		for i := range es {
			if drop == nil || !drop(&es[i]) {
				per[s] = append(per[s], es[i].storedEntry)
			}
		}
	}
	out := searchOracle(per, cs.labels, q.o)
	code := 0
	if len(out) == 0 || q.o.count && string(out) == "0\n" {
		code = 1
	}
	cs.mu.Lock()
	if cs.cache == nil {
		cs.cache = map[string]corruptOut{}
	}
	cs.cache[key] = corruptOut{out, code}
	cs.mu.Unlock()
	return out, code
}

// corruptHashes fingerprints the base store's files.
func corruptHashes(t *testing.T, dir string, cs *corruptStore) [][32]byte {
	t.Helper()
	var out [][32]byte
	for _, f := range cs.files {
		data, err := os.ReadFile(filepath.Join(dir, f.rel))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sha256.Sum256(data))
	}
	return out
}

// corruptDamage is one damaged copy of the store.
type corruptDamage struct {
	dir  string
	file *corruptFile
	kind string
	desc string
	data []byte // the damaged file's new contents
	rng  *rand.Rand
	keep string // where to copy the damaged store before recovery writes to it, if set
}

// corruptCase makes case i of seed: a copy of the store in dir with one
// file damaged.
func corruptCase(t *testing.T, cs *corruptStore, seed uint64, i int, dir string) *corruptDamage {
	r := rand.New(rand.NewPCG(seed, uint64(i)))
	// Every file has a chance, the small ones more than their size.
	weights := map[int]int{corruptSeg: 3, corruptWAL: 4, corruptManifest: 3, corruptLock: 1}
	total := 0
	for _, f := range cs.files {
		total += weights[f.kind]
	}
	pick := r.IntN(total)
	var f *corruptFile
	for _, g := range cs.files {
		if pick -= weights[g.kind]; pick < 0 {
			f = g
			break
		}
	}
	c := &corruptDamage{dir: dir, file: f, rng: r}
	size := len(f.data)
	// offset picks a place to damage, in [0, size) (0 when the file is
	// empty): 40% near a structure boundary, 15% in the first or last 64
	// bytes, else anywhere.
	offset := func() int {
		if size == 0 {
			return 0
		}
		var o int
		switch k := r.IntN(20); {
		case k < 8:
			g := f.marks[r.IntN(len(f.marks))]
			for len(g) == 0 {
				g = f.marks[r.IntN(len(f.marks))]
			}
			o = g[r.IntN(len(g))] + r.IntN(9) - 4
		case k < 11:
			if r.IntN(2) == 0 {
				o = r.IntN(64)
			} else {
				o = size - 1 - r.IntN(64)
			}
		default:
			o = r.IntN(size)
		}
		return min(max(o, 0), size-1)
	}
	data := bytes.Clone(f.data)
	kind := r.IntN(10)
	if size == 0 {
		kind = 9 // only junk can damage an empty file
	}
	switch {
	case kind < 5:
		n := 1 + r.IntN(8)
		at := offset()
		var where []string
		for k := range n {
			o := at
			if k > 0 {
				if r.IntN(4) > 0 {
					o = min(max(at+r.IntN(33)-16, 0), size-1) // near the first
				} else {
					o = offset()
				}
			}
			x := byte(1 + r.IntN(255))
			switch r.IntN(8) {
			case 0, 1, 2:
				x = 1 << r.IntN(8) // one bit
			case 3:
				x = 0x20 // ASCII case, or space to NUL
			}
			data[o] ^= x
			where = append(where, fmt.Sprintf("%d^%#02x", o, x))
		}
		c.kind, c.desc = "flip", fmt.Sprintf("flip %d byte(s) at %s", n, strings.Join(where, " "))
	case kind < 7:
		at := offset()
		n := 1 + r.IntN(min(size-at, []int{8, 64, 4096}[r.IntN(3)]))
		if r.IntN(5) == 0 {
			n = size - at // to the end, as a crash's unwritten pages
		}
		clear(data[at : at+n])
		c.kind, c.desc = "zero", fmt.Sprintf("zero %d byte(s) at %d", n, at)
	case kind < 9:
		at := offset()
		if r.IntN(6) == 0 {
			at = 0
		}
		data = data[:at]
		c.kind, c.desc = "truncate", fmt.Sprintf("truncate to %d of %d bytes", at, size)
	default:
		n := 1 + r.IntN([]int{8, 64, 300}[r.IntN(3)])
		junk := make([]byte, n)
		if r.IntN(3) > 0 {
			for k := range junk {
				junk[k] = byte(r.Uint32())
			}
		}
		if r.IntN(4) == 0 && size >= n {
			copy(junk, f.data[size-n:]) // a repeat of the file's end
		}
		data = append(data, junk...)
		c.kind, c.desc = "append", fmt.Sprintf("append %d byte(s) of junk", n)
	}
	c.data = data

	for _, sub := range []string{"segments", "wal"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Error(err)
		}
	}
	for _, g := range cs.files {
		to := filepath.Join(dir, g.rel)
		var err error
		switch {
		case g == f:
			err = os.WriteFile(to, data, 0o644)
		case g.kind == corruptSeg:
			// Nothing writes to a segment file once it is committed: a
			// hard link is a copy.
			err = os.Link(filepath.Join(cs.dir, g.rel), to)
		default:
			// Recovery truncates WAL files, and LOCK is flock'ed.
			err = os.WriteFile(to, g.data, 0o644)
		}
		if err != nil {
			t.Error(err)
		}
	}
	return c
}

// corruptResult is one run of hay.
type corruptResult struct {
	out     []byte
	stderr  string
	code    int
	timeout bool
}

// corruptRun runs `hay CMD --data DIR args...` as a child process with a
// time limit.
func corruptRun(t *testing.T, cmdName, dir string, args []string) corruptResult {
	cmd := hayCommand(append([]string{cmdName, "--data", dir}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Error(err)
		return corruptResult{code: -1}
	}
	var timedOut atomic.Bool
	timer := time.AfterFunc(20*time.Second, func() {
		timedOut.Store(true)
		cmd.Process.Kill()
	})
	err := cmd.Wait()
	timer.Stop()
	res := corruptResult{out: stdout.Bytes(), stderr: stderr.String(), timeout: timedOut.Load()}
	if ee, ok := err.(*exec.ExitError); ok {
		res.code = ee.ExitCode()
	} else if err != nil {
		t.Error(err)
		res.code = -1
	}
	return res
}

// corruptCrashed reports what in stderr shows a Go panic or fatal runtime error.
func corruptCrashed(stderr string) string {
	for _, s := range []string{"panic:", "goroutine ", "fatal error:", "SIGSEGV", "unexpected fault address", "runtime error"} {
		if strings.Contains(stderr, s) {
			return s
		}
	}
	return ""
}

var (
	corruptBlockRE    = regexp.MustCompile(`\.seg: block (\d+): corrupt: `)
	corruptSummaryRE  = regexp.MustCompile(`^hay search: \d+ damaged part\(s\) skipped; run hay verify$`)
	corruptVerifyLine = regexp.MustCompile(`^(damaged|note): (\S+?)(?: block (\d+))?: `)
)

// corruptWALCut describes WAL damage: the first record a reader loses (in the
// damaged file) and what the damage looks like.
type corruptWALCut struct {
	record int
	class  int
	lost   bool // some entry is lost from that record on
}

// Classes of WAL damage.
const (
	// corruptWALTail is what a crash leaves at the end of the last WAL file: the
	// file cut short or followed by junk, its last record damaged, or
	// zeros from some point to its end. Readers and recovery take the
	// valid prefix in silence; verify notes it and passes.
	corruptWALTail = iota
	// corruptWALDamage cannot come from a crash: a WAL file that is not the last
	// is damaged, or a whole record follows the damage. Losing entries
	// to it takes exit 2 and the file named; verify fails naming it.
	corruptWALDamage
	// corruptWALEither is the rest (damage in the last file that no whole
	// record follows, not only in the last record, not zeros to the
	// end): whether a crash's unsynced pages could look like it is a
	// matter of policy, so either treatment passes.
	corruptWALEither
)

// cut finds the first record of the damaged WAL file that no longer reads
// as written (the magic counts as the first record's).
func (c *corruptDamage) cut(cs *corruptStore) corruptWALCut {
	f, d := c.file, c.data
	var p int
	truncated, appended := false, false
	switch {
	case len(d) < len(f.data):
		truncated, p = true, len(d)
	case len(d) > len(f.data):
		appended, p = true, len(f.data)
	default:
		for p < len(d) && d[p] == f.data[p] {
			p++
		}
	}
	w := corruptWALCut{}
	if p >= 8 {
		for _, rec := range f.records {
			if rec[1] <= p {
				w.record++
			}
		}
	}
	last := len(f.records) > 0 && p >= f.records[len(f.records)-1][0]
	zeroTail := !truncated && !appended && p < len(d) && len(bytes.Trim(d[p:], "\x00")) == 0
	wholeAfter := false // a record after the first bad one is intact
	for k := w.record + 1; k < len(f.records); k++ {
		rec := f.records[k]
		wholeAfter = wholeAfter || len(d) >= rec[1] && bytes.Equal(d[rec[0]:rec[1]], f.data[rec[0]:rec[1]])
	}
	if p < 8 && len(f.records) > 0 {
		// The magic is damaged: record 0 itself may be whole.
		rec := f.records[0]
		wholeAfter = wholeAfter || len(d) >= rec[1] && bytes.Equal(d[rec[0]:rec[1]], f.data[rec[0]:rec[1]])
	}
	switch {
	case !f.lastWAL || wholeAfter:
		w.class = corruptWALDamage
	case truncated || appended || last || zeroTail:
		w.class = corruptWALTail
	default:
		w.class = corruptWALEither
	}
	for _, es := range cs.per {
		for _, e := range es {
			if e.walIdx > f.walIdx || e.walIdx == f.walIdx && e.unit >= w.record {
				w.lost = true
			}
		}
	}
	return w
}

// check runs the battery and verify on the damaged copy and returns what
// breaks a promise, and a one-word outcome for the summary.
func (c *corruptDamage) check(t *testing.T, cs *corruptStore, qs []*corruptQuery) (probs []string, outcome string) {
	// The queries that read every block, and three of the others.
	var run []*corruptQuery
	var some []*corruptQuery
	for _, q := range qs {
		if q.full {
			run = append(run, q)
		} else {
			some = append(some, q)
		}
	}
	for _, k := range c.rng.Perm(len(some))[:min(3, len(some))] {
		run = append(run, some[k])
	}
	changed := !bytes.Equal(c.data, c.file.data)
	base := filepath.Base(c.file.rel)
	var wc corruptWALCut
	if c.file.kind == corruptWAL && changed {
		wc = c.cut(cs)
	}
	outcome = "exact"
	if !changed {
		outcome = "unchanged"
	}
	// drops: the exact outputs a search may give besides the undamaged
	// store's, for WAL damage.
	dropWAL := func(upto bool) func(e *corruptEntry) bool {
		return func(e *corruptEntry) bool {
			if e.walIdx == c.file.walIdx {
				return e.unit >= wc.record
			}
			return upto && e.walIdx > c.file.walIdx
		}
	}
	for _, q := range run {
		r := corruptRun(t, "search", c.dir, q.args)
		what := fmt.Sprintf("search %q", q.args)
		if s := corruptCrashed(r.stderr); s != "" || r.timeout || r.code < 0 || r.code > 2 {
			probs = append(probs, fmt.Sprintf("%s: exit %d, timeout %v, %q in stderr:\n%s", what, r.code, r.timeout, s, r.stderr))
			continue
		}
		// Every line on stderr names the damaged file, but the summary.
		skipped := map[int]bool{} // blocks of the damaged segment skipped; -1: all of it
		named := false
		for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
			if l == "" || corruptSummaryRE.MatchString(l) {
				continue
			}
			if !strings.Contains(l, base) {
				probs = append(probs, fmt.Sprintf("%s: stderr line does not name %s: %q", what, base, l))
				continue
			}
			named = true
			if strings.Contains(l, "skip index damaged") && outcome == "exact" {
				outcome = "index-warning"
			}
			if strings.HasSuffix(l, "(skipped)") {
				if c.file.kind == corruptWAL {
					// Its entries are checked against the WAL's cuts below.
				} else if c.file.kind != corruptSeg {
					probs = append(probs, fmt.Sprintf("%s: skipped a part of a file that is no segment: %q", what, l))
				} else if m := corruptBlockRE.FindStringSubmatch(l); m != nil {
					b, _ := strconv.Atoi(m[1])
					skipped[b] = true
					if !c.damagedBlock(b) {
						probs = append(probs, fmt.Sprintf("%s: skipped block %d, which holds no damaged byte: %q", what, b, l))
					}
				} else {
					skipped[-1] = true
				}
			}
		}
		if r.code == 2 && !named {
			probs = append(probs, fmt.Sprintf("%s: exit 2 without naming %s: stderr %q", what, base, r.stderr))
		}
		exact := bytes.Equal(r.out, q.out) && r.code == q.code
		switch {
		case len(skipped) > 0:
			want, _ := cs.oracle(q, fmt.Sprintf("%s %v", c.file.rel, corruptKeys(skipped)), func(e *corruptEntry) bool {
				return e.file == c.file.rel && (skipped[-1] || skipped[e.unit])
			})
			if r.code != 2 || !bytes.Equal(r.out, want) {
				probs = append(probs, fmt.Sprintf("%s: skipped %v but exit %d (want 2) and %s",
					what, corruptKeys(skipped), r.code, corruptDiff(r.out, want)))
			}
			outcome = "skipped-" + map[bool]string{true: "segment", false: "blocks"}[skipped[-1]]
		case exact:
		case r.code == 2 && len(r.out) == 0 && c.file.kind == corruptManifest:
			// The store cannot be read at all: named above.
			outcome = "refused"
		case c.file.kind == corruptWAL && changed && wc.lost:
			cut, cutCode := cs.oracle(q, fmt.Sprintf("%s %d+", c.file.rel, wc.record), dropWAL(true))
			alt := [][]byte{cut}
			if wc.class != corruptWALTail {
				// A fixed reader might skip less: the damaged file's
				// rest, not the later files.
				rest, _ := cs.oracle(q, fmt.Sprintf("%s %d", c.file.rel, wc.record), dropWAL(false))
				alt = append(alt, rest)
			}
			ok := false
			for _, a := range alt {
				ok = ok || bytes.Equal(r.out, a)
			}
			switch {
			case !ok:
				probs = append(probs, fmt.Sprintf("%s: WAL damage from record %d: exit %d, %s",
					what, wc.record, r.code, corruptDiff(r.out, cut)))
			case wc.class == corruptWALTail && r.code != cutCode:
				probs = append(probs, fmt.Sprintf("%s: a crash's torn WAL tail: exit %d, want %d as for the valid prefix", what, r.code, cutCode))
			case wc.class == corruptWALDamage && r.code != 2:
				probs = append(probs, fmt.Sprintf("%s: WAL damage from record %d (not a crash's tail) lost entries silently: exit %d, %s, stderr %q",
					what, wc.record, r.code, corruptDiff(r.out, q.out), r.stderr))
			case wc.class == corruptWALEither && r.code != 2 && (r.code != cutCode || !bytes.Equal(r.out, cut)):
				probs = append(probs, fmt.Sprintf("%s: WAL damage from record %d: exit %d and %s: neither the valid prefix nor exit 2",
					what, wc.record, r.code, corruptDiff(r.out, cut)))
			}
			if outcome == "exact" {
				outcome = []string{"wal-tail", "wal-damage", "wal-either"}[wc.class]
			}
		default:
			probs = append(probs, fmt.Sprintf("%s: exit %d (oracle %d), %s, stderr %q",
				what, r.code, q.code, corruptDiff(r.out, q.out), r.stderr))
		}
	}

	// verify
	r := corruptRun(t, "verify", c.dir, nil)
	if s := corruptCrashed(r.stderr); s != "" || r.timeout || r.code < 0 || r.code > 1 {
		probs = append(probs, fmt.Sprintf("verify: exit %d, timeout %v, %q in stderr:\n%s", r.code, r.timeout, s, r.stderr))
	}
	named, notes := false, false
	for _, l := range strings.Split(r.stderr, "\n") {
		m := corruptVerifyLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if m[2] != c.file.rel {
			probs = append(probs, fmt.Sprintf("verify: reports an undamaged file: %q", l))
			continue
		}
		if m[1] == "damaged" {
			named = true
			if b, err := strconv.Atoi(m[3]); err == nil && !c.damagedBlock(b) {
				probs = append(probs, fmt.Sprintf("verify: reports block %d, which holds no damaged byte: %q", b, l))
			}
		} else {
			notes = true
		}
	}
	mustFail := changed
	switch {
	case c.file.kind == corruptLock:
		mustFail = false
	case c.file.kind == corruptWAL && changed && wc.class == corruptWALEither:
		// Damage or a crash's tail: a failure naming the file, or a note.
		mustFail = false
		if r.code != 0 && !named || r.code == 0 && !notes && wc.lost {
			probs = append(probs, fmt.Sprintf("verify: WAL damage neither reported nor noted (exit %d):\n%s", r.code, r.stderr))
		}
	case c.file.kind == corruptWAL && changed && wc.class == corruptWALTail:
		// A crash's tail: a note, and verify passes.
		mustFail = false
		if r.code != 0 {
			probs = append(probs, fmt.Sprintf("verify: a crash's torn WAL tail fails verify (exit %d), docs/STORE.md: a note:\n%s", r.code, r.stderr))
		}
		if !notes && (wc.lost || len(c.data) > len(c.file.data)) && !c.cleanCut() {
			probs = append(probs, fmt.Sprintf("verify: a torn WAL tail without a note naming %s:\n%s", c.file.rel, r.stderr))
		}
	case c.file.rel == "STREAMS" && len(c.data) > len(c.file.data) && bytes.Equal(c.data[:len(c.file.data)], c.file.data):
		// Bytes past the stream table the manifest covers: what a flush
		// that died before its manifest leaves. A note, and verify passes.
		mustFail = false
		outcome = "streams-tail"
		if r.code != 0 || !notes {
			probs = append(probs, fmt.Sprintf("verify: bytes past the stream table not noted, or failing (exit %d):\n%s", r.code, r.stderr))
		}
	case c.file.kind == corruptManifest && changed && r.code == 0:
		// Only the header line is outside the checksum; a change there
		// that reads the same is harmless, and counted apart.
		if nl := bytes.IndexByte(c.file.data, '\n'); nl >= 0 && len(c.data) > nl && bytes.Equal(c.data[nl:], c.file.data[nl:]) {
			mustFail = false
			outcome = "manifest-header-unchecked"
		}
	}
	if mustFail && (r.code != 1 || !named) {
		probs = append(probs, fmt.Sprintf("verify: damage not reported: exit %d, stderr:\n%s", r.code, r.stderr))
	}
	if !changed && r.code != 0 {
		probs = append(probs, fmt.Sprintf("verify: fails an unchanged store: exit %d\n%s", r.code, r.stderr))
	}
	if r.code == 0 && !bytes.HasPrefix(r.out, []byte("ok: ")) {
		probs = append(probs, fmt.Sprintf("verify: exit 0 without its summary: %q", r.out))
	}

	if c.keep != "" {
		if err := os.CopyFS(c.keep, os.DirFS(c.dir)); err != nil {
			t.Errorf("HAY_CORRUPT_KEEP: %v", err)
		}
	}
	// Last, as it writes: recovery.
	if changed && (c.file.kind == corruptWAL || c.file.kind == corruptManifest) {
		probs = append(probs, c.checkRecovery(t, cs, wc)...)
	}
	return probs, outcome
}

// checkRecovery runs what a user runs next, hay ingest (of an empty
// file), which recovers the store, and checks what it kept. After damage
// a crash can leave, the exact prefix before the first bad record
// (docs/STORE.md); after other damage, an error naming the file, or the
// entries but the damaged part and a message naming the file: never
// acknowledged entries deleted in silence. A damaged MANIFEST must stop
// it, and stay as it was.
func (c *corruptDamage) checkRecovery(t *testing.T, cs *corruptStore, wc corruptWALCut) (probs []string) {
	base := filepath.Base(c.file.rel)
	empty := filepath.Join(filepath.Dir(c.dir), "empty.log")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Error(err)
		return nil
	}
	r := corruptRun(t, "ingest", c.dir, []string{empty})
	if s := corruptCrashed(r.stderr); s != "" || r.timeout {
		return []string{fmt.Sprintf("recovery: ingest exit %d, timeout %v, %q in stderr:\n%s", r.code, r.timeout, s, r.stderr)}
	}
	if r.code != 0 && c.file.kind == corruptWAL && wc.class == corruptWALTail {
		return []string{fmt.Sprintf("recovery: ingest fails (exit %d) on a crash's torn WAL tail, which Open repairs (docs/STORE.md): %q", r.code, r.stderr)}
	}
	if r.code != 0 {
		if !strings.Contains(r.stderr, base) {
			probs = append(probs, fmt.Sprintf("recovery: ingest fails (exit %d) without naming %s: %q", r.code, base, r.stderr))
		}
		if c.file.kind == corruptManifest {
			if now, err := os.ReadFile(filepath.Join(c.dir, c.file.rel)); err != nil || !bytes.Equal(now, c.data) {
				probs = append(probs, "recovery: a failed ingest changed the damaged MANIFEST")
			}
			return probs
		}
		// What the error tells the user to run: hay verify --repair,
		// after which verify is clean, ingest runs, and the WAL's
		// entries are those before the damage, with or without the
		// later WAL files (kept when the streams they use survive).
		if rr := corruptRun(t, "verify", c.dir, []string{"--repair"}); rr.code != 0 || corruptCrashed(rr.stderr) != "" || !strings.Contains(rr.stderr, "repaired: ") {
			return append(probs, fmt.Sprintf("repair: hay verify --repair exit %d:\n%s", rr.code, rr.stderr))
		}
		if r = corruptRun(t, "ingest", c.dir, []string{empty}); r.code != 0 {
			return append(probs, fmt.Sprintf("repair: ingest after hay verify --repair: exit %d %q", r.code, r.stderr))
		}
		r.stderr = base // the repair named the file
	}
	if c.file.kind == corruptManifest {
		if r := corruptRun(t, "verify", c.dir, nil); r.code != 0 {
			// Damage verify sees must stop the writer: a manifest
			// rewritten from a misread one loses the store.
			probs = append(probs, fmt.Sprintf("recovery: ingest runs on a damaged MANIFEST (exit 0) and leaves:\n%s", r.stderr))
		}
		return probs
	}
	live := &corruptQuery{args: []string{"--query", `{source=~"live.*"}`}}
	live.o = parseOracleArgs(t, live.args)
	all, _ := cs.oracle(live, "", nil)
	want := [][]byte{all}
	if wc.lost {
		cut, _ := cs.oracle(live, fmt.Sprintf("%s %d+", c.file.rel, wc.record), func(e *corruptEntry) bool {
			return e.walIdx == c.file.walIdx && e.unit >= wc.record || e.walIdx > c.file.walIdx
		})
		want = [][]byte{cut}
		if wc.class != corruptWALTail {
			rest, _ := cs.oracle(live, fmt.Sprintf("%s %d", c.file.rel, wc.record), func(e *corruptEntry) bool {
				return e.walIdx == c.file.walIdx && e.unit >= wc.record
			})
			want = append(want, rest)
		}
	}
	got := corruptRun(t, "search", c.dir, live.args)
	ok := false
	for _, w := range want {
		ok = ok || bytes.Equal(got.out, w)
	}
	switch {
	case !ok || got.code > 1:
		probs = append(probs, fmt.Sprintf("recovery: after ingest the WAL's entries are %s, exit %d, stderr %q",
			corruptDiff(got.out, want[0]), got.code, got.stderr))
	case wc.lost && wc.class == corruptWALEither && !strings.Contains(r.stderr, base) && !bytes.Equal(got.out, want[0]):
		probs = append(probs, fmt.Sprintf("recovery: ingest deleted entries of %s in silence, and not the exact prefix (%s)", c.file.rel, corruptDiff(got.out, want[0])))
	case wc.lost && wc.class == corruptWALDamage && !strings.Contains(r.stderr, base):
		probs = append(probs, fmt.Sprintf("recovery: ingest lost entries in silence, from record %d of %s on (the WAL's entries are %s)",
			wc.record, c.file.rel, corruptDiff(got.out, all)))
	}
	return probs
}

// damagedBlock reports whether block b of the damaged segment holds a
// changed byte, or lost some to a truncation.
func (c *corruptDamage) damagedBlock(b int) bool {
	if c.file.kind != corruptSeg || b < 0 || b >= len(c.file.blocks) {
		return false
	}
	from, to := c.file.blocks[b][0], c.file.blocks[b][1]
	if len(c.data) < to {
		return true
	}
	return !bytes.Equal(c.data[from:to], c.file.data[from:to])
}

// cleanCut reports a WAL file cut exactly at a record boundary: a whole
// prefix of records, which verify has no reason to remark on.
func (c *corruptDamage) cleanCut() bool {
	if len(c.data) >= len(c.file.data) {
		return false
	}
	if len(c.data) <= 8 {
		return string(c.data) == "HAYWAL1\n"[:len(c.data)]
	}
	for _, rec := range c.file.records {
		// A record's start is a boundary too: the first one's is the
		// end of the header, which is all a crash leaves of a file
		// whose records were never synced.
		if rec[0] == len(c.data) || rec[1] == len(c.data) {
			return true
		}
	}
	return false
}

func corruptKeys(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

var (
	corruptClassArgs   = regexp.MustCompile(`search \[[^\]]*\]`)
	corruptClassNumber = regexp.MustCompile(`[0-9]+`)
)

// corruptFailureClass names the kind of a problem for the summary: its message
// without the query, numbers and details.
func corruptFailureClass(p string) string {
	p = corruptClassArgs.ReplaceAllString(p, "search")
	p = corruptClassNumber.ReplaceAllString(p, "N")
	if i := strings.IndexAny(p, ",\n"); i >= 0 {
		p = p[:i]
	}
	return p
}

// corruptDiff describes how got differs from want.
func corruptDiff(got, want []byte) string {
	if bytes.Equal(got, want) {
		return "the expected output"
	}
	gl, wl := bytes.Count(got, []byte("\n")), bytes.Count(want, []byte("\n"))
	return fmt.Sprintf("%d lines, want %d (first difference at line %d)", gl, wl, firstDiffLine(got, want))
}
