package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"haystack/internal/attrs"
	"haystack/internal/segment"
	"haystack/internal/testseed"
)

// genAttrs returns random metadata: none half the time, else a few pairs
// with empty, binary (invalid UTF-8) and OTel-like values; now and then
// the limits (MaxPairs pairs, or close to MaxBytes).
func genAttrs(r *rand.Rand) []byte {
	var ps []attrs.Pair
	switch x := r.IntN(40); {
	case x < 20:
		return nil
	case x == 20:
		for i := range attrs.MaxPairs {
			ps = append(ps, attrs.Pair{Name: fmt.Sprintf("k%03d", i), Value: strings.Repeat("v", r.IntN(4))})
		}
	case x == 21:
		// One value filling the encoding to a few bytes under MaxBytes.
		ps = []attrs.Pair{{Name: "big", Value: strings.Repeat("\xff", attrs.MaxBytes-16-r.IntN(64))}}
	default:
		names := []string{"trace_id", "span_id", "severity", "a", "_x", "Z9", "empty"}
		for range 1 + r.IntN(4) {
			var v string
			switch r.IntN(4) {
			case 0:
				v = ""
			case 1:
				v = string([]byte{0xff, 0x00, byte(r.IntN(256)), '\n'})
			case 2:
				v = fmt.Sprintf("%032x", r.Uint64())
			default:
				v = "v" + fmt.Sprint(r.IntN(100))
			}
			ps = append(ps, attrs.Pair{Name: names[r.IntN(len(names))], Value: v})
		}
	}
	b, err := attrs.Encode(nil, ps)
	if err != nil {
		panic(err)
	}
	return b
}

// genAttrEntries makes n entries over 3 streams, times a little out of
// order, lines unique, metadata from genAttrs.
func genAttrEntries(r *rand.Rand, n int) []LabeledEntry {
	es := make([]LabeledEntry, n)
	for i := range es {
		es[i] = LabeledEntry{
			Labels: fmt.Sprintf(`{s="%d"}`, r.IntN(3)),
			Time:   int64(1000 + i - r.IntN(5)),
			Line:   []byte(fmt.Sprintf("%d %s", i, strings.Repeat("x", r.IntN(40)))),
			Attrs:  genAttrs(r),
		}
	}
	return es
}

// readAll returns every entry of parts in store order, with labels.
func readAll(t *testing.T, parts []Part, labels func(uint32) string) []LabeledEntry {
	t.Helper()
	var out []LabeledEntry
	b := segment.GetBlock()
	defer segment.PutBlock(b)
	for _, p := range parts {
		for i := range p.NumBlocks() {
			if err := p.ReadBlock(i, b); err != nil {
				t.Fatalf("%s block %d: %v", p.Name(), i, err)
			}
			if len(b.AttrOffsets) != 0 && len(b.AttrOffsets) != b.Len()+1 {
				t.Fatalf("%s block %d: %d attr offsets for %d entries", p.Name(), i, len(b.AttrOffsets), b.Len())
			}
			none := true
			for k := range b.Len() {
				e := b.Entry(k)
				none = none && len(e.Attrs) == 0
				out = append(out, LabeledEntry{Labels: labels(e.Stream), Time: e.Time, Line: bytes.Clone(e.Line), Attrs: bytes.Clone(e.Attrs)})
			}
			if none && (len(b.AttrData) != 0 || len(b.AttrOffsets) != 0) {
				t.Fatalf("%s block %d: no entry has metadata, yet %d bytes and %d offsets of it", p.Name(), i, len(b.AttrData), len(b.AttrOffsets))
			}
		}
	}
	return out
}

func diffLabeled(got, want []LabeledEntry) string {
	for i := range max(len(got), len(want)) {
		if i >= len(got) || i >= len(want) {
			return fmt.Sprintf("%d entries, want %d", len(got), len(want))
		}
		g, w := got[i], want[i]
		if g.Labels != w.Labels || g.Time != w.Time || !bytes.Equal(g.Line, w.Line) || !bytes.Equal(g.Attrs, w.Attrs) {
			return fmt.Sprintf("entry %d: got %s %d %q attrs %q, want %s %d %q attrs %q", i, g.Labels, g.Time, g.Line, g.Attrs, w.Labels, w.Time, w.Line, w.Attrs)
		}
	}
	return ""
}

