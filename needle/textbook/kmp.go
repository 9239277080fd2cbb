package textbook

// KMP is a needle prepared for Knuth-Morris-Pratt search (1977): the
// haystack is read once, left to right, never backing up; on a mismatch the
// failure table says how much of the needle still matches. Each step
// depends on the state (j) the previous byte left behind, a loop-carried
// dependency through a table load and a branch, which is why it is the
// slowest method here on text where mismatches are the rule.
type KMP struct {
	needle []byte
	fail   []int // fail[j]: length of the longest proper border of needle[:j+1]
}

// NewKMP builds the failure table for needle.
func NewKMP(needle []byte) *KMP {
	m := len(needle)
	fail := make([]int, m)
	k := 0
	for j := 1; j < m; j++ {
		for k > 0 && needle[j] != needle[k] {
			k = fail[k-1]
		}
		if needle[j] == needle[k] {
			k++
		}
		fail[j] = k
	}
	return &KMP{needle: needle, fail: fail}
}

// Index returns the index of the first instance of the needle in haystack,
// or -1.
//
//go:noinline
func (p *KMP) Index(haystack []byte) int {
	needle, fail := p.needle, p.fail
	m := len(needle)
	if m == 0 {
		return 0
	}
	j := 0 // needle bytes matched so far
	for i, c := range haystack {
		for j > 0 && c != needle[j] {
			j = fail[j-1]
		}
		if c == needle[j] {
			j++
			if j == m {
				return i - m + 1
			}
		}
	}
	return -1
}

// IndexKMP is NewKMP(needle).Index(haystack).
func IndexKMP(haystack, needle []byte) int {
	return NewKMP(needle).Index(haystack)
}
