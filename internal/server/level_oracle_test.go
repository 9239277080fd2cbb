package server

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"haystack/internal/attrs"
)

// The test side of detected_level (as withServiceName is of
// service_name): what the tests' oracles expect a push to add to an
// entry, computed from the labels, metadata and line the test pushed.
// It is written apart from levels.go on purpose (no call into
// lineLevel, entryLevel or their tables), a small rule set that covers
// the lines the tests push: a level field (stream label, metadata pair,
// OTLP severity_number, JSON key, logfmt key) or a level word standing
// alone between spaces or punctuation. Tests whose lines are outside it
// (a level word glued into a name, escaped JSON keys, klog headers) are
// levels_test.go's business, not these oracles'.

// oracleLevelFields are the level field names (Loki's documented
// log_level_fields default), in the order Loki looks for them.
var oracleLevelFields = strings.Fields("level LEVEL Level Severity severity SEVERITY lvl LVL Lvl severity_text Severity_Text SEVERITY_TEXT")

// oracleLevelNames maps a level field's lower-cased value to its level.
var oracleLevelNames = func() map[string]string {
	m := map[string]string{}
	for level, names := range map[string]string{
		"trace":    "trace trc trac verbose finest",
		"debug":    "debug dbg dbug debu fine finer",
		"info":     "info inf information informational notice",
		"warn":     "warn warning wrn",
		"error":    "error err eror erro severe",
		"critical": "critical crit crt alert emerg emergency",
		"fatal":    "fatal ftl fata panic pnc pani",
	} {
		for _, n := range strings.Fields(names) {
			m[n] = level
		}
	}
	return m
}()

// oracleWords are the words that tell a level in a line's text: in any
// letter case, and (the short forms) in upper case only.
var (
	oracleWords      = map[string]string{"trace": "trace", "debug": "debug", "info": "info", "warn": "warn", "warning": "warn", "error": "error", "critical": "critical", "crit": "critical", "fatal": "fatal", "panic": "fatal"}
	oracleUpperWords = map[string]string{"TRC": "trace", "DBG": "debug", "INF": "info", "WRN": "warn", "ERR": "error", "ERRO": "error", "FTL": "fatal", "CRT": "critical"}
)

// oracleNormLevel is the level a level field's value names; unknown for
// a value it does not know.
func oracleNormLevel(v string) string {
	if l, ok := oracleLevelNames[strings.ToLower(strings.TrimSpace(v))]; ok {
		return l
	}
	return "unknown"
}

// wantLevel is the detected_level an entry pushed with stream labels
// labs, metadata meta and line gets: "" for none (the stream has a
// detected_level label, or the entry a detected_level pair that is a
// level's normalised name or no level's name: kept as sent; another
// name of a level, ERROR, is replaced by the normalised one). A level
// label's or pair's value that names no level is kept as sent (as Loki
// does since grafana/loki PR 22844); a line's is unknown.
func wantLevel(labs, meta map[string]string, line string) string {
	if labs["detected_level"] != "" {
		return ""
	}
	if v, ok := meta["detected_level"]; ok {
		if l := oracleNormLevel(v); l != "unknown" && l != v {
			return l
		}
		return ""
	}
	asSent := func(v string) string {
		if l := oracleNormLevel(v); l != "unknown" {
			return l
		}
		return v
	}
	for _, f := range oracleLevelFields {
		if v := labs[f]; v != "" {
			return asSent(v)
		}
	}
	for _, f := range oracleLevelFields {
		if v, ok := meta[f]; ok {
			return asSent(v)
		}
	}
	if n, err := strconv.Atoi(meta["severity_number"]); err == nil && n >= 1 && n <= 24 {
		return []string{"trace", "debug", "info", "warn", "error", "fatal"}[(n-1)/4]
	}
	return wantLineLevel(line)
}

// wantLineLevel is the level a line's text tells.
func wantLineLevel(line string) string {
	if t := strings.TrimSpace(line); strings.HasPrefix(t, "{") {
		var obj map[string]any
		if json.Unmarshal([]byte(t), &obj) == nil {
			return wantJSONLevel(obj)
		}
	}
	// Only a plain line's first 4 KiB are read for its level (doc.go: a
	// level is written near the start).
	line = line[:min(len(line), 4<<10)]
	for _, w := range strings.Fields(line) {
		for _, f := range oracleLevelFields {
			if v, ok := strings.CutPrefix(w, f+"="); ok {
				return oracleNormLevel(strings.Trim(v, `"`))
			}
		}
	}
	if l := wordsLevel(line); l != "" {
		return l
	}
	return "unknown"
}

