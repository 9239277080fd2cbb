package main

import (
	"runtime"
	"strings"
	"testing"

	"haystack/internal/version"
	"haystack/needle"
)

// TestVersion: `hay version` and `hay --version` print the same three
// lines: the build, the platform and the kernel needle chose; extra
// arguments are a usage error.
func TestVersion(t *testing.T) {
	want := version.Get().String() + "\n" +
		"platform: " + runtime.GOOS + "/" + runtime.GOARCH + "\n" +
		"search kernel: " + needle.Impl() + " (supported: " + strings.Join(needle.Kernels(), " ") + ")\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, code := hayInProcess(t, args...)
		if code != 0 || string(out) != want {
			t.Errorf("hay %v: exit %d\n%s\nwant exit 0\n%s", args, code, out, want)
		}
	}
	if out, code := hayInProcess(t, "version", "extra"); code != 2 || len(out) != 0 {
		t.Errorf("hay version extra: exit %d, stdout %q; want exit 2 and nothing", code, out)
	}
}
