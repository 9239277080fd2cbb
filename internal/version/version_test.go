package version

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	cases := []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want Info
		line string
	}{
		{"no build info", nil, false, Info{Version: "(devel)", Go: runtime.Version()},
			"haystack (devel) " + runtime.Version()},
		{"checkout without vcs", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, true,
			Info{Version: "(devel)", Go: "go1.26.8"}, "haystack (devel) go1.26.8"},
		{"release", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "6079019e2a9b4c1d8e7f6a5b4c3d2e1f00112233"},
			{Key: "vcs.time", Value: "2026-11-30T08:00:00Z"},
			{Key: "vcs.modified", Value: "false"},
			{Key: "GOARCH", Value: "amd64"},
		}}, true,
			Info{Version: "v1.2.0", Revision: "6079019e2a9b4c1d8e7f6a5b4c3d2e1f00112233", Time: "2026-11-30T08:00:00Z", Go: "go1.26.8"},
			"haystack v1.2.0 (6079019e2a9b, 2026-11-30T08:00:00Z) go1.26.8"},
		{"modified tree", &debug.BuildInfo{GoVersion: "go1.26.8", Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "true"},
		}}, true,
			Info{Version: "(devel)", Revision: "abc", Modified: true, Go: "go1.26.8"},
			"haystack (devel) (abc, modified) go1.26.8"},
	}
	for _, c := range cases {
		got := fromBuildInfo(c.bi, c.ok)
		if got != c.want {
			t.Errorf("%s: fromBuildInfo = %+v, want %+v", c.name, got, c.want)
		}
		if s := got.String(); s != c.line {
			t.Errorf("%s: String = %q, want %q", c.name, s, c.line)
		}
	}
}

// TestGet: the test binary has build information, and Get reports its Go
// version.
func TestGet(t *testing.T) {
	if g := Get(); g.Go != runtime.Version() || g.Version == "" {
		t.Errorf("Get() = %+v", g)
	}
}
