package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"haystack/internal/attrs"
	"haystack/internal/search"
	"haystack/internal/segment"
	"haystack/internal/store"
)

// TestSelectionSkipAttrs: a selection with skipAttrs reads segment
// blocks without their structured metadata, in both of run's paths (one
// stream: search.Run; several: scanBlocks), unless its label filters
// need it. The store's one block has a damaged metadata section behind a
// valid checksum: a search that reads metadata reports it, one that
// skips it finds every entry. An undamaged twin gives the oracle hits.
func TestSelectionSkipAttrs(t *testing.T) {
	const n = 60
	bad, good := t.TempDir(), t.TempDir()
	views := map[string]*store.View{}
	for _, dir := range []string{bad, good} {
		w, err := store.OpenWriter(dir, store.WriterOptions{Options: store.Options{Segment: segment.Options{Codec: segment.CodecNone, BlockSize: 1 << 20}}})
		if err != nil {
			t.Fatal(err)
		}
		var batch []store.LabeledEntry
		for i := range n {
			a, err := attrs.Encode(nil, []attrs.Pair{{Name: "trace_id", Value: fmt.Sprintf("%032x", i)}})
			if err != nil {
				t.Fatal(err)
			}
			batch = append(batch, store.LabeledEntry{Labels: fmt.Sprintf(`{s="%d"}`, i%2), Time: int64(1000 + i), Line: fmt.Appendf(nil, "line %d", i), Attrs: a})
		}
		if err := w.Append(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if dir == bad {
			segs, _ := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
			if len(segs) != 1 {
				t.Fatalf("%d segments", len(segs))
			}
			f, err := os.ReadFile(segs[0])
			if err != nil {
				t.Fatal(err)
			}
			// One uncompressed block from offset 16: the attrs section
			// ends with the last entry's metadata, then the CRC.
			last := []byte(fmt.Sprintf("%032x", n-1))
			end := bytes.LastIndex(f, last) + len(last)
			first := bytes.Index(f, []byte("trace_id"))
			if end < len(last) || first < 16 || first > end {
				t.Fatalf("layout not as expected")
			}
			f[first] = '9' // "9race_id": an invalid name
			binary.LittleEndian.PutUint32(f[end:], crc32.Checksum(f[16:end], crc32.MakeTable(crc32.Castagnoli)))
			if err := os.WriteFile(segs[0], f, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		w, err = store.OpenWriter(dir, store.WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if views[dir], err = w.View(); err != nil {
			t.Fatal(err)
		}
	}
	type res struct {
		lines []string
		err   error
	}
	do := func(v *store.View, q string, skip bool, order search.Order) res {
		sel, err := parseSelection(q, false)
		if err != nil {
			t.Fatal(err)
		}
		sel.skipAttrs = skip
		var r res
		r.err = run(context.Background(), v, sel, order, 0, func(h *hit) bool {
			if skip && len(h.Attrs) != 0 && views[bad] == v {
				t.Errorf("%s: metadata %q read", q, h.Attrs)
			}
			r.lines = append(r.lines, string(h.Line))
			return true
		})
		return r
	}
	for _, q := range []string{`{s=~".+"} |= "line 4"`, `{s="0"} |= "line 4"`, `{s=~".+"} | logfmt | drop s`, "line 5"} {
		for _, order := range []search.Order{anyOrder, search.Oldest} {
			want := do(views[good], q, false, order)
			if want.err != nil || len(want.lines) == 0 {
				t.Fatalf("%s: oracle: %v, %d lines", q, want.err, len(want.lines))
			}
			if got := do(views[good], q, true, order); got.err != nil || strings.Join(got.lines, ",") != strings.Join(want.lines, ",") {
				t.Errorf("%s order %d: skipAttrs on an undamaged store: %q, %v; want %q", q, order, got.lines, got.err, want.lines)
			}
			if got := do(views[bad], q, true, order); got.err != nil || strings.Join(got.lines, ",") != strings.Join(want.lines, ",") {
				t.Errorf("%s order %d: skipAttrs: %q, %v; want %q (metadata decoded?)", q, order, got.lines, got.err, want.lines)
			}
			if got := do(views[bad], q, false, order); got.err == nil || !strings.Contains(got.err.Error(), "attrs section") {
				t.Errorf("%s order %d: reading metadata: %v, want the damage", q, order, got.err)
			}
		}
	}
	// A label filter needs the metadata: read whatever skipAttrs says.
	for _, order := range []search.Order{anyOrder, search.Oldest} {
		for _, q := range []string{`{s=~".+"} | trace_id!="x"`, `{s="1"} | trace_id!="x"`} {
			if got := do(views[bad], q, true, order); got.err == nil || !strings.Contains(got.err.Error(), "attrs section") {
				t.Errorf("%s order %d: %v, want the damage", q, order, got.err)
			}
		}
	}
}
