package store

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"

	"haystack/internal/attrs"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestGolden pins the on-disk encodings of a WAL file and a manifest: a
// change to either breaks existing data directories and must be
// deliberate (go test -run TestGolden -update, and a format version bump).
func TestGolden(t *testing.T) {
	b := &Batch{
		Streams: []StreamDef{{ID: 0, Labels: `{source="app.log"}`}},
		Sources: []Source{{Key: "/var/log/app.log", Offset: 45, Check: 0x89abcdef}},
		Entries: []Entry{
			{Time: 1764460800000000000, Stream: 0, Line: []byte("2025-11-30T00:00:00Z start")},
			{Time: 1764460800000000000, Stream: 0, Line: []byte("")},
			{Time: 1764460799000000000, Stream: 0, Line: []byte("\x00\xff\n")},
		},
	}
	// golden.wal is a version 1 file (its magic alone: still read),
	// golden2.wal version 2, whose header records a predecessor of 120
	// bytes; golden3.wal version 3 (what is written now), with b as a
	// kind 1 record and then battrs, whose entries carry metadata (one
	// none), as a kind 2 record.
	wal := appendRecord([]byte(walMagicV1), appendBatch(nil, b))
	wal2 := appendRecord(walHeaderV(walMagicV2, 120), appendBatch(nil, b))
	battrs := &Batch{Entries: []Entry{
		{Time: 1764460801000000000, Stream: 0, Line: []byte("GET /"), Attrs: mustAttrs(t, "trace_id", "0af7651916cd43dd8448eb211c80319c", "span_id", "b7ad6b7169203331")},
		{Time: 1764460801000000001, Stream: 0, Line: []byte("no metadata")},
		{Time: 1764460801000000002, Stream: 0, Line: nil, Attrs: mustAttrs(t, "empty", "", "bin", "\xff\x00")},
	}}
	wal3 := appendRecord(appendRecord(walHeaderFor(7), appendBatch(nil, b)), appendBatch(nil, battrs))
	man, err := encodeManifest(&Manifest{
		NextSeq: 2, WALStart: 3,
		Segments: []SegmentMeta{{Name: "0000000000000001.seg", Entries: 3, RawBytes: 29, Size: 200, MinTime: 1764460799000000000, MaxTime: 1764460800000000000}},
		Streams:  b.Streams,
		Sources:  b.Sources,
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][]byte{"golden.wal": wal, "golden2.wal": wal2, "golden3.wal": wal3, "golden.MANIFEST": man} {
		path := filepath.Join("testdata", name)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: encoding changed:\ngot  %q\nwant %q", name, got, want)
		}
	}
	// And the golden files decode to what they hold.
	for name, prev := range map[string]int64{"golden.wal": -1, "golden2.wal": 120, "golden3.wal": 7} {
		data, _ := os.ReadFile(filepath.Join("testdata", name))
		r := NewWALReader(data)
		got, err := r.Next()
		if err != nil || !equalEntries(got.Entries, b.Entries) || got.Sources[0] != b.Sources[0] || got.Streams[0] != b.Streams[0] || r.Prev != prev {
			t.Fatalf("%s decodes to %+v, %v, predecessor %d (want %d)", name, got, err, r.Prev, prev)
		}
		if name == "golden3.wal" {
			got, err := r.Next()
			if err != nil || !equalEntries(got.Entries, battrs.Entries) {
				t.Fatalf("%s: second record decodes to %+v, %v", name, got, err)
			}
		}
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("%s: %v after its records", name, err)
		}
	}
	// The kind bytes, by hand: a batch without metadata is kind 1 in
	// every version, one with metadata kind 2.
	data, _ := os.ReadFile(filepath.Join("testdata", "golden3.wal"))
	first := walHeader + recHeader
	second := first + len(appendBatch(nil, b)) + recHeader
	if string(data[:len(walMagic)]) != "HAYWAL3\n" || data[first] != 1 || data[second] != 2 {
		t.Fatalf("golden3.wal: magic %q, kinds %d and %d", data[:len(walMagic)], data[first], data[second])
	}
}

// mustAttrs encodes name, value pairs.
func mustAttrs(t testing.TB, kv ...string) []byte {
	t.Helper()
	var ps []attrs.Pair
	for i := 0; i < len(kv); i += 2 {
		ps = append(ps, attrs.Pair{Name: kv[i], Value: kv[i+1]})
	}
	b, err := attrs.Encode(nil, ps)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
