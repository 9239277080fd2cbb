package logtest

import (
	"bytes"
	"testing"
)

// defaultNeedleLines is the number of lines of the default 100,000-line
// corpus that contain each of DefaultNeedles, as documented there.
var defaultNeedleLines = []int{0, 0, 0, 8, 9, 10, 32, 45, 59, 77, 168, 275, 734, 747, 1055, 2668, 8562, 8970, 16376, 19256, 33362, 35411, 38010, 38693, 49770}

// TestDefaultNeedles counts, with bytes.Contains per line, the lines that
// contain each default needle, and checks the counts span absent to about
// half the lines, rise in the documented order and match the table.
func TestDefaultNeedles(t *testing.T) {
	needles := DefaultNeedles()
	if len(needles) != 25 {
		t.Fatalf("%d needles, want 25", len(needles))
	}
	seen := map[string]bool{}
	for _, n := range needles {
		if n == "" || seen[n] {
			t.Fatalf("empty or duplicate needle %q", n)
		}
		seen[n] = true
	}
	lines := splitLines(gen(t, Config{Lines: 100_000}))
	counts := make([]int, len(needles))
	for i, n := range needles {
		for _, l := range lines {
			if bytes.Contains(l, []byte(n)) {
				counts[i]++
			}
		}
		t.Logf("%-36q %6d %7.3f%%", n, counts[i], 100*float64(counts[i])/float64(len(lines)))
	}
	if counts[0] != 0 {
		t.Errorf("first needle %q found %d times, want absent", needles[0], counts[0])
	}
	if last := counts[len(counts)-1]; last < len(lines)*40/100 || last > len(lines)*60/100 {
		t.Errorf("last needle %q found in %d lines, want 40-60%%", needles[len(needles)-1], last)
	}
	for i := 1; i < len(counts); i++ {
		if counts[i] < counts[i-1] {
			t.Errorf("needle %q (%d) is rarer than %q (%d): keep them in order", needles[i], counts[i], needles[i-1], counts[i-1])
		}
	}
	for i, want := range defaultNeedleLines {
		if counts[i] != want {
			t.Errorf("needle %q: %d lines, the documented table says %d", needles[i], counts[i], want)
		}
	}
}
