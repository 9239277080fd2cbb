package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"haystack/internal/attrs"
	"haystack/internal/ingest"
	"haystack/internal/logtest"
	"haystack/internal/testseed"
)

// TestLineLevel is the table of what a line tells of its level
// (lineLevel). Where Loki's documentation says what it does, hay does
// the same: the field names of its default log_level_fields, matched as
// written (LeVeL is no level field), a JSON line's fields down to depth
// 2, the normalised values, unknown when nothing is found. The rest is
// hay's (doc.go): the first level word wins, a word is a run of
// [A-Za-z0-9_/-], a field with a value it does not know is unknown.
func TestLineLevel(t *testing.T) {
	huge := strings.Repeat("x ", 1<<19) // 1 MiB
	cases := []struct {
		line, want string
	}{
		// JSON: every name of log_level_fields, values in any case.
		{`{"level":"error","msg":"x"}`, "error"},
		{`{"LEVEL":"WARN"}`, "warn"},
		{`{"Level":"Info"}`, "info"},
		{`{"lvl":"dbg"}`, "debug"},
		{`{"LVL":"trace"}`, "trace"},
		{`{"Lvl":"FATAL"}`, "fatal"},
		{`{"severity":"CRITICAL"}`, "critical"},
		{`{"Severity":"warning"}`, "warn"},
		{`{"SEVERITY":"err"}`, "error"},
		{`{"severity_text":"INFO"}`, "info"},
		{`{"Severity_Text":"notice"}`, "info"},
		{`{"SEVERITY_TEXT":"emerg"}`, "critical"},
		{`{"level":" Warn "}`, "warn"},
		// Names match as written: LeVeL and levels are no fields (and
		// notice is no level word).
		{`{"LeVeL":"notice"}`, "unknown"},
		{`{"levels":"notice"}`, "unknown"},
		{`{"level":"notice"}`, "info"},
		// Depth 2: the objects directly under the line's.
		{`{"log":{"level":"notice"},"msg":"an error"}`, "info"},
		{`{"a":{"b":{"level":"notice"}}}`, "unknown"},
		{`{"a":[{"level":"notice"}]}`, "unknown"},
		{`{"ctx":{"level":"debug"},"level":"error"}`, "error"},
		{`{"ctx":{"level":"debug"},"other":{"severity":"error"}}`, "debug"},
		// The first field of the line wins.
		{`{"severity":"info","level":"error"}`, "info"},
		// Numbers as pino and bunyan write them.
		{`{"level":30,"msg":"hi"}`, "info"},
		{`{"level":10}`, "trace"},
		{`{"level":20}`, "debug"},
		{`{"level":40}`, "warn"},
		{`{"level":50,"msg":"x"}`, "error"},
		{`{"level":60}`, "fatal"},
		{`{"level":35}`, "unknown"},
		{`{"level":-1}`, "unknown"},
		// null, true, objects are no level: the words decide.
		{`{"level":null,"msg":"Error: boom"}`, "error"},
		{`{"level":true,"msg":"fine"}`, "unknown"},
		// Escapes in keys and values.
		{`{"level":"\u0065rror"}`, "error"},
		{`{"le\u0076el":"notice"}`, "info"},
		// A field with a value hay does not know: unknown, whatever the
		// message says.
		{`{"level":"loud","msg":"ERROR"}`, "unknown"},
		// No field: the first level word of the string values (not keys).
		{`{"msg":"request failed: ERROR 500"}`, "error"},
		{`{"error":null,"msg":"done"}`, "unknown"},
		{`{"msg":"ok","deep":{"a":{"b":["WARN"]}}}`, "warn"},
		{`{}`, "unknown"},
		{`  {"level":"debug"}  `, "debug"},
		// Not one JSON object: read as text.
		{`{"level":"warn" trailing`, "warn"},
		{`{"level":"debug"} {"level":"error"}`, "debug"},
		{`{"level":}`, "unknown"},
		{`{`, "unknown"},

		// logfmt: a field wins over words before or after it.
		{`ts=2024-01-02 level=warn msg="disk error"`, "warn"},
		{`msg="error while reading" level=info`, "info"},
		{`level="error" msg=x`, "error"},
		{`lvl=eror`, "error"},
		{`caller=x.go:1 level=Debug`, "debug"},
		{`severity=WARNING msg=x`, "warn"},
		{"time=1\tLevel=TRACE", "trace"},
		{`level=loud msg=error`, "unknown"},
		{`level= msg=error`, "unknown"},
		{`level="unterminated`, "unknown"},
		// Not inside a quoted value (h107's review).
		{`msg="set level=debug for module db" level=info`, "info"},
		{`ts=1 msg="flag parsed" args="-x level=trace" level=warn`, "warn"},
		{`msg="a \" level=debug" level=error`, "error"},
		{`msg="unterminated level=debug`, "debug"},
		// Only at the start or after a space or tab.
		{`x.level=notice msg=ok`, "unknown"},
		{`level=notice`, "info"},
		// CRLF.
		{"level=error\r\n", "error"},
		{"WARN something\r\n", "warn"},

		// Level words, any case, the first one wins.
		{`ERROR connection refused`, "error"},
		{`[WARN] disk almost full`, "warn"},
		{`<11>Jan  1 12:00:00 host app[1]: disk failure`, "error"},
		{`<13>Jan  1 12:00:00 host app[1]: no error, all fine`, "info"},
		{`<12>1 2024-01-01T12:00:00Z host app 1 - - something`, "warn"},
		{`<191>x debug`, "debug"},
		{`<192>x ERROR y`, "error"},
		{`<1234>x ERROR y`, "error"},
		{`<>x WARN`, "warn"},
		{`time=2024-01-01T12:00:00Z level=ERROR+2 msg="x"`, "error"},
		{`time=2024-01-01T12:00:00Z level=INFO-4 msg="x"`, "info"},
		{`{"time":"x","level":"WARN+1","msg":"y"}`, "warn"},
		{`level=ERROR+ msg=x`, "unknown"},
		{`level=FATAL+2 msg=x`, "unknown"},
		{`[Sun Dec 04 04:47:44 2005] [notice] workerEnv.init() ok /etc/httpd/conf/workers2.properties`, "info"},
		{`2024/01/01 12:00:00 [alert] 1#1: worker exited`, "critical"},
		{`[Sun Dec 04 04:51:18 2005] [error] mod_jk child workerEnv in error state 6`, "error"},
		{`a notice was posted [x] [information]`, "info"},
		{`a notice was posted, [blue] alert`, "unknown"},
		{`2024-01-02T03:04:05Z INFO started`, "info"},
		{`panic: runtime error: index out of range`, "fatal"},
		{`Error: something`, "error"},
		{`info and then error`, "info"},
		{`CRITICAL: disk`, "critical"},
		{`<crit> x`, "critical"},
		{`EMERG now`, "critical"},
		{`FATAL oops`, "fatal"},
		{`DEBUG x`, "debug"},
		{`TRACE x`, "trace"},
		{`dbug x`, "debug"},
		{`stack trace follows`, "trace"},
		// Not standalone: a word after '/' or '.', before '.' and a
		// letter, or joined by '-' or followed by '/' unless in upper
		// case (a logger's level beside a process or thread name).
		{`2024-01-01 12:00:00,000 [trace-exporter-1] ERROR c.e.Exporter - failed`, "error"},
		{`[2024-01-01 12:00:00,000: INFO/MainProcess] Task x succeeded, no error`, "info"},
		{`[2024-01-01 12:00:00,000: ERROR/MainProcess] Task x raised unexpected: ValueError()`, "error"},
		// Go's crash behind a shipper's prefix (syslog, a CRI log
		// file) is fatal: panic followed by ':'; a panic in a message
		// is error.
		{"May  1 10:00:00 web1 myapp[1234]: panic: runtime error: index out of range [3] with length 3", "fatal"},
		{"2024-05-01T10:00:00.000000000Z stderr F panic: assignment to entry in nil map", "fatal"},
		{"2024/05/01 10:00:00 http: panic serving 10.0.0.1:5000: boom", "error"},
		{"[GIN] panic recovered: boom", "error"},
		// Monolog (Laravel, Symfony): channel.LEVEL: message.
		{"[2024-05-01 10:00:00] production.ERROR: SQLSTATE[HY000] [2002] Connection refused", "error"},
		{"[2024-05-01 10:00:00] app.WARNING: Deprecated: strlen(): Passing null", "warn"},
		{"[2024-05-01 10:00:00] local.INFO: user logged in", "info"},
		{"[2024-05-01 10:00:00] security.DEBUG: Checking for authenticator", "debug"},
		// A lower-case word after '.' stays a name's part, before ':'
		// too; an upper-case one not before ':' as well.
		{"loading config.error: none", "unknown"},
		{"reading app.ERROR.log now", "unknown"},
		// Terminal colours around the level (logrus' text formatter on
		// a terminal, zap's console encoder, containers run with a
		// tty): the escape's parameters are no word.
		{"\x1b[31mERROR\x1b[0m disk full", "error"},
		{"\x1b[36mINFO\x1b[0m[0000] started", "info"},
		{"2024-01-01T00:00:00Z \x1b[33mWARN\x1b[0m slow request", "warn"},
		{"\x1b[1;31mFATAL\x1b[0m out of memory", "fatal"},
		{"\x1b[35mpanic: runtime error\x1b[0m", "fatal"},
		{"ts \x1b[2mmsg\x1b[0m \x1b[32mhttp: panic serving 1.2.3.4\x1b[0m", "error"},
		{"\x1b[0m\x1b[32m200\x1b[0m GET /x no level here", "unknown"},
		{"\x1b", "unknown"},
		{"\x1b[", "unknown"},
		{"\x1b[31", "unknown"},
		{"x\x1berror", "error"},
		{`[2024-01-01 12:00:00,000: WARNING/ForkPoolWorker-1] soft time limit exceeded`, "warn"},
		{`2024-01-01 12:00:00,000-ERROR-app-boom`, "error"},
		{`12:00:00 INFO-main: started`, "info"},
		{`Jan  1 12:00:00 debug-vm sshd[1]: error: kex_exchange_identification`, "error"},
		{`GET /debug/vars 200`, "unknown"},
		{`writing error.log and app.debug.enabled`, "unknown"},
		{`disk error/report sent`, "unknown"},
		{`An ERROR.`, "error"},
		{`2024-01-01 12:00:00,000 [error-handler-3] INFO c.e.Handler - handled`, "info"},
		{`GET /api/error/report 200`, "unknown"},
		{`2024-01-01 - root - WARNING - low disk`, "warn"},
		{`the errors were fixed`, "unknown"},
		{`terror`, "unknown"},
		{`level_error happened`, "unknown"},
		{`ERROR1 x`, "unknown"},
		// Short forms count in upper case only.
		{`err=<nil> all good`, "unknown"},
		{`[ERR] agent: failed`, "error"},
		{`10:00AM INF listening`, "info"},
		{`10:00AM inf listening`, "unknown"},
		{`WRN slow`, "warn"},
		{`DBG x`, "debug"},
		{`TRC x`, "trace"},
		{`FTL x`, "fatal"},
		{`ERRO[0001] boom`, "error"},
		{`WARN[0001] boom`, "warn"},
		{`alert sent to the user`, "unknown"},
		// klog/glog headers.
		{`E0102 15:04:05.000000 1 server.go:12] oops`, "error"},
		{`I0102 15:04:05.123 1 x.go:1] started`, "info"},
		{`W1231 23:59:59.9 1 x.go:1] slow`, "warn"},
		{`F0101 00:00:00.0 1 x.go:1] dying`, "fatal"},
		{`X0101 00:00:00.0 1 x.go:1] hm`, "unknown"},
		{`E010 15:04:05`, "unknown"},
		// None.
		{`GET /index.html 200`, "unknown"},
		{``, "unknown"},
		{"   \r\n", "unknown"},
		// Invalid UTF-8: its bytes are not word bytes.
		{"\xff\xfeERROR\xff", "error"},
		{"\xffwarn\xc3", "warn"},
		{"\xc3\xa9error", "error"},
		{"level=\xff\xfe", "unknown"},
		{"{\"level\":\"\xff\"}", "unknown"},
		// Huge lines: text is searched in its first levelScanBytes, a JSON
		// line's fields in all of it.
		{"ERROR " + huge, "error"},
		{huge + "ERROR", "unknown"},
		{strings.Repeat("x", levelScanBytes-5) + " WARN", "warn"},
		{strings.Repeat("x", levelScanBytes-4) + " WARN", "unknown"},
		{`{"msg":"` + huge + `","level":"warn"}`, "warn"},
		{`{"msg":"` + huge + ` ERROR"}`, "unknown"},
		{strings.Repeat(" ", levelScanBytes+10) + "ERROR", "unknown"},
		// PostgreSQL (log_line_prefix '%m [%p] ', stderr or syslog): its
		// severity before ":  ". LOG is info, DEBUG (DEBUG1-5 all print it)
		// debug; FATAL ends
		// the session's backend process, PANIC every session: fatal.
		// The lines that continue a message (DETAIL, HINT, STATEMENT,
		// ...) do not tell its level: unknown, whatever their words.
		{`2024-01-01 10:00:00.123 UTC [123] LOG:  checkpoint starting: time`, "info"},
		{`2024-01-01 10:00:00.123 UTC [123] LOG:  could not receive data from client: error 104`, "info"},
		{`2024-01-01 10:00:00.123 UTC [123] LOG:  statement: SELECT * FROM t WHERE level = 'error'`, "info"},
		{`LOG:  database system is ready to accept connections`, "info"},
		{`Jan  1 10:00:00 db postgres[123]: [3-1] LOG:  autovacuum launcher started`, "info"},
		{`2024-01-01 10:00:00.123 UTC [123] ERROR:  relation "debug_log" does not exist at character 15`, "error"},
		{`2024-01-01 10:00:00.123 UTC [123] FATAL:  password authentication failed for user "info"`, "fatal"},
		{`2024-01-01 10:00:00.123 UTC [123] PANIC:  could not write to file "pg_wal/xlogtemp.123": No space left on device`, "fatal"},
		{`2024-01-01 10:00:00.123 UTC [123] WARNING:  there is no transaction in progress`, "warn"},
		{`2024-01-01 10:00:00.123 UTC [123] NOTICE:  table "t" does not exist, skipping`, "info"},
		{`2024-01-01 10:00:00.123 UTC [123] INFO:  vacuuming "public.t"`, "info"},
		{`2024-01-01 10:00:00.123 UTC [123] DEBUG:  autovacuum: processing database "postgres"`, "debug"},
		{`2024-01-01 10:00:00.123 UTC [123] DEBUG:  StartTransaction(1) name: unnamed; error check`, "debug"},
		{`2024-01-01 10:00:00.123 UTC [123] DETAIL:  Key (id)=(1) already exists, a fatal error.`, "unknown"},
		{`2024-01-01 10:00:00.123 UTC [123] HINT:  Set debug_print_plan to see the plan.`, "unknown"},
		{`2024-01-01 10:00:00.123 UTC [123] STATEMENT:  INSERT INTO events (level) VALUES ('error')`, "unknown"},
		{`2024-01-01 10:00:00.123 UTC [123] CONTEXT:  while inserting tuple, ERROR: x`, "unknown"},
		// Only with PostgreSQL's two spaces and in upper case: other
		// software's LOG: is no level, nor a prose "Detail:  ".
		{`LOG: user logged in, then error`, "error"},
		{`log:  user logged in, then error`, "error"},
		{`Detail:  see the error below`, "error"},
		// Go's net/http logs a handler's recovered panic and serves on:
		// error, as is any message that mentions a panic; Go's own crash
		// (panic: first in the line), a PANIC level, [panic] and the
		// kernel's panic are fatal.
		{`2024/01/01 12:00:00 http: panic serving 1.2.3.4:5678: runtime error: invalid memory address or nil pointer dereference`, "error"},
		{`http: panic serving 1.2.3.4:5678: boom`, "error"},
		{`[Recovery] 2024/01/01 - 12:00:00 panic recovered: boom`, "error"},
		{`2024-01-01T12:00:00Z recovered from Panic in worker 3`, "error"},
		{`panic: runtime error: index out of range [5] with length 3`, "fatal"},
		{`  panic: boom`, "fatal"},
		{`2024-01-01 12:00:00 PANIC something`, "fatal"},
		{`2024-01-01 12:00:00 [panic] something`, "fatal"},
		{`[    1.234567] Kernel panic - not syncing: VFS: Unable to mount root fs`, "fatal"},
		{`kernel panic - not syncing`, "fatal"},
		{`mykernel panic serving`, "error"},
		{`{"msg":"http: panic serving 1.2.3.4:5678: boom"}`, "error"},
		{`{"msg":"panic: boom"}`, "fatal"},
		// A word of a URL's query (after '?' in its token) is no level;
		// the rest of the line still counts.
		{`10.0.0.1 - - [01/Jan/2024:12:00:00 +0000] "GET /search?q=fatal+error HTTP/1.1" 200 512`, "unknown"},
		{`"GET /search?q=fatal+error HTTP/1.1" 500 0 "https://x/?level=debug" "curl"`, "unknown"},
		{`GET /x?debug=1&trace=on HTTP/1.1 ERROR upstream`, "error"},
		{`GET /x?a=[error] WARN`, "warn"},
		{`{"request":"GET /search?q=warn HTTP/1.1","note":"info"}`, "info"},
		{`is it an error? yes`, "error"},
		{`what? error`, "error"},
		{strings.Repeat("?error", 600) + " WARN x", "warn"},
	}
	for _, c := range cases {
		if got := lineLevel([]byte(c.line)); got != c.want {
			t.Errorf("lineLevel(%.80q) = %q, want %q", c.line, got, c.want)
		}
	}
}

