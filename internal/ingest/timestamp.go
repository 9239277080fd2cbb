package ingest

import (
	"math"
	"time"
)

const (
	nanosPerSecond = int64(time.Second)
	nanosPerDay    = 86400 * nanosPerSecond

	// maxNano is 2201-01-01T00:00:00Z: detected instants lie in
	// [0, maxNano), that is years 1970 through 2200.
	maxNano = 84371 * nanosPerDay
)

// refTime is the reference instant for formats without a year (syslog,
// klog), with its UTC year precomputed. It is resolved lazily: a Parser sets
// now and the clock is read only for lines that need it. Without now and ok,
// no year can be inferred and those formats are not recognised.
type refTime struct {
	now   func() time.Time
	nanos int64
	year  int
	ok    bool

	// The UTC year [yearStart, yearEnd) of the last resolution, so that
	// a Parser computes the calendar year only when it changes.
	yearStart, yearEnd int64
}

func makeRef(t time.Time) refTime {
	var r refTime
	if !t.IsZero() {
		r.set(t)
	}
	return r
}

func (r *refTime) set(t time.Time) {
	r.nanos = t.UnixNano()
	r.ok = true
	if r.nanos >= r.yearStart && r.nanos < r.yearEnd {
		return
	}
	r.year = t.UTC().Year()
	if r.year >= 1970 && r.year < 2200 {
		r.yearStart = daysFromCivil(r.year, 1, 1) * nanosPerDay
		r.yearEnd = daysFromCivil(r.year+1, 1, 1) * nanosPerDay
	}
}

// resolve reads the clock if the reference is still unknown.
func (r *refTime) resolve() bool {
	if !r.ok && r.now != nil {
		r.set(r.now())
	}
	return r.ok
}

// LeadingTime detects a timestamp at the start of line and returns it as
// unix nanoseconds. Before the timestamp it skips a UTF-8 byte order mark,
// spaces and tabs, a logfmt time key (ts=, t=, time=, timestamp= or
// @timestamp=, value quoted or not: Go kit, slog, logrus), a syslog
// priority "<pri>" (and an RFC 5424 version "1 " after it) and one "[".
// Recognised layouts, with examples:
//
//	2015-07-29T17:41:44.747Z         RFC 3339 / ISO 8601: 'T' or ' ' between date and
//	2015-07-29 17:41:44,747+02:00    time; fraction after '.' or ','; zone Z, ±hh:mm,
//	2015-07-29 17:41:44 +0200        ±hhmm or ±hh (also after one space); no zone is UTC
//	2016-09-28 04:30:30, Info        (Windows CBS; log4j, Hadoop and Zookeeper are above)
//	2009/01/23 01:23:23.123          '/' instead of '-' (Go's log package, nginx)
//	081109 203615                    yyMMdd HHmmss (HDFS)
//	17/06/09 20:10:40                yy/MM/dd HH:mm:ss (Spark)
//	[Sun Dec 04 04:47:44 2005]       asctime, optional fraction (Apache error log)
//	[10/Oct/2000:13:55:36 -0700]     common log format, also after "host ident authuser "
//	                                 as Apache and nginx access logs write it (the one
//	                                 layout found after other text)
//	29-Jul-2015 17:41:44.747         Tomcat
//	Jun 14 15:16:01                  syslog (RFC 3164), day may be space-padded
//	I1130 01:02:03.123456            klog / glog (Kubernetes)
//
// After one space a zone may also be UTC or GMT, with an offset or not
// (GMT+01:00), or one of RFC 822's US names (EST, EDT, CST, CDT, MST, MDT,
// PST, PDT); a sign and digits right after the clock that are no valid
// offset make no timestamp.
//
// Two-digit years 00–69 are 2000–2069, 70–99 are 1970–1999. Syslog and klog
// carry no year: it is the next year (of ref, in UTC) when that puts the
// time at most one day after ref (a line just after New Year), else ref's
// year, or the year before when that would put the time more than one day
// after ref; a zero ref disables them.
// Every field is range-checked and the timestamp must not be followed by a
// digit, so "2015 was a year" or "12345" are not timestamps. Results outside
// years 1970..2200 are rejected. LeadingTime does not allocate.
func LeadingTime(line []byte, ref time.Time) (unixNano int64, ok bool) {
	r := makeRef(ref)
	return leadingTime(line, &r)
}

