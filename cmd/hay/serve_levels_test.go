package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestServeDiscoverLogLevels: hay serve derives detected_level by
// default, as Loki 3's discover_log_levels, and --discover-log-levels=false
// turns it off; /drilldown-limits says which.
func TestServeDiscoverLogLevels(t *testing.T) {
	for _, c := range []struct {
		args   []string
		on     bool
		errors int // lines of | detected_level="error"
	}{
		{nil, true, 2},
		{[]string{"--discover-log-levels=false"}, false, 0},
	} {
		t.Run(fmt.Sprint(c.on), func(t *testing.T) {
			_, base := startServe(t, t.TempDir(), c.args...)
			get := func(path string, v any) {
				t.Helper()
				resp, err := http.Get(base + path)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != 200 {
					t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
				}
				if err := json.Unmarshal(b, v); err != nil {
					t.Fatalf("%s: %v: %s", path, err, b)
				}
			}
			var lim struct {
				Limits struct {
					Discover bool `json:"discover_log_levels"`
				} `json:"limits"`
			}
			get("/loki/api/v1/drilldown-limits", &lim)
			if lim.Limits.Discover != c.on {
				t.Errorf("discover_log_levels %v, want %v", lim.Limits.Discover, c.on)
			}
			now := time.Now().UnixNano()
			body := fmt.Sprintf(`{"streams":[{"stream":{"app":"lv"},"values":[["%d","ERROR a"],["%d","level=error msg=b"],["%d","INFO c"]]}]}`, now-3e9, now-2e9, now-1e9)
			resp, err := http.Post(base+"/loki/api/v1/push", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				t.Fatalf("push: %d", resp.StatusCode)
			}
			var qr struct {
				Data struct {
					Result []struct {
						Values [][2]string `json:"values"`
					} `json:"result"`
				} `json:"data"`
			}
			get(fmt.Sprintf("/loki/api/v1/query_range?query=%s&start=%d&end=%d", url.QueryEscape(`{app="lv"} | detected_level="error"`), now-60e9, now+1e9), &qr)
			n := 0
			for _, r := range qr.Data.Result {
				n += len(r.Values)
			}
			if n != c.errors {
				t.Errorf("| detected_level=\"error\": %d lines, want %d", n, c.errors)
			}
		})
	}
}