// TestEntryLevel: an entry's detected_level from its stream's labels,
// its metadata and its line, first found (entryLevel); "" when it has
// one (its own is kept) or its stream has a detected_level label.
func TestEntryLevel(t *testing.T) {
	cases := []struct {
		labels map[string]string
		meta   []string
		line   string
		want   string
	}{
		{map[string]string{"app": "a"}, nil, "ERROR x", "error"},
		{map[string]string{"app": "a"}, nil, "nothing", "unknown"},
		// A level label wins over the line, normalised.
		{map[string]string{"app": "a", "level": "ERROR"}, nil, "level=info", "error"},
		// A value it does not know is kept as sent, as Loki keeps it
		// (grafana/loki PR 22844); values hay knows are normalised.
		{map[string]string{"app": "a", "lvl": "x"}, nil, "ERROR", "x"},
		{map[string]string{"app": "a", "level": "cleared"}, nil, "ERROR", "cleared"},
		{map[string]string{"app": "a", "level": " Odd Value "}, nil, "", " Odd Value "},
		{map[string]string{"app": "a", "level": "NOTICE"}, nil, "", "info"},
		{map[string]string{"app": "a", "Level": "warn", "level": "debug"}, nil, "", "debug"},
		{map[string]string{"app": "a", "severity_text": "Warning"}, nil, "", "warn"},
		// ... and over metadata.
		{map[string]string{"app": "a", "level": "info"}, []string{"level", "error"}, "", "info"},
		// A detected_level label: nothing added.
		{map[string]string{"app": "a", "detected_level": "warn"}, nil, "ERROR", ""},
		// The entry's own detected_level is kept, normalised when it
		// names a level another way (as Loki's distributor does; with
		// then replaces it); another value as sent.
		{map[string]string{"app": "a"}, []string{"detected_level", "Loud"}, "ERROR", ""},
		{map[string]string{"app": "a", "level": "info"}, []string{"detected_level", "error"}, "", ""},
		{map[string]string{"app": "a", "level": "info"}, []string{"detected_level", "ERROR"}, "", "error"},
		{map[string]string{"app": "a"}, []string{"detected_level", " Warning", "level", "debug"}, "", "warn"},
		// Metadata level fields, in log_level_fields' order.
		{map[string]string{"app": "a"}, []string{"severity", "warning"}, "ERROR", "warn"},
		{map[string]string{"app": "a"}, []string{"LEVEL", "error", "level", "debug"}, "", "debug"},
		{map[string]string{"app": "a"}, []string{"severity_text", "x"}, "ERROR", "x"},
		{map[string]string{"app": "a"}, []string{"severity_text", "Foo", "severity_number", "17"}, "ERROR", "Foo"},
		{map[string]string{"app": "a"}, []string{"level", "notice2", "trace_id", "ab"}, "ERROR", "notice2"},
		// OTLP: severity_text first, then severity_number's ranges.
		{map[string]string{"app": "a"}, []string{"severity_text", "INFO", "severity_number", "17"}, "", "info"},
		{map[string]string{"app": "a"}, []string{"severity_number", "17"}, "hello", "error"},
		{map[string]string{"app": "a"}, []string{"severity_number", "1"}, "", "trace"},
		{map[string]string{"app": "a"}, []string{"severity_number", "8"}, "", "debug"},
		{map[string]string{"app": "a"}, []string{"severity_number", "12"}, "", "info"},
		{map[string]string{"app": "a"}, []string{"severity_number", "13"}, "", "warn"},
		{map[string]string{"app": "a"}, []string{"severity_number", "24"}, "", "fatal"},
		{map[string]string{"app": "a"}, []string{"severity_number", "25"}, "WARN x", "warn"},
		{map[string]string{"app": "a"}, []string{"severity_number", "x"}, "WARN x", "warn"},
		// Other metadata: the line decides.
		{map[string]string{"app": "a"}, []string{"trace_id", "ab", "zz", "1"}, `{"level":"debug"}`, "debug"},
	}
	for i, c := range cases {
		var labs ingest.Labels
		for _, k := range slices.Sorted(maps.Keys(c.labels)) {
			labs = append(labs, ingest.Label{Name: k, Value: c.labels[k]})
		}
		var meta []byte
		if c.meta != nil {
			meta = attrs.MustPairs(c.meta...)
		}
		got := ""
		if level, skip := streamLevel(labs); !skip {
			got = entryLevel(level, meta, []byte(c.line))
		}
		if got != c.want {
			t.Errorf("case %d %v %v %q: %q, want %q", i, c.labels, c.meta, c.line, got, c.want)
		}
	}
}

