package server

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strconv"

	"haystack/internal/attrs"
	"haystack/internal/ingest"
)

// Log level discovery at push, as Loki 3's discover_log_levels
// (limits_config, -validation.discover-log-levels, on by default): an
// entry gets the structured metadata detected_level, whose value is one
// of the normalised levels below, or a level label's or metadata value
// as sent when it is none of them (fieldLevel). Grafana's Explore colours its log
// volume by it (sum by (level, detected_level) (count_over_time(...)))
// and Logs Drilldown filters on it. doc.go says in which order the
// value is looked for; the facts taken from Loki's documentation are
// its default log_level_fields (levelFields, matched as written: letter
// case counts), log_level_from_json_max_depth 2 (a JSON line's fields
// in its object and in the objects directly under it) and the values.
// The detection is hay's own, cheap (one pass over at most
// levelScanBytes of a plain line, no allocation) and deterministic.

// The normalised levels: a line's detected_level is always one of them.
const (
	levelTrace    = "trace"
	levelDebug    = "debug"
	levelInfo     = "info"
	levelWarn     = "warn"
	levelError    = "error"
	levelCritical = "critical"
	levelFatal    = "fatal"
	levelUnknown  = "unknown"
)

// detectedLevel is the structured metadata name of the level.
const detectedLevel = "detected_level"

// levelFields are the label, metadata and line field names that hold an
// entry's level: Loki's default log_level_fields, in its order (which
// decides between several labels or metadata pairs). Names match exactly.
var levelFields = []string{"level", "LEVEL", "Level", "Severity", "severity", "SEVERITY",
	"lvl", "LVL", "Lvl", "severity_text", "Severity_Text", "SEVERITY_TEXT"}

// isLevelField reports whether name is one of levelFields.
func isLevelField(name []byte) bool {
	switch len(name) {
	case 3, 5, 8, 13:
	default:
		return false
	}
	for _, f := range levelFields {
		if string(name) == f {
			return true
		}
	}
	return false
}

// levelValues maps the lower-cased value of a level field to its
// normalised level: the usual names of loggers' levels (syslog's, Go's,
// Java's, logrus' four-letter and zerolog's three-letter forms). Any
// other value is unknown.
var levelValues = map[string]string{
	"trace": levelTrace, "trc": levelTrace, "trac": levelTrace, "verbose": levelTrace, "finest": levelTrace,
	"debug": levelDebug, "dbg": levelDebug, "dbug": levelDebug, "debu": levelDebug, "fine": levelDebug, "finer": levelDebug,
	"info": levelInfo, "inf": levelInfo, "information": levelInfo, "informational": levelInfo, "notice": levelInfo,
	"warn": levelWarn, "warning": levelWarn, "wrn": levelWarn,
	"error": levelError, "err": levelError, "eror": levelError, "erro": levelError, "severe": levelError,
	"critical": levelCritical, "crit": levelCritical, "crt": levelCritical, "alert": levelCritical, "emerg": levelCritical, "emergency": levelCritical,
	"fatal": levelFatal, "ftl": levelFatal, "fata": levelFatal, "panic": levelFatal, "pnc": levelFatal, "pani": levelFatal,
}

// maxLevelValue is the longest key of levelValues.
const maxLevelValue = len("informational")

// normalizeLevel is the normalised level of a level field's value:
// levelValues of it, letter case ignored, spaces around it trimmed;
// unknown for anything else.
func normalizeLevel(v []byte) string {
	for len(v) > 0 && isSpace(v[0]) {
		v = v[1:]
	}
	for len(v) > 0 && isSpace(v[len(v)-1]) {
		v = v[:len(v)-1]
	}
	if len(v) == 0 || len(v) > maxLevelValue {
		return levelUnknown
	}
	var buf [maxLevelValue]byte
	lower := lowerInto(buf[:], v)
	if l, ok := levelValues[string(lower)]; ok {
		return l
	}
	// Go's log/slog names a level between its four by the one below and
	// an offset: ERROR+2, INFO+1, DEBUG-4 (slog.Level.String).
	if k := bytes.IndexAny(v, "+-"); k > 0 && k+1 < len(v) && allDigits(string(v[k+1:])) {
		switch string(lower[:k]) {
		case "debug", "info", "warn", "error":
			return levelValues[string(lower[:k])]
		}
	}
	return levelUnknown
}

