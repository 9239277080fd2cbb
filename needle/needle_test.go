package needle

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// searchers returns one Searcher per kernel this machine supports, so every
// test runs every kernel in the same `go test` run.
func searchers(t testing.TB, needle []byte, fold bool) []*Searcher {
	t.Helper()
	var ss []*Searcher
	for _, name := range Kernels() {
		s, err := NewKernel(needle, fold, name)
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, s)
	}
	return ss
}

// lowerBytes lower-cases ASCII letters only (bytes.ToLower would also map
// UTF-8 sequences, which IndexFold must compare exactly).
func lowerBytes(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		out[i] = lowerASCII(c)
	}
	return out
}

// oracle is what Index (or IndexFold) must return.
func oracle(h, n []byte, fold bool) int {
	if fold {
		return bytes.Index(lowerBytes(h), lowerBytes(n))
	}
	return bytes.Index(h, n)
}

// check runs every kernel's Searcher and the package functions on one case.
func check(t *testing.T, h, n []byte) {
	t.Helper()
	for _, fold := range []bool{false, true} {
		want := oracle(h, n, fold)
		for _, s := range searchers(t, n, fold) {
			if got := s.Index(h); got != want {
				t.Fatalf("%s fold=%v: Index(%q, %q) = %d, want %d", s.kern, fold, h, n, got, want)
			}
		}
	}
	if got, want := Index(h, n), bytes.Index(h, n); got != want {
		t.Fatalf("Index(%q, %q) = %d, want %d", h, n, got, want)
	}
	if got, want := IndexFold(h, n), oracle(h, n, true); got != want {
		t.Fatalf("IndexFold(%q, %q) = %d, want %d", h, n, got, want)
	}
}

// hardBytes are the byte values the SWAR arithmetic and the case folding
// are most likely to get wrong: lane carries (0x00, 0x01, 0x7F, 0x80, 0xFF)
// and both cases of a letter plus the bytes one bit away from them.
var hardBytes = []byte{0x00, 0x01, 0x7F, 0x80, 0xFF, 'a', 'A', 'q', 'Q', '@', '`', 0xC1, 0xE1}

func TestIndexRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabets := [][]byte{hardBytes, []byte("aA"), []byte("ab"), {0, 1}}
	for i := range 30000 {
		alpha := alphabets[i%len(alphabets)]
		h := make([]byte, r.IntN(300))
		for j := range h {
			h[j] = alpha[r.IntN(len(alpha))]
		}
		var n []byte
		if len(h) > 0 && r.IntN(2) == 0 {
			// A substring of h, so most cases have a match to find.
			a := r.IntN(len(h))
			b := a + 1 + r.IntN(min(len(h)-a, 40))
			n = bytes.Clone(h[a:b])
			if r.IntN(3) == 0 { // flip its case: matches only under fold
				for j := range n {
					if 'a' <= n[j]|0x20 && n[j]|0x20 <= 'z' {
						n[j] ^= 0x20
					}
				}
			}
		} else {
			n = make([]byte, r.IntN(12))
			for j := range n {
				n[j] = alpha[r.IntN(len(alpha))]
			}
		}
		check(t, h, n)
	}
}

// TestEveryPosition puts the needle at every position of haystacks of
// every length, so it lands in every lane of a word or vector and in the
// overlapping final one.
func TestEveryPosition(t *testing.T) {
	needles := []string{"x", "xy", "xyz", "Qa", "aQa", "abcdefgh", "abcdefghi", "status=50", " timeout",
		strings.Repeat("0123456789", 7), strings.Repeat("Zz", 40)}
	for _, n := range needles {
		for size := len(n); size <= 200; size++ {
			for p := 0; p+len(n) <= size; p++ {
				h := bytes.Repeat([]byte{'.'}, size)
				copy(h[p:], n)
				for _, fold := range []bool{false, true} {
					for _, s := range searchers(t, []byte(n), fold) {
						if got := s.Index(h); got != p {
							t.Fatalf("%s fold=%v needle %q size %d: got %d, want %d", s.kern, fold, n, size, got, p)
						}
					}
				}
			}
		}
	}
}

// TestNearMisses places, at every position, a copy of the needle whose
// anchor bytes match but one other byte does not: the prefilter fires and
// the verify step must reject it.
func TestNearMisses(t *testing.T) {
	needles := []string{"abc", "hello world", "trace_id=", "0123456789abcdefXYZ", strings.Repeat("k", 30) + "Q"}
	for _, n := range needles {
		for _, fold := range []bool{false, true} {
			for _, s := range searchers(t, []byte(n), fold) {
				// Damage each non-anchor byte in turn.
				for d := range len(n) {
					if d == s.off1 || d == s.off2 {
						continue
					}
					bad := []byte(n)
					bad[d] ^= 0x01
					for size := len(n); size <= 140; size += 7 {
						for p := 0; p+len(n) <= size; p++ {
							h := bytes.Repeat([]byte{' '}, size)
							copy(h[p:], bad)
							want := oracle(h, []byte(n), fold)
							if got := s.Index(h); got != want {
								t.Fatalf("%s fold=%v needle %q near miss %q at %d size %d: got %d want %d",
									s.kern, fold, n, bad, p, size, got, want)
							}
						}
					}
				}
			}
		}
	}
}