// wantJSONLevel is a JSON object line's level: its level field's or
// that of an object directly under it, else the first level word of its
// string values.
func wantJSONLevel(obj map[string]any) string {
	field := func(m map[string]any) (string, bool) {
		for _, f := range oracleLevelFields {
			switch v := m[f].(type) {
			case string:
				return oracleNormLevel(v), true
			case float64:
				if l, ok := map[float64]string{10: "trace", 20: "debug", 30: "info", 40: "warn", 50: "error", 60: "fatal"}[v]; ok {
					return l, true
				}
				return "unknown", true
			}
		}
		return "", false
	}
	if l, ok := field(obj); ok {
		return l
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if m, ok := obj[k].(map[string]any); ok {
			if l, ok := field(m); ok {
				return l
			}
		}
	}
	var strs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			strs = append(strs, v)
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(v)) {
				walk(v[k])
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(obj)
	for _, s := range strs {
		if l := wordsLevel(s); l != "" {
			return l
		}
	}
	return "unknown"
}

// wordsLevel is the level of the first level word of s that stands
// between spaces and brackets, colons, commas or quotes ("" for none):
// glued to a name by '-', '.', '/' or '=' it is none.
func wordsLevel(s string) string {
	s = oracleANSI.ReplaceAllString(s, " ") // terminal colours are no words
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(" \t\r\n[]():,;\"'|<>", r) }) {
		if l, ok := oracleWords[strings.ToLower(w)]; ok {
			return l
		}
		if l, ok := oracleUpperWords[w]; ok {
			return l
		}
	}
	return ""
}

// oracleANSI matches an ANSI control sequence (ECMA-48 CSI: ESC [,
// parameter bytes, intermediate bytes, a final byte).
var oracleANSI = regexp.MustCompile("\x1b\\[[0-?]*[ -/]*[@-~]")

// TestWantLevelOracle: the oracle's rules on the shapes the tests push.
func TestWantLevelOracle(t *testing.T) {
	for _, c := range []struct {
		labs, meta map[string]string
		line, want string
	}{
		{nil, nil, "plain line 1", "unknown"},
		{nil, nil, strings.Repeat("x", 4091) + " error", "unknown"},
		{nil, nil, strings.Repeat("x", 4090) + " error", "error"},
		{nil, nil, "GET /api/error/report 200", "unknown"},
		{nil, nil, "ERROR db down", "error"},
		{nil, nil, "\x1b[31mERROR\x1b[0m db down", "error"},
		{nil, nil, "[WARN] slow", "warn"},
		{nil, nil, "err id=3 ERR", "error"},
		{nil, nil, "level=debug msg=x error", "debug"},
		{nil, nil, `level="Warning" msg=x`, "warn"},
		{nil, nil, "lvl=bogus", "unknown"},
		{nil, nil, `{"level":"info","msg":"error"}`, "info"},
		{nil, nil, `{"x":{"severity":"ERROR"}}`, "error"},
		{nil, nil, `{"level":50}`, "error"},
		{nil, nil, `{"msg":"disk full: fatal"}`, "fatal"},
		{map[string]string{"level": "WARNING"}, nil, "ERROR x", "warn"},
		{map[string]string{"detected_level": "x"}, nil, "ERROR x", ""},
		{nil, map[string]string{"detected_level": "mine"}, "ERROR x", ""},
		{nil, map[string]string{"detected_level": "error"}, "WARN x", ""},
		{nil, map[string]string{"detected_level": "Warning"}, "ERROR x", "warn"},
		{map[string]string{"level": "cleared"}, nil, "ERROR x", "cleared"},
		{nil, map[string]string{"severity_text": "Foo"}, "ERROR x", "Foo"},
		{nil, map[string]string{"severity_text": "INFO", "severity_number": "17"}, "", "info"},
		{nil, map[string]string{"severity_number": "17"}, "", "error"},
		{nil, map[string]string{"severity_number": "0"}, "warn", "warn"},
	} {
		if got := wantLevel(c.labs, c.meta, c.line); got != c.want {
			t.Errorf("wantLevel(%v, %v, %q) = %q, want %q", c.labs, c.meta, c.line, got, c.want)
		}
	}
}

// noLevels is newEnv's mod for the tests that serve without
// detected_level (each says why).
func noLevels(c *Config) { c.NoLogLevelDiscovery = true }