// syslogLevel is the level of a syslog priority at the start of b
// (<PRI>, RFC 3164 and 5424: facility × 8 + severity, severity 0-2
// emergency, alert, critical; 3 error; 4 warning; 5-6 notice, info; 7
// debug), "" for another start.
func syslogLevel(b []byte) string {
	if len(b) < 3 || b[0] != '<' {
		return ""
	}
	pri := 0
	k := 1
	for ; k < len(b) && k <= 3 && '0' <= b[k] && b[k] <= '9'; k++ {
		pri = pri*10 + int(b[k]-'0')
	}
	if k == 1 || k >= len(b) || b[k] != '>' || pri > 191 {
		return ""
	}
	switch pri % 8 {
	case 0, 1, 2:
		return levelCritical
	case 3:
		return levelError
	case 4:
		return levelWarn
	case 5, 6:
		return levelInfo
	}
	return levelDebug
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// severityNumberLevel is the level of an OTLP severity_number (the
// ranges of the OpenTelemetry logs data model: 1-4 TRACE, 5-8 DEBUG,
// 9-12 INFO, 13-16 WARN, 17-20 ERROR, 21-24 FATAL); "" for anything else.
func severityNumberLevel(v []byte) string {
	n, err := strconv.Atoi(string(v))
	if err != nil {
		return ""
	}
	switch {
	case n >= 1 && n <= 4:
		return levelTrace
	case n >= 5 && n <= 8:
		return levelDebug
	case n >= 9 && n <= 12:
		return levelInfo
	case n >= 13 && n <= 16:
		return levelWarn
	case n >= 17 && n <= 20:
		return levelError
	case n >= 21 && n <= 24:
		return levelFatal
	}
	return ""
}

// streamLevel is what a stream's labels say of its entries' level:
// skip when the stream has a detected_level label of its own (its
// entries get none: the label already answers by (detected_level), and
// a pair of that name beside it would be a second detected_level),
// else the fieldLevel of its first levelFields label, if any.
func streamLevel(labs ingest.Labels) (level string, skip bool) {
	if labs.Get(detectedLevel) != "" {
		return "", true
	}
	for _, f := range levelFields {
		if v := labs.Get(f); v != "" {
			return fieldLevel([]byte(v)), false
		}
	}
	return "", false
}

// fieldLevel is the detected_level of a level label's or metadata
// pair's value: the normalised level, or the value as sent when it is
// none of the names normalizeLevel knows, as Loki keeps it (grafana/loki
// PR 22844 reverted PR 22373, which had made such values unknown: users
// relied on them). A label's value is already the stream's, so keeping
// it adds no series; a metadata pair's distinct values each make a
// series of a query by detected_level, as in Loki (review h111 D2). A
// line's field is different: its unknown value is unknown (lineLevel).
func fieldLevel(v []byte) string {
	if l := normalizeLevel(v); l != levelUnknown {
		return l
	}
	return string(v)
}

// entryLevel is the detected_level of an entry whose stream's labels
// gave level (streamLevel; "" for none), with structured metadata a
// (package attrs' encoding, valid) and the line: when a already has a
// detected_level, its normalised level if that differs from it (ERROR
// is error, with then replaces the pair), else "" (the shipper's value
// is kept); else, first found: the
// stream's level, the fieldLevel of a's first levelFields pair,
// the level of a's OTLP severity_number, the line's (lineLevel).
func entryLevel(level string, a, line []byte) string {
	if len(a) > 0 {
		var field, sevNum, own []byte
		fieldRank := len(levelFields)
		has := false
		attrs.EachValid(a, func(name, value []byte) bool {
			switch {
			case string(name) == detectedLevel:
				has, own = true, value
			case string(name) == "severity_number":
				sevNum = value
			case isLevelField(name):
				for i, f := range levelFields[:fieldRank] {
					if string(name) == f {
						field, fieldRank = value, i
						break
					}
				}
			}
			return true
		})
		switch {
		case has:
			// The shipper's, normalised when it names a level in
			// another way (ERROR, Warning), as Loki's distributor
			// normalises it: with replaces it. Another value is kept.
			if l := normalizeLevel(own); l != levelUnknown && l != string(own) {
				return l
			}
			return ""
		case level != "":
			return level
		case fieldRank < len(levelFields):
			return fieldLevel(field)
		}
		if l := severityNumberLevel(sevNum); l != "" {
			return l
		}
	}
	if level != "" {
		return level
	}
	return lineLevel(line)
}

// levelScanBytes bounds the bytes of a plain line searched for a
// logfmt level field or a level word (and of a JSON line searched for
// level words in its string values): a level is written near the start,
// and a line of megabytes is not read whole for it.
const levelScanBytes = 4 << 10

// lineLevel is the level a line tells, always one of the normalised
// levels:
//
//   - a JSON object (first byte past spaces '{'): the value of its first
//     levelFields key, in its own keys then in those of the objects
//     directly under them (Loki's log_level_from_json_max_depth 2); a
//     string normalised, a number as pino and bunyan number them (10
//     trace, 20 debug, 30 info, 40 warn, 50 error, 60 fatal; others
//     unknown); without one, the first level word in its string values;
//   - otherwise the value of the first logfmt levelFields key (key=value
//     or key="value" at the start of the line or after a space or tab);
//     a syslog priority; a klog/glog header (I0102 15:04:05..., W...,
//     E..., F...); the first level word or PostgreSQL severity
//     (scanText);
//   - unknown when none of these is found.
//
// A level field with a value it does not know is unknown: the line named
// its level, so words of its message are not looked at.
func lineLevel(line []byte) string {
	i := 0
	for i < len(line) && isSpace(line[i]) {
		i++
	}
	if i < len(line) && line[i] == '{' {
		if l, ok := jsonLineLevel(line[i:]); ok {
			return l
		}
		// Not a JSON object after all: read as text.
	}
	text := line[:min(len(line), levelScanBytes)]
	if l := syslogLevel(text[min(i, len(text)):]); l != "" {
		return l
	}
	if l := klogLevel(text[min(i, len(text)):]); l != "" {
		return l
	}
	if l, _ := scanText(text, true); l != "" {
		return l
	}
	return levelUnknown
}

// klogLevel is the level of a klog/glog header (Lmmdd hh:mm:ss, L one
// of I W E F), "" for another start.
func klogLevel(b []byte) string {
	if len(b) < 9 || b[5] != ' ' {
		return ""
	}
	for _, c := range b[1:5] {
		if c < '0' || c > '9' {
			return ""
		}
	}
	if b[6] < '0' || b[6] > '9' || b[7] < '0' || b[7] > '9' || b[8] != ':' {
		return ""
	}
	switch b[0] {
	case 'I':
		return levelInfo
	case 'W':
		return levelWarn
	case 'E':
		return levelError
	case 'F':
		return levelFatal
	}
	return ""
}

// levelWord is the level of a level word, "" if w is none: a word is a
// longest run of [A-Za-z0-9_] (standalone); these count in any letter case (ERROR,
// Error, error), the short forms of upperWord only in upper case
// (zerolog's INF, WRN, ERR; logrus' ERRO, WARN): lower-case "err" and
// "inf" are too often something else (err=<nil>). Words that are as
// often ordinary prose (alert, notice, information, fine) are left out:
// they count only as a level field's value. (Switches, not maps: this
// runs for each word of a line until one is found.)
func levelWord(lower string) string {
	switch lower {
	case "trace":
		return levelTrace
	case "debug", "dbug":
		return levelDebug
	case "info":
		return levelInfo
	case "warn", "warning":
		return levelWarn
	case "error", "eror":
		return levelError
	case "critical", "crit", "emerg":
		return levelCritical
	case "fatal", "panic":
		return levelFatal
	}
	return ""
}

// upperWord is the level of the upper-case-only level words.
func upperWord(w string) string {
	switch w {
	case "TRC", "TRAC":
		return levelTrace
	case "DBG", "DEBU":
		return levelDebug
	case "INF":
		return levelInfo
	case "WRN":
		return levelWarn
	case "ERR", "ERRO":
		return levelError
	case "CRT":
		return levelCritical
	case "FTL", "FATA", "PNC", "PANI":
		return levelFatal
	}
	return ""
}

// maxLevelWord is the longest level word.
const maxLevelWord = len("critical")

// wordLevel is the level word w is, "" if none.
func wordLevel(w []byte) string {
	if len(w) < 3 || len(w) > maxLevelWord {
		return ""
	}
	switch w[0] | 0x20 { // the first letter, lower-cased: most words end here
	case 't', 'd', 'i', 'w', 'e', 'c', 'f', 'p':
	default:
		return ""
	}
	if len(w) <= 4 && 'A' <= w[0] && w[0] <= 'Z' {
		if l := upperWord(string(w)); l != "" {
			return l
		}
	}
	var buf [maxLevelWord]byte
	return levelWord(string(lowerInto(buf[:], w)))
}

// lowerInto writes src with ASCII letters lowered into dst, which is at
// least as long, and returns that part of dst: a level's name is looked
// up lowered without an allocation.
func lowerInto(dst, src []byte) []byte {
	dst = dst[:len(src)]
	for i, c := range src {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst[i] = c
	}
	return dst
}

// wordBytes marks the bytes of a logfmt key before '=': [A-Za-z0-9_],
// and '-' and '/', so that x-level= or app/level= is no level field.
// (Level words are runs of isAlnum; see standalone.)
var wordBytes = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c == '_' || c == '-' || c == '/' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
	}
	return t
}()