// TestZeroLanesExact pins the exact zero-byte mask on the case the shorter
// formula gets wrong: a zero lane with 0x01 just above it.
func TestZeroLanesExact(t *testing.T) {
	if got, want := zeroLanes(0x0100), uint64(lanes80)&^0x8000; got != want {
		// lane 0 is zero, lane 1 is 0x01, lanes 2..7 are zero
		t.Fatalf("zeroLanes(0x0100) = %#x, want %#x", got, want)
	}
	if got, want := zeroLanes(0xFFFFFFFFFFFF0100), uint64(0x80); got != want {
		t.Fatalf("zeroLanes(0x...ffff0100) = %#x, want %#x", got, want)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		var x uint64
		for k := range 8 {
			x |= uint64(hardBytes[r.IntN(len(hardBytes))]) << (8 * k)
		}
		var want uint64
		for k := range 8 {
			if byte(x>>(8*k)) == 0 {
				want |= 0x80 << (8 * k)
			}
		}
		if got := zeroLanes(x); got != want {
			t.Fatalf("zeroLanes(%#x) = %#x, want %#x", x, got, want)
		}
	}
}

func TestLowerWord(t *testing.T) {
	for c := 0; c < 256; c++ {
		w := uint64(c) * lanes01
		if got, want := lowerWord(w), uint64(lowerASCII(byte(c)))*lanes01; got != want {
			t.Fatalf("lowerWord(%#x) = %#x, want %#x", w, got, want)
		}
	}
}

// TestCapacityTrap: the bytes after len (in the slice's capacity) would
// complete a match; no kernel may see them.
func TestCapacityTrap(t *testing.T) {
	for _, n := range []string{"ab", "abc", "needle", "0123456789abcdef0123456789abcdef0123456789"} {
		for size := 0; size <= 200; size++ {
			for cut := 1; cut < len(n); cut++ {
				if cut > size {
					break
				}
				buf := bytes.Repeat([]byte{'-'}, size+len(n))
				copy(buf[size-cut:], n) // the needle straddles len
				h := buf[:size]
				for _, fold := range []bool{false, true} {
					for _, s := range searchers(t, []byte(n), fold) {
						if got := s.Index(h); got != -1 {
							t.Fatalf("%s fold=%v %q size %d cut %d: got %d, want -1", s.kern, fold, n, size, cut, got)
						}
					}
				}
			}
		}
	}
}

func TestEmptyAndShort(t *testing.T) {
	cases := []struct{ h, n string }{
		{"", ""}, {"a", ""}, {"", "a"}, {"a", "a"}, {"a", "ab"}, {"ab", "b"},
		{"\r\n", "\r"}, {"line\r\n", "\r\n"}, {"\xff\xfe", "\xfe"}, {"\xc3\xa9t\xc3\xa9", "\xc3\x89"},
		{"ABC", "abc"}, {"abc", "ABC"}, {"[\\]^_`", "{|}"}, {"@", "`"},
	}
	for _, c := range cases {
		check(t, []byte(c.h), []byte(c.n))
	}
}

func TestCount(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 3000 {
		h := make([]byte, r.IntN(400))
		for j := range h {
			h[j] = "ab"[r.IntN(2)]
		}
		n := make([]byte, 1+r.IntN(4))
		for j := range n {
			n[j] = "ab"[r.IntN(2)]
		}
		want := bytes.Count(h, n)
		for _, s := range searchers(t, n, false) {
			if got := s.Count(h); got != want {
				t.Fatalf("%s Count(%q, %q) = %d, want %d", s.kern, h, n, got, want)
			}
		}
	}
	if got := New(nil).Count([]byte("abc")); got != 4 {
		t.Fatalf("Count with empty needle = %d, want 4", got)
	}
}

// TestDegrade: a prefilter that keeps failing must hand over to the
// fallback, and the answer must stay right either way.
func TestDegrade(t *testing.T) {
	h := bytes.Repeat([]byte("ab"), 5000)
	for _, fold := range []bool{false, true} {
		// "abab..." with one byte flipped away from the anchors: both anchors
		// match at every other position and the verify step always fails.
		n := []byte("abababababababab")
		for d := 1; ; d++ {
			n[d] ^= 'a' ^ 'b'
			if s := New(n); d != s.off1 && d != s.off2 {
				break
			}
			n[d] ^= 'a' ^ 'b'
		}
		for _, s := range searchers(t, n, fold) {
			before := fallbacks.Load()
			if got := s.Index(h); got != -1 {
				t.Fatalf("%s: got %d, want -1", s.kern, got)
			}
			if fallbacks.Load() == before {
				t.Fatalf("%s fold=%v: prefilter never degraded on %d false candidates", s.kern, fold, len(h)/2)
			}
			hm := append(bytes.Clone(h), n...)
			if got, want := s.Index(hm), oracle(hm, n, fold); got != want {
				t.Fatalf("%s: got %d, want %d", s.kern, got, want)
			}
		}
	}
	// aQa in all-a rows: the rare 'Q' is an anchor, so there is nothing to degrade.
	rows := bytes.Repeat([]byte{'a'}, 1024)
	for _, s := range searchers(t, []byte("aQa"), false) {
		if s.c1 != 'Q' && s.c2 != 'Q' {
			t.Fatalf("aQa: anchors %q %q, want 'Q' among them", s.c1, s.c2)
		}
		if got := s.Index(rows); got != -1 {
			t.Fatalf("got %d", got)
		}
	}
}

