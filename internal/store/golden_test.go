package store

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
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
	// bytes.
	wal := appendRecord([]byte(walMagicV1), appendBatch(nil, b))
	wal2 := appendRecord(walHeaderFor(120), appendBatch(nil, b))
	man, err := encodeManifest(&Manifest{
		NextSeq: 2, WALStart: 3,
		Segments: []SegmentMeta{{Name: "0000000000000001.seg", Entries: 3, RawBytes: 29, Size: 200, MinTime: 1764460799000000000, MaxTime: 1764460800000000000}},
		Streams:  b.Streams,
		Sources:  b.Sources,
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][]byte{"golden.wal": wal, "golden2.wal": wal2, "golden.MANIFEST": man} {
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
	for name, prev := range map[string]int64{"golden.wal": -1, "golden2.wal": 120} {
		data, _ := os.ReadFile(filepath.Join("testdata", name))
		r := NewWALReader(data)
		got, err := r.Next()
		if err != nil || !equalEntries(got.Entries, b.Entries) || got.Sources[0] != b.Sources[0] || got.Streams[0] != b.Streams[0] || r.Prev != prev {
			t.Fatalf("%s decodes to %+v, %v, predecessor %d (want %d)", name, got, err, r.Prev, prev)
		}
	}
}