func isWordByte(c byte) bool { return wordBytes[c] }

// scanText finds, in a plain text, the value of the first logfmt
// levelFields key (when logfmt is set) and else the first level word
// (not in a URL's query; a panic in a message is error) or PostgreSQL
// severity (pgLevel). field reports that the level came from a key or
// a PostgreSQL severity (and may be unknown); level is "" when none was
// found.
func scanText(b []byte, logfmt bool) (level string, field bool) {
	if logfmt {
		// Each '=' outside quotes (found by IndexByte, not byte by byte):
		// is the word before it a level field at the start or after a
		// space or tab? (msg="set level=debug" level=info is info.)
		nextQuote := func(from int) int {
			if k := bytes.IndexByte(b[from:], '"'); k >= 0 {
				return from + k
			}
			return len(b)
		}
		q := nextQuote(0) // the next '"' from i
		for i := 0; ; {
			k := bytes.IndexByte(b[i:], '=')
			if k < 0 {
				break
			}
			j := i + k
			if q < j {
				// A quoted value opens before this '=': past it.
				e, ok := jsonStringEnd(b, q)
				if !ok {
					break // unterminated: the rest is quoted
				}
				i, q = e, nextQuote(e)
				continue
			}
			s := j
			for s > 0 && j-s <= len("SEVERITY_TEXT") && isWordByte(b[s-1]) {
				s--
			}
			if s < j && (s == 0 || b[s-1] == ' ' || b[s-1] == '\t') && isLevelField(b[s:j]) {
				return normalizeLevel(logfmtValue(b[j+1:])), true
			}
			i = j + 1
		}
	}
	for i := 0; i < len(b); {
		if !isAlnum(b[i]) {
			if b[i] == 0x1b {
				// A terminal colour (ESC [ 31 m ERROR ESC [ 0 m, as
				// logrus, zap's console encoder and many containers
				// write their level): its parameters are no word and
				// the word after it stands alone.
				i = skipCSI(b, i)
				continue
			}
			i++
			continue
		}
		j := i
		for j < len(b) && isAlnum(b[j]) {
			j++
		}
		if standalone(b, i, j) {
			l := wordLevel(b[i:j])
			if l == "" && j < len(b) {
				switch b[j] {
				case ']':
					// A bracketed token is a level as a field's value
					// is (Apache's and nginx's [notice], [alert],
					// [crit]): prose words such as notice count there
					// only.
					if i > 0 && b[i-1] == '[' {
						if l = normalizeLevel(b[i:j]); l == levelUnknown {
							l = ""
						}
					}
				case ':':
					// PostgreSQL writes its severity then ":  " (two
					// spaces): LOG:  is info, DETAIL:  ... none
					// (pgLevel; ERROR:, WARNING: ... are level words).
					if j+2 < len(b) && b[j+1] == ' ' && b[j+2] == ' ' {
						if l = pgLevel(b[i:j]); l != "" {
							return l, true
						}
					}
				}
			}
			if l != "" {
				if inURLQuery(b, i) {
					// /search?q=fatal+error: every word to the end of
					// this token is in the query too.
					for j < len(b) && !isSpace(b[j]) {
						j++
					}
					i = j
					continue
				}
				if l == levelFatal && b[i]|0x20 == 'p' && !firstWord(b, i) && !isUpper(b[i:j]) && b[i-1] != '[' && (j == len(b) || b[j] != ':') && !kernelBefore(b, i) {
					// A message about a panic (Go's http: panic
					// serving ..., recovered from panic): the process
					// that logs it carries on. panic first in the line
					// or followed by ':' (Go's crash, panic: ..., also
					// behind a syslog or CRI prefix), PANIC, [panic]
					// and Kernel panic stay fatal.
					l = levelError
				}
				return l, false
			}
		}
		i = j
	}
	return "", false
}

