package textbook

import (
	"encoding/binary"
	"math/bits"
)

// SWAR constants: a byte value broadcast to the eight lanes of a uint64.
const (
	lanes01 = 0x0101010101010101
	lanes80 = 0x8080808080808080
)

// zeroLanes is the classic has-zero-byte test (Mycroft; Hacker's Delight
// §6-1): 0x80 in each byte lane of x that is zero. It never misses a zero
// lane, but a borrow out of a zero lane also flags a 0x01 lane just above it
// (a later position, since words are loaded little-endian). That is harmless
// here because every flagged lane is verified against the whole needle;
// package needle uses the exact formula instead because it counts on its
// masks.
func zeroLanes(x uint64) uint64 {
	return (x - lanes01) &^ x & lanes80
}

// load64 reads haystack[i:i+8] little-endian so that lane k is byte i+k on
// every machine.
func load64(b []byte, i int) uint64 {
	return binary.LittleEndian.Uint64(b[i : i+8])
}

// SWAR is the single-anchor SWAR prefilter: the needle's first byte is
// broadcast to all eight lanes, each 8-byte word of the haystack is XORed
// with it, and the zero lanes of the result are candidate starts, verified
// one by one. Positions that do not fill a whole word are tried one at a
// time at the end. Every occurrence of the first byte is a candidate, so
// the method is as fast as that byte is rare.
//
//go:noinline
func SWAR(haystack, needle []byte) int {
	n, m := len(haystack), len(needle)
	if m == 0 {
		return 0
	}
	last := n - m // the last possible start
	first := lanes01 * uint64(needle[0])
	i := 0
	for ; i+7 <= last; i += 8 {
		mask := zeroLanes(load64(haystack, i) ^ first)
		for mask != 0 {
			p := i + bits.TrailingZeros64(mask)>>3
			// The whole window, first byte included: the has-zero test
			// can flag a lane whose first byte does not match.
			if string(haystack[p:p+m]) == string(needle) {
				return p
			}
			mask &= mask - 1
		}
	}
	for ; i <= last; i++ {
		if haystack[i] == needle[0] && string(haystack[i+1:i+m]) == string(needle[1:]) {
			return i
		}
	}
	return -1
}

// SWAR2 is the SWAR prefilter with two anchors, the needle's first and last
// bytes (Muła's "generic SIMD" substring search on 64-bit words): a lane is
// a candidate only when the word at i matches the first byte and the word
// at i+m-1 matches the last byte, which cuts the false candidates of
// single-anchor SWAR roughly by the frequency of the last byte.
//
//go:noinline
func SWAR2(haystack, needle []byte) int {
	n, m := len(haystack), len(needle)
	if m == 0 {
		return 0
	}
	last := n - m
	first := lanes01 * uint64(needle[0])
	final := lanes01 * uint64(needle[m-1])
	i := 0
	for ; i+7 <= last; i += 8 {
		x := (load64(haystack, i) ^ first) | (load64(haystack, i+m-1) ^ final)
		mask := zeroLanes(x)
		for mask != 0 {
			p := i + bits.TrailingZeros64(mask)>>3
			if string(haystack[p:p+m]) == string(needle) {
				return p
			}
			mask &= mask - 1
		}
	}
	for ; i <= last; i++ {
		if haystack[i] == needle[0] && haystack[i+m-1] == needle[m-1] &&
			string(haystack[i:i+m]) == string(needle) {
			return i
		}
	}
	return -1
}
