package ingest

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// JSONTime returns the timestamp of a JSON object line: the value of its
// first top-level key among "time", "ts", "timestamp" and "@timestamp" whose
// value is a timestamp. A value is a timestamp when it is
//
//   - a string in one of LeadingTime's layouts that carry a year (RFC 3339,
//     "2015-07-29 17:41:44,747", …), or in an RFC 1123/850/822, Unix date or
//     Ruby date layout, or holding a number as below (a Parser also accepts
//     the yearless syslog and klog layouts, with the year from its clock).
//     A two-digit year is read as LeadingTime reads one (69 is 2069); a
//     zone name must be one of RFC 822's (UT, UTC, GMT, Z, EST ... PDT) or
//     numeric ("-03", as date writes it where a zone has no letters);
//   - a number of unix seconds, milliseconds, microseconds or nanoseconds,
//     judged by magnitude: below 1e11 seconds, below 1e14 milliseconds,
//     below 1e17 microseconds, else nanoseconds. Fractions are kept.
//
// The line is scanned, not validated: the keys before the timestamp must be
// well formed, what follows it is not looked at. Nested objects are skipped.
// The usual case (a time key with a plain string or number value) does not
// allocate; time.Parse serves only as a fallback for the rarer string layouts.
func JSONTime(line []byte) (unixNano int64, ok bool) {
	var r refTime
	return jsonTime(line, &r)
}

// jsonTime is JSONTime with a reference for strings in yearless layouts
// (syslog); a Parser provides it.
func jsonTime(b []byte, ref *refTime) (int64, bool) {
	i := skipWS(b, skipBOM(b))
	if i >= len(b) || b[i] != '{' {
		return 0, false
	}
	i++
	for {
		i = skipWS(b, i)
		if i >= len(b) || b[i] != '"' {
			return 0, false // '}' (end of object) or malformed
		}
		end, ok := scanString(b, i)
		if !ok {
			return 0, false
		}
		want := isTimeKey(b[i+1 : end-1])
		i = skipWS(b, end)
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		i = skipWS(b, i+1)
		if want {
			if t, ok := jsonValueTime(b, i, ref); ok {
				return t, true
			}
		}
		if i, ok = skipValue(b, i); !ok {
			return 0, false
		}
		i = skipWS(b, i)
		if i >= len(b) || b[i] != ',' {
			return 0, false
		}
		i++
	}
}

// isTimeKey reports whether a raw (still escaped) JSON key names a time.
func isTimeKey(raw []byte) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		return isTimeName(raw)
	}
	var buf [16]byte
	k, ok := unescape(buf[:0], raw)
	return ok && isTimeName(k)
}

func isTimeName(k []byte) bool {
	switch string(k) {
	case "time", "ts", "timestamp", "@timestamp":
		return true
	}
	return false
}

// jsonValueTime interprets the JSON value at b[i:] as a timestamp.
func jsonValueTime(b []byte, i int, ref *refTime) (int64, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		end, ok := scanString(b, i)
		if !ok {
			return 0, false
		}
		s := b[i+1 : end-1]
		if bytes.IndexByte(s, '\\') >= 0 {
			// E.g. PHP's json_encode writes "2015\/07\/29".
			var buf [64]byte
			if s, ok = unescape(buf[:0], s); !ok {
				return 0, false
			}
			return stringTime(s, ref)
		}
		return stringTime(s, ref)
	case isDigit(c) || c == '-':
		j := i
		for j < len(b) && !isDelim(b[j]) {
			j++
		}
		return epochNumber(b[i:j])
	}
	return 0, false
}

// fallbackLayouts are tried with time.Parse for strings LeadingTime does not
// recognise.
var fallbackLayouts = [...]string{
	time.RFC1123Z, time.RFC1123, time.RFC850, time.RFC822Z, time.RFC822,
	time.UnixDate, time.RubyDate,
}