// skipCSI returns the index after the ANSI control sequence (ESC '['
// parameters, intermediates, a final byte; ECMA-48) that starts at
// b[i] == ESC, or i+1 when none does.
func skipCSI(b []byte, i int) int {
	if i+1 >= len(b) || b[i+1] != '[' {
		return i + 1
	}
	k := i + 2
	for k < len(b) && 0x20 <= b[k] && b[k] <= 0x3f {
		k++
	}
	if k < len(b) && 0x40 <= b[k] && b[k] <= 0x7e {
		k++
	}
	return k
}

// firstWord reports whether no word byte comes before b[i] (terminal
// colours are no words).
func firstWord(b []byte, i int) bool {
	for k := 0; k < i; {
		switch {
		case b[k] == 0x1b:
			k = skipCSI(b, k)
		case isAlnum(b[k]):
			return false
		default:
			k++
		}
	}
	return true
}

// pgLevel is the level of a PostgreSQL severity written before ":  "
// (elog.c; in upper case: lc_messages other than English translate
// them), "" for another word: LOG, INFO, NOTICE info;
// WARNING warn; ERROR error; FATAL (the session's backend exits) and
// PANIC (every session) fatal. DEBUG1 to DEBUG5 are all written DEBUG,
// a level word. The lines that continue a message
// (DETAIL, HINT, CONTEXT, QUERY, STATEMENT, LOCATION) have the level of
// the message before them, which the line does not tell: unknown, and
// the words of a quoted statement are no level.
func pgLevel(w []byte) string {
	switch string(w) {
	case "LOG", "INFO", "NOTICE":
		return levelInfo
	case "WARNING":
		return levelWarn
	case "ERROR":
		return levelError
	case "FATAL", "PANIC":
		return levelFatal
	case "DETAIL", "HINT", "CONTEXT", "QUERY", "STATEMENT", "LOCATION":
		return levelUnknown
	}
	return ""
}