// TestLevelAttrsWith: the pair is inserted in name order, as
// attrs.Encode would encode the set with it (the oracle); an entry at
// attrs' limits keeps its metadata as it is.
func TestLevelAttrsWith(t *testing.T) {
	var la levelAttrs
	sets := [][]string{
		nil,
		{"a", "1"},
		{"z", "1"},
		{"a", "1", "trace_id", "abc", "detected_levelz", "2"},
		{"detected", "x", "detected_leve", "y", "e", ""},
		{"_", "1", "ZZ", "2", "severity_text", "INFO"},
	}
	var many []string
	for i := range attrs.MaxPairs - 1 {
		many = append(many, fmt.Sprintf("k%03d", i), "v")
	}
	sets = append(sets, many)
	for _, kv := range sets {
		var a []byte
		var pairs []attrs.Pair
		if kv != nil {
			a = attrs.MustPairs(kv...)
			pairs, _ = attrs.Decode(a)
		}
		for _, l := range []string{"info", "critical", "unknown", "cleared"} {
			got := la.with(a, l)
			want, err := attrs.Encode(nil, append(slices.Clone(pairs), attrs.Pair{Name: detectedLevel, Value: l}))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%v + %s: got %x, want %x", kv, l, got, want)
			}
			if cap(got) != len(got) {
				t.Errorf("%v + %s: capacity %d past the encoding's %d bytes", kv, l, cap(got), len(got))
			}
		}
	}
	// A shipper's detected_level (entryLevel normalised it) is replaced
	// in its place, the count unchanged: at 127 pairs it takes one byte
	// where 128 take two.
	own := [][]string{
		{"detected_level", "ERROR"},
		{"a", "1", "detected_level", "Warning", "z", "2"},
		append(slices.Clone(many[:2*126]), "detected_level", "INFO"),
	}
	for _, kv := range own {
		a := attrs.MustPairs(kv...)
		pairs, _ := attrs.Decode(a)
		for i := range pairs {
			if pairs[i].Name == detectedLevel {
				pairs[i].Value = "warn"
			}
		}
		want, err := attrs.Encode(nil, pairs)
		if err != nil {
			t.Fatal(err)
		}
		if got := la.with(a, "warn"); !bytes.Equal(got, want) || attrs.Validate(got) != nil {
			t.Errorf("%d pairs with detected_level: got %x, want %x", len(kv)/2, got, want)
		}
	}
	// At the limits: unchanged.
	full := append(slices.Clone(many), "zz", "v")
	a := attrs.MustPairs(full...)
	if got := la.with(a, "info"); !bytes.Equal(got, a) {
		t.Errorf("%d pairs: got %d bytes, want the metadata unchanged", attrs.MaxPairs, len(got))
	}
	// 1 + 2 + 3 + 65507 bytes: with 24 more, one past MaxBytes.
	big := attrs.MustPairs("a", strings.Repeat("v", attrs.MaxBytes-29))
	if got := la.with(big, "critical"); !bytes.Equal(got, big) {
		t.Errorf("%d bytes: got %d bytes, want the metadata unchanged", len(big), len(got))
	}
	fits := attrs.MustPairs("a", strings.Repeat("v", attrs.MaxBytes-30))
	if got := la.with(fits, "critical"); attrs.Validate(got) != nil || len(got) != attrs.MaxBytes {
		t.Errorf("%d bytes: got %d bytes, want the pair added", len(fits), len(got))
	}
}

