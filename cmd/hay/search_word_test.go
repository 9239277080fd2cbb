package main

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestGrepWordLine checks -w and -x against grep -w -F and grep -x -F on
// Loghub samples: random substrings (mostly cut mid-word), whole words
// and whole lines, with -i, -c and -v, byte for byte and exit status;
// and -m N (-mN), which on one file is grep's.
func TestGrepWordLine(t *testing.T) {
	if _, err := exec.LookPath("grep"); err != nil {
		t.Skip("no grep binary")
	}
	r := rand.New(rand.NewPCG(7, 7))
	for _, name := range []string{"Apache_2k.log", "OpenSSH_2k.log", "HDFS_2k.log"} {
		t.Run(name, func(t *testing.T) {
			plain := stripCR(t, filepath.Join("../../testdata/loghub", name))
			data, _ := os.ReadFile(plain)
			dir := filepath.Join(t.TempDir(), "data")
			if _, code := hayInProcess(t, "ingest", "--data", dir, plain); code != 0 {
				t.Fatalf("ingest exit %d", code)
			}
			lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
			var nds []string
			for _, nd := range needles(r, data, 20) {
				if nd != "" { // grep -w '' has rules of its own for empty matches
					nds = append(nds, nd)
				}
			}
			for range 10 {
				words := strings.Fields(string(lines[r.IntN(len(lines))]))
				if len(words) > 0 {
					nds = append(nds, words[r.IntN(len(words))])
				}
			}
			var whole []string
			for range 5 {
				whole = append(whole, string(lines[r.IntN(len(lines))]))
			}
			check := func(nd string, flags ...string) {
				t.Helper()
				want, wcode := grepOut(t, nd, plain, flags...)
				args := append(append([]string{"search", "--data", dir}, flags...), "--", nd)
				got, gcode := hayInProcess(t, args...)
				if !bytes.Equal(got, want) || gcode != wcode {
					t.Fatalf("hay search %s -- %q: exit %d, %d bytes; grep exit %d, %d bytes; first diff at line %d",
						strings.Join(flags, " "), nd, gcode, len(got), wcode, len(want), firstDiffLine(got, want))
				}
			}
			for _, nd := range nds {
				check(nd, "-w")
				check(nd, "-w", "-i", "-c")
			}
			// -m, as grep's on one file: the first N matching lines.
			for k, nd := range nds[:8] {
				check(nd, "-m", strconv.Itoa(k+1))
				check(nd, "-m"+strconv.Itoa(k+1), "-i")
			}
			for _, nd := range append(whole, nds[:5]...) {
				check(nd, "-x")
				check(nd, "-x", "-i")
			}
			// -v with -w: entries without the word (grep -v -w).
			for _, nd := range nds[len(nds)-5:] {
				want, wcode := grepArgs(t, plain, "-F", "-w", "-v", "--", nd)
				got, gcode := hayInProcess(t, "search", "--data", dir, "-w", "-v", nd)
				if !bytes.Equal(got, want) || gcode != wcode {
					t.Fatalf("hay search -w -v %q: exit %d, %d bytes; grep exit %d, %d bytes", nd, gcode, len(got), wcode, len(want))
				}
			}
		})
	}
	if _, code := hayInProcess(t, "search", "--data", t.TempDir(), "-w"); code != 2 {
		t.Errorf("-w without a pattern: exit %d, want 2", code)
	}
	// Not UTF-8: a clear refusal, not "invalid regular expression".
	if _, code, stderr := hayInProcessStderr(t, "search", "--data", t.TempDir(), "-w", "caf\xe9"); code != 2 || !strings.Contains(stderr, "valid UTF-8") {
		t.Errorf("-w with a Latin-1 pattern: exit %d, %q", code, stderr)
	}
}
