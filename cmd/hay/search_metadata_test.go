package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"haystack/internal/server"
)

// TestSearchJSONMetadata: hay search --json prints each entry's
// structured metadata (as stored, the field the server's native API
// has), locally and with --server, in the same bytes; the text output
// stays grep's (the line only); a LogQL label filter on metadata selects
// entries locally as on the server.
func TestSearchJSONMetadata(t *testing.T) {
	dir := t.TempDir()
	s, err := server.New(server.Config{DataDir: dir, NoLogLevelDiscovery: true}) // the metadata sent, no detected_level
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() { hs.Close(); s.Close() })
	base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixNano()
	body := fmt.Sprintf(`{"streams":[
		{"stream":{"app":"api"},"values":[["%d","GET /a",{"trace_id":"t1","user":"\u00e9\"q"}],["%d","GET /b"],["%d","GET /c",{"trace_id":"t2","app":"m"}]]},
		{"stream":{"app":"web"},"values":[["%d","GET /d",{"trace_id":"t1"}]]}]}`, base+1e9, base+2e9, base+3e9, base+4e9)
	resp, err := http.Post(hs.URL+"/loki/api/v1/push", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("push: %s", resp.Status)
	}
	ts := func(sec int64) string { return time.Unix(0, base+sec*1e9).UTC().Format(time.RFC3339Nano) }
	line := func(sec int64, app, l, meta string) string {
		s := fmt.Sprintf(`{"time":"%s","labels":{"app":"%s","service_name":"%s"},"line":"%s"`, ts(sec), app, app, l)
		if meta != "" {
			s += `,"metadata":` + meta
		}
		return s + "}\n"
	}
	a := line(1, "api", "GET /a", `{"trace_id":"t1","user":"é\"q"}`)
	b := line(2, "api", "GET /b", "")
	c := line(3, "api", "GET /c", `{"app":"m","trace_id":"t2"}`)
	d := line(4, "web", "GET /d", `{"trace_id":"t1"}`)
	tenant := filepath.Join(dir, "fake")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--json", "--order", "oldest", "GET"}, a + b + c + d},
		{[]string{"--order", "oldest", "GET"}, "GET /a\nGET /b\nGET /c\nGET /d\n"},
		{[]string{"--json", "--order", "oldest", "--query", `{app=~".+"} | trace_id="t1"`}, a + d},
		{[]string{"--json", "--order", "oldest", "--query", `{app="api"} | trace_id="t1"`}, a},
		{[]string{"--json", "--order", "oldest", "--query", `{app="api"} | app_extracted="m"`}, c},
		{[]string{"--json", "--order", "oldest", "--query", `{app="api"} |= "t1"`}, ""},
	} {
		for _, where := range [][]string{{"--data", tenant}, {"--server", hs.URL}} {
			args := append(append([]string{"search"}, where...), tc.args...)
			out, code := hayInProcess(t, args...)
			wantCode := 0
			if tc.want == "" {
				wantCode = 1
			}
			if code != wantCode || !bytes.Equal(out, []byte(tc.want)) {
				t.Errorf("hay %s: exit %d\n got %s\nwant %s", strings.Join(args, " "), code, out, tc.want)
			}
		}
	}
}
