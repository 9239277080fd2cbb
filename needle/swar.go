package needle

import (
	"encoding/binary"
)

// SWAR ("SIMD within a register") constants: a byte value broadcast to all
// eight lanes of a uint64.
const (
	lanes01 = 0x0101010101010101
	lanes7F = 0x7F7F7F7F7F7F7F7F
	lanes80 = 0x8080808080808080
)

// zeroLanes returns a word with 0x80 in every byte lane of x that is zero
// and 0 in every other lane. It is exact: no carry or borrow crosses a lane,
// because (x & 0x7F) + 0x7F never exceeds 0xFE. The shorter, better-known
// (x - 0x01..01) & ^x & 0x80..80 is not: a borrow out of a zero lane also
// flags a 0x01 byte just above it.
func zeroLanes(x uint64) uint64 {
	return ^(((x & lanes7F) + lanes7F) | x | lanes7F)
}

// load64 reads 8 bytes at b[i:] as a little-endian word, so lane k is
// byte i+k on every machine (big-endian ones included).
func load64(b []byte, i int) uint64 {
	return binary.LittleEndian.Uint64(b[i : i+8])
}

// loadPartial reads the n < 8 bytes at b[i:i+n] into the low lanes of a
// word; the other lanes are zero. It reads nothing past b[i+n-1].
func loadPartial(b []byte, i, n int) uint64 {
	var w uint64
	for k, c := range b[i : i+n] {
		w |= uint64(c) << (8 * k)
	}
	return w
}

// scanGeneric is the portable kernel: SWAR over 8-byte words.
//
// The scan contract, shared by every kernel: positions p in [from, last]
// are candidates when all four anchors of a match, (h[p+off] | or) == c
// for each anchor (off, c, or) of a. The caller guarantees 0 <= from <=
// last and last+max(offsets) < len(h). scan returns mask == 0 when there is
// no candidate in [from, last]. Otherwise it returns base <= the first
// candidate, with no candidate in [from, base), and mask holding exactly
// the candidates in [base, base+width) ∩ [from, last]: for the generic
// kernel lane k is bit 8k+7, for the vector kernels bit k (see
// kernel.laneShift). Every kernel compares anchors 1 and 2 first and looks
// at 3 and 4 only where those match.
//
// The final word is moved back to end at last, overlapping words already
// scanned, and the lanes already scanned are masked off, so there is no
// byte-at-a-time tail. Only haystacks with fewer than 8 positions in all
// are read with partial loads.
func scanGeneric(a *scanArgs, h []byte, from, last int) (int, uint64) {
	o1, o2 := a.off1, a.off2
	b1, b2 := lanes01*uint64(a.c1), lanes01*uint64(a.c2)
	m1, m2 := lanes01*uint64(a.or1), lanes01*uint64(a.or2)
	if last < 7 {
		n := last + 1
		x := ((loadPartial(h, o1, n) | m1) ^ b1) | ((loadPartial(h, o2, n) | m2) ^ b2)
		if zeroLanes(x)&(1<<(8*n)-1) == 0 {
			return 0, 0
		}
		x |= diff34(a, loadPartial(h, a.off3, n), loadPartial(h, a.off4, n))
		mask := zeroLanes(x) & (1<<(8*n) - 1) >> (8 * from) << (8 * from)
		return 0, mask
	}
	p := from
	for ; p+7 <= last; p += 8 {
		x := ((load64(h, p+o1) | m1) ^ b1) | ((load64(h, p+o2) | m2) ^ b2)
		if zeroLanes(x) != 0 {
			x |= diff34(a, load64(h, p+a.off3), load64(h, p+a.off4))
			if mask := zeroLanes(x); mask != 0 {
				return p, mask
			}
		}
	}
	if p > last {
		return 0, 0
	}
	// Final word: end it at last, overlapping what was already scanned.
	q := last - 7
	x := ((load64(h, q+o1) | m1) ^ b1) | ((load64(h, q+o2) | m2) ^ b2)
	if zeroLanes(x) == 0 {
		return 0, 0
	}
	x |= diff34(a, load64(h, q+a.off3), load64(h, q+a.off4))
	seen := uint(p - q)
	return q, zeroLanes(x) >> (8 * seen) << (8 * seen)
}

// diff34 is zero in the lanes where words w3 and w4, read at anchors 3
// and 4, match them; scanGeneric computes it only where anchors 1 and 2
// match somewhere in the word.
func diff34(a *scanArgs, w3, w4 uint64) uint64 {
	return ((w3 | lanes01*uint64(a.or3)) ^ lanes01*uint64(a.c3)) |
		((w4 | lanes01*uint64(a.or4)) ^ lanes01*uint64(a.c4))
}

// equalFold reports whether a equals lowerNeedle when a is lower-cased in
// ASCII; len(a) == len(lowerNeedle). It compares 8 bytes at a time and
// finishes with an overlapping word, like the scan.
func equalFold(a, lowerNeedle []byte) bool {
	n := len(lowerNeedle)
	if len(a) != n {
		return false
	}
	if n < 8 {
		for i, c := range a {
			if lowerASCII(c) != lowerNeedle[i] {
				return false
			}
		}
		return true
	}
	i := 0
	for ; i+8 <= n; i += 8 {
		if lowerWord(load64(a, i)) != load64(lowerNeedle, i) {
			return false
		}
	}
	if i < n {
		i = n - 8
		return lowerWord(load64(a, i)) == load64(lowerNeedle, i)
	}
	return true
}

// lowerWord lower-cases the ASCII letters 'A'..'Z' in each lane of w and
// leaves every other byte (including all bytes >= 0x80) unchanged.
func lowerWord(w uint64) uint64 {
	t := w & lanes7F
	geA := t + lanes01*(0x80-'A')   // lane high bit set iff t >= 'A'
	gtZ := t + lanes01*(0x80-'Z'-1) // lane high bit set iff t > 'Z'
	upper := geA &^ gtZ &^ w & lanes80
	return w | upper>>2 // 0x80 >> 2 == 0x20, the case bit
}
