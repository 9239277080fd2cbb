package textbook

// Horspool is a needle prepared for Boyer-Moore-Horspool search (Horspool,
// 1980): the window's last byte picks the shift from a 256-entry table, so
// a byte absent from the needle skips a whole needle length. The window is
// compared right to left, last byte first.
type Horspool struct {
	needle []byte
	shift  [256]int
}

// NewHorspool builds the bad-character shift table for needle: for a byte c
// the distance from c's last occurrence in needle[:m-1] to the needle's end,
// or m when c does not occur there.
func NewHorspool(needle []byte) *Horspool {
	h := &Horspool{needle: needle}
	m := len(needle)
	for c := range h.shift {
		h.shift[c] = m
	}
	for i := 0; i < m-1; i++ {
		h.shift[needle[i]] = m - 1 - i
	}
	return h
}

// Index returns the index of the first instance of the needle in haystack,
// or -1.
//
//go:noinline
func (h *Horspool) Index(haystack []byte) int {
	needle := h.needle
	n, m := len(haystack), len(needle)
	if m == 0 {
		return 0
	}
	last := needle[m-1]
	for i := 0; i <= n-m; {
		c := haystack[i+m-1]
		if c == last {
			j := m - 2
			for j >= 0 && haystack[i+j] == needle[j] {
				j--
			}
			if j < 0 {
				return i
			}
		}
		i += h.shift[c]
	}
	return -1
}

// IndexHorspool is NewHorspool(needle).Index(haystack).
func IndexHorspool(haystack, needle []byte) int {
	return NewHorspool(needle).Index(haystack)
}
