package needle

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
)

// Tests of the scan contract (documented on scanGeneric) for every kernel
// this machine supports, each kernel called directly rather than through
// Searcher, so a kernel bug cannot hide behind the verify step.

// scanCase is one call setup of the scan contract. Without four, anchors
// 3 and 4 repeat 1 and 2.
type scanCase struct {
	h          []byte
	from, last int
	o1, o2     int
	c1, c2     byte
	or1, or2   byte
	four       bool
	o3, o4     int
	c3, c4     byte
	or3, or4   byte
}

func (c scanCase) args() *scanArgs {
	if !c.four {
		c.o3, c.o4, c.c3, c.c4, c.or3, c.or4 = c.o1, c.o2, c.c1, c.c2, c.or1, c.or2
	}
	return &scanArgs{off1: c.o1, off2: c.o2, off3: c.o3, off4: c.o4,
		c1: c.c1, c2: c.c2, c3: c.c3, c4: c.c4, or1: c.or1, or2: c.or2, or3: c.or3, or4: c.or4}
}

func (c scanCase) String() string {
	return fmt.Sprintf("len=%d from=%d last=%d args=%+v h=%q", len(c.h), c.from, c.last, *c.args(), c.h)
}

// isCandidate is the contract's definition of a candidate, byte by byte.
func (c scanCase) isCandidate(p int) bool {
	a := c.args()
	return c.h[p+a.off1]|a.or1 == a.c1 && c.h[p+a.off2]|a.or2 == a.c2 &&
		c.h[p+a.off3]|a.or3 == a.c3 && c.h[p+a.off4]|a.or4 == a.c4
}

// scanOracle lists the candidate positions in [from, last] naively.
func scanOracle(c scanCase) []int {
	var ps []int
	for p := c.from; p <= c.last; p++ {
		if c.isCandidate(p) {
			ps = append(ps, p)
		}
	}
	return ps
}

// applies reports whether kernel k may be called on c: the vector kernels
// need at least one whole vector of positions.
func applies(k kernel, c scanCase) bool {
	return k == kernGeneric || c.last+1 >= k.width()
}

// runScan drives kernel k over c the way Searcher.search does (without
// verifying), checks every call against the contract exactly, and returns
// the candidate positions it reported, in order.
func runScan(k kernel, c scanCase) ([]int, error) {
	w, shift := k.width(), k.laneShift()
	var got []int
	for from := c.from; from <= c.last; {
		base, mask := k.scan(c.args(), c.h, from, c.last)
		if mask == 0 {
			for p := from; p <= c.last; p++ {
				if c.isCandidate(p) {
					return got, fmt.Errorf("from=%d: mask 0, but %d is a candidate", from, p)
				}
			}
			return got, nil
		}
		if k != kernGeneric && mask>>w != 0 {
			return got, fmt.Errorf("from=%d: mask %#x has bits beyond lane %d", from, mask, w-1)
		}
		if k == kernGeneric && mask&^lanes80 != 0 {
			return got, fmt.Errorf("from=%d: mask %#x has bits other than lane high bits", from, mask)
		}
		// No candidate in [from, base).
		for p := from; p < base; p++ {
			if c.isCandidate(p) {
				return got, fmt.Errorf("from=%d: base %d skips candidate %d", from, base, p)
			}
		}
		// mask holds exactly the candidates in [base, base+w) ∩ [from, last].
		var want uint64
		for lane := range w {
			p := base + lane
			if p >= from && p <= c.last && c.isCandidate(p) {
				want |= 1 << (lane<<shift + (1<<shift - 1))
			}
		}
		if mask != want {
			return got, fmt.Errorf("from=%d: base %d mask %#x, want %#x", from, base, mask, want)
		}
		for m := mask; m != 0; m &= m - 1 {
			got = append(got, base+bits.TrailingZeros64(m)>>shift)
		}
		next := base + w
		if next <= from {
			return got, fmt.Errorf("from=%d: base %d does not advance", from, base)
		}
		from = next
	}
	return got, nil
}