func leadingTime(b []byte, ref *refTime) (int64, bool) {
	if t, ok := timeAtStart(b, ref); ok {
		return t, true
	}
	return accessLogTime(b)
}

// accessLogTime reads the time of a line in the common or combined log
// format, "127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] ...": three
// tokens without blanks (at most 256 bytes each), one space after each,
// then the bracketed time. Access logs never start with their time, so a
// whole log used to take the time it was ingested.
func accessLogTime(b []byte) (int64, bool) {
	i := 0
	for range 3 {
		st := i
		for i < len(b) && i-st < 256 && b[i] != ' ' && b[i] != '\t' && b[i] != '[' {
			i++
		}
		if i == st || i >= len(b) || b[i] != ' ' {
			return 0, false
		}
		i++
	}
	if i+3 >= len(b) || b[i] != '[' || !isDigit(b[i+1]) || !isDigit(b[i+2]) || b[i+3] != '/' {
		return 0, false
	}
	return clfTime(b, i+1)
}

// timeAtStart is leadingTime for a timestamp at the start of b (after the
// prefixes LeadingTime skips).
func timeAtStart(b []byte, ref *refTime) (int64, bool) {
	i := skipSpace(b, skipBOM(b))
	if i < len(b) && (b[i] == 't' || b[i] == '@') {
		i = skipLogfmtTimeKey(b, i)
	}
	if i < len(b) && b[i] == '<' {
		// Syslog priority: "<" 1-3 digits ">".
		j := i + 1
		for j < len(b) && j-i <= 3 && isDigit(b[j]) {
			j++
		}
		if j == i+1 || j >= len(b) || b[j] != '>' {
			return 0, false
		}
		i = j + 1
		if i+2 < len(b) && b[i] == '1' && b[i+1] == ' ' && (isDigit(b[i+2]) || b[i+2] == '[') {
			i += 2 // RFC 5424 version
		}
	}
	if i < len(b) && b[i] == '[' {
		i = skipSpace(b, i+1)
	}
	if i >= len(b) {
		return 0, false
	}
	c := b[i]
	if isDigit(c) {
		if i+4 < len(b) && isDigit(b[i+1]) {
			switch {
			case isDigit(b[i+2]) && isDigit(b[i+3]) && (b[i+4] == '-' || b[i+4] == '/'):
				return isoTime(b, i)
			case isDigit(b[i+2]) && isDigit(b[i+3]) && isDigit(b[i+4]):
				return hdfsTime(b, i)
			case b[i+2] == '/' && isDigit(b[i+3]):
				return sparkTime(b, i)
			case b[i+2] == '/' || (b[i+2] == '-' && isLetter(b[i+3])):
				return clfTime(b, i)
			}
		}
		return 0, false
	}
	switch c {
	case 'I', 'W', 'E', 'F':
		if i+1 < len(b) && isDigit(b[i+1]) {
			return klogTime(b, i, ref)
		}
	}
	if isLetter(c) {
		if i+3 < len(b) && b[i+3] == ' ' {
			if _, ok := monthAt(b, i); ok {
				return syslogTime(b, i, ref)
			}
			return asctimeTime(b, i)
		}
	}
	return 0, false
}

// isoTime parses "YYYY-MM-DD[T ]hh:mm:ss[.frac][zone]" (or with '/' in the
// date) at b[i:].
func isoTime(b []byte, i int) (int64, bool) {
	year, ok := digits4(b, i)
	if !ok {
		return 0, false
	}
	sep := b[i+4]
	month, ok1 := digits2(b, i+5)
	day, ok2 := digits2(b, i+8)
	if !ok1 || !ok2 || b[i+7] != sep || i+10 >= len(b) {
		return 0, false
	}
	if c := b[i+10]; c != 'T' && c != ' ' && c != 't' {
		return 0, false
	}
	sod, frac, off, ok := clockEnd(b, i+11, true)
	if !ok {
		return 0, false
	}
	return civil(year, month, day, sod, frac, off)
}