// inURLQuery reports whether b[i] follows a '?' in its token (the run of
// bytes without a space around it): a word of a URL's query
// (GET /search?q=fatal+error, a referrer's ?level=error) is no level.
// Called for a level word only, once per token (the caller then skips
// the token), so the scans back stay linear.
func inURLQuery(b []byte, i int) bool {
	for k := i - 1; k >= 0 && !isSpace(b[k]); k-- {
		if b[k] == '?' {
			return true
		}
	}
	return false
}

// isUpper reports whether w has no lower-case letter.
func isUpper(w []byte) bool {
	for _, c := range w {
		if 'a' <= c && c <= 'z' {
			return false
		}
	}
	return true
}

// kernelBefore reports whether the word at b[i] follows "kernel " in
// any letter case (Linux's Kernel panic - not syncing: the machine
// stops).
func kernelBefore(b []byte, i int) bool {
	const k = "kernel "
	if i < len(k) || !bytes.EqualFold(b[i-len(k):i], []byte(k)) {
		return false
	}
	return i == len(k) || !isAlnum(b[i-len(k)-1])
}

func isAlnum(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// standalone reports whether the word b[i:j] stands for itself rather
// than being part of a name or a path: a level word counts only then. A
// word after '/' or '.' is part of one (/api/error/report,
// app.debug.enabled), and so is a word before a '.' and a letter or
// digit (error.log). A word joined by '-' (debug-vm, [trace-exporter-1])
// or followed by '/' (error/report) is too, unless it is in upper case,
// as a logger writes its level beside a process or thread name
// (Celery's INFO/MainProcess, WARNING/ForkPoolWorker-1; INFO-main,
// 12:00:00,000-ERROR-app), or, after '.', followed by ':' (Monolog's
// production.ERROR: ...).
func standalone(b []byte, i, j int) bool {
	upper := true
	for _, c := range b[i:j] {
		if 'a' <= c && c <= 'z' {
			upper = false
			break
		}
	}
	if i > 0 {
		switch b[i-1] {
		case '.':
			// A name's part (com.error.Handler, file.error), except
			// an upper-case level between a channel and ':' as
			// Monolog (Laravel, Symfony) writes it: production.ERROR:
			if !upper || j == len(b) || b[j] != ':' {
				return false
			}
		case '/':
			return false
		case '-':
			if !upper {
				return false
			}
		}
	}
	if j < len(b) {
		switch b[j] {
		case '-', '/':
			if !upper {
				return false
			}
		case '.':
			if j+1 < len(b) && isAlnum(b[j+1]) {
				return false
			}
		}
	}
	return true
}

// logfmtValue is the value at the start of b: a quoted string's
// content (escapes kept: a level has none), else the bytes up to a
// space.
func logfmtValue(b []byte) []byte {
	if len(b) > 0 && b[0] == '"' {
		for k := 1; k < len(b); k++ {
			switch b[k] {
			case '\\':
				k++
			case '"':
				return b[1:k]
			}
		}
		return b[1:]
	}
	for k, c := range b {
		if isSpace(c) {
			return b[:k]
		}
	}
	return b
}

// jsonLineLevel is lineLevel of a line that starts with '{': ok is false
// when the line is not one JSON object (then it is read as text).
func jsonLineLevel(b []byte) (string, bool) {
	w := jsonLevelWalk{b: b}
	end, ok := w.object(0, 1)
	if w.found1 {
		// The walk stopped at the line's own level field: the line is
		// taken for JSON when it ends with '}', as Loki takes it.
		e := len(b)
		for e > 0 && isSpace(b[e-1]) {
			e--
		}
		if e > 0 && b[e-1] == '}' {
			return w.level1, true
		}
		return "", false
	}
	if !ok {
		return "", false
	}
	for end < len(b) && isSpace(b[end]) {
		end++
	}
	if end != len(b) {
		return "", false
	}
	switch {
	case w.found2:
		return w.level2, true
	case w.word != "":
		return w.word, true
	}
	return levelUnknown, true
}

// jsonLevelWalk walks a JSON object for lineLevel without decoding it:
// the level of the first levelFields key of the object (level1) and of
// the objects under it (level2), and the first level word of its string
// values in the line's first levelScanBytes.
type jsonLevelWalk struct {
	b              []byte
	level1, level2 string
	found1, found2 bool
	word           string
}

// object walks the object at b[i] ('{') at depth d (1 is the line's)
// and returns the offset past it.
func (w *jsonLevelWalk) object(i, d int) (int, bool) {
	b := w.b
	i++ // '{'
	i = jsonSpace(b, i)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, false
		}
		ks := i
		ke, ok := jsonStringEnd(b, i)
		if !ok {
			return 0, false
		}
		i = jsonSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		i = jsonSpace(b, i+1)
		if i >= len(b) {
			return 0, false
		}
		isField := d <= 2 && !(d == 1 && w.found1) && !(d == 2 && (w.found1 || w.found2)) && jsonKeyIsLevelField(b[ks:ke])
		vs := i
		switch c := b[i]; {
		case c == '{' && d < 2:
			i, ok = w.object(i, d+1)
		case c == '"':
			i, ok = jsonStringEnd(b, i)
			if ok && w.word == "" && vs < levelScanBytes {
				w.word, _ = scanText(b[vs+1:min(i-1, levelScanBytes)], false)
			}
		default:
			i, ok = w.skip(i)
		}
		if !ok {
			return 0, false
		}
		if isField {
			if l, ok := jsonLevelValue(b[vs:i]); ok {
				if d == 1 {
					w.level1, w.found1 = l, true
					return i, true // nothing after it can change the level
				}
				w.level2, w.found2 = l, true
			}
		}
		i = jsonSpace(b, i)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i = jsonSpace(b, i+1)
		case '}':
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// skip returns the offset past the JSON value at b[i] that is not a
// string read for words: an object or array (at any depth, without
// recursion), a number, true, false or null. Strings inside objects and
// arrays deeper than depth 2 are searched for level words too.
func (w *jsonLevelWalk) skip(i int) (int, bool) {
	b := w.b
	switch b[i] {
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '{', '[':
				depth++
				i++
			case '}', ']':
				depth--
				i++
				if depth == 0 {
					return i, true
				}
			case '"':
				s := i
				e, ok := jsonStringEnd(b, i)
				if !ok {
					return 0, false
				}
				if w.word == "" && s < levelScanBytes {
					w.word, _ = scanText(b[s+1:min(e-1, levelScanBytes)], false)
				}
				i = e
			default:
				i++
			}
		}
		return 0, false
	}
	// A scalar: up to the next delimiter.
	s := i
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && !isSpace(b[i]) {
		i++
	}
	if i == s {
		return 0, false
	}
	return i, true
}