// checkScan runs every applicable kernel on c and compares with the oracle.
func checkScan(t *testing.T, c scanCase) {
	t.Helper()
	want := scanOracle(c)
	for _, k := range supported() {
		if !applies(k, c) {
			continue
		}
		got, err := runScan(k, c)
		if err == nil && !slices.Equal(got, want) {
			err = fmt.Errorf("candidates %v, want %v", got, want)
		}
		if err != nil {
			t.Fatalf("%s: %v\n%v", k, err, c)
		}
	}
}

// scanAlphabets: the bytes SWAR and case folding get wrong most easily, a
// two-letter alphabet for dense candidates, and all bytes.
var scanAlphabets = [][]byte{
	{0x00, 0x01, 0x7F, 0x80, 0xFF, 'a', 'A', 'Q'},
	[]byte("aA"),
	nil, // any byte
}

// randomScanCase builds a haystack of n bytes over alphabet with random
// offsets (some past a vector width) and anchors, exact or folded.
func randomScanCase(r *rand.Rand, n int, alphabet []byte, fold int) (scanCase, bool) {
	if n == 0 {
		return scanCase{}, false
	}
	var c scanCase
	c.h = make([]byte, n)
	for i := range c.h {
		if alphabet == nil {
			c.h[i] = byte(r.Uint32())
		} else {
			c.h[i] = alphabet[r.IntN(len(alphabet))]
		}
	}
	maxOff := min(n-1, 80)
	c.o1, c.o2 = r.IntN(maxOff+1), r.IntN(maxOff+1)
	if r.IntN(4) == 0 {
		c.o2 = c.o1 // same offset, as for a needle of one anchor byte
	}
	c.four = r.IntN(3) > 0
	if c.four {
		c.o3, c.o4 = r.IntN(maxOff+1), r.IntN(maxOff+1)
	}
	c.last = n - 1 - max(c.o1, c.o2, c.o3, c.o4)
	if r.IntN(3) == 0 {
		c.from = r.IntN(c.last + 1)
	}
	// Anchors taken from the haystack make candidates likely.
	c.c1, c.c2 = c.h[r.IntN(n)], c.h[r.IntN(n)]
	c.c3, c.c4 = c.h[r.IntN(n)], c.h[r.IntN(n)]
	switch fold {
	case 1: // every anchor folded
		c.or1, c.or2, c.or3, c.or4 = 0x20, 0x20, 0x20, 0x20
	case 2: // some folded (letter and non-letter anchors)
		c.or1, c.or4 = 0x20, 0x20
	}
	c.c1 |= c.or1
	c.c2 |= c.or2
	c.c3 |= c.or3
	c.c4 |= c.or4
	return c, true
}

func TestScanContract(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for n := 0; n <= 300; n++ {
		for _, alphabet := range scanAlphabets {
			for fold := range 3 {
				for range 6 {
					if c, ok := randomScanCase(r, n, alphabet, fold); ok {
						checkScan(t, c)
					}
				}
			}
		}
	}
}

// TestScanEveryPosition places a single candidate at each position in turn
// (and none), on haystacks sized around the vector widths, so every lane of
// the unrolled loops, the one-vector loop and the tail is hit.
func TestScanEveryPosition(t *testing.T) {
	for _, n := range []int{8, 31, 32, 33, 63, 64, 65, 127, 128, 129, 200, 255, 256, 257, 300, 511, 512, 513, 1000} {
		for _, offs := range [][2]int{{0, 1}, {1, 0}, {0, 0}, {5, 70}} {
			o1, o2 := offs[0], offs[1]
			if max(o1, o2) >= n {
				continue
			}
			last := n - 1 - max(o1, o2)
			for _, or := range []byte{0, 0x20} {
				for p := -1; p <= last; p++ {
					h := make([]byte, n)
					for i := range h {
						h[i] = 'x'
					}
					if p >= 0 {
						h[p+o1] = 'N'
						if o2 != o1 {
							h[p+o2] = 'E'
						}
					}
					c2 := byte('E')
					if o2 == o1 {
						c2 = 'N'
					}
					checkScan(t, scanCase{h: h, last: last, o1: o1, o2: o2,
						c1: 'N' | or, c2: c2 | or, or1: or, or2: or})
				}
			}
		}
	}
}