// hdfsTime parses "yyMMdd HHmmss" at b[i:].
func hdfsTime(b []byte, i int) (int64, bool) {
	if i+13 > len(b) || b[i+6] != ' ' {
		return 0, false
	}
	yy, ok0 := digits2(b, i)
	month, ok1 := digits2(b, i+2)
	day, ok2 := digits2(b, i+4)
	h, ok3 := digits2(b, i+7)
	m, ok4 := digits2(b, i+9)
	s, ok5 := digits2(b, i+11)
	if !(ok0 && ok1 && ok2 && ok3 && ok4 && ok5) || (i+13 < len(b) && isDigit(b[i+13])) {
		return 0, false
	}
	sod, ok := secondOfDay(h, m, s)
	if !ok {
		return 0, false
	}
	return civil(year2(yy), month, day, sod, 0, 0)
}

// sparkTime parses "yy/MM/dd HH:mm:ss[.frac]" at b[i:].
func sparkTime(b []byte, i int) (int64, bool) {
	if i+9 > len(b) || b[i+5] != '/' || b[i+8] != ' ' {
		return 0, false
	}
	yy, ok0 := digits2(b, i)
	month, ok1 := digits2(b, i+3)
	day, ok2 := digits2(b, i+6)
	if !(ok0 && ok1 && ok2) {
		return 0, false
	}
	sod, frac, _, ok := clockEnd(b, i+9, false)
	if !ok {
		return 0, false
	}
	return civil(year2(yy), month, day, sod, frac, 0)
}

// clfTime parses the common log format "dd/Mon/yyyy:hh:mm:ss[ ±hhmm]" and
// Tomcat's "dd-Mon-yyyy hh:mm:ss[.frac]".
func clfTime(b []byte, i int) (int64, bool) {
	day, ok := digits2(b, i)
	if !ok || i+11 >= len(b) || b[i+6] != b[i+2] || (b[i+11] != ':' && b[i+11] != ' ') {
		return 0, false
	}
	month, ok1 := monthAt(b, i+3)
	year, ok2 := digits4(b, i+7)
	if !ok1 || !ok2 {
		return 0, false
	}
	sod, frac, off, ok := clockEnd(b, i+12, true)
	if !ok {
		return 0, false
	}
	return civil(year, month, day, sod, frac, off)
}

// syslogTime parses "Mon dd hh:mm:ss[.frac]" (dd may be " d" or "d") at b[i:].
func syslogTime(b []byte, i int, ref *refTime) (int64, bool) {
	month, _ := monthAt(b, i)
	day, j, ok := paddedDay(b, i+4)
	if !ok || j >= len(b) || b[j] != ' ' {
		return 0, false
	}
	sod, frac, _, ok := clockEnd(b, j+1, false)
	if !ok {
		return 0, false
	}
	return inferYear(month, day, sod, frac, ref)
}

// klogTime parses klog's "Lmmdd hh:mm:ss.uuuuuu" (L is the level letter).
func klogTime(b []byte, i int, ref *refTime) (int64, bool) {
	month, ok1 := digits2(b, i+1)
	day, ok2 := digits2(b, i+3)
	if !ok1 || !ok2 || i+5 >= len(b) || b[i+5] != ' ' {
		return 0, false
	}
	sod, frac, _, ok := clockEnd(b, i+6, false)
	if !ok {
		return 0, false
	}
	return inferYear(month, day, sod, frac, ref)
}

// asctimeTime parses "Www Mon dd hh:mm:ss[.frac] yyyy" (dd may be " d").
func asctimeTime(b []byte, i int) (int64, bool) {
	if !weekdayAt(b, i) || i+8 > len(b) || b[i+7] != ' ' {
		return 0, false
	}
	month, ok := monthAt(b, i+4)
	if !ok {
		return 0, false
	}
	day, j, ok := paddedDay(b, i+8)
	if !ok || j >= len(b) || b[j] != ' ' {
		return 0, false
	}
	sod, j, ok := clock(b, j+1)
	if !ok {
		return 0, false
	}
	frac, j := fraction(b, j)
	if j >= len(b) || b[j] != ' ' {
		return 0, false
	}
	year, ok := digits4(b, j+1)
	if !ok || (j+5 < len(b) && isDigit(b[j+5])) {
		return 0, false
	}
	return civil(year, month, day, sod, frac, 0)
}

