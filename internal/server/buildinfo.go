package server

import (
	"net/http"

	"haystack/internal/version"
)

// buildInfo answers Loki's GET /loki/api/v1/status/buildinfo with this
// binary's own identity (clients such as Grafana read it to learn what
// they talk to), in Loki's six fields. It names no Loki version, since
// Haystack implements only part of Loki's API.
func buildInfo() map[string]string {
	v := version.Get()
	info := map[string]string{"version": "haystack " + v.Version, "revision": v.Revision, "branch": "", "buildUser": "", "buildDate": v.Time, "goVersion": v.Go}
	if v.Modified {
		info["branch"] = "modified"
	}
	return info
}

func (s *Server) lokiBuildInfo(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, buildInfo())
}