// levelSet is the normalised levels, detected_level's only values from
// a line.
var levelSet = map[string]bool{"trace": true, "debug": true, "info": true, "warn": true, "error": true, "critical": true, "fatal": true, "unknown": true}

// FuzzLineLevel: lineLevel never panics and returns only normalised
// levels, and a level label or metadata value of any value gives one
// too or, when it normalises to unknown, is kept as sent; a text line's
// level depends only on its first levelScanBytes.
func FuzzLineLevel(f *testing.F) {
	for _, s := range []string{`{"level":"error"}`, `level=warn msg=x`, `[WARN] x`, `E0102 15:04:05 x`, `{"a":{"level":30}}`,
		`{"le\u0076el":"x"}`, "\xff{", `{"a":[{"b":"ERROR"}]}`, `panic: x`, `lvl="eror"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		l := lineLevel(line)
		if !levelSet[l] {
			t.Fatalf("lineLevel(%q) = %q", line, l)
		}
		n := normalizeLevel(line)
		if !levelSet[n] {
			t.Fatalf("normalizeLevel(%q) = %q", line, n)
		}
		// A field's value: its level, or itself when unknown.
		want := n
		if n == levelUnknown {
			want = string(line)
		}
		if lvl := streamLevelOf(line); lvl != "" && lvl != want {
			t.Fatalf("streamLevel(level=%q) = %q, want %q", line, lvl, want)
		}
		// As metadata values: a level, and the pair added to them.
		meta, err := attrs.Encode(nil, []attrs.Pair{{Name: "severity_number", Value: string(line)}, {Name: "zz", Value: string(line)}})
		if err == nil {
			el := entryLevel("", meta, line)
			if !levelSet[el] {
				t.Fatalf("entryLevel(severity_number=%q) = %q", line, el)
			}
			var la levelAttrs
			got := la.with(meta, el)
			if v, ok := attrs.Get(got, detectedLevel); !ok || string(v) != el {
				t.Fatalf("with(%x, %s) = %x: detected_level %q %v", meta, el, got, v, ok)
			}
		}
		// A shipper's detected_level of any value: normalised in place
		// when it names a level another way, else kept.
		if meta, err := attrs.Encode(nil, []attrs.Pair{{Name: "a", Value: "1"}, {Name: detectedLevel, Value: string(line)}}); err == nil {
			el := entryLevel("", meta, nil)
			wantOwn := ""
			if n != levelUnknown && n != string(line) {
				wantOwn = n
			}
			if el != wantOwn {
				t.Fatalf("entryLevel(detected_level=%q) = %q, want %q", line, el, wantOwn)
			}
			if el != "" {
				var la levelAttrs
				got := la.with(meta, el)
				if v, ok := attrs.Get(got, detectedLevel); attrs.Validate(got) != nil || !ok || string(v) != el || !bytes.HasPrefix(got, []byte{2}) {
					t.Fatalf("with(%x, %q) = %x", meta, el, got)
				}
			}
		}
		// A metadata level of any value: its level or itself, and the
		// pair added beside it and alone (as a stream's level label's).
		if meta, err := attrs.Encode(nil, []attrs.Pair{{Name: "level", Value: string(line)}}); err == nil {
			el := entryLevel("", meta, nil)
			if el != want {
				t.Fatalf("entryLevel(level=%q) = %q, want %q", line, el, want)
			}
			var la levelAttrs
			for _, a := range [][]byte{meta, nil} {
				got := la.with(a, el)
				if len(got) == len(a) {
					continue // past attrs' limits: unchanged
				}
				if v, ok := attrs.Get(got, detectedLevel); attrs.Validate(got) != nil || !ok || string(v) != el {
					t.Fatalf("with(%x, %q) = %x: detected_level %q %v", a, el, got, v, ok)
				}
			}
		}
		if t0 := bytes.TrimLeft(line, " \t\r\n"); len(t0) > 0 && t0[0] == '{' {
			return
		}
		if len(line) > levelScanBytes {
			if got := lineLevel(line[:levelScanBytes]); got != l {
				t.Fatalf("lineLevel of %d bytes = %q, of its first %d = %q", len(line), l, levelScanBytes, got)
			}
		}
	})
}

func streamLevelOf(v []byte) string {
	if !utf8.Valid(v) {
		return ""
	}
	l, _ := streamLevel(ingest.Labels{{Name: "level", Value: string(v)}})
	return l
}

// TestDetectedLevelEndToEnd pushes lines over Loki's JSON and protobuf,
// JSON lines and OTLP, then asks what Grafana's Explore asks for its log
// volume and what Logs Drilldown asks for a level: the exact counts and
// lines. With --discover-log-levels=false nothing is added (a shipper's
// own detected_level is stored either way), and /drilldown-limits says
// which.
func TestDetectedLevelEndToEnd(t *testing.T) {
	const at = base - 30e9
	type ent struct {
		line string
		meta []attrs.Pair
	}
	jsonEntries := []string{`{"level":"error","msg":"j1"}`, `level=warn msg=j2`, `ERROR j3`, `plain j4`, `[WARN] j5`}
	protoEntries := []ent{
		{line: "INFO p1"},
		{line: "panic: p2"},
		{line: `{"lvl":"debug","msg":"p3"}`},
		{line: "p4 says info", meta: []attrs.Pair{{Name: "detected_level", Value: "error"}}},
		{line: "p5", meta: []attrs.Pair{{Name: "severity", Value: "CRIT"}, {Name: "trace_id", Value: "ab"}}},
	}
	push := func(e *testEnv) {
		var js []string
		for i, l := range jsonEntries {
			js = append(js, fmt.Sprintf(`["%d",%s]`, at+int64(i), jsonStr(l)))
		}
		e.mustPush("/loki/api/v1/push", []byte(`{"streams":[{"stream":{"app":"lv","src":"json"},"values":[`+strings.Join(js, ",")+`]},`+
			fmt.Sprintf(`{"stream":{"app":"lv","src":"labelled","level":"WARN"},"values":[["%d","ERROR l1"],["%d","l2"]]}]}`, at+10, at+11)))
		ps := PushStream{Labels: `{app="lv", src="proto"}`}
		for i, en := range protoEntries {
			ps.Entries = append(ps.Entries, PushEntry{Time: at + 20 + int64(i), Line: en.line})
			ps.Metadata = append(ps.Metadata, en.meta)
		}
		e.mustPush("/loki/api/v1/push", protoBody([]PushStream{ps}), "Content-Type", "application/x-protobuf")
		e.mustPush("/api/v1/push/jsonl", fmt.Appendf(nil, `{"labels":{"app":"lv","src":"jsonl"},"ts":%d,"line":"lvl=error jl1"}`+"\n", at+30))
		otlp := fmt.Sprintf(`{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"lvotlp"}}]},"scopeLogs":[{"logRecords":[`+
			`{"timeUnixNano":"%d","severityNumber":17,"body":{"stringValue":"o1"}},`+
			`{"timeUnixNano":"%d","severityText":"Warning","severityNumber":9,"body":{"stringValue":"ERROR o2"}},`+
			`{"timeUnixNano":"%d","body":{"stringValue":"o3 DEBUG"}}]}]}]}`, at+40, at+41, at+42)
		if code, body, _ := e.otlpPost([]byte(otlp), "Content-Type", "application/json"); code != 200 {
			t.Fatalf("otlp push: %d %s", code, body)
		}
	}
	volume := func(e *testEnv, sel string) map[string]string {
		var resp struct {
			Data struct {
				Result []struct {
					Metric map[string]string `json:"metric"`
					Value  [2]any            `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		code, body := e.get(fmt.Sprintf("/loki/api/v1/query?query=%s&time=%d", q(`sum by (level, detected_level) (count_over_time(`+sel+`[1m]))`), base))
		if code != 200 {
			t.Fatalf("volume: %d %s", code, body)
		}
		if err := json.Unmarshal([]byte(body), &resp); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, r := range resp.Data.Result {
			out[fmt.Sprintf("level=%s,detected_level=%s", r.Metric["level"], r.Metric["detected_level"])] = fmt.Sprint(r.Value[1])
		}
		return out
	}
	lines := func(e *testEnv, query string) []string {
		var resp struct {
			Data struct {
				Result []struct {
					Values [][]any `json:"values"`
				} `json:"result"`
			} `json:"data"`
		}
		code, body := e.get(fmt.Sprintf("/loki/api/v1/query_range?query=%s&start=%d&end=%d&limit=1000", q(query), base-3600e9, base+1))
		if code != 200 {
			t.Fatalf("%s: %d %s", query, code, body)
		}
		if err := json.Unmarshal([]byte(body), &resp); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range resp.Data.Result {
			for _, v := range r.Values {
				out = append(out, v[1].(string))
			}
		}
		slices.Sort(out)
		return out
	}
	limits := func(e *testEnv) (bool, []any) {
		var resp struct {
			Limits struct {
				Discover bool  `json:"discover_log_levels"`
				Fields   []any `json:"log_level_fields"`
			} `json:"limits"`
		}
		code, body := e.get("/loki/api/v1/drilldown-limits")
		if code != 200 {
			t.Fatalf("drilldown-limits: %d %s", code, body)
		}
		if err := json.Unmarshal([]byte(body), &resp); err != nil {
			t.Fatal(err)
		}
		return resp.Limits.Discover, resp.Limits.Fields
	}
	wantFields := []any{"level", "LEVEL", "Level", "Severity", "severity", "SEVERITY", "lvl", "LVL", "Lvl", "severity_text", "Severity_Text", "SEVERITY_TEXT"}

	t.Run("on", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.NoLogLevelDiscovery = false })
		push(e)
		wantVolume := map[string]string{
			// json: j1 error, j3 error; proto: p4 (its own); jsonl: jl1.
			"level=,detected_level=error":    "4",
			"level=,detected_level=warn":     "2", // j2, j5
			"level=,detected_level=unknown":  "1", // j4
			"level=,detected_level=info":     "1", // p1
			"level=,detected_level=fatal":    "1", // p2
			"level=,detected_level=debug":    "1", // p3
			"level=,detected_level=critical": "1", // p5
			"level=WARN,detected_level=warn": "2", // l1, l2: the label
		}
		if got := volume(e, `{app="lv"}`); !maps.Equal(got, wantVolume) {
			t.Errorf("log volume:\n got %v\nwant %v", got, wantVolume)
		}
		wantOTLP := map[string]string{
			"level=,detected_level=error": "1", // o1: severity_number 17
			"level=,detected_level=warn":  "1", // o2: severity_text over the number and the line
			"level=,detected_level=debug": "1", // o3: the line
		}
		if got := volume(e, `{service_name="lvotlp"}`); !maps.Equal(got, wantOTLP) {
			t.Errorf("OTLP log volume:\n got %v\nwant %v", got, wantOTLP)
		}
		wantLines(t, `| detected_level="error"`, lines(e, `{app="lv"} | detected_level="error"`), []string{"ERROR j3", `lvl=error jl1`, `p4 says info`, `{"level":"error","msg":"j1"}`})
		wantLines(t, `detected_level=~"warn|critical"`, lines(e, `{app=~"lv|x"} | detected_level=~"warn|critical"`), []string{"ERROR l1", "[WARN] j5", "l2", "level=warn msg=j2", "p5"})
		// As stored: the pair among the entry's other metadata.
		var proto []string
		for _, s := range e.stored("fake") {
			if strings.Contains(s, `src="proto"`) {
				proto = append(proto, s)
			}
		}
		wantLines(t, "stored proto", proto, []string{
			fmt.Sprintf(`{app="lv", service_name="lv", src="proto"} %d "INFO p1" | detected_level="info"`, at+20),
			fmt.Sprintf(`{app="lv", service_name="lv", src="proto"} %d "panic: p2" | detected_level="fatal"`, at+21),
			fmt.Sprintf(`{app="lv", service_name="lv", src="proto"} %d "{\"lvl\":\"debug\",\"msg\":\"p3\"}" | detected_level="debug"`, at+22),
			fmt.Sprintf(`{app="lv", service_name="lv", src="proto"} %d "p4 says info" | detected_level="error"`, at+23),
			fmt.Sprintf(`{app="lv", service_name="lv", src="proto"} %d "p5" | detected_level="critical", severity="CRIT", trace_id="ab"`, at+24),
		})
		if d, f := limits(e); !d || !slices.Equal(f, wantFields) {
			t.Errorf("drilldown-limits: discover_log_levels %v, log_level_fields %v", d, f)
		}
	})
	t.Run("off", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.NoLogLevelDiscovery = true })
		push(e)
		want := map[string]string{
			"level=,detected_level=":      "10",
			"level=,detected_level=error": "1", // p4's own
			"level=WARN,detected_level=":  "2",
		}
		if got := volume(e, `{app="lv"}`); !maps.Equal(got, want) {
			t.Errorf("log volume:\n got %v\nwant %v", got, want)
		}
		if got := volume(e, `{service_name="lvotlp"}`); !maps.Equal(got, map[string]string{"level=,detected_level=": "3"}) {
			t.Errorf("OTLP log volume: %v", got)
		}
		wantLines(t, `| detected_level="error"`, lines(e, `{app="lv"} | detected_level="error"`), []string{"p4 says info"})
		for _, s := range e.stored("fake") {
			if strings.Contains(s, "detected_level") && !strings.Contains(s, "p4 says info") {
				t.Errorf("stored with the flag off: %s", s)
			}
		}
		if d, f := limits(e); d || !slices.Equal(f, wantFields) {
			t.Errorf("drilldown-limits: discover_log_levels %v, log_level_fields %v", d, f)
		}
	})
}

