// Package version describes the running binary: the module version, the
// VCS revision and time the Go toolchain stamped into it, and the Go
// version. `hay version` prints it and the Loki build-info endpoint serves
// it, so that a bug report and a Grafana data source name the same build.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
)

// Info identifies a build. Fields the toolchain did not stamp are empty
// (a `go run`, or a build with -buildvcs=false, has no revision).
type Info struct {
	Version  string // the module version, "(devel)" for a build from a checkout
	Revision string // the VCS commit
	Time     string // the commit's time, RFC 3339
	Modified bool   // the working tree had uncommitted changes
	Go       string // the Go version, e.g. "go1.26.8"
}

// Get returns this binary's Info. It reads the build information once.
var Get = sync.OnceValue(func() Info {
	return fromBuildInfo(debug.ReadBuildInfo())
})

// fromBuildInfo is Get's work, apart so that tests can feed it.
func fromBuildInfo(bi *debug.BuildInfo, ok bool) Info {
	info := Info{Version: "(devel)", Go: runtime.Version()}
	if !ok || bi == nil {
		return info
	}
	if v := bi.Main.Version; v != "" {
		info.Version = v
	}
	if bi.GoVersion != "" {
		info.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.time":
			info.Time = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// String is one line for people: "haystack v1.2.0 (abc123, 2026-11-30T08:00:00Z)
// go1.26.8", the parenthesis only when a revision is known, with
// ", modified" when the tree was.
func (i Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "haystack %s", i.Version)
	if i.Revision != "" {
		rev := i.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		b.WriteString(" (" + rev)
		if i.Time != "" {
			b.WriteString(", " + i.Time)
		}
		if i.Modified {
			b.WriteString(", modified")
		}
		b.WriteString(")")
	}
	b.WriteString(" " + i.Go)
	return b.String()
}