// inferYear completes a date without a year from ref (see LeadingTime).
func inferYear(month, day int, sod, frac int64, ref *refTime) (int64, bool) {
	if !ref.resolve() || month < 1 || month > 12 || day < 1 {
		return 0, false
	}
	y := ref.year
	prev := func(y int) int {
		y--
		for month == 2 && day == 29 && !isLeap(y) {
			y--
		}
		return y
	}
	// Next year's date when it is at most a day after ref: a line written
	// just after New Year, read just before it in UTC (a clock ahead, a
	// zone east of UTC), is not 364 days old.
	if !(month == 2 && day == 29 && !isLeap(y+1)) {
		if t, ok := civil(y+1, month, day, sod, frac, 0); ok && t <= ref.nanos+nanosPerDay {
			return t, true
		}
	}
	if month == 2 && day == 29 && !isLeap(y) {
		y = prev(y)
	}
	t, ok := civil(y, month, day, sod, frac, 0)
	if ok && t <= ref.nanos+nanosPerDay {
		return t, true
	}
	if !ok && y <= 1970 {
		return 0, false
	}
	return civil(prev(y), month, day, sod, frac, 0)
}

// clockEnd parses a time of day that ends a timestamp at b[i:]:
// "hh:mm:ss[.frac]", then a zone when zoned (off is 0 otherwise), with no
// digit after it.
func clockEnd(b []byte, i int, zoned bool) (sod, frac, off int64, ok bool) {
	sod, j, ok := clock(b, i)
	if !ok {
		return 0, 0, 0, false
	}
	frac, j = fraction(b, j)
	if zoned {
		off, j = zone(b, j)
		// A sign and a digit right after the clock that did not read as
		// a zone (+15:00, +05:60, +05:3, +530, +2:00) make no timestamp,
		// as any field out of range does: ignoring it read the clock as
		// UTC, up to 15 h off.
		if j+1 < len(b) && (b[j] == '+' || b[j] == '-') && isDigit(b[j+1]) {
			return 0, 0, 0, false
		}
	}
	if j < len(b) && isDigit(b[j]) {
		return 0, 0, 0, false
	}
	return sod, frac, off, true
}

// clock parses "hh:mm:ss" at b[i:] into seconds of the day and returns the
// index after it.
func clock(b []byte, i int) (sod int64, j int, ok bool) {
	if i+8 > len(b) || b[i+2] != ':' || b[i+5] != ':' {
		return 0, 0, false
	}
	h, ok1 := digits2(b, i)
	m, ok2 := digits2(b, i+3)
	s, ok3 := digits2(b, i+6)
	if !(ok1 && ok2 && ok3) {
		return 0, 0, false
	}
	sod, ok = secondOfDay(h, m, s)
	return sod, i + 8, ok
}

func secondOfDay(h, m, s int) (int64, bool) {
	// Second 60 is a leap second; like time.Date it becomes the next minute.
	if h > 23 || m > 59 || s > 60 {
		return 0, false
	}
	return int64(h*3600 + m*60 + s), true
}

// fraction parses an optional fraction of a second, '.' or ',' followed by
// digits, at b[i:]. Digits beyond nanoseconds are consumed and ignored. A
// separator without digits after it is not consumed.
func fraction(b []byte, i int) (nanos int64, j int) {
	if i+1 >= len(b) || (b[i] != '.' && b[i] != ',') || !isDigit(b[i+1]) {
		return 0, i
	}
	j = i + 1
	scale := nanosPerSecond
	for j < len(b) && isDigit(b[j]) {
		if scale > 1 {
			scale /= 10
			nanos += int64(b[j]-'0') * scale
		}
		j++
	}
	return nanos, j
}

