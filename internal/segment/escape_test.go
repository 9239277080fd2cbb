package segment

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"haystack/internal/testseed"
)

// spelledASCII is the oracle of the escape grams (format 7): the ASCII
// characters that escapes in line spell, read naively at every
// backslash: u or U and 4 or 8 hex digits, x or X and 2, or 3 octal
// digits, each form tried on its own, values below 0x80 (strconv parses
// the digits).
func spelledASCII(line []byte, into *[128]bool) {
	s := string(line)
	for i := range len(s) {
		if s[i] != '\\' {
			continue
		}
		rest := s[i+1:]
		for _, f := range []struct {
			letters string
			digits  int
			base    int
		}{{"uU", 4, 16}, {"uU", 8, 16}, {"xX", 2, 16}, {"", 3, 8}} {
			d := rest
			if f.letters != "" {
				if d == "" || !strings.ContainsRune(f.letters, rune(d[0])) {
					continue
				}
				d = d[1:]
			}
			if len(d) < f.digits || strings.ContainsAny(d[:f.digits], "+-_xXoObB") {
				continue
			}
			if v, err := strconv.ParseUint(d[:f.digits], f.base, 32); err == nil && v < 128 {
				into[v] = true
			}
		}
	}
}

// checkEscapes requires MayHoldEscape to be exact in a version-7
// segment (escapes true) without unindexed blocks, against spelledASCII
// over each block's entries, and "maybe" for every block and character
// before version 7.
func checkEscapes(t *testing.T, r *Reader, entries []Entry, escapes bool) {
	t.Helper()
	if r.EscapeIndexed() != escapes {
		t.Fatalf("EscapeIndexed() = %v in version %d", r.EscapeIndexed(), r.version)
	}
	k := 0
	for bi := range r.NumBlocks() {
		var want [128]bool
		for _, e := range entries[k : k+r.BlockMeta(bi).Entries] {
			spelledASCII(e.Line, &want)
		}
		k += r.BlockMeta(bi).Entries
		for c := range 256 {
			w := !escapes || c >= 128 || want[c]
			if got := r.MayHoldEscape(bi, byte(c)); got != w {
				t.Fatalf("version %d block %d: MayHoldEscape(%q) = %v, want %v", r.version, bi, rune(c), got, w)
			}
		}
	}
}

