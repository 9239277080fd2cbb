package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestDrilldownEndExclusive: detected_fields and patterns read [start,
// end), as query_range and Loki do: the entry exactly at end adds no
// field, no pattern count and no sample at end (review 15c F3).
func TestDrilldownEndExclusive(t *testing.T) {
	e := newEnv(t, nil)
	end := base - int64(time.Minute)
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, end-int64(30*time.Second), `{"inside":"1"}`))
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, end, `{"only_at_end":"1"}`))
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"y"}`, end-int64(30*time.Second), "request took 10 ms"))
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"y"}`, end, "request took 20 ms"))
	rng := fmt.Sprintf("start=%d&end=%d", end-int64(5*time.Minute), end)

	code, body := e.get("/loki/api/v1/detected_fields?query=" + q(`{app="x"}`) + "&" + rng)
	var df struct {
		Fields []struct {
			Label string `json:"label"`
		} `json:"fields"`
	}
	if err := json.Unmarshal([]byte(body), &df); code != 200 || err != nil {
		t.Fatalf("detected_fields: %d %v %s", code, err, body)
	}
	var labels []string
	for _, f := range df.Fields {
		labels = append(labels, f.Label)
	}
	// detected_level: the entry's metadata (unknown, its line's).
	if strings.Join(labels, ",") != "detected_level,inside" {
		t.Errorf("detected_fields over [start, end): %q, want [detected_level inside]", labels)
	}

	code, body = e.get("/loki/api/v1/patterns?query=" + q(`{app="y"}`) + "&step=60s&" + rng)
	var pr struct {
		Data []struct {
			Pattern string     `json:"pattern"`
			Samples [][2]int64 `json:"samples"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &pr); code != 200 || err != nil {
		t.Fatalf("patterns: %d %v %s", code, err, body)
	}
	var total int64
	for _, p := range pr.Data {
		for _, s := range p.Samples {
			total += s[1]
			if s[0] >= end/1e9 {
				t.Errorf("pattern %q has a sample at %d s, at or past end (%d s)", p.Pattern, s[0], end/1e9)
			}
		}
	}
	if total != 1 {
		t.Errorf("patterns count %d entries over [start, end), want 1: %s", total, body)
	}
}
