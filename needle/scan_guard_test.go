//go:build unix

package needle

import "testing"

// TestScanGuardPages calls every kernel directly on haystacks that end
// exactly at a PROT_NONE page and on haystacks that start right after one
// (the technique of Go's bytes/boundary_test.go): a load of even one byte
// outside h faults and kills the test.
func TestScanGuardPages(t *testing.T) {
	region := guarded(t)

	// Anchor offsets as a needle of length m would have them.
	offsets := [][2]int{{0, 1}, {1, 0}, {0, 2}, {2, 7}, {0, 32}, {70, 3}}
	for n := 1; n <= 300; n++ {
		for _, atEnd := range []bool{false, true} {
			var h []byte
			if atEnd {
				h = region[len(region)-n:] // ends at the guard page after
			} else {
				h = region[:n:n] // starts right after the guard page before
			}
			for _, offs := range offsets {
				o1, o2 := offs[0], offs[1]
				if max(o1, o2) >= n {
					continue
				}
				last := n - 1 - max(o1, o2)
				// where: -1 absent, else the candidate's position.
				for _, where := range []int{-1, 0, last} {
					for i := range h {
						h[i] = 'x'
					}
					c1, c2 := byte('N'), byte('E')
					if o1 == o2 {
						c2 = 'N'
					}
					if where >= 0 {
						h[where+o1] = 'N'
						if o1 != o2 {
							h[where+o2] = 'E'
						}
					}
					for _, or := range []byte{0, 0x20} {
						c := scanCase{h: h, last: last, o1: o1, o2: o2,
							c1: c1 | or, c2: c2 | or, or1: or, or2: or}
						checkScan(t, c)
						if last > 0 {
							c.from = last // only the tail
							checkScan(t, c)
						}
					}
				}
			}
		}
	}
}