// escapeLine is a log line with escapes of many kinds: JSON as Go's
// encoding/json writes it (\u003c for '<'), hex ids (which hold 0035,
// 0061, ... as text), logfmt's and Go's quoted escapes, upper-case hex
// digits, escaped backslashes, non-ASCII escapes and broken ones.
func escapeLine(rng *rand.Rand) []byte {
	pieces := []string{
		`\u003c`, `\u003e`, `\u0026`, `\u0035`, `\x35`, `\065`, `\U00000035`, `\u003C`, `\u004A`, `\u004a`,
		`\\u0037`, `\\`, `\u00e9`, `\ud83d\ude00`, `\X41`, `\u12`, `\x4`, `\8`, `\0`, `\177`, `\200`,
		`\u0000`, `\u001f`, `\n`, `\"`, `\/`, `\U0001F600`, `\u00000041`, `ESC5`, `esc`,
	}
	var b strings.Builder
	fmt.Fprintf(&b, `{"trace_id":"%016x%016x","msg":"`, rng.Uint64(), rng.Uint64())
	for range rng.IntN(4) {
		b.WriteString(pieces[rng.IntN(len(pieces))])
		b.WriteString([]string{"", " ", "x", "0"}[rng.IntN(4)])
	}
	b.WriteString(`"}`)
	if rng.IntN(5) == 0 {
		b.WriteString(`\u00`) // the next entry may start with "35": never one escape
	}
	if rng.IntN(7) == 0 {
		b.WriteString(`\`)
	}
	return []byte(b.String())
}

// TestEscapeGrams: a version-7 segment's escape grams say exactly which
// ASCII characters each block's escapes spell (spelledASCII), and
// versions 3 to 6 say "maybe"; the lines' index answers text needles as
// before ("ESC5" in a line is text, not an escape gram).
func TestEscapeGrams(t *testing.T) {
	seed := testseed.Seed(t, "HAY_ESCAPEGRAMS_SEED")
	t.Logf("seed %d (HAY_ESCAPEGRAMS_SEED)", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	var es []Entry
	for i := range testseed.Scale(3000, 800) {
		line := escapeLine(rng)
		if i%3 == 0 {
			line = fmt.Appendf(nil, "plain %d \\u0-%x", i, rng.Uint32()) // no escape
		}
		if rng.IntN(9) == 0 {
			line = []byte(`35 rest`) // after an entry ending in \u00
		}
		es = append(es, Entry{Time: int64(i), Line: line})
	}
	needles := [][]byte{[]byte("ESC5"), []byte("esc5"), []byte(`\u0035`), []byte(`u003c`), []byte(`0035`), []byte("rest")}
	for _, v := range []uint32{formatV3, formatV5, formatV6, formatVersion} {
		for _, bs := range []int{300, 4 << 10} {
			path, _ := writeSegmentVersion(t, t.TempDir(), "s", es, Options{BlockSize: bs, Codec: CodecNone}, v)
			got, r := readAll(t, path)
			equalEntries(t, got, es)
			for _, w := range r.grams.unindexed {
				if w != 0 {
					t.Fatalf("version %d: blocks unindexed", v)
				}
			}
			checkEscapes(t, r, es, v >= formatVersion)
			checkExact(t, r, es, needles)
			if err := r.Verify(); err != nil {
				t.Fatal(err)
			}
			r.Close()
		}
	}
}

// TestEscapeGramsSkip: in a version-7 segment where every block holds
// Go's \u003c and hex ids, and so every 4-gram of `\u0035`, only the
// blocks that hold an escape of '5' answer MayHoldEscape('5'), where
// MayContain(`\u0035`) keeps every block (as version 6 must).
func TestEscapeGramsSkip(t *testing.T) {
	var es []Entry
	for i := range 400 {
		line := fmt.Sprintf(`{"msg":"\u003cb\u003e %d","id":"0035%08x0061"}`, i, i*7919)
		if i == 123 {
			line = `{"k":"\u0035f89"}`
		}
		es = append(es, Entry{Time: int64(i), Line: []byte(line)})
	}
	for _, v := range []uint32{formatV6, formatVersion} {
		path, _ := writeSegmentVersion(t, t.TempDir(), "s", es, Options{BlockSize: 1 << 10}, v)
		_, r := readAll(t, path)
		gram, esc := 0, 0
		for bi := range r.NumBlocks() {
			if r.MayContain(bi, []byte(`\u0035`), false) {
				gram++
			}
			if r.MayHoldEscape(bi, '5') {
				esc++
			}
		}
		wantEsc := 1
		if v < formatVersion {
			wantEsc = r.NumBlocks()
		}
		if gram != r.NumBlocks() || esc != wantEsc {
			t.Errorf("version %d: %d blocks, %d may hold the grams of \\u0035, %d an escape of '5' (want %d)", v, r.NumBlocks(), gram, esc, wantEsc)
		}
		r.Close()
	}
}

// TestGoldenLayoutV7 reads every gram of golden-v7.seg's lines' index
// and its blocks: exactly the lowered 4-grams of each block's entries
// and, per ASCII character an escape of the block spells (spelledASCII),
// the gram 'E' 'S' 'C' c, as the package doc says; the rest of the file
// has version 6's layout (Open and TestGolden read it).
func TestGoldenLayoutV7(t *testing.T) {
	path := filepath.Join("testdata", "golden-v7.seg")
	v7 := readFile(t, path)
	if le := binary.LittleEndian.Uint32; le(v7[8:]) != 7 || le(v7[len(v7)-footerSize+44:]) != 7 {
		t.Fatal("not version 7")
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	es := goldenEscapeEntries()
	want := blockGrams(r, es)
	k, escapes := 0, 0
	for bi := range r.NumBlocks() {
		var spelled [128]bool
		for _, e := range es[k : k+r.BlockMeta(bi).Entries] {
			spelledASCII(e.Line, &spelled)
		}
		k += r.BlockMeta(bi).Entries
		for c, ok := range spelled {
			if ok {
				want[bi][uint32('E')<<24|uint32('S')<<16|uint32('C')<<8|uint32(c)] = true
				escapes++
			}
		}
	}
	if escapes == 0 {
		t.Fatal("the golden entries spell no escape")
	}
	got := make([]map[uint32]bool, r.NumBlocks())
	for i := range got {
		got[i] = map[uint32]bool{}
	}
	x := r.grams
	for g := range len(x.table) / gramTableEntry {
		if err := x.verify(g); err != nil {
			t.Fatal(err)
		}
		it := x.iter(g)
		for it.next() {
			bm := make([]uint64, (r.NumBlocks()+63)/64)
			for i := range bm {
				bm[i] = ^uint64(0)
			}
			it.p.and(bm)
			for bi := range r.NumBlocks() {
				if bm[bi/64]&(1<<(bi%64)) != 0 {
					got[bi][it.gram] = true
				}
			}
		}
		if it.d.err != nil {
			t.Fatal(it.d.err)
		}
	}
	for bi := range got {
		if !maps.Equal(got[bi], want[bi]) {
			t.Fatalf("block %d: %d grams indexed, %d expected", bi, len(got[bi]), len(want[bi]))
		}
	}
}
