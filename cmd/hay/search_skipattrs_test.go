package main

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
	"haystack/internal/segment"
	"haystack/internal/store"
)

// metaSegmentStore writes n entries ("line 0".. with a trace_id each) to
// a store in dir as one uncompressed segment block; damage makes the
// block's attrs section invalid (a metadata name "9race_id") with its
// checksum recomputed, so that only decoding the section finds it.
func metaSegmentStore(t *testing.T, dir string, n int, damage bool) {
	t.Helper()
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
		batch = append(batch, store.LabeledEntry{Labels: `{s="1"}`, Time: int64(1_700_000_000e9 + i*1e9), Line: fmt.Appendf(nil, "line %d", i), Attrs: a})
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
	if !damage {
		return
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
	if len(segs) != 1 {
		t.Fatalf("%d segments, want 1", len(segs))
	}
	f, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	// One uncompressed block from offset 16; its attrs section ends with
	// the last entry's metadata, and the block's CRC follows.
	last := []byte(fmt.Sprintf("%032x", n-1))
	end := bytes.LastIndex(f, last) + len(last)
	first := bytes.Index(f, []byte("trace_id"))
	if end < len(last) || first < 16 || first > end {
		t.Fatalf("layout not as expected: attrs end %d, first name at %d", end, first)
	}
	f[first] = '9'
	binary.LittleEndian.PutUint32(f[end:], crc32.Checksum(f[16:end], crc32.MakeTable(crc32.Castagnoli)))
	if err := os.WriteFile(segs[0], f, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSearchSkipsMetadata: hay search reads segment blocks without
// their structured metadata when it prints none (text, -c, -l, -q,
// --hist), and with it for --json and for a --query label filter. A
// block whose metadata section is damaged behind a valid checksum shows
// which: the first searches succeed exactly, the others report the
// damage (exit 2). On an undamaged store --json still has the metadata.
func TestSearchSkipsMetadata(t *testing.T) {
	const n = 50
	bad, good := t.TempDir(), t.TempDir()
	metaSegmentStore(t, bad, n, true)
	metaSegmentStore(t, good, n, false)
	var lines4 string
	for _, i := range []int{4, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49} {
		lines4 += fmt.Sprintf("line %d\n", i)
	}
	for _, tc := range []struct {
		args    []string
		want    string
		damaged bool
	}{
		{[]string{"-c", "line"}, "50\n", false},
		{[]string{"--order", "stored", "line 4"}, lines4, false},
		{[]string{"-c", "--query", `{s="1"} |= "line 4"`}, "11\n", false},
		{[]string{"-c", "--query", `{s="1"} |= "line 4" | logfmt`}, "11\n", false},
		{[]string{"-l", "line 4"}, "{s=\"1\"}\n", false},
		{[]string{"-q", "line 4"}, "", false},
		{[]string{"--json", "-c", "line"}, "50\n", false},
		{[]string{"--json", "line 4"}, "", true},
		{[]string{"-c", "line 4"}, "11\n", false},
		{[]string{"-c", "--query", `{s="1"} |= "line 4" | trace_id!="x"`}, "0\n", true},
		{[]string{"--query", `{s="1"} | trace_id=~".*"`}, "", true},
	} {
		args := append([]string{"search", "--data", bad}, tc.args...)
		out, code, stderr := hayInProcessStderr(t, args...)
		wantCode := 0
		if tc.damaged {
			wantCode = 2
		}
		if code != wantCode || string(out) != tc.want || tc.damaged != strings.Contains(stderr, "attrs section") {
			t.Errorf("hay %s: exit %d (want %d)\n got %q\nwant %q\nstderr %s", strings.Join(args, " "), code, wantCode, out, tc.want, stderr)
		}
	}
	_, code, stderr := hayInProcessStderr(t, "search", "--data", bad, "--hist", "line")
	if code != 0 || stderr != "" {
		t.Errorf("hay search --hist: exit %d, stderr %s", code, stderr)
	}

	// Undamaged: --json has each entry's metadata from the segment, and
	// the text output the same lines.
	out, code := hayInProcess(t, "search", "--data", good, "--order", "stored", "--json", "line 4")
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if code != 0 || len(got) != 11 {
		t.Fatalf("--json: exit %d, %d entries:\n%s", code, len(got), out)
	}
	for j, i := range []int{4, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49} {
		if want := fmt.Sprintf(`"line":"line %d","metadata":{"trace_id":"%032x"}}`, i, i); !strings.HasSuffix(got[j], want) {
			t.Errorf("--json entry %d: %s, want it to end %s", j, got[j], want)
		}
	}
	if out, code := hayInProcess(t, "search", "--data", good, "--order", "stored", "line 4"); code != 0 || string(out) != lines4 {
		t.Errorf("text: exit %d\n%s", code, out)
	}
}
