package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"haystack/internal/attrs"
	"haystack/internal/segment"
)

// allEntries reads every entry of a snapshot in order.
func allEntries(t *testing.T, dir string) []Entry {
	t.Helper()
	s, err := OpenSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.Damaged) > 0 {
		t.Fatalf("damaged: %v", s.Damaged)
	}
	var out []Entry
	b := new(segment.Block)
	for _, p := range s.Parts {
		for i := range p.NumBlocks() {
			if err := p.ReadBlock(i, b); err != nil {
				t.Fatal(err)
			}
			for k := range b.Times {
				out = append(out, Entry{Time: b.Times[k], Stream: b.Streams[k],
					Line: bytes.Clone(b.Data[b.Offsets[k]:b.Offsets[k+1]])})
			}
		}
	}
	return out
}

func genEntries(r *rand.Rand, n int, stream uint32) []Entry {
	es := make([]Entry, n)
	for i := range es {
		line := make([]byte, r.IntN(200))
		for j := range line {
			line[j] = byte(r.IntN(256))
		}
		es[i] = Entry{Time: int64(i) * 1e9, Stream: stream, Line: line}
	}
	return es
}

func equalEntries(a, b []Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Time != b[i].Time || a[i].Stream != b[i].Stream || !bytes.Equal(a[i].Line, b[i].Line) || !bytes.Equal(a[i].Attrs, b[i].Attrs) {
			return false
		}
	}
	return true
}

