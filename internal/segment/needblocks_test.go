package segment

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"haystack/internal/attrs"
)

// TestValueAndEscapeBlocks checks the whole-segment answers a search
// asks for label filters (MayContainValueBlocks, MayHaveValueBlocks,
// MayHoldEscapeBlocks) against the per-block ones on the golden segments
// of every format: every metadata value and its 4- and 7-byte
// substrings (also upper-cased), absent, short and empty values, and
// every ASCII character; after Close, nil (every block may).
func TestValueAndEscapeBlocks(t *testing.T) {
	files, err := filepath.Glob("testdata/golden-v*.seg")
	if err != nil || len(files) < 7 {
		t.Fatalf("golden files %v: %v", files, err)
	}
	check := func(f, what string, arg any, n int, bm []uint64, per func(int) bool) (pruned int) {
		t.Helper()
		for i := range n {
			got := bm == nil || bm[i/64]&(1<<(i%64)) != 0
			if want := per(i); got != want {
				t.Fatalf("%s: %s(%q) block %d: whole %v, per block %v", f, what, arg, i, got, want)
			}
			if !got {
				pruned++
			}
		}
		return pruned
	}
	for _, f := range files {
		r, err := Open(f)
		if err != nil {
			t.Fatal(err)
		}
		vals := [][]byte{nil, []byte("ab"), []byte("zzzz absent"), []byte("\x00\x01\x02\x03")}
		b := GetBlock()
		for i := range r.NumBlocks() {
			if err := r.ReadBlock(i, b); err != nil {
				t.Fatal(err)
			}
			for k := range b.Len() {
				err := attrs.Each(b.Attrs(k), func(_, v []byte) bool {
					vals = append(vals, bytes.Clone(v), bytes.ToUpper(v))
					for j := 0; j+SkipGram <= len(v); j += 2 {
						vals = append(vals, bytes.Clone(v[j:j+SkipGram]), bytes.ToUpper(v[j:min(j+7, len(v))]))
					}
					return true
				})
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		PutBlock(b)
		n := r.NumBlocks()
		valuePruned, exactPruned, escPruned := 0, 0, 0
		for _, v := range vals {
			for _, fold := range []bool{false, true} {
				valuePruned += check(f, "MayContainValueBlocks", v, n, r.MayContainValueBlocks(v, fold),
					func(i int) bool { return r.MayContainValue(i, v, fold) })
			}
			exactPruned += check(f, "MayHaveValueBlocks", v, n, r.MayHaveValueBlocks(v),
				func(i int) bool { return r.MayHaveValue(i, v) })
		}
		for c := range 256 {
			escPruned += check(f, "MayHoldEscapeBlocks", c, n, r.MayHoldEscapeBlocks(byte(c)),
				func(i int) bool { return r.MayHoldEscape(i, byte(c)) })
		}
		t.Logf("%s: %d blocks, %d values; pruned: values %d, exact %d, escapes %d", f, n, len(vals), valuePruned, exactPruned, escPruned)
		v := fileVersion(f)
		if v >= 5 && valuePruned == 0 {
			t.Errorf("%s: no value ruled out a block: the comparison tests nothing", f)
		}
		if v >= 6 && exactPruned == 0 {
			t.Errorf("%s: no exact value ruled out a block: the comparison tests nothing", f)
		}
		if v >= 7 && escPruned == 0 {
			t.Errorf("%s: no escape ruled out a block: the comparison tests nothing", f)
		}
		r.Close()
		if r.MayContainValueBlocks([]byte("zzzz absent"), false) != nil || r.MayHaveValueBlocks([]byte("zzzz absent")) != nil || r.MayHoldEscapeBlocks('5') != nil {
			t.Errorf("%s: after Close a whole-segment answer is not nil (every block may)", f)
		}
	}
}

// fileVersion is the format version a golden file's name gives.
func fileVersion(f string) int {
	name := filepath.Base(f)
	name = strings.TrimPrefix(name, "golden-v")
	v := 0
	for _, c := range name {
		if c < '0' || c > '9' {
			break
		}
		v = v*10 + int(c-'0')
	}
	return v
}