// stringTime interprets a JSON string's contents as a timestamp.
func stringTime(s []byte, ref *refTime) (int64, bool) {
	if t, ok := leadingTime(s, ref); ok {
		return t, true
	}
	s = bytes.TrimSpace(s)
	if len(s) == 0 {
		return 0, false
	}
	if isDigit(s[0]) {
		if t, ok := epochNumber(s); ok {
			return t, true
		}
	}
	// RFC 822 starts with the day of the month, the others with a letter.
	if !isLetter(s[0]) && !isDigit(s[0]) || len(s) > 64 {
		return 0, false
	}
	str := spellUTC(string(s))
	for _, layout := range fallbackLayouts {
		// In UTC, not the machine's zone: time.Parse resolves a zone
		// abbreviation with the local zone's offset when that zone knows
		// the name ("CST" was +8 under TZ=Asia/Shanghai, -6 elsewhere).
		t, err := time.ParseInLocation(layout, str, time.UTC)
		if err != nil {
			continue
		}
		if y := t.Year(); !strings.Contains(layout, "2006") && year2(y%100) != y {
			// A two-digit year (RFC 850, RFC 822) takes LeadingTime's
			// pivot: time.Parse makes 69 1969, so "01-Jan-69" was
			// refused and "31-Dec-69 23:00:00 EST" stored in 1970,
			// where "69/12/31 23:00:00" is 2069. Only 69 differs, and
			// 1969 has no Feb 29 for AddDate to move.
			t = t.AddDate(year2(y%100)-y, 0, 0)
		}
		n := t.UnixNano()
		if name, off := t.Zone(); off == 0 && strings.Contains(layout, "MST") && name != "UTC" {
			// A zone abbreviation parses with offset 0, which would put
			// "05:06 PST" at 05:06 UTC, eight hours off: take RFC 822's
			// own zones and tzdata's numeric names ("-03", "+0530", as
			// date writes them in zones without a letter abbreviation),
			// refuse the others.
			z, ok := zoneNameOffset(name)
			if !ok {
				continue
			}
			n -= int64(z) * int64(time.Second)
		}
		if t.Year() >= 1969 && t.Year() <= 2201 && n >= 0 && n < maxNano {
			return n, true
		}
		return 0, false
	}
	return 0, false
}

// spellUTC writes RFC 822's zone names "UT" and "Z" (rfc822Zones) as
// "UTC" where they stand as a word after a space: time.Parse takes no zone
// name shorter than three letters, so "Mon, 30 Nov 2026 11:00:00 UT" was
// refused. In these layouts a word of those letters can only be a zone.
func spellUTC(s string) string {
	for _, name := range [...]string{" UT", " Z"} {
		for i := 0; ; {
			k := strings.Index(s[i:], name)
			if k < 0 {
				break
			}
			st := i + k + 1 // the name, after its space
			i = i + k + len(name)
			if i == len(s) || s[i] == ' ' {
				s = s[:st] + "UTC" + s[i:]
				i = st + 3
			}
		}
	}
	return s
}

// zoneNameOffset is the offset from UTC, in seconds, of a zone name: one
// of RFC 822's, or a numeric one, ±hh or ±hhmm.
func zoneNameOffset(name string) (int, bool) {
	if h, ok := rfc822Zones[name]; ok {
		return h * 3600, true
	}
	if (len(name) != 3 && len(name) != 5) || name[0] != '+' && name[0] != '-' {
		return 0, false
	}
	n := 0
	for i := 1; i < len(name); i++ {
		if !isDigit(name[i]) {
			return 0, false
		}
		n = n*10 + int(name[i]-'0')
	}
	h, m := n, 0
	if len(name) == 5 {
		h, m = n/100, n%100
	}
	if h > 14 || m > 59 {
		return 0, false
	}
	off := h*3600 + m*60
	if name[0] == '-' {
		off = -off
	}
	return off, true
}

// rfc822Zones are the zone names RFC 822 defines (section 5.1), as hours
// from UTC; time.Parse knows only those of the local time zone.
var rfc822Zones = map[string]int{
	"UT": 0, "UTC": 0, "GMT": 0, "Z": 0,
	"EST": -5, "EDT": -4, "CST": -6, "CDT": -5,
	"MST": -7, "MDT": -6, "PST": -8, "PDT": -7,
}