func TestAppendFlushReopen(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(1, 2))
	// A small head forces several flushes.
	st, err := Open(dir, Options{HeadBytes: 20 << 10})
	if err != nil {
		t.Fatal(err)
	}
	a := st.Stream(`{source="a"}`)
	b := st.Stream(`{source="b"}`)
	if a != 0 || b != 1 || st.Stream(`{source="a"}`) != 0 {
		t.Fatalf("stream ids %d %d", a, b)
	}
	var want []Entry
	for i := range 30 {
		es := genEntries(r, 20, uint32(i%2))
		want = append(want, es...)
		if err := st.Append(&Batch{Entries: es, Sources: []Source{{Key: "/x", Offset: int64(i)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if got := allEntries(t, dir); !equalEntries(got, want) {
		t.Fatalf("got %d entries, want %d (or content differs)", len(got), len(want))
	}
	snap, _ := OpenSnapshot(dir)
	if snap.Labels(1) != `{source="b"}` || len(snap.Manifest.Segments) < 2 {
		t.Fatalf("labels %q, %d segments", snap.Labels(1), len(snap.Manifest.Segments))
	}
	snap.Close()
	seqs, _ := walSeqs(dir)
	if len(seqs) != 0 {
		t.Fatalf("wal files after close: %v", seqs)
	}

	st, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if src, ok := st.Source("/x"); !ok || src.Offset != 29 {
		t.Fatalf("source = %+v %v", src, ok)
	}
	if st.Stream(`{source="b"}`) != 1 || st.Stream(`{source="c"}`) != 2 {
		t.Fatal("stream table not restored")
	}
	st.Close()
	ps, err := Verify(dir)
	if err != nil || len(ps) != 0 {
		t.Fatalf("verify: %v %v", ps, err)
	}
}

func TestLock(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); err == nil {
		t.Fatal("second writer opened a locked directory")
	}
	st.Close()
	st, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
}

// TestRecoverWALCut cuts the WAL after every byte position of an
// unflushed store and checks that recovery gives exactly the batches that
// were whole, and that the store stays writable.
func TestRecoverWALCut(t *testing.T) {
	src := t.TempDir()
	r := rand.New(rand.NewPCG(3, 4))
	st, err := Open(src, Options{FsyncInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	st.Stream(`{s="1"}`)
	var batches [][]Entry
	var ends []int64 // WAL size after each batch
	for range 4 {
		es := genEntries(r, 3, 0)
		batches = append(batches, es)
		if err := st.Append(&Batch{Entries: es}); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, st.wal.size)
	}
	// Simulate kill -9: copy the WAL without closing the store.
	wal, err := os.ReadFile(walPath(src, st.wal.seq))
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(walPath(src, st.wal.seq))
	for cut := 0; cut <= len(wal); cut += 1 + cut/50 {
		dir := t.TempDir()
		os.MkdirAll(filepath.Join(dir, walDir), 0o755)
		os.WriteFile(filepath.Join(dir, walDir, name), wal[:cut], 0o644)
		var want []Entry
		for i, e := range ends {
			if int64(cut) >= e {
				want = append(want, batches[i]...)
			}
		}
		if got := allEntries(t, dir); !equalEntries(got, want) {
			t.Fatalf("cut %d: snapshot has %d entries, want %d", cut, len(got), len(want))
		}
		st2, err := Open(dir, Options{})
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		extra := genEntries(r, 2, st2.Stream(`{s="1"}`))
		if err := st2.Append(&Batch{Entries: extra}); err != nil {
			t.Fatal(err)
		}
		if err := st2.Close(); err != nil {
			t.Fatal(err)
		}
		want = append(want, extra...)
		if got := allEntries(t, dir); !equalEntries(got, want) {
			t.Fatalf("cut %d: after recovery %d entries, want %d", cut, len(got), len(want))
		}
	}
	st.Close()
}

// TestCrashBetweenFlushSteps replays the states a crash inside Flush can
// leave: an orphan segment and a WAL already covered by the manifest.
func TestCrashBetweenFlushSteps(t *testing.T) {
	dir := t.TempDir()
	st, _ := Open(dir, Options{})
	id := st.Stream(`{a="b"}`)
	es := genEntries(rand.New(rand.NewPCG(5, 6)), 50, id)
	st.Append(&Batch{Entries: es})
	walFile := walPath(dir, st.wal.seq)
	walCopy, _ := os.ReadFile(walFile)
	st.Close()
	// Crash after the manifest swap, before the WAL deletion: the old WAL
	// file is back; it must not be replayed twice.
	os.WriteFile(walFile, walCopy, 0o644)
	if got := allEntries(t, dir); !equalEntries(got, es) {
		t.Fatalf("covered wal replayed: %d entries", len(got))
	}
	// Crash after the segment commit, before the manifest swap: an orphan
	// segment is ignored by readers and deleted by the next writer.
	orphan := filepath.Join(dir, segDir, "00000000000000ff.seg")
	seg, _ := os.ReadFile(filepath.Join(dir, segDir, "0000000000000001.seg"))
	os.WriteFile(orphan, seg, 0o644)
	if got := allEntries(t, dir); !equalEntries(got, es) {
		t.Fatalf("orphan segment read: %d entries", len(got))
	}
	ps, _ := Verify(dir)
	if len(ps) != 1 || ps[0].Damage {
		t.Fatalf("verify with orphan: %v", ps)
	}
	st, _ = Open(dir, Options{})
	st.Close()
	if _, err := os.Stat(orphan); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("orphan segment not removed")
	}
	if _, err := os.Stat(walFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("covered wal not removed")
	}
}

func TestVerifyDamage(t *testing.T) {
	dir := t.TempDir()
	st, _ := Open(dir, Options{HeadBytes: 1})
	id := st.Stream(`{a="b"}`)
	r := rand.New(rand.NewPCG(7, 8))
	st.Append(&Batch{Entries: genEntries(r, 100, id)})
	st.Append(&Batch{Entries: genEntries(r, 100, id)})
	st.Close()
	seg := filepath.Join(dir, segDir, "0000000000000001.seg")
	data, _ := os.ReadFile(seg)
	data[40] ^= 1 // inside block 0
	os.WriteFile(seg, data, 0o644)
	ps, err := Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || !ps[0].Damage || ps[0].Block != 0 || ps[0].File != filepath.Join(segDir, "0000000000000001.seg") {
		t.Fatalf("verify: %v", ps)
	}
	// The manifest is checksummed too.
	m, _ := os.ReadFile(filepath.Join(dir, manifestName))
	m[len(m)-5] ^= 0x20
	os.WriteFile(filepath.Join(dir, manifestName), m, 0o644)
	ps, _ = Verify(dir)
	if len(ps) != 1 || ps[0].File != manifestName {
		t.Fatalf("verify manifest: %v", ps)
	}
}

func TestBatchRoundTrip(t *testing.T) {
	for _, withAttrs := range []bool{false, true} {
		b := &Batch{
			Streams: []StreamDef{{ID: 3, Labels: `{a="x"}`}},
			Sources: []Source{{Key: "/var/log/x", Offset: 1 << 40, Check: 0xdeadbeef}},
			Entries: []Entry{{Time: -5, Stream: 3, Line: []byte("a\nb")}, {Time: 1 << 62, Stream: 0, Line: []byte{}}},
		}
		if withAttrs {
			b.Entries[0].Attrs = mustAttrs(t, "trace_id", "abc", "z", "\xff")
		}
		rec := appendRecord(walHeaderFor(0), appendBatch(nil, b))
		if kind := rec[walHeader+recHeader]; withAttrs != (kind == kindBatchAttrs) {
			t.Fatalf("metadata %v: record kind %d", withAttrs, kind)
		}
		r := NewWALReader(rec)
		got, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("second Next: %v", err)
		}
		if fmt.Sprint(got.Streams, got.Sources) != fmt.Sprint(b.Streams, b.Sources) || !equalEntries(got.Entries, b.Entries) {
			t.Fatalf("round trip: %+v", got)
		}
		// Every single bit flip is caught.
		for i := len(walMagic); i < len(rec); i++ {
			for bit := range 8 {
				bad := bytes.Clone(rec)
				bad[i] ^= 1 << bit
				if b2, err := NewWALReader(bad).Next(); err == nil {
					t.Fatalf("flip byte %d bit %d accepted: %+v", i, bit, b2)
				}
			}
		}
	}
}

// FuzzWALReader feeds arbitrary files to the WAL reader: it must never
// panic, and every record it accepts must re-encode to the same bytes.
func FuzzWALReader(f *testing.F) {
	b := &Batch{
		Streams: []StreamDef{{ID: 0, Labels: `{source="x"}`}},
		Sources: []Source{{Key: "/a", Offset: 10, Check: 7}},
		Entries: []Entry{{Time: 1, Stream: 0, Line: []byte("hello")}, {Time: 0, Stream: 0, Line: nil}},
	}
	good := appendRecord(walHeaderFor(77), appendBatch(nil, b))
	ba := &Batch{Entries: []Entry{
		{Time: 5, Stream: 0, Line: []byte("x"), Attrs: mustAttrs(f, "span_id", "b7ad6b7169203331", "trace_id", "0af7651916cd43dd8448eb211c80319c")},
		{Time: 6, Stream: 0, Line: []byte("y")},
	}}
	f.Add(appendRecord(good, appendBatch(nil, ba)))
	f.Add(appendRecord(walHeaderV(walMagicV2, 0), appendBatch(nil, ba))) // refused: kind 2 in version 2
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add(walHeaderFor(0))
	f.Add(appendRecord([]byte(walMagicV1), appendBatch(nil, b)))
	f.Add([]byte(walMagicV1))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewWALReader(data)
		valid := r.Valid
		// A version 2 header is whole and checked, or the file reads as
		// nothing.
		for _, m := range []string{walMagic, walMagicV2} {
			if bytes.HasPrefix(data, []byte(m)) && r.Prev >= 0 && !bytes.Equal(data[:walHeader], walHeaderV(m, r.Prev)) {
				t.Fatalf("header %q accepted with predecessor %d", data[:walHeader], r.Prev)
			}
		}
		for {
			b, err := r.Next()
			if err != nil {
				break
			}
			for _, e := range b.Entries {
				if len(e.Attrs) > 0 && r.Version < 3 {
					t.Fatalf("metadata accepted in a version %d file", r.Version)
				}
				if err := attrs.Validate(e.Attrs); err != nil {
					t.Fatalf("metadata accepted: %v", err)
				}
			}
			// What was accepted survives a round trip through the encoder.
			b2, err := decodeBatch(appendBatch(nil, b))
			if err != nil {
				t.Fatalf("re-encoded record does not decode: %v", err)
			}
			if fmt.Sprint(b.Streams, b.Sources) != fmt.Sprint(b2.Streams, b2.Sources) || !equalEntries(b.Entries, b2.Entries) {
				t.Fatalf("round trip changed the batch")
			}
			if r.Valid <= valid {
				t.Fatalf("Valid %d did not advance past %d", r.Valid, valid)
			}
			valid = r.Valid
		}
		if r.Valid > int64(len(data)) {
			t.Fatalf("Valid %d past end %d", r.Valid, len(data))
		}
	})
}

