package server

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

// TestBuildInfo: Loki's build-info endpoint answers, without auth as Loki
// does, with its six fields and this binary's Go version.
func TestBuildInfo(t *testing.T) {
	e := newEnv(t, nil)
	code, body := e.get("/loki/api/v1/status/buildinfo")
	if code != 200 {
		t.Fatalf("buildinfo: %d %s", code, body)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("buildinfo: %v: %s", err, body)
	}
	for _, k := range []string{"version", "revision", "branch", "buildUser", "buildDate", "goVersion"} {
		if _, ok := got[k]; !ok {
			t.Errorf("buildinfo lacks %q: %s", k, body)
		}
	}
	if got["goVersion"] != runtime.Version() || !strings.HasPrefix(got["version"], "haystack") {
		t.Errorf("buildinfo: %s", body)
	}
}