// epochNumber reads a JSON number as unix time, its unit judged by magnitude
// (see JSONTime).
func epochNumber(s []byte) (int64, bool) {
	var n int64
	i := 0
	for i < len(s) && isDigit(s[i]) {
		if n > (math.MaxInt64-9)/10 {
			return 0, false // beyond int64 nanoseconds
		}
		n = n*10 + int64(s[i]-'0')
		i++
	}
	if i == 0 {
		return 0, false // negative or not a number: before 1970 anyway
	}
	fracStart, fracEnd := i, i
	if i < len(s) && s[i] == '.' {
		i++
		fracStart = i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		fracEnd = i
		if fracEnd == fracStart {
			return 0, false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		return epochFloat(s)
	}
	if i != len(s) {
		return 0, false
	}
	// unit is the nanoseconds in one unit of n; digits is how many digits
	// of the fraction still count.
	var unit int64
	switch {
	case n < 1e11:
		unit = nanosPerSecond
	case n < 1e14:
		unit = int64(time.Millisecond)
	case n < 1e17:
		unit = int64(time.Microsecond)
	default:
		unit = 1
	}
	if n >= maxNano/unit {
		return 0, false
	}
	t := n * unit
	scale := unit
	for j := fracStart; j < fracEnd && scale > 1; j++ {
		scale /= 10
		t += int64(s[j]-'0') * scale
	}
	return t, true
}

// epochFloat handles numbers with an exponent, which JSON encoders emit for
// large floats (1.7e+09). Precision is that of a float64.
func epochFloat(s []byte) (int64, bool) {
	f, err := strconv.ParseFloat(string(s), 64)
	if err != nil || !(f >= 0) {
		return 0, false
	}
	switch {
	case f < 1e11:
		f *= 1e9
	case f < 1e14:
		f *= 1e6
	case f < 1e17:
		f *= 1e3
	}
	if f >= float64(maxNano) {
		return 0, false
	}
	return int64(f), true
}

// scanString returns the index after the closing quote of the JSON string
// starting at b[i] == '"'.
func scanString(b []byte, i int) (int, bool) {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, false
		}
		q := j + k
		n := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, true
		}
		j = q + 1
	}
}

// skipValue returns the index after the JSON value at b[i:]. Scalars are
// skipped to the next delimiter without validation.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return scanString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); {
			switch b[j] {
			case '"':
				end, ok := scanString(b, j)
				if !ok {
					return 0, false
				}
				j = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, true
				}
			}
			j++
		}
		return 0, false
	}
	j := i
	for j < len(b) && !isDelim(b[j]) {
		j++
	}
	if j == i {
		return 0, false
	}
	return j, true
}

func isDelim(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\r', '\n':
		return true
	}
	return false
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// unescape appends the decoded form of a JSON string's raw contents to dst,
// failing when it would outgrow dst's capacity (so a stack buffer is never
// reallocated) or on a bad escape.
func unescape(dst, raw []byte) ([]byte, bool) {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			if len(dst) == cap(dst) {
				return nil, false
			}
			dst = append(dst, c)
			continue
		}
		i++
		if i >= len(raw) {
			return nil, false
		}
		switch raw[i] {
		case '"', '\\', '/':
			c = raw[i]
		case 'b':
			c = '\b'
		case 'f':
			c = '\f'
		case 'n':
			c = '\n'
		case 'r':
			c = '\r'
		case 't':
			c = '\t'
		case 'u':
			if i+4 >= len(raw) {
				return nil, false
			}
			var r rune
			for _, h := range raw[i+1 : i+5] {
				switch {
				case isDigit(h):
					r = r<<4 | rune(h-'0')
				case (h|0x20)-'a' < 6:
					r = r<<4 | rune((h|0x20)-'a'+10)
				default:
					return nil, false
				}
			}
			i += 4
			if len(dst)+utf8.UTFMax > cap(dst) {
				return nil, false
			}
			// A surrogate half becomes U+FFFD, as encoding/json does for
			// unpaired halves; time keys and values are ASCII anyway.
			dst = utf8.AppendRune(dst, r)
			continue
		default:
			return nil, false
		}
		if len(dst) == cap(dst) {
			return nil, false
		}
		dst = append(dst, c)
	}
	return dst, true
}