// TestScanSecondPair: the first pair of anchors matches at every position
// and the second at one position p (or none), so every vector goes through
// the narrowing by anchors 3 and 4 and all but p's lane must be dropped,
// in the unrolled loops and in the final block alike.
func TestScanSecondPair(t *testing.T) {
	for _, n := range []int{8, 31, 32, 33, 63, 64, 65, 127, 128, 129, 200, 255, 256, 257, 300, 511, 512, 513, 1000} {
		for _, offs := range [][4]int{{0, 1, 2, 3}, {1, 0, 3, 2}, {0, 1, 70, 5}, {3, 0, 1, 1}} {
			last := n - 1 - max(offs[0], offs[1], offs[2], offs[3])
			if last < 0 {
				continue
			}
			for _, or := range []byte{0, 0x20} {
				for p := -1; p <= last; p++ {
					h := make([]byte, n)
					for i := range h {
						h[i] = 'x'
					}
					c3, c4 := byte('R'), byte('S')
					if offs[2] == offs[3] {
						c4 = 'R'
					}
					if p >= 0 {
						h[p+offs[2]] = c3
						h[p+offs[3]] = c4
					}
					for _, from := range []int{0, last / 2, last} {
						checkScan(t, scanCase{h: h, from: from, last: last, o1: offs[0], o2: offs[1],
							c1: 'x', c2: 'x', four: true, o3: offs[2], o4: offs[3],
							c3: c3 | or, c4: c4 | or, or1: 0, or2: or, or3: or, or4: or})
					}
				}
			}
		}
	}
}

// TestScanCapacityTrap: the bytes in the capacity after len would make
// positions past last candidates; no kernel may report them or depend on
// them.
func TestScanCapacityTrap(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for n := 1; n <= 300; n++ {
		for _, offs := range [][2]int{{0, 1}, {0, 7}, {3, 40}, {0, 0}} {
			o1, o2 := offs[0], offs[1]
			if o2 >= n {
				continue
			}
			last := n - 1 - o2
			buf := make([]byte, n+128)
			for i := range buf {
				buf[i] = 'A'
			}
			h := buf[:n]
			for i := range h {
				h[i] = 'x'
			}
			// Positions past last would see 'A' at o1 (inside h) and at o2
			// (in the capacity); positions up to last never see both.
			for i := last + 1 + o1; i < n; i++ {
				h[i] = 'A'
			}
			c := scanCase{h: h, last: last, o1: o1, o2: o2, c1: 'A', c2: 'A'}
			checkScan(t, c)
			c.or1, c.or2, c.c1, c.c2 = 0x20, 0x20, 'a', 'a'
			checkScan(t, c)
			// And a random haystack over the anchor's alphabet.
			for i := range h {
				h[i] = "aAx"[r.IntN(3)]
			}
			checkScan(t, c)
		}
	}
}

// TestScanLong runs haystacks long enough for many iterations of the
// unrolled loops, with sparse candidates.
func TestScanLong(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for range 40 {
		n := 1000 + r.IntN(5000)
		h := make([]byte, n)
		for i := range h {
			h[i] = "abcdefghijklmnopqrstuvwxyz "[r.IntN(27)]
		}
		for range r.IntN(6) {
			h[r.IntN(n)] = 'Q'
		}
		o1, o2 := r.IntN(40), r.IntN(40)
		c := scanCase{h: h, last: n - 1 - max(o1, o2), o1: o1, o2: o2, c1: 'Q', c2: h[r.IntN(n)]}
		checkScan(t, c)
		c.or1, c.or2, c.c1, c.c2 = 0x20, 0x20, 'q', c.c2|0x20
		checkScan(t, c)
	}
}
