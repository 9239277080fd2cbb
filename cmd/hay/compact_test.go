package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"haystack/internal/segment"
)

// TestCompactKeepsResults ingests Loghub samples (one segment each),
// compacts the store and checks that every search prints exactly what it
// printed before, and what a naive scan of the input counts.
func TestCompactKeepsResults(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var inputs []string
	for _, name := range []string{"HDFS_2k.log", "Apache_2k.log", "OpenSSH_2k.log", "Linux_2k.log"} {
		f := stripCR(t, filepath.Join("../../testdata/loghub", name))
		inputs = append(inputs, f)
		if _, code := hayInProcess(t, "ingest", "--data", dir, f); code != 0 {
			t.Fatalf("ingest %s failed", f)
		}
	}
	needles := []string{"error", "Failed password", "blk_-", "user", "e", "0000", "not-in-the-logs", "session opened", "INFO"}
	search := func(args ...string) []byte {
		out, code := hayInProcess(t, append([]string{"search", "--data", dir}, args...)...)
		if code > 1 { // 1: no match
			t.Fatalf("search %v: exit %d", args, code)
		}
		return out
	}
	type result struct{ count, lines, fold []byte }
	before := map[string]result{}
	for _, n := range needles {
		before[n] = result{search("-c", n), search(n), search("-i", "-c", n)}
	}
	segsBefore, _ := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))

	// Many blocks a segment; two workers merge the four segments into two.
	out, code := hayInProcess(t, "compact", "--data", dir, "--block-size", "8192", "--workers", "2")
	if code != 0 || !strings.HasPrefix(string(out), "compacted 4 segments into 2,") {
		t.Fatalf("compact: exit %d, %q", code, out)
	}
	segsAfter, _ := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
	if len(segsBefore) != 4 || len(segsAfter) != 2 || segsAfter[0] == segsBefore[0] {
		t.Fatalf("segments before %v, after %v", segsBefore, segsAfter)
	}
	for _, n := range needles {
		want := 0
		for _, f := range inputs {
			data, _ := os.ReadFile(f)
			for _, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
				if bytes.Contains(line, []byte(n)) {
					want++
				}
			}
		}
		b := before[n]
		if got := strings.TrimSpace(string(b.count)); got != strconv.Itoa(want) {
			t.Errorf("%q before compaction: count %s, naive %d", n, got, want)
		}
		if got := search("-c", n); !bytes.Equal(got, b.count) {
			t.Errorf("%q: count %q after compaction, %q before", n, got, b.count)
		}
		if got := search(n); !bytes.Equal(got, b.lines) {
			t.Errorf("%q: %d bytes of lines after compaction, %d before", n, len(got), len(b.lines))
		}
		if got := search("-i", "-c", n); !bytes.Equal(got, b.fold) {
			t.Errorf("-i %q: count %q after compaction, %q before", n, got, b.fold)
		}
	}
	if _, code := hayInProcess(t, "verify", "--data", dir); code != 0 {
		t.Fatal("compacted store fails verify")
	}
	if out, code := hayInProcess(t, "compact", "--data", dir); code != 0 || string(out) != "nothing to compact\n" {
		t.Fatalf("second compact: exit %d, %q", code, out)
	}
	if _, code := hayInProcess(t, "compact", "--data", filepath.Join(t.TempDir(), "none")); code == 0 {
		t.Fatal("compact of a missing data directory succeeded")
	}
	// A directory that is not a store is left alone.
	empty := t.TempDir()
	if _, code := hayInProcess(t, "compact", "--data", empty); code == 0 {
		t.Fatal("compact of a directory without a store succeeded")
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Fatalf("compact made %d entries in a directory that is not a store", len(ents))
	}
	for _, bad := range [][]string{{"--workers", "-1"}, {"--block-size", "100"}, {"--level", "5"}, {"--merge-bytes", "-1"}, {"extra"}} {
		if _, code := hayInProcess(t, append([]string{"compact", "--data", dir}, bad...)...); code != 2 {
			t.Fatalf("compact %v: exit %d, want 2 (usage)", bad, code)
		}
	}
}

// TestCompactCodec checks --codec: every block of the compacted store is
// written with the codec asked for, searches print exactly what they
// printed before compaction, and an unknown codec is a usage error.
func TestCompactCodec(t *testing.T) {
	input := stripCR(t, filepath.Join("../../testdata/loghub", "OpenSSH_2k.log"))
	needles := []string{"Failed password", "error", "e", "not-in-the-logs"}
	for _, codec := range []segment.Codec{segment.CodecLZ4, segment.CodecNone, segment.CodecZstd} {
		dir := filepath.Join(t.TempDir(), "data")
		if _, code := hayInProcess(t, "ingest", "--data", dir, input); code != 0 {
			t.Fatal("ingest failed")
		}
		search := func(args ...string) []byte {
			out, code := hayInProcess(t, append([]string{"search", "--data", dir}, args...)...)
			if code > 1 {
				t.Fatalf("search %v: exit %d", args, code)
			}
			return out
		}
		before := map[string][2][]byte{}
		for _, n := range needles {
			before[n] = [2][]byte{search(n), search("-i", "-c", n)}
		}
		out, code := hayInProcess(t, "compact", "--data", dir, "--block-size", "8192", "--codec", codec.String())
		if code != 0 || !strings.HasPrefix(string(out), "compacted 1 segments into 1,") {
			t.Fatalf("compact --codec %v: exit %d, %q", codec, code, out)
		}
		segs, _ := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
		if len(segs) != 1 {
			t.Fatalf("%v: segments %v", codec, segs)
		}
		r, err := segment.Open(segs[0])
		if err != nil {
			t.Fatal(err)
		}
		for i := range r.NumBlocks() {
			if got := r.BlockCodec(i); got != codec {
				t.Errorf("--codec %v: block %d of %d is %v", codec, i, r.NumBlocks(), got)
			}
		}
		r.Close()
		for _, n := range needles {
			if got := search(n); !bytes.Equal(got, before[n][0]) {
				t.Errorf("--codec %v, %q: %d bytes of lines after compaction, %d before", codec, n, len(got), len(before[n][0]))
			}
			if got := search("-i", "-c", n); !bytes.Equal(got, before[n][1]) {
				t.Errorf("--codec %v, -i %q: count %q after compaction, %q before", codec, n, got, before[n][1])
			}
		}
		if _, code := hayInProcess(t, "verify", "--data", dir); code != 0 {
			t.Fatalf("--codec %v: the compacted store fails verify", codec)
		}
	}
	dir := filepath.Join(t.TempDir(), "data")
	if _, code := hayInProcess(t, "ingest", "--data", dir, input); code != 0 {
		t.Fatal("ingest failed")
	}
	if _, code := hayInProcess(t, "compact", "--data", dir, "--codec", "brotli"); code != 2 {
		t.Fatalf("compact --codec brotli: exit %d, want 2 (usage)", code)
	}
}