// zone parses an optional zone at b[i:]: "Z", "±hh:mm", "±hhmm", "±hh",
// each but "Z" also after one space, or " UTC"/" GMT". It returns the offset
// east of UTC in seconds and the index after the zone (i if none).
func zone(b []byte, i int) (off int64, j int) {
	if i >= len(b) {
		return 0, i
	}
	switch b[i] {
	case 'Z', 'z':
		return 0, i + 1
	case '+', '-':
		return numericZone(b, i)
	case ' ':
		if i+1 < len(b) && (b[i+1] == '+' || b[i+1] == '-') {
			if off, j := numericZone(b, i+1); j > i+1 {
				return off, j
			}
			return 0, i
		}
		if i+4 <= len(b) && (string(b[i+1:i+4]) == "UTC" || string(b[i+1:i+4]) == "GMT") &&
			(i+4 == len(b) || !isLetter(b[i+4])) {
			if i+4 < len(b) && (b[i+4] == '+' || b[i+4] == '-') {
				// GMT+01:00 (Java's name for a zone without one),
				// UTC+02:00, GMT-0800: the offset that follows.
				return numericZone(b, i+4)
			}
			return 0, i + 4
		}
		// One of RFC 822's US zone names (PostgreSQL's log prefix
		// writes them: "10:00:00.123 PST [1234]"); other names, which
		// are ambiguous (IST, CST in China), are left as text.
		if i+4 <= len(b) && isUpper(b[i+1]) && isUpper(b[i+2]) && isUpper(b[i+3]) && (i+4 == len(b) || !isLetter(b[i+4])) {
			if h, ok := rfc822Zones[string(b[i+1:i+4])]; ok {
				return int64(h) * 3600, i + 4
			}
		}
	}
	return 0, i
}

func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }

func numericZone(b []byte, i int) (off int64, j int) {
	h, ok := digits2(b, i+1)
	if !ok || h > 14 {
		return 0, i
	}
	j = i + 3
	m := 0
	if j < len(b) && b[j] == ':' {
		mm, ok := digits2(b, j+1)
		if !ok {
			return 0, i
		}
		m, j = mm, j+3
	} else if mm, ok := digits2(b, j); ok {
		m, j = mm, j+2
	}
	if m > 59 {
		return 0, i
	}
	off = int64(h*3600 + m*60)
	if b[i] == '-' {
		off = -off
	}
	return off, j
}

// civil converts a UTC-offset civil time to unix nanoseconds, checking the
// date and the 1970..2200 range.
func civil(year, month, day int, sod, frac, off int64) (int64, bool) {
	if month < 1 || month > 12 || day < 1 || day > daysIn(year, month) || year < 1969 || year > 2201 {
		return 0, false
	}
	secs := daysFromCivil(year, month, day)*86400 + sod - off
	if secs < 0 || secs >= maxNano/nanosPerSecond {
		return 0, false
	}
	return secs*nanosPerSecond + frac, true
}

// daysFromCivil returns the days since 1970-01-01 of a proleptic Gregorian
// date (Howard Hinnant's algorithm, valid for the years used here).
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400 // y >= 0 here
	yoe := y - era*400
	mp := m - 3
	if m <= 2 {
		mp = m + 9
	}
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era*146097 + doe - 719468)
}

func isLeap(y int) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

