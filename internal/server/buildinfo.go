package server

import (
	"net/http"
	"runtime"
	"runtime/debug"
	"sync"
)

// buildInfo answers Loki's GET /loki/api/v1/status/buildinfo with this
// binary's own identity (clients such as Grafana read it to learn what
// they talk to): the module version, the VCS revision and time the Go
// toolchain stamped into the binary, and the Go version. It names no Loki
// version, since Haystack implements only part of Loki's API.
var buildInfo = sync.OnceValue(func() map[string]string {
	info := map[string]string{"version": "haystack (devel)", "revision": "", "branch": "", "buildUser": "", "buildDate": "", "goVersion": runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		info["version"] = "haystack " + v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info["revision"] = s.Value
		case "vcs.time":
			info["buildDate"] = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				info["branch"] = "modified"
			}
		}
	}
	return info
})

func (s *Server) lokiBuildInfo(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, buildInfo())
}