// TestDetectedLevelKeptValue: a level label or metadata value hay does
// not know is the entry's detected_level as sent, as in Loki (grafana/loki
// PR 22844): Drilldown lists it and | detected_level="cleared" finds
// it, also for entries without other metadata (the pair is then not one
// of the shared encodings of the known levels). A shipper's own
// detected_level is normalised when it names a level (WARNING is warn),
// as Loki's distributor does, and kept as sent otherwise.
func TestDetectedLevelKeptValue(t *testing.T) {
	const at = base - 30e9
	e := newEnv(t, func(c *Config) { c.NoLogLevelDiscovery = false })
	e.mustPush("/loki/api/v1/push", []byte(fmt.Sprintf(`{"streams":[`+
		`{"stream":{"app":"kv","level":"cleared"},"values":[["%d","ERROR k1"],["%d","k2"]]},`+
		`{"stream":{"app":"kv"},"values":[["%d","ERROR k3",{"severity_text":"Foo"}],["%d","k4",{"level":"NOTICE","trace_id":"ab"}],`+
		`["%d","k5",{"detected_level":"WARNING","trace_id":"cd"}],["%d","k6",{"detected_level":"Loud"}]]}]}`,
		at, at+1, at+2, at+3, at+4, at+5)))
	var got []string
	for _, s := range e.stored("fake") {
		if strings.Contains(s, `app="kv"`) {
			got = append(got, s)
		}
	}
	wantLines(t, "stored", got, []string{
		fmt.Sprintf(`{app="kv", level="cleared", service_name="kv"} %d "ERROR k1" | detected_level="cleared"`, at),
		fmt.Sprintf(`{app="kv", level="cleared", service_name="kv"} %d "k2" | detected_level="cleared"`, at+1),
		fmt.Sprintf(`{app="kv", service_name="kv"} %d "ERROR k3" | detected_level="Foo", severity_text="Foo"`, at+2),
		fmt.Sprintf(`{app="kv", service_name="kv"} %d "k4" | detected_level="info", level="NOTICE", trace_id="ab"`, at+3),
		fmt.Sprintf(`{app="kv", service_name="kv"} %d "k5" | detected_level="warn", trace_id="cd"`, at+4),
		fmt.Sprintf(`{app="kv", service_name="kv"} %d "k6" | detected_level="Loud"`, at+5),
	})
	code, body := e.get(fmt.Sprintf("/loki/api/v1/query_range?query=%s&start=%d&end=%d", q(`{app="kv"} | detected_level="cleared"`), base-3600e9, base+1))
	if code != 200 || !strings.Contains(body, `"ERROR k1"`) || !strings.Contains(body, `"k2"`) || strings.Contains(body, "k3") {
		t.Errorf(`| detected_level="cleared": %d %s`, code, body)
	}
}