// jsonLevelValue is the level of a level field's JSON value: a string
// normalised, a number as pino numbers levels; ok is false for other
// kinds (null, true, an object), which are no level.
func jsonLevelValue(v []byte) (string, bool) {
	switch c := v[0]; {
	case c == '"':
		s := v[1 : len(v)-1]
		for _, c := range s {
			if c == '\\' {
				var u string
				if json.Unmarshal(v, &u) != nil {
					return levelUnknown, true
				}
				return normalizeLevel([]byte(u)), true
			}
		}
		return normalizeLevel(s), true
	case c == '-' || '0' <= c && c <= '9':
		switch string(v) {
		case "10":
			return levelTrace, true
		case "20":
			return levelDebug, true
		case "30":
			return levelInfo, true
		case "40":
			return levelWarn, true
		case "50":
			return levelError, true
		case "60":
			return levelFatal, true
		}
		return levelUnknown, true
	}
	return "", false
}

// jsonKeyIsLevelField reports whether a JSON key (with its quotes) is
// one of levelFields; a key with escapes is decoded first.
func jsonKeyIsLevelField(k []byte) bool {
	s := k[1 : len(k)-1]
	if bytes.IndexByte(s, '\\') < 0 {
		return isLevelField(s)
	}
	// Unescaped into a buffer the size of the longest field name, by
	// hand: json.Unmarshal of every escaped key cost 9 ms and 71,000
	// allocations for a 256 KiB line of them (review h107 A8). A field
	// name is ASCII letters and '_', so only \u escapes below 0x80 may
	// spell one; any other escape rules the key out.
	var buf [len("SEVERITY_TEXT")]byte
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		i++
		if c == '\\' {
			if i+5 > len(s) || s[i] != 'u' {
				return false
			}
			v := 0
			for _, h := range s[i+1 : i+5] {
				switch {
				case '0' <= h && h <= '9':
					v = v<<4 | int(h-'0')
				case 'a' <= h && h <= 'f':
					v = v<<4 | int(h-'a'+10)
				case 'A' <= h && h <= 'F':
					v = v<<4 | int(h-'A'+10)
				default:
					return false
				}
			}
			if v >= 0x80 {
				return false
			}
			c, i = byte(v), i+5
		}
		if n == len(buf) {
			return false
		}
		buf[n] = c
		n++
	}
	return isLevelField(buf[:n])
}

