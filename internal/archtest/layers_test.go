package archtest

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// rank orders Haystack's packages: a package may import only packages of a
// lower rank. New packages must be added here, so the layering is decided
// when they are written, not discovered later.
var rank = map[string]int{
	"haystack/needle":                                0,
	"haystack/needle/internal/mkrank":                0,
	"haystack/internal/browsertest":                  0,
	"haystack/internal/server/web":                   0,
	"haystack/internal/archtest":                     0,
	"haystack/internal/metrics":                      0,
	"haystack/internal/metrics/metricstest":          0,
	"haystack/internal/version":                      0,
	"haystack/internal/testseed":                     0,
	"haystack/internal/testexec":                     0,
	"haystack/internal/testfs":                       0,
	"haystack/internal/testdiff":                     0,
	"haystack/internal/attrs":                        0,
	"haystack/internal/dirfs":                        0,
	"haystack/needle/textbook":                       1,
	"haystack/internal/segment":                      1,
	"haystack/internal/ingest":                       1,
	"haystack/internal/logtest":                      1,
	"haystack/internal/store":                        2,
	"haystack/internal/query":                        2,
	"haystack/internal/segment/internal/measure":     2,
	"haystack/internal/segment/internal/skipmeasure": 2,
	"haystack/internal/search":                       3,
	"haystack/internal/server":                       4,
	"haystack/cmd/hay":                               5,
}

func TestLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports", "haystack/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		seen++
		r, ok := rank[p.ImportPath]
		if !ok {
			t.Errorf("package %s has no rank: add it to the table in layers_test.go", p.ImportPath)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, "haystack/") {
				continue
			}
			if ri, ok := rank[imp]; ok && ri >= r {
				t.Errorf("%s (rank %d) imports %s (rank %d): imports must go downward", p.ImportPath, r, imp, ri)
			}
		}
	}
	if seen < len(rank)-2 {
		t.Fatalf("go list found %d packages, want about %d", seen, len(rank))
	}
}
