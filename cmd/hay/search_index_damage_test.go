package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSearchDamagedSkipIndex damages a segment's skip index, either
// every group of postings (Open checks only the index's head, so the
// segment opens with the index and its lookups of those groups answer
// "maybe") or one byte of the head, the group table (the segment then
// opens without a skip index: review 14 F3, it was refused whole): hay
// search must still print exactly what grep prints, exit as grep does,
// and warn once that the segment's index is damaged; hay verify must
// fail naming the file.
func TestSearchDamagedSkipIndex(t *testing.T) {
	t.Run("postings", func(t *testing.T) {
		testSearchDamagedSkipIndex(t, "checksum mismatch", func(table, area []byte) {
			for k := range len(table) / 12 {
				area[binary.LittleEndian.Uint32(table[12*k+4:])] ^= 0x20
			}
		})
	})
	t.Run("head", func(t *testing.T) {
		testSearchDamagedSkipIndex(t, "skip index: group offset outside the postings area", func(table, area []byte) {
			table[len(table)/2] ^= 0x04 // a group's offset or CRC
		})
	})
}

func testSearchDamagedSkipIndex(t *testing.T, verifyReason string, damage func(table, area []byte)) {
	dir := filepath.Join(t.TempDir(), "data")
	src := stripCR(t, "../../testdata/loghub/HDFS_2k.log")
	if _, code := hayInProcess(t, "ingest", "--data", dir, src); code != 0 {
		t.Fatal("ingest failed")
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
	if len(segs) != 1 {
		t.Fatalf("want 1 segment, have %v", segs)
	}
	data, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	// The skip index (format versions 3 and 4, see internal/segment/doc.go;
	// in versions 5 to 7 the lines' index, after its length):
	// uvarint blocks, uvarint unindexed (0 here), uvarint grams, then the
	// group table of 12-byte entries (first gram, offset, CRC), then the
	// postings area.
	ft := data[len(data)-72:]
	v := binary.LittleEndian.Uint32(ft[44:])
	if v < 3 || v > 7 {
		t.Fatalf("segment version %d", v)
	}
	skip := data[binary.LittleEndian.Uint64(ft[24:]) : len(data)-72]
	if v >= 5 {
		l, n := binary.Uvarint(skip)
		if n <= 0 || l > uint64(len(skip)-n) {
			t.Fatal("bad lines' index length")
		}
		skip = skip[n : n+int(l)]
	}
	pos := 0
	uv := func() uint64 {
		v, n := binary.Uvarint(skip[pos:])
		if n <= 0 {
			t.Fatal("bad varint in the skip index")
		}
		pos += n
		return v
	}
	uv()
	if uv() != 0 {
		t.Fatal("unindexed blocks")
	}
	groups := int(uv()+31) / 32
	damage(skip[pos:pos+12*groups], skip[pos+12*groups:])
	if err := os.WriteFile(segs[0], data, 0o644); err != nil {
		t.Fatal(err)
	}

	warning := filepath.Base(segs[0]) + ": skip index damaged, its blocks were scanned in full; run hay verify"
	for _, needle := range []string{"PacketResponder", "blk_-1608999687919862906", "needle-absent-7c3e9a"} {
		cmd := hayCommand("search", "--data", dir, "--", needle)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		want, wantCode := grepOut(t, needle, src)
		if !bytes.Equal(out, want) || code != wantCode {
			t.Fatalf("%q: %d bytes, exit %d; grep: %d bytes, exit %d", needle, len(out), code, len(want), wantCode)
		}
		if strings.Count(stderr.String(), warning) != 1 {
			t.Fatalf("%q: stderr lacks the warning %q once:\n%s", needle, warning, stderr.String())
		}
	}

	cmd := hayCommand("verify", "--data", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), filepath.Base(segs[0])) ||
		!strings.Contains(stderr.String(), verifyReason) {
		t.Fatalf("verify: %v\n%s", err, stderr.String())
	}
}