// levelModes runs f with detected_level discovery on (the default) and
// off, as subtests "levels" and "nolevels": tests whose oracle knows the
// level run both ways where that is cheap.
func levelModes(t *testing.T, f func(t *testing.T, on bool)) {
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "levels", false: "nolevels"}[on], func(t *testing.T) { f(t, on) })
	}
}

// levelMod is newEnv's mod for mode on (nil) or off (noLevels).
func levelMod(on bool) func(*Config) {
	if on {
		return nil
	}
	return noLevels
}

// levelsOn reports whether e's server adds detected_level.
func (e *testEnv) levelsOn() bool { return !e.srv.cfg.NoLogLevelDiscovery }

// withLevels adds, when e's server discovers levels, the detected_level
// pair wantLevel expects to each "labels time line | metadata" string
// of e.stored's form, and sorts them as stored does.
func (e *testEnv) withLevels(want []string) []string {
	e.t.Helper()
	if !e.levelsOn() {
		return want
	}
	out := make([]string, len(want))
	for i, w := range want {
		out[i] = addStoredLevel(e.t, w)
	}
	slices.Sort(out)
	return out
}

// addStoredLevel adds the expected detected_level to one stored string.
func addStoredLevel(t *testing.T, w string) string {
	t.Helper()
	end := strings.Index(w, "} ")
	if !strings.HasPrefix(w, "{") || end < 0 {
		t.Fatalf("stored string %q: no labels", w)
	}
	labs := parsePairs(t, w[1:end])
	rest := w[end+2:]
	sp := strings.IndexByte(rest, ' ')
	if sp < 0 {
		t.Fatalf("stored string %q: no time", w)
	}
	rest = rest[sp+1:]
	ql, err := strconv.QuotedPrefix(rest)
	if err != nil {
		t.Fatalf("stored string %q: %v", w, err)
	}
	line, _ := strconv.Unquote(ql)
	metaStr, ok := strings.CutPrefix(rest[len(ql):], " | ")
	if !ok {
		t.Fatalf("stored string %q: no metadata part", w)
	}
	meta := parsePairs(t, metaStr)
	l := wantLevel(labs, meta, line)
	if _, own := meta["detected_level"]; l == "" || !own && len(meta) >= attrs.MaxPairs {
		return w // none, or no room for the pair: stored without it
	}
	meta["detected_level"] = l
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(meta)) {
		parts = append(parts, k+"="+strconv.Quote(meta[k]))
	}
	return w[:len(w)-len(metaStr)] + strings.Join(parts, ", ")
}

// parsePairs reads `a="x", b="y"` (Go-quoted values).
func parsePairs(t *testing.T, s string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for s != "" {
		k, rest, ok := strings.Cut(s, "=")
		if !ok {
			t.Fatalf("pairs %q: no '='", s)
		}
		qv, err := strconv.QuotedPrefix(rest)
		if err != nil {
			t.Fatalf("pairs %q: %v", s, err)
		}
		v, _ := strconv.Unquote(qv)
		m[strings.TrimSpace(k)] = v
		s = strings.TrimPrefix(rest[len(qv):], ", ")
	}
	return m
}

// levelLabels is labs with the detected_level wantLevel expects for an
// entry with line and metadata meta, when on: a query's stream (and a
// metric series without aggregation) has the entry's metadata among its
// labels.
func levelLabels(on bool, labs, meta map[string]string, line string) map[string]string {
	if !on {
		return labs
	}
	l := wantLevel(labs, meta, line)
	if l == "" {
		return labs
	}
	out := maps.Clone(labs)
	if out == nil {
		out = map[string]string{}
	}
	out["detected_level"] = l
	return out
}

// wantStored compares e.stored(tenant) with want (as pushed) and the
// detected_level wantLevel expects when e discovers levels.
func wantStored(t *testing.T, what string, e *testEnv, tenant string, want []string) {
	t.Helper()
	wantLines(t, what, e.stored(tenant), e.withLevels(want))
}

// dlJSON is the JSON member `"detected_level":"L",` that a query's
// stream (or series) has, when on, for an entry pushed with line and no
// level label or metadata (L = wantLevel's); "" when off. It goes
// between the labels that sort before detected_level and those after.
func dlJSON(on bool, line string) string {
	if !on {
		return ""
	}
	return `"detected_level":"` + wantLevel(nil, nil, line) + `",`
}