// TestWriterAttrsRoundTrip appends random entries with and without
// metadata through Writer.Append and reads them back, exactly as
// appended, from the head, after a flush (some in a segment, some in the
// head), after compaction, from a snapshot (the WAL replayed) and after
// a reopen.
func TestWriterAttrsRoundTrip(t *testing.T) {
	seed := testseed.Seed(t, "HAY_STORE_ATTRS_SEED")
	t.Logf("seed %d (HAY_STORE_ATTRS_SEED=%d repeats it)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 3))
	dir := t.TempDir()
	opt := WriterOptions{Options: Options{Segment: segment.Options{BlockSize: 16 << 10}}}
	w, err := OpenWriter(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { w.Close() }()
	es := genAttrEntries(r, 600)
	appendAll := func(es []LabeledEntry) {
		for i := 0; i < len(es); {
			n := min(1+r.IntN(20), len(es)-i)
			if err := w.Append(context.Background(), es[i:i+n]); err != nil {
				t.Fatal(err)
			}
			i += n
		}
	}
	check := func(what string, want []LabeledEntry) {
		t.Helper()
		v, err := w.View()
		if err != nil {
			t.Fatal(err)
		}
		if d := diffLabeled(readAll(t, v.Parts, v.Labels), want); d != "" {
			t.Fatalf("%s: %s", what, d)
		}
	}
	appendAll(es[:200])
	check("head", es[:200])
	v, _ := w.View()
	headCuts := blockCuts(v.Parts)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	// The head cuts its blocks where the segment writer cuts them,
	// metadata counted, so each is written as it is (AddBlock).
	v, _ = w.View()
	if segCuts := blockCuts(v.Parts); !slices.Equal(headCuts, segCuts) {
		t.Fatalf("head blocks of %v entries, segment blocks of %v", headCuts, segCuts)
	}
	appendAll(es[200:400])
	check("segment and head", es[:400])
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	appendAll(es[400:])
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	check("segments", es)
	st, err := w.Compact(context.Background(), CompactOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Segments != 3 {
		t.Fatalf("compaction rewrote %d segments of 3", st.Segments)
	}
	check("compacted", es)
	more := genAttrEntries(r, 300)
	appendAll(more)
	all := append(es[:len(es):len(es)], more...)
	check("compacted and head", all)

	// The head only in the WAL: a snapshot replays it.
	snap, err := OpenSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffLabeled(readAll(t, snap.Parts, snap.Labels), all); d != "" {
		t.Fatalf("snapshot: %s", d)
	}
	snap.Close()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w, err = OpenWriter(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	check("reopened", all)
}

// TestAppendRefusesBadAttrs: metadata that is not attrs' encoding is
// refused by Store.Append and Writer.Append, with nothing of the batch
// written, and the Writer goes on.
func TestAppendRefusesBadAttrs(t *testing.T) {
	good := []byte{1, 1, 'a', 0}
	bad := map[string][]byte{
		"bad name":  {1, 1, '1', 0},
		"unsorted":  {2, 1, 'b', 0, 1, 'a', 0},
		"truncated": {1, 1, 'a', 5, 'x'},
		"zero":      {0},
		"trailing":  {1, 1, 'a', 0, 0},
	}
	for name, a := range bad {
		dir := t.TempDir()
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		id := s.Stream(`{a="b"}`)
		size := s.wal.size
		err = s.Append(&Batch{Entries: []Entry{{Time: 1, Stream: id, Line: []byte("ok"), Attrs: good}, {Time: 2, Stream: id, Line: []byte("x"), Attrs: a}}})
		if !errors.Is(err, attrs.ErrCorrupt) || s.wal.size != size || s.head.entries != 0 {
			t.Fatalf("%s: Store.Append: %v, wal %d -> %d bytes, %d entries in the head", name, err, size, s.wal.size, s.head.entries)
		}
		// The store goes on, the stream defined with the next batch.
		if err := s.Append(&Batch{Entries: []Entry{{Time: 3, Stream: id, Line: []byte("y"), Attrs: good}}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		w, err := OpenWriter(dir, WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		err = w.Append(context.Background(), []LabeledEntry{{Labels: `{a="c"}`, Time: 4, Line: []byte("z")}, {Labels: `{a="c"}`, Time: 5, Attrs: a}})
		if !errors.Is(err, attrs.ErrCorrupt) || !strings.Contains(err.Error(), "entry 1") || w.Err() != nil {
			t.Fatalf("%s: Writer.Append: %v (writer: %v)", name, err, w.Err())
		}
		if err := w.Append(context.Background(), []LabeledEntry{{Labels: `{a="c"}`, Time: 6, Line: []byte("w"), Attrs: good}}); err != nil {
			t.Fatalf("%s: the writer failed after refusing bad metadata: %v", name, err)
		}
		v, _ := w.View()
		got := readAll(t, v.Parts, v.Labels)
		want := []LabeledEntry{{Labels: `{a="b"}`, Time: 3, Line: []byte("y"), Attrs: good}, {Labels: `{a="c"}`, Time: 6, Line: []byte("w"), Attrs: good}}
		if d := diffLabeled(got, want); d != "" {
			t.Fatalf("%s: %s", name, d)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWALAttrsDamage: a record whose checksum holds but whose metadata
// does not validate, or a kind 2 record in a version 2 file, is a bad
// record: the end of the valid prefix when it is the last thing in the
// last file (cut by Open), damage Open refuses when a record follows.
func TestWALAttrsDamage(t *testing.T) {
	good := &Batch{Streams: []StreamDef{{ID: 0, Labels: `{a="b"}`}}, Entries: []Entry{{Time: 1, Line: []byte("one"), Attrs: []byte{1, 1, 'a', 0}}}}
	badAttrs := appendBatch(nil, &Batch{Entries: []Entry{{Time: 2, Line: []byte("two"), Attrs: []byte{1, 1, 'a', 0}}}})
	badAttrs[len(badAttrs)-2] = '1' // the name: a digit first
	if _, err := decodeBatch(badAttrs); !errors.Is(err, attrs.ErrCorrupt) {
		t.Fatalf("decode: %v", err)
	}
	next := appendBatch(nil, &Batch{Entries: []Entry{{Time: 3, Line: []byte("three")}}})
	cases := []struct {
		name string
		file []byte
	}{
		{"bad metadata", appendRecord(appendRecord(walHeaderFor(0), appendBatch(nil, good)), badAttrs)},
		{"kind 2 in version 2", appendRecord(appendRecord(walHeaderV(walMagicV2, 0), appendBatch(nil, &Batch{Streams: good.Streams, Entries: []Entry{{Time: 1, Line: []byte("one")}}})), appendBatch(nil, &Batch{Entries: good.Entries}))},
	}
	for _, c := range cases {
		for _, followed := range []bool{false, true} {
			file := c.file
			if followed {
				file = appendRecord(bytes.Clone(file), next)
			}
			r := NewWALReader(file)
			if _, err := r.Next(); err != nil {
				t.Fatalf("%s: first record: %v", c.name, err)
			}
			valid := r.Valid
			if b, err := r.Next(); !errors.Is(err, errTorn) || b != nil {
				t.Fatalf("%s: bad record read as %+v, %v", c.name, b, err)
			}
			dir, seq := emptyStore(t)
			if err := os.WriteFile(walPath(dir, seq), file, 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := Open(dir, Options{})
			if followed {
				if err == nil || !strings.Contains(err.Error(), "damaged") {
					t.Fatalf("%s, followed by a record: Open: %v", c.name, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: Open: %v", c.name, err)
			}
			if s.head.entries != 1 {
				t.Fatalf("%s: %d entries replayed, want 1", c.name, s.head.entries)
			}
			if fi, err := os.Stat(walPath(dir, seq)); err != nil || fi.Size() != valid {
				t.Fatalf("%s: WAL file cut to %v, want %d bytes", c.name, fi, valid)
			}
			s.Close()
		}
	}
	// RepairWAL keeps what precedes the bad record and the file's
	// version.
	dir, seq := emptyStore(t)
	os.WriteFile(walPath(dir, seq), appendRecord(bytes.Clone(cases[1].file), next), 0o644)
	if _, err := RepairWAL(dir); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(walPath(dir, seq))
	r := NewWALReader(data)
	if b, err := r.Next(); err != nil || r.Version != 2 || string(b.Entries[0].Line) != "one" {
		t.Fatalf("repaired: %v, version %d", err, r.Version)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("repaired file goes on: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, lostFoundDir)); err != nil {
		t.Fatalf("no copy in lost+found: %v", err)
	}

	// A version 3 file: the records with metadata before the damage are
	// kept, with their metadata, and Open then reads them.
	dir, seq = emptyStore(t)
	file := appendRecord(walHeaderFor(0), appendBatch(nil, good))
	file = appendRecord(file, badAttrs)
	file = appendRecord(file, next)
	os.WriteFile(walPath(dir, seq), file, 0o644)
	if _, err := Open(dir, Options{}); err == nil {
		t.Fatal("damaged version 3 file opened")
	}
	if _, err := RepairWAL(dir); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, []Part{newHeadPart(s.head.blocks)}, func(uint32) string { return "" })
	if len(got) != 1 || string(got[0].Line) != "one" || !bytes.Equal(got[0].Attrs, good.Entries[0].Attrs) {
		t.Fatalf("repaired version 3 file: %+v", got)
	}
	s.Close()
}

// emptyStore makes a store with nothing in it and no WAL file, and
// returns it and the number of the WAL file a test may write.
func emptyStore(t *testing.T) (string, uint64) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if seqs, _ := walSeqs(dir); len(seqs) != 0 {
		t.Fatalf("WAL files %v left", seqs)
	}
	return dir, s.man.WALStart
}

// TestViewAttrsWhileAppending reads views of a Writer's head while
// entries with and without metadata are appended (a block's first entry
// with metadata gives the block its offsets then): every entry a view
// shows carries the metadata it was appended with. Run with -race.
func TestViewAttrsWhileAppending(t *testing.T) {
	w, err := OpenWriter(t.TempDir(), WriterOptions{Options: Options{HeadBytes: 64 << 10, Segment: segment.Options{BlockSize: 2 << 10}}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r := rand.New(rand.NewPCG(7, 7))
	es := make([]LabeledEntry, 2000)
	want := map[string][]byte{}
	for i := range es {
		var a []byte
		if r.IntN(3) == 0 {
			a = mustAttrs(t, "i", strconv.Itoa(i))
		}
		es[i] = LabeledEntry{Labels: `{a="b"}`, Time: int64(i), Line: []byte(fmt.Sprint("line ", i)), Attrs: a}
		want[string(es[i].Line)] = a
	}
	done := make(chan error)
	go func() {
		for i := 0; i < len(es); i += 3 {
			if err := w.Append(context.Background(), es[i:min(i+3, len(es))]); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	check := func() {
		v, err := w.View()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range readAll(t, v.Parts, v.Labels) {
			if !bytes.Equal(e.Attrs, want[string(e.Line)]) {
				t.Fatalf("%s: metadata %q, want %q", e.Line, e.Attrs, want[string(e.Line)])
			}
		}
	}
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			check()
			return
		default:
			check()
		}
	}
}

// blockCuts lists the entry counts of the blocks of parts.
func blockCuts(parts []Part) []int {
	var n []int
	for _, p := range parts {
		for i := range p.NumBlocks() {
			n = append(n, p.BlockMeta(i).Entries)
		}
	}
	return n
}