// BenchmarkLineLevel measures lineLevel over the generated corpus
// (internal/logtest: logfmt, JSON and plain lines, mean ~255 bytes),
// the work discovery adds to each pushed line without a level label or
// metadata.
func BenchmarkLineLevel(b *testing.B) {
	g := logtest.NewGenerator(logtest.Config{Seed: 1, Lines: 4096})
	var lines [][]byte
	var n int64
	for range 4096 {
		line, _, _ := g.Next(nil)
		lines = append(lines, line)
		n += int64(len(line))
	}
	b.SetBytes(n / int64(len(lines)))
	i := 0
	for b.Loop() {
		lineLevel(lines[i%len(lines)])
		i++
	}
}

// BenchmarkPushValidate decodes and validates (no store) 1000-line
// protobuf pushes of the generated corpus, as BenchmarkPushProtobuf
// builds them: the CPU a push costs before the WAL, of which
// detected_level is part (sub-benchmark off: Config.NoLogLevelDiscovery).
func BenchmarkPushValidate(b *testing.B) {
	bodies, raw := benchPushBodies()
	for _, off := range []bool{false, true} {
		b.Run(fmt.Sprintf("off=%v", off), func(b *testing.B) {
			s, err := New(Config{DataDir: b.TempDir(), RejectOlderThan: -1, RejectNewerThan: -1, NoLogLevelDiscovery: off})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.SetBytes(raw / 64)
			i := 0
			for b.Loop() {
				streams, err := decodePushProto(bodies[i%64])
				if err != nil {
					b.Fatal(err)
				}
				if entries, _, rj := s.validate(streams); len(entries) != 1000 || rj.entries != 0 {
					b.Fatalf("%d entries, %d refused: %v", len(entries), rj.entries, rj.msgs)
				}
				i++
			}
			b.ReportMetric(float64(b.N)*1000/b.Elapsed().Seconds(), "lines/s")
		})
	}
}