// FuzzDecodeBatch fuzzes the record payload decoder directly (the WAL
// reader's checksum keeps random bytes from reaching it): no panic, no
// allocation beyond the input's size, and what decodes re-encodes to the
// same batch.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(appendBatch(nil, &Batch{
		Streams: []StreamDef{{ID: 0, Labels: `{a="b"}`}},
		Sources: []Source{{Key: "/k", Offset: 3, Check: 9}},
		Entries: []Entry{{Time: 10, Stream: 0, Line: []byte("xy")}, {Time: 9, Stream: 0}},
	}))
	f.Add(appendBatch(nil, &Batch{Entries: []Entry{
		{Time: 10, Stream: 0, Line: []byte("xy"), Attrs: mustAttrs(f, "a", "", "b", "\x00\xff")},
		{Time: 9, Stream: 0},
	}}))
	f.Add([]byte{kindBatchAttrs, 0, 0, 1, 2, 0, 1, 'x', 4, 1, 1, 'a', 0}) // one entry, metadata a=""
	f.Add([]byte{kindBatchAttrs, 0, 0, 1, 2, 0, 1, 'x', 4, 1, 1, '1', 0}) // a bad name
	f.Add([]byte{kindBatch, 0, 0, 0})
	f.Add([]byte{kindBatch, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, p []byte) {
		b, err := decodeBatch(p)
		if err != nil {
			return
		}
		for _, e := range b.Entries {
			if err := attrs.Validate(e.Attrs); err != nil {
				t.Fatalf("metadata accepted: %v", err)
			}
		}
		b2, err := decodeBatch(appendBatch(nil, b))
		if err != nil || fmt.Sprint(b.Streams, b.Sources) != fmt.Sprint(b2.Streams, b2.Sources) || !equalEntries(b.Entries, b2.Entries) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// FuzzManifest: the manifest decoder never panics, and accepts only what
// its own encoder could have written (a decoded manifest re-encodes and
// decodes to the same value).
func FuzzManifest(f *testing.F) {
	good, _ := encodeManifest(&Manifest{NextSeq: 2, WALStart: 3,
		Segments: []SegmentMeta{{Name: "0000000000000001.seg", Entries: 5, RawBytes: 100, Size: 60, MinTime: 1, MaxTime: 2}},
		Streams:  []StreamDef{{ID: 0, Labels: `{source="a"}`}},
		Sources:  []Source{{Key: "/a", Offset: 100, Check: 1}}})
	f.Add(good)
	f.Add(good[:len(good)-2])
	f.Add([]byte("HAYSTACK-MANIFEST 1 00000000 0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeManifest(data)
		if err != nil {
			return
		}
		enc, err := encodeManifest(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := decodeManifest(enc)
		if err != nil || fmt.Sprint(m) != fmt.Sprint(m2) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// TestFlushFailureIsSticky: when a background flush fails, nothing more is
// accepted (a later flush would cover WAL files whose entries are in no
// segment), and the next Open recovers every appended entry from the WAL.
func TestFlushFailureIsSticky(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir, Options{HeadBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	id := st.Stream(`{a="b"}`)
	r := rand.New(rand.NewPCG(11, 11))
	var want []Entry
	// Make segment creation fail: segments/ is a file now.
	os.RemoveAll(filepath.Join(dir, segDir))
	os.WriteFile(filepath.Join(dir, segDir), nil, 0o644)
	var failed error
	var maybe []Entry // the batch whose Append failed: it may be in the WAL
	for range 20 {
		es := genEntries(r, 20, id)
		if err := st.Append(&Batch{Entries: es}); err != nil {
			failed, maybe = err, es
			break
		}
		want = append(want, es...)
	}
	if failed == nil {
		t.Fatal("no error from a failing flush")
	}
	if err := st.Append(&Batch{Entries: genEntries(r, 1, id)}); err == nil {
		t.Fatal("append accepted after a failed flush")
	}
	if err := st.Close(); err == nil {
		t.Fatal("close succeeded after a failed flush")
	}
	os.Remove(filepath.Join(dir, segDir))
	st, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	got := allEntries(t, dir)
	if !equalEntries(got, want) && !equalEntries(got, append(want, maybe...)) {
		t.Fatalf("after recovery %d entries, want %d (or %d)", len(got), len(want), len(want)+len(maybe))
	}
}

// TestSnapshotDamagedOrder: segments are opened in parallel, yet Parts
// keep the manifest's order and a damaged segment in the middle is listed
// in Damaged (by name) while the others stay searchable.
func TestSnapshotDamagedOrder(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir, Options{HeadBytes: 1}) // a segment per append
	if err != nil {
		t.Fatal(err)
	}
	id := st.Stream(`{a="b"}`)
	r := rand.New(rand.NewPCG(9, 10))
	var batches [][]Entry
	for range 7 {
		es := genEntries(r, 30, id)
		batches = append(batches, es)
		if err := st.Append(&Batch{Entries: es}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := OpenSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	segs := s.Manifest.Segments
	s.Close()
	if len(segs) != len(batches) {
		t.Fatalf("%d segments for %d appends", len(segs), len(batches))
	}
	bad := filepath.Join(segDir, segs[3].Name)
	path := filepath.Join(dir, bad)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 1 // the footer's magic
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}

	s, err = OpenSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.Damaged) != 1 || !strings.HasPrefix(s.Damaged[0].Error(), bad+": ") {
		t.Fatalf("damaged = %v, want %s only", s.Damaged, bad)
	}
	if len(s.Parts) != len(segs)-1 {
		t.Fatalf("%d parts, want %d", len(s.Parts), len(segs)-1)
	}
	var want []Entry
	j := 0
	for i, sm := range segs {
		if i == 3 {
			continue
		}
		if name := s.Parts[j].Name(); name != filepath.Join(segDir, sm.Name) {
			t.Fatalf("part %d is %s, want %s", j, name, sm.Name)
		}
		want = append(want, batches[i]...)
		j++
	}
	var got []Entry
	b := new(segment.Block)
	for _, p := range s.Parts {
		for i := range p.NumBlocks() {
			if err := p.ReadBlock(i, b); err != nil {
				t.Fatal(err)
			}
			for k := range b.Times {
				got = append(got, Entry{Time: b.Times[k], Stream: b.Streams[k],
					Line: bytes.Clone(b.Data[b.Offsets[k]:b.Offsets[k+1]])})
			}
		}
	}
	if !equalEntries(got, want) {
		t.Fatalf("got %d entries, want %d (or content differs)", len(got), len(want))
	}
}

// TestOpenSnapshotRange: exactly the segments whose time range meets
// [lo, hi] (bounds inclusive) are opened, in order; the others are
// counted in Skipped; the WAL's entries are always there.
func TestOpenSnapshotRange(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir, Options{HeadBytes: 1}) // a segment per append
	if err != nil {
		t.Fatal(err)
	}
	id := st.Stream(`{a="b"}`)
	// Segment i holds times 100i .. 100i+50.
	for i := range 5 {
		es := []Entry{{Time: int64(100*i + 50), Stream: id, Line: []byte("y")}, {Time: int64(100 * i), Stream: id, Line: []byte("x")}}
		if err := st.Append(&Batch{Entries: es}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// An unflushed entry, older than every segment: in the head.
	st, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Append(&Batch{Entries: []Entry{{Time: -5, Stream: id, Line: []byte("w")}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })

	for _, c := range []struct {
		lo, hi int64
		want   []int // segment indexes opened
	}{
		{math.MinInt64, math.MaxInt64, []int{0, 1, 2, 3, 4}},
		{0, 0, []int{0}},
		{50, 50, []int{0}},
		{51, 99, nil},
		{51, 100, []int{1}},
		{150, 250, []int{1, 2}},
		{-10, -1, nil},
		{450, math.MaxInt64, []int{4}},
		{451, math.MaxInt64, nil},
		{math.MinInt64, 199, []int{0, 1}},
	} {
		s, err := OpenSnapshotRange(dir, c.lo, c.hi)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, i := range c.want {
			names = append(names, filepath.Join(segDir, s.Manifest.Segments[i].Name))
		}
		names = append(names, "head")
		var got []string
		for _, p := range s.Parts {
			if _, ok := p.(*HeadPart); ok {
				got = append(got, "head")
				if p.NumBlocks() != 1 || p.BlockMeta(0).MinTime != -5 {
					t.Errorf("head part: %d blocks", p.NumBlocks())
				}
				continue
			}
			got = append(got, p.Name())
		}
		if fmt.Sprint(got) != fmt.Sprint(names) || s.Skipped != 5-len(c.want) || len(s.Damaged) != 0 {
			t.Errorf("[%d, %d]: parts %v skipped %d, want %v skipped %d", c.lo, c.hi, got, s.Skipped, names, 5-len(c.want))
		}
		s.Close()
	}
}

// copyStoreFiles copies the files of a store directory (the state a crash
// would leave on disk), without the lock file.
func copyStoreFiles(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		if d.Name() == lockName {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRecoverDropsEmptyWAL: a process that dies after restarting but
// before appending anything leaves a WAL file with only its header. The
// next Open must replay the WAL before it and take the empty one as its
// new WAL file (same number: no gap), so that a clean Close leaves no WAL
// file (it used to stay for ever; found by a kill -9 test of hay serve).
func TestRecoverDropsEmptyWAL(t *testing.T) {
	base := t.TempDir()
	dir, crash1, crash2 := filepath.Join(base, "a"), filepath.Join(base, "b"), filepath.Join(base, "c")
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	es := genEntries(rand.New(rand.NewPCG(9, 10)), 40, st.Stream(`{a="b"}`))
	if err := st.Append(&Batch{Entries: es}); err != nil {
		t.Fatal(err)
	}
	copyStoreFiles(t, dir, crash1) // killed with the entries in the WAL
	st.Close()
	st, err = Open(crash1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	copyStoreFiles(t, crash1, crash2) // restarted, killed before any append
	st.Close()
	wals, _ := walSeqs(crash2)
	if len(wals) != 2 {
		t.Fatalf("crash state: WAL files %v, want one with the entries and one empty", wals)
	}
	st, err = Open(crash2, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := walSeqs(crash2); !slices.Equal(got, wals) {
		t.Fatalf("after Open: WAL files %v, want %v: %d replayed, %d started again", got, wals, wals[0], wals[1])
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := walSeqs(crash2); len(got) != 0 {
		t.Fatalf("after a clean Close: WAL files %v left", got)
	}
	if got := allEntries(t, crash2); !equalEntries(got, es) {
		t.Fatalf("%d entries after the two crashes, want %d", len(got), len(es))
	}
}

// TestRecoverDropsStaleManifestTmp: a crash while the manifest was being
// replaced leaves MANIFEST.tmp; the manifest in place stands, and Open
// deletes the partial copy.
func TestRecoverDropsStaleManifestTmp(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	es := genEntries(rand.New(rand.NewPCG(11, 12)), 30, st.Stream(`{a="b"}`))
	st.Append(&Batch{Entries: es})
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, manifestName+".tmp")
	if err := os.WriteFile(tmp, []byte("{\"segments\": [{\"name\": \"torn"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale %s left after Open: %v", tmp, err)
	}
	if got := allEntries(t, dir); !equalEntries(got, es) {
		t.Fatalf("%d entries, want %d", len(got), len(es))
	}
}