func daysIn(y, m int) int {
	switch m {
	case 2:
		if isLeap(y) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// year2 expands a two-digit year the POSIX strptime way.
func year2(yy int) int {
	if yy < 70 {
		return 2000 + yy
	}
	return 1900 + yy
}

// paddedDay parses a day of month written "dd", " d" or "d" at b[i:].
func paddedDay(b []byte, i int) (day, j int, ok bool) {
	if i < len(b) && b[i] == ' ' {
		i++
		if i < len(b) && isDigit(b[i]) && (i+1 >= len(b) || !isDigit(b[i+1])) {
			return int(b[i] - '0'), i + 1, true
		}
		return 0, 0, false
	}
	if d, ok := digits2(b, i); ok {
		return d, i + 2, true
	}
	if i < len(b) && isDigit(b[i]) {
		return int(b[i] - '0'), i + 1, true
	}
	return 0, 0, false
}

// monthAt recognises a three-letter English month name (any case) at b[i:].
func monthAt(b []byte, i int) (int, bool) {
	if i+3 > len(b) {
		return 0, false
	}
	switch uint32(b[i]|0x20)<<16 | uint32(b[i+1]|0x20)<<8 | uint32(b[i+2]|0x20) {
	case 'j'<<16 | 'a'<<8 | 'n':
		return 1, true
	case 'f'<<16 | 'e'<<8 | 'b':
		return 2, true
	case 'm'<<16 | 'a'<<8 | 'r':
		return 3, true
	case 'a'<<16 | 'p'<<8 | 'r':
		return 4, true
	case 'm'<<16 | 'a'<<8 | 'y':
		return 5, true
	case 'j'<<16 | 'u'<<8 | 'n':
		return 6, true
	case 'j'<<16 | 'u'<<8 | 'l':
		return 7, true
	case 'a'<<16 | 'u'<<8 | 'g':
		return 8, true
	case 's'<<16 | 'e'<<8 | 'p':
		return 9, true
	case 'o'<<16 | 'c'<<8 | 't':
		return 10, true
	case 'n'<<16 | 'o'<<8 | 'v':
		return 11, true
	case 'd'<<16 | 'e'<<8 | 'c':
		return 12, true
	}
	return 0, false
}

// weekdayAt recognises a three-letter English weekday name (any case).
func weekdayAt(b []byte, i int) bool {
	if i+3 > len(b) {
		return false
	}
	switch uint32(b[i]|0x20)<<16 | uint32(b[i+1]|0x20)<<8 | uint32(b[i+2]|0x20) {
	case 's'<<16 | 'u'<<8 | 'n', 'm'<<16 | 'o'<<8 | 'n', 't'<<16 | 'u'<<8 | 'e',
		'w'<<16 | 'e'<<8 | 'd', 't'<<16 | 'h'<<8 | 'u', 'f'<<16 | 'r'<<8 | 'i',
		's'<<16 | 'a'<<8 | 't':
		return true
	}
	return false
}

func digits2(b []byte, i int) (int, bool) {
	if i < 0 || i+2 > len(b) {
		return 0, false
	}
	x, y := b[i]-'0', b[i+1]-'0'
	if x > 9 || y > 9 {
		return 0, false
	}
	return int(x)*10 + int(y), true
}

func digits4(b []byte, i int) (int, bool) {
	hi, ok1 := digits2(b, i)
	lo, ok2 := digits2(b, i+2)
	return hi*100 + lo, ok1 && ok2
}

// skipLogfmtTimeKey skips a logfmt time key at b[i:], "ts=", "t=", "time=",
// "timestamp=" or "@timestamp=", and an opening quote after it; it returns i
// when there is none.
func skipLogfmtTimeKey(b []byte, i int) int {
	j := i
	for j < len(b) && j-i < 11 && b[j] != '=' {
		j++
	}
	if j >= len(b) || b[j] != '=' {
		return i
	}
	switch string(b[i:j]) {
	case "ts", "t", "time", "timestamp", "@timestamp":
	default:
		return i
	}
	j++
	if j < len(b) && b[j] == '"' {
		j++
	}
	return j
}

// skipBOM returns the length of a UTF-8 byte order mark at the start of b:
// editors on Windows put one before the first line of a file.
func skipBOM(b []byte) int {
	if len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
		return 3
	}
	return 0
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	return i
}

func isDigit(c byte) bool  { return c-'0' <= 9 }
func isLetter(c byte) bool { return (c|0x20)-'a' < 26 }

// The instants int64 nanoseconds since 1970 can hold.
var (
	minUnixNano = time.Unix(0, math.MinInt64)
	maxUnixNano = time.Unix(0, math.MaxInt64)
)

// UnixNano is t.UnixNano() saturated at the ends of what int64
// nanoseconds can hold (1677-09-21 and 2262-04-11), where
// time.Time.UnixNano's result is undefined (it wraps: year 9999 would
// come out in 1816). A bound such as --until 9999-12-31 then means "no
// bound" rather than a time in the past.
func UnixNano(t time.Time) int64 {
	switch {
	case t.Before(minUnixNano):
		return math.MinInt64
	case t.After(maxUnixNano):
		return math.MaxInt64
	}
	return t.UnixNano()
}
