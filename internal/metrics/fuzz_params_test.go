package metrics

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// bootTimeOracle reads /proc/stat text as proc(5) describes it: lines of
// "name value...", and the first line named btime holds the boot time in
// seconds (surrounding blanks ignored).
func bootTimeOracle(s string) (uint64, bool) {
	for _, line := range strings.Split(s, "\n") {
		if rest, ok := strings.CutPrefix(line, "btime "); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(rest), 10, 64)
			if err != nil {
				return 0, false
			}
			return n, true
		}
	}
	return 0, false
}

// FuzzParseBootTime compares parseBootTime with bootTimeOracle, and checks
// that a btime line inserted anywhere among other lines is found exactly.
func FuzzParseBootTime(f *testing.F) {
	real := "cpu  2255 34 2290 22625563 6290 127 456 0 0 0\ncpu0 1132 34 1441 11311718 3675 127 438 0 0 0\n" +
		"intr 114930548 113199788 3 0 5 263 0 4 [... 254 more]\nctxt 1990473\nbtime 1062191376\nprocesses 2915\n" +
		"procs_running 1\nprocs_blocked 0\nsoftirq 183433 0 21755 12 39 1137 231 21459 2263\n"
	f.Add([]byte(real), []byte("cpu 1\n"), uint64(1764467400), uint16(0))
	for _, s := range []string{"", "cpu 1\n", "btime x\n", "btime\n", "xbtime 5\n", "btime 7", "btime  7 \r\n", "btime -1\n",
		"btime 18446744073709551616\n", "btime 1\nbtime 2\n", "btime\t5\n", "\nbtime 5\n", "BTIME 5\n", "btime +5\n"} {
		f.Add([]byte(s), []byte("intr 5\n"), uint64(0), uint16(3))
	}
	f.Fuzz(func(t *testing.T, b, other []byte, btime uint64, at uint16) {
		got, err := parseBootTime(b)
		want, ok := bootTimeOracle(string(b))
		if ok != (err == nil) || got != want {
			t.Fatalf("parseBootTime(%q) = %d, %v; want %d, %v", b, got, err, want, ok)
		}
		// A /proc/stat of other's lines (none of them a btime line) with
		// "btime N" inserted as line at.
		var lines [][]byte
		for _, l := range bytes.Split(other, []byte("\n")) {
			if !bytes.HasPrefix(l, []byte("btime ")) {
				lines = append(lines, l)
			}
		}
		i := int(at) % (len(lines) + 1)
		lines = append(lines[:i], append([][]byte{[]byte("btime " + strconv.FormatUint(btime, 10))}, lines[i:]...)...)
		stat := bytes.Join(lines, []byte("\n"))
		if got, err := parseBootTime(stat); err != nil || got != btime {
			t.Fatalf("parseBootTime(%q) = %d, %v; want %d", stat, got, err, btime)
		}
	})
}
