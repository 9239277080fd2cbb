package needle

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMutantsAreCaught proves the suite can fail: it rebuilds this package
// with a known-bad change to the SWAR kernel (through `go test -overlay`, so
// the tree is never touched) and requires the oracle tests to fail.
func TestMutantsAreCaught(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go command needed to build mutants: %v", err)
	}
	src, err := os.ReadFile("swar.go")
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs("swar.go")
	if err != nil {
		t.Fatal(err)
	}
	mutants := []struct{ name, from, to string }{
		{
			name: "shorter zero-byte formula",
			from: "return ^(((x & lanes7F) + lanes7F) | x | lanes7F)",
			to:   "return (x - lanes01) &^ x & lanes80",
		},
		{
			name: "no overlapping final word",
			from: "\t// Final word: end it at last",
			to:   "\treturn 0, 0\n\t// Final word: end it at last",
		},
		{
			// Invisible to Index (the re-reported lanes fail verification
			// again) but a break of the scan contract.
			name: "final word not masked",
			from: "return q, zeroLanes(x) >> (8 * seen) << (8 * seen)",
			to:   "_ = seen\n\treturn q, zeroLanes(x)",
		},
	}
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			if strings.Count(string(src), m.from) != 1 {
				t.Fatalf("mutation site %q not found exactly once in swar.go", m.from)
			}
			dir := t.TempDir()
			mutant := filepath.Join(dir, "swar.go")
			if err := os.WriteFile(mutant, []byte(strings.Replace(string(src), m.from, m.to, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{abs: mutant}})
			ovPath := filepath.Join(dir, "overlay.json")
			if err := os.WriteFile(ovPath, overlay, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(goBin, "test", "-count=1", "-tags=purego", "-overlay="+ovPath,
				"-run=^(TestZeroLanesExact|TestEveryPosition|TestIndexRandom|TestCount|TestScanContract|TestScanEveryPosition)$", ".")
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("mutant %q passed the suite:\n%s", m.name, out)
			}
			if !strings.Contains(string(out), "--- FAIL") {
				t.Fatalf("mutant %q did not build or run; want a test failure:\n%s", m.name, out)
			}
		})
	}
}