// jsonStringEnd returns the offset past the JSON string at b[i] ('"'):
// the next quote not escaped, found by IndexByte.
func jsonStringEnd(b []byte, i int) (int, bool) {
	for i++; ; {
		k := bytes.IndexByte(b[i:], '"')
		if k < 0 {
			return 0, false
		}
		q := i + k
		bs := 0
		for p := q - 1; p >= i && b[p] == '\\'; p-- {
			bs++
		}
		if bs%2 == 0 {
			return q + 1, true
		}
		i = q + 1
	}
}

// levelAttrs adds detected_level to the metadata of pushed entries. Its
// zero value is ready; one serves one push.
type levelAttrs struct {
	arena []byte
}

// onlyLevel holds, by level, the encoding of metadata that is only
// detected_level=level: the metadata of most entries, shared by them
// (the store copies what it keeps).
var onlyLevel = func() map[string][]byte {
	m := map[string][]byte{}
	for _, l := range []string{levelTrace, levelDebug, levelInfo, levelWarn, levelError, levelCritical, levelFatal, levelUnknown} {
		b := attrs.MustPairs(detectedLevel, l)
		m[l] = b[:len(b):len(b)]
	}
	return m
}()

// with returns the encoding a (valid) with detected_level=level added
// (level a normalised one or a value kept as sent), or in place of a's
// own detected_level (entryLevel normalised it); a itself when the pair would take it past
// attrs' limits (the entry is stored without it).
func (la *levelAttrs) with(a []byte, level string) []byte {
	if len(a) == 0 {
		if b, ok := onlyLevel[level]; ok {
			return b
		}
		// A label's or metadata value kept as sent (fieldLevel).
	}
	n, k := binary.Uvarint(a)
	add := 1 + len(detectedLevel) + 1 + len(level)
	size := len(a) + add + uvarintSize(n+1) - k
	if n+1 > attrs.MaxPairs || size > attrs.MaxBytes {
		return a
	}
	if cap(la.arena)-len(la.arena) < size {
		la.arena = make([]byte, 0, max(min(2*cap(la.arena), metaChunk), 1<<10, size))
	}
	start := len(la.arena)
	out := binary.AppendUvarint(la.arena, n+1)
	rest := a[k:]
	added, replaced := false, false
	appendPair := func() {
		out = binary.AppendUvarint(out, uint64(len(detectedLevel)))
		out = append(out, detectedLevel...)
		out = binary.AppendUvarint(out, uint64(len(level)))
		out = append(out, level...)
		added = true
	}
	for range n {
		l, k := binary.Uvarint(rest)
		name := rest[k : k+int(l)]
		if !added && string(name) > detectedLevel {
			appendPair()
		}
		end := k + int(l)
		vl, vk := binary.Uvarint(rest[end:])
		end += vk + int(vl)
		if string(name) == detectedLevel {
			// a's own (a shipper's, normalised): level replaces it.
			if !added {
				appendPair()
			}
			replaced = true
		} else {
			out = append(out, rest[:end]...)
		}
		rest = rest[end:]
	}
	if !added {
		appendPair()
	}
	if replaced {
		// n pairs, not n+1: the count is rewritten, shorter when n+1
		// took more bytes (n+1 = 128).
		if w, w1 := uvarintSize(n), uvarintSize(n+1); w < w1 {
			copy(out[start+w:], out[start+w1:])
			out = out[:len(out)-(w1-w)]
		}
		binary.PutUvarint(out[start:], n)
	}
	la.arena = out
	return out[start:len(out):len(out)]
}

func uvarintSize(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