func TestAnchors(t *testing.T) {
	cases := []struct {
		needle string
		avoid  string // bytes neither anchor may be
	}{
		{" timeout", " "},
		{"status=50", "="},
		{"trace_id=", "_="},
		{"span_id=abc", "_="},
	}
	for _, c := range cases {
		s := New([]byte(c.needle))
		if s.off1 == s.off2 {
			t.Fatalf("%q: both anchors at %d", c.needle, s.off1)
		}
		for _, a := range []byte{s.c1, s.c2} {
			if strings.IndexByte(c.avoid, a) >= 0 {
				t.Errorf("%q: anchor %q is structural/common", c.needle, a)
			}
		}
	}
}

func TestChooseKernel(t *testing.T) {
	all := []kernel{kernGeneric, kernAVX2, kernAVX512}
	for _, c := range []struct {
		env  string
		have []kernel
		want kernel
	}{
		{"", all, kernAVX512},
		{"generic", all, kernGeneric},
		{"avx2", all, kernAVX2},
		{"avx512", []kernel{kernGeneric, kernAVX2}, kernAVX2},
		{"bogus", []kernel{kernGeneric}, kernGeneric},
	} {
		if got := chooseKernel(c.env, c.have); got != c.want {
			t.Errorf("chooseKernel(%q, %v) = %v, want %v", c.env, c.have, got, c.want)
		}
	}
	if _, err := NewKernel([]byte("x"), false, "sse9"); err == nil {
		t.Fatal("NewKernel accepted an unknown kernel")
	}
	t.Logf("kernels here: %v, in use: %s", Kernels(), Impl())
}

func ExampleIndex() {
	fmt.Println(Index([]byte("GET /health 200 3ms"), []byte("200")))
	fmt.Println(IndexFold([]byte("Connection TIMEOUT"), []byte("timeout")))
	// Output:
	// 12
	// 11
}

// TestSecondAnchors: the second pair of anchors is two more offsets of the
// needle, distinct from the first pair and from each other when the needle
// has room, repeated ones when it does not; each anchor's byte is the
// needle's byte there.
func TestSecondAnchors(t *testing.T) {
	for _, n := range []string{"a", "ab", "abc", "aQa", "abcd", "status=50", "connection refused", "aaaaaaa"} {
		for _, fold := range []bool{false, true} {
			var s *Searcher
			if fold {
				s = NewFold([]byte(n))
			} else {
				s = New([]byte(n))
			}
			offs := []int{s.off1, s.off2, s.off3, s.off4}
			cs := []byte{s.c1, s.c2, s.c3, s.c4}
			ors := []byte{s.or1, s.or2, s.or3, s.or4}
			distinct := map[int]bool{}
			for k, o := range offs {
				if o < 0 || o >= len(n) {
					t.Fatalf("%q: anchor %d at %d, outside the needle", n, k+1, o)
				}
				if cs[k] != s.needle[o] {
					t.Fatalf("%q: anchor %d is %q, the needle has %q at %d", n, k+1, cs[k], s.needle[o], o)
				}
				wantOr := byte(0)
				if fold && isLowerLetter(cs[k]) {
					wantOr = 0x20
				}
				if ors[k] != wantOr {
					t.Fatalf("%q fold=%v: anchor %d or %#x, want %#x", n, fold, k+1, ors[k], wantOr)
				}
				distinct[o] = true
			}
			if want := min(len(n), 4); len(distinct) != want {
				t.Fatalf("%q: anchors at %v, want %d distinct offsets", n, offs, want)
			}
		}
	}
}

// TestFastPath checks that Index's direct kernel calls (min512, min256)
// take exactly the haystacks kernelFor gives those kernels.
func TestFastPath(t *testing.T) {
	for _, name := range Kernels() {
		for _, m := range []int{1, 2, 3, 17, 70} {
			s, err := NewKernel(bytes.Repeat([]byte{'q'}, m), false, name)
			if err != nil {
				t.Fatal(err)
			}
			for n := 0; n <= 200; n++ {
				var got kernel = kernGeneric
				switch {
				case s.min512 > 0 && n >= s.min512:
					got = kernAVX512
				case s.min256 > 0 && n >= s.min256:
					got = kernAVX2
				}
				want := kernGeneric
				if m >= 2 && n >= m {
					want = s.kernelFor(n - m)
				}
				if got != want {
					t.Fatalf("%s, needle %d bytes, haystack %d: Index calls %v, kernelFor says %v", name, m, n, got, want)
				}
			}
		}
	}
}