// TestJSONKeyIsLevelFieldOracle compares the hand unescaping of a JSON
// key with encoding/json's on every level field spelled with random
// escapes (\u in either case of hex, and the other escapes), on near
// misses and on random keys (review h107 A8 replaced json.Unmarshal).
func TestJSONKeyIsLevelFieldOracle(t *testing.T) {
	oracle := func(k []byte) bool {
		var u string
		if json.Unmarshal(k, &u) != nil {
			return false
		}
		return isLevelField([]byte(u))
	}
	rng := rand.New(rand.NewPCG(testseed.Seed(t, "HAY_LEVELKEY_SEED"), 9))
	spell := func(name string) []byte {
		k := []byte{'"'}
		for i := 0; i < len(name); i++ {
			c := name[i]
			switch rng.IntN(4) {
			case 0:
				k = fmt.Appendf(k, `\u%04x`, c)
			case 1:
				k = fmt.Appendf(k, `\u%04X`, c)
			default:
				k = append(k, c)
			}
		}
		return append(k, '"')
	}
	alphabet := []string{"a", "L", "_", `\u0065`, `\u004C`, `\u00e9`, `\"`, `\\`, `\/`, `\n`, `\u12`, `\uZZZZ`, `\`, "é", "\xff", `\ud83d\ude00`}
	n := 0
	for range 20000 {
		var k []byte
		switch rng.IntN(3) {
		case 0:
			k = spell(levelFields[rng.IntN(len(levelFields))])
		case 1:
			name := []byte(levelFields[rng.IntN(len(levelFields))])
			name[rng.IntN(len(name))] ^= byte(1 << rng.IntN(7)) // a near miss, or a case change
			k = spell(string(name))
		default:
			k = []byte{'"'}
			for range rng.IntN(16) {
				k = append(k, alphabet[rng.IntN(len(alphabet))]...)
			}
			k = append(k, '"')
		}
		if got, want := jsonKeyIsLevelField(k), oracle(k); got != want {
			t.Fatalf("jsonKeyIsLevelField(%s) = %v, encoding/json says %v", k, got, want)
		}
		if oracle(k) {
			n++
		}
	}
	if n < 5000 {
		t.Fatalf("only %d of 20000 keys were level fields: the test lost its reach", n)
	}
}
