package main

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"haystack/internal/store"
	"haystack/internal/testseed"
)

// The time oracle test of `hay ingest` as seen through `hay search`: what
// time and what text each ingested line gets, at the edges of the
// calendar (month and year ends, leap days, leap seconds, 24:00, offsets
// from -12:00 to +14:00 and half hours, two-digit years, the 1970 and
// end-of-2200 limits, lowercase month names), JSON time keys with values
// of every type, lines whose timestamp is not leading, NUL and invalid
// UTF-8 before a timestamp, timestamps that go backwards and a format that
// changes midway. The expected instants are computed here with time.Date
// from the civil fields each line was rendered from, by the rules the docs
// state (LeadingTime and JSONTime in internal/ingest, docs/STORE.md
// "Entries, times, streams"); the check reads `hay search --json` (time
// and line bytes), `--order newest`, and `--since/--until` windows whose
// bounds sit on, just before and just after the oracle's instants.
//
// It differs from TestIngestDiff (random instants, the store read
// directly) by aiming at the calendar's edges and by checking the search
// path and its time bounds. HAY_TIME_ORACLE_SEED=n reruns one seed.

// torMaxNano is 2201-01-01T00:00:00Z, the end of what the detectors report.
var torMaxNano = time.Date(2201, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// torCivil is a wall-clock time with its zone offset, as a line writes it.
// Fields may be out of range on purpose (hour 24, Feb 29 of a common year).
type torCivil struct {
	y, mo, d, h, mi, s int
	ns                 int // nanoseconds shown (the fraction, truncated)
	off                int // seconds east of UTC
}

// torDaysIn is the number of days of month mo of year y, by time.Date's
// normalisation (day 0 of the next month).
func torDaysIn(y, mo int) int {
	return time.Date(y, time.Month(mo)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// instant is the documented reading of c: every field range-checked
// (second 60 is a leap second and, as time.Date has it, the next
// minute's first), then the instant must lie in [1970, 2201).
func (c torCivil) instant() (int64, bool) {
	if c.mo < 1 || c.mo > 12 || c.d < 1 || c.d > torDaysIn(c.y, c.mo) || c.h > 23 || c.mi > 59 || c.s > 60 {
		return 0, false
	}
	t := time.Date(c.y, time.Month(c.mo), c.d, c.h, c.mi, c.s, c.ns, time.FixedZone("", c.off))
	if t.Before(time.Unix(0, 0)) || !t.Before(time.Unix(0, torMaxNano)) {
		return 0, false
	}
	return t.UnixNano(), true
}

// torSpec is one generated line (without its terminator) and the time
// each detector must find in it.
type torSpec struct {
	content        []byte
	plain          int64
	plainOK        bool
	json           int64
	jsonOK         bool
	what           string
	lineTerminator string
}

type torGen struct {
	r *rand.Rand
	// refLo and refHi bracket the clock hay ingest reads for yearless
	// layouts: a yearless date is used only when both give the same year.
	refLo, refHi time.Time
}

func (g *torGen) pick(s ...string) string { return s[g.r.IntN(len(s))] }

var torMonths = []string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}
var torDays = []string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}

// caseOf writes a month or weekday name in upper, lower or title case
// (the detectors take any case).
func (g *torGen) caseOf(s string) string {
	switch g.r.IntN(4) {
	case 0:
		return strings.ToLower(s)
	case 1:
		return strings.ToUpper(s)
	}
	return s
}

// year picks a year, mostly at the edges.
func (g *torGen) year(lo, hi int) int {
	edges := []int{1970, 1971, 1999, 2000, 2004, 2016, 2024, 2026, 2038, 2069, 2070, 2099, 2100, 2199, 2200}
	if g.r.IntN(2) == 0 {
		var in []int
		for _, y := range edges {
			if y >= lo && y <= hi {
				in = append(in, y)
			}
		}
		if len(in) > 0 {
			return in[g.r.IntN(len(in))]
		}
	}
	return lo + g.r.IntN(hi-lo+1)
}

// civil picks a valid wall-clock time of year y (a day at a month's
// edge, a leap day, midnight, 23:59:59, a leap second) with ns nanoseconds
// and offset 0.
func (g *torGen) civil(y int) torCivil {
	c := torCivil{y: y, mo: 1 + g.r.IntN(12)}
	switch g.r.IntN(6) {
	case 0:
		c.d = torDaysIn(y, c.mo)
	case 1:
		c.d = 1
	case 2:
		c.mo, c.d = 2, torDaysIn(y, 2) // the 28th, or a leap day
	case 3:
		c.mo, c.d = 12, 31
	default:
		c.d = 1 + g.r.IntN(torDaysIn(y, c.mo))
	}
	switch g.r.IntN(6) {
	case 0:
		c.h, c.mi, c.s = 0, 0, 0
	case 1:
		c.h, c.mi, c.s = 23, 59, 59
	case 2:
		c.h, c.mi, c.s = 23, 59, 60 // leap second
	default:
		c.h, c.mi, c.s = g.r.IntN(24), g.r.IntN(60), g.r.IntN(60)
	}
	if g.r.IntN(3) > 0 {
		c.ns = g.r.IntN(1e9)
	}
	return c
}

// invalid makes c out of range in one field (the line then has no
// timestamp), or leaves it valid.
func (g *torGen) invalid(c torCivil) torCivil {
	switch g.r.IntN(8) {
	case 0:
		c.h, c.mi, c.s = 24, 0, 0
	case 1:
		c.mo, c.d = 2, 29
		if torDaysIn(c.y, 2) == 29 {
			c.y++ // a common year after a leap year
		}
	case 2:
		c.mo, c.d = []int{4, 6, 9, 11}[g.r.IntN(4)], 31
	case 3:
		c.mo = 13
	case 4:
		c.mi = 60
	case 5:
		c.s = 61
	case 6:
		c.d = 0
	case 7:
		c.mo = 0
	}
	return c
}

// fraction renders c.ns with n digits after sep (digits beyond 9 are
// extra, to be ignored) and truncates c.ns to what is shown.
func (g *torGen) fraction(c *torCivil, sep string, n int) string {
	if n == 0 {
		c.ns = 0
		return ""
	}
	s := fmt.Sprintf("%09d", c.ns)
	for len(s) < n {
		s += strconv.Itoa(g.r.IntN(10))
	}
	s = s[:n]
	if n < 9 {
		v, _ := strconv.Atoi(s + strings.Repeat("0", 9-n))
		c.ns = v
	}
	return sep + s
}

func (g *torGen) fracDigits() int { return []int{0, 0, 1, 3, 6, 9, 12}[g.r.IntN(7)] }

var torOffsets = []int{0, 3600, -3600, 14 * 3600, -12 * 3600, 5*3600 + 1800, 5*3600 + 2700, -(3*3600 + 1800),
	45 * 60, -30 * 60, 13*3600 + 2700, -(9*3600 + 1800), 8 * 3600, -5 * 3600}

func (g *torGen) offset() int {
	if g.r.IntN(4) == 0 {
		return (g.r.IntN(26*4+1) - 12*4) * 900 // -12:00 .. +14:00 in quarters
	}
	return torOffsets[g.r.IntN(len(torOffsets))]
}

// numZone renders off as ±hh:mm, ±hhmm or (whole hours) ±hh.
func (g *torGen) numZone(off int) string {
	sign := "+"
	if off < 0 {
		sign, off = "-", -off
	}
	h, m := off/3600, off%3600/60
	switch g.r.IntN(3) {
	case 0:
		return fmt.Sprintf("%s%02d%02d", sign, h, m)
	case 1:
		if m == 0 {
			return fmt.Sprintf("%s%02d", sign, h)
		}
	}
	return fmt.Sprintf("%s%02d:%02d", sign, h, m)
}

// stamp renders a timestamp in a documented layout with a year and
// returns it with its civil fields (ok false: out of range on purpose).
// The text after it must not start with a digit, '.', ',', a zone or a
// sign.
func (g *torGen) stamp() (string, torCivil, string) {
	bad := g.r.IntN(8) == 0
	switch g.r.IntN(10) {
	case 0, 1, 2, 3: // RFC 3339 / ISO 8601
		y := g.year(1970, 2200)
		if g.r.IntN(12) == 0 {
			y = []int{1, 1900, 1969, 2201, 2262, 2263, 9999}[g.r.IntN(7)]
		}
		c := g.civil(y)
		if bad {
			c = g.invalid(c)
		}
		ds := g.pick("-", "-", "/")
		s := fmt.Sprintf("%04d%s%02d%s%02d%s%02d:%02d:%02d", c.y, ds, c.mo, ds, c.d, g.pick("T", "T", " ", "t"), c.h, c.mi, c.s)
		s += g.fraction(&c, g.pick(".", ","), g.fracDigits())
		switch g.r.IntN(5) {
		case 0:
		case 1:
			s += g.pick("Z", "z", " UTC", " GMT")
		default:
			c.off = g.offset()
			s += g.pick("", " ") + g.numZone(c.off)
		}
		return s, c, "iso"
	case 4: // common log format
		c := g.civil(g.year(1970, 2200))
		c.ns = 0
		if bad {
			c = g.invalid(c)
		}
		if c.mo < 1 || c.mo > 12 {
			c.mo = 2 // the month is a name: no month 13 to write
			c.d = 30
		}
		s := fmt.Sprintf("%02d/%s/%04d:%02d:%02d:%02d", c.d, g.caseOf(torMonths[c.mo-1]), c.y, c.h, c.mi, c.s)
		if g.r.IntN(4) > 0 {
			c.off = g.offset()
			sign, o := "+", c.off
			if o < 0 {
				sign, o = "-", -o
			}
			s += fmt.Sprintf(" %s%02d%02d", sign, o/3600, o%3600/60)
		}
		return s, c, "clf"
	case 5: // Tomcat
		c := g.civil(g.year(1970, 2200))
		if bad {
			c = g.invalid(c)
		}
		if c.mo < 1 || c.mo > 12 {
			c.mo, c.d = 9, 31
		}
		s := fmt.Sprintf("%02d-%s-%04d %02d:%02d:%02d", c.d, g.caseOf(torMonths[c.mo-1]), c.y, c.h, c.mi, c.s)
		s += g.fraction(&c, ".", []int{0, 3}[g.r.IntN(2)])
		return s, c, "tomcat"
	case 6: // asctime
		c := g.civil(g.year(1970, 2200))
		if bad {
			c = g.invalid(c)
		}
		if c.mo < 1 || c.mo > 12 {
			c.mo, c.d = 6, 31
		}
		wd := torDays[time.Date(c.y, time.Month(c.mo), max(c.d, 1), 0, 0, 0, 0, time.UTC).Weekday()]
		day := fmt.Sprintf("%02d", c.d)
		if c.d < 10 && g.r.IntN(2) == 0 {
			day = fmt.Sprintf("%2d", c.d)
		}
		s := fmt.Sprintf("%s %s %s %02d:%02d:%02d", g.caseOf(wd), g.caseOf(torMonths[c.mo-1]), day, c.h, c.mi, c.s)
		s += g.fraction(&c, ".", []int{0, 3, 6}[g.r.IntN(3)])
		s += fmt.Sprintf(" %04d", c.y)
		return s, c, "asctime"
	case 7: // HDFS yyMMdd HHmmss: two-digit years 00-69 are 20xx, 70-99 19xx
		c := g.civil(g.year(1970, 2069))
		c.ns = 0
		if bad {
			c = g.invalid(c)
		}
		return fmt.Sprintf("%02d%02d%02d %02d%02d%02d", c.y%100, c.mo, c.d, c.h, c.mi, c.s), c, "hdfs"
	default: // Spark yy/MM/dd HH:mm:ss[.frac]
		c := g.civil(g.year(1970, 2069))
		if bad {
			c = g.invalid(c)
		}
		s := fmt.Sprintf("%02d/%02d/%02d %02d:%02d:%02d", c.y%100, c.mo, c.d, c.h, c.mi, c.s)
		s += g.fraction(&c, ".", []int{0, 3}[g.r.IntN(2)])
		return s, c, "spark"
	}
}

// yearlessYear is the documented year of a date without one: the next
// year when that puts it at most a day after the clock, else the clock's
// UTC year, or the year before when that would put it more than a day
// after the clock; Feb 29 takes the latest leap year at or before.
func yearlessYear(c torCivil, ref time.Time) int {
	at := func(y int) time.Time {
		return time.Date(y, time.Month(c.mo), c.d, c.h, c.mi, c.s, c.ns, time.UTC)
	}
	leapFix := func(y int) int {
		for c.mo == 2 && c.d == 29 && torDaysIn(y, 2) != 29 {
			y--
		}
		return y
	}
	if n := ref.UTC().Year() + 1; (c.mo != 2 || c.d != 29 || torDaysIn(n, 2) == 29) && !at(n).After(ref.Add(24*time.Hour)) {
		return n // just after New Year
	}
	y := leapFix(ref.UTC().Year())
	if at(y).After(ref.Add(24 * time.Hour)) {
		y = leapFix(y - 1)
	}
	return y
}

// yearless renders a syslog or klog timestamp; its year comes from the
// clock by the documented rule, the same for every clock reading the
// ingest may make.
func (g *torGen) yearless() (string, torCivil, bool, string) {
	for {
		c := g.civil(2024) // 2024: Feb 29 is a day to write
		if g.r.IntN(4) == 0 {
			// Near the clock: within days of it, on either side.
			near := g.refLo.Add(time.Duration(g.r.Int64N(int64(6*24*time.Hour))) - 3*24*time.Hour).UTC()
			c.mo, c.d = int(near.Month()), near.Day()
		}
		y1, y2 := yearlessYear(c, g.refLo), yearlessYear(c, g.refHi)
		if y1 != y2 {
			continue
		}
		c.y = y1
		var s string
		kind := "syslog"
		if g.r.IntN(3) == 0 {
			kind = "klog"
			s = fmt.Sprintf("%s%02d%02d %02d:%02d:%02d", g.pick("I", "W", "E", "F"), c.mo, c.d, c.h, c.mi, c.s)
			s += g.fraction(&c, ".", []int{0, 6, 6, 9}[g.r.IntN(4)])
		} else {
			day := fmt.Sprintf("%02d", c.d)
			if c.d < 10 {
				day = g.pick(fmt.Sprintf("%2d", c.d), strconv.Itoa(c.d), day)
			}
			s = fmt.Sprintf("%s %s %02d:%02d:%02d", g.caseOf(torMonths[c.mo-1]), day, c.h, c.mi, c.s)
			s += g.fraction(&c, ".", []int{0, 0, 3, 6}[g.r.IntN(4)])
		}
		// Recheck with the fraction as truncated.
		if yearlessYear(c, g.refLo) != c.y || yearlessYear(c, g.refHi) != c.y {
			continue
		}
		_, ok := c.instant()
		return s, c, ok, kind
	}
}

// plainLine is a line led by a timestamp behind documented prefixes, or
// (bad prefix) one whose timestamp is not leading.
func (g *torGen) plainLine() torSpec {
	var s string
	var c torCivil
	var kind string
	yearlessOK := true
	if g.r.IntN(4) == 0 {
		s, c, yearlessOK, kind = g.yearless()
	} else {
		s, c, kind = g.stamp()
	}
	t, ok := c.instant()
	ok = ok && yearlessOK
	pre := ""
	if g.r.IntN(10) == 0 {
		pre += "\xEF\xBB\xBF"
	}
	pre += g.pick("", "", "", " ", "\t", " \t ")
	switch g.r.IntN(10) {
	case 0:
		pre += g.pick("ts=", "t=", "time=", "timestamp=", "@timestamp=")
	case 1:
		pre += g.pick("ts=\"", "time=\"")
	case 2:
		pre += g.pick("<34>", "<0>", "<191>")
		if kind != "syslog" && kind != "klog" && kind != "asctime" && kind != "tomcat" && g.r.IntN(2) == 0 {
			pre += "1 "
		}
	}
	if g.r.IntN(4) == 0 {
		pre += g.pick("[", "[ ")
	}
	valid := ok
	if g.r.IntN(7) == 0 {
		// Not leading: a NUL, an invalid byte, a vertical tab, a no-break
		// space or a word before it.
		pre = g.pick("\x00", "\xff", "\xc3", "\v", "\u00a0", "msg ", "x", "[[", "<9999>", "ts =", "timestamps=", "- ") + pre
		ok = false
	}
	suf := g.pick("", " msg", "] GET /x HTTP/1.1", " - INFO main", "\" level=info", " \x00\xff body", "\r mid", "\tx", " [2099-01-01T00:00:00Z later]")
	content := []byte(pre + s + suf)
	if !ok && valid && kind == "clf" && torAccessLogShape(content) {
		// The one layout read after other text (LeadingTime's doc): three
		// tokens, as "host ident authuser " (e.g. "ts = <191>1 "), then
		// the bracketed time.
		ok = true
	}
	return torSpec{content: content, plain: t, plainOK: ok, what: kind}
}

// torAccessLogShape reports whether b starts as an access-log line does
// for LeadingTime: three tokens of 1 to 256 bytes without a blank or
// "[", a space after each, then "[dd/".
func torAccessLogShape(b []byte) bool { return torAccessLogRE.Match(b) }

var torAccessLogRE = regexp.MustCompile(`^(?:[^ \t\[]{1,256} ){3}\[[0-9]{2}/`)

// epoch renders a JSON number of unix time (an integer and maybe a
// fraction, or an exponent form exact in float64) and its documented
// instant: the unit is judged by magnitude (below 1e11 seconds, 1e14
// milliseconds, 1e17 microseconds, else nanoseconds).
func (g *torGen) epoch() (string, int64, bool) {
	if g.r.IntN(6) == 0 {
		// m·10^k written with an exponent; kept to values whose product
		// with the unit is exact in a float64 (the doc: "Precision is that
		// of a float64").
		for {
			m := int64(1 + g.r.IntN(999999))
			k := g.r.IntN(13)
			v := new(big.Int).Mul(big.NewInt(m), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(k)), nil))
			var unit int64
			switch {
			case v.Cmp(big.NewInt(1e11)) < 0:
				unit = 1e9
			case v.Cmp(big.NewInt(1e14)) < 0:
				unit = 1e6
			case v.Cmp(big.NewInt(1e17)) < 0:
				unit = 1e3
			default:
				unit = 1
			}
			ns := new(big.Int).Mul(v, big.NewInt(unit))
			// Exact when the odd part of ns fits 53 bits.
			odd := new(big.Int).Set(ns)
			for odd.Sign() > 0 && odd.Bit(0) == 0 {
				odd.Rsh(odd, 1)
			}
			if odd.BitLen() > 53 {
				continue
			}
			f, _ := new(big.Float).SetInt(v).Float64()
			s := strconv.FormatFloat(f, 'e', -1, 64)
			if !ns.IsInt64() || ns.Int64() >= torMaxNano {
				return s, 0, false
			}
			return s, ns.Int64(), true
		}
	}
	var digits int
	switch g.r.IntN(5) {
	case 0:
		digits = 1 + g.r.IntN(10) // seconds, small to 10 digits
	case 1:
		digits = 11 + g.r.IntN(3) // milliseconds
	case 2:
		digits = 14 + g.r.IntN(3) // microseconds
	case 3:
		digits = 17 + g.r.IntN(3) // nanoseconds (19 digits may be out of int64)
	default:
		// An instant at an edge, in a random unit.
		c := g.civil(g.year(1974, 2200))
		t, ok := c.instant()
		if !ok {
			t = 1700000000123456789
		}
		switch g.r.IntN(4) {
		case 0:
			return strconv.FormatInt(t/1e9, 10), t / 1e9 * 1e9, true
		case 1:
			return strconv.FormatInt(t/1e6, 10), t / 1e6 * 1e6, true
		case 2:
			return strconv.FormatInt(t/1e3, 10), t / 1e3 * 1e3, true
		}
		return strconv.FormatInt(t, 10), t, true
	}
	b := []byte{byte('1' + g.r.IntN(9))}
	for len(b) < digits {
		b = append(b, byte('0'+g.r.IntN(10)))
	}
	n, _ := new(big.Int).SetString(string(b), 10)
	var unit int64
	switch {
	case len(b) <= 11 && n.Cmp(big.NewInt(1e11)) < 0:
		unit = 1e9
	case n.Cmp(big.NewInt(1e14)) < 0:
		unit = 1e6
	case n.Cmp(big.NewInt(1e17)) < 0:
		unit = 1e3
	default:
		unit = 1
	}
	s := string(b)
	ns := new(big.Int).Mul(n, big.NewInt(unit))
	if nf := g.r.IntN(14); nf > 0 && g.r.IntN(2) == 0 {
		fr := make([]byte, nf)
		for i := range fr {
			fr[i] = byte('0' + g.r.IntN(10))
		}
		s += "." + string(fr)
		// The fraction of one unit, truncated to nanoseconds.
		scale := unit
		for _, d := range fr {
			if scale == 1 {
				break
			}
			scale /= 10
			ns.Add(ns, big.NewInt(int64(d-'0')*scale))
		}
	}
	if !ns.IsInt64() || ns.Int64() >= torMaxNano {
		return s, 0, false
	}
	return s, ns.Int64(), true
}

// jsonLine is a JSON object line: keys before the time key (some time
// keys with values that are not times, nested time keys, time text under
// other keys), the time key with a value of some type, and the rest.
func (g *torGen) jsonLine() torSpec {
	var b strings.Builder
	b.WriteString(g.pick("{", " {", "\xEF\xBB\xBF{", "{ ", "\t{"))
	before := []string{`"level":"info"`, `"msg":"2015-07-29T17:41:44Z leading in msg"`, `"nested":{"ts":1700000000,"time":"2001-01-01T00:00:00Z"}`,
		`"arr":[{"time":"2001-01-01T00:00:00Z"},["ts"]]`, `"ts":null`, `"time":true`, `"timestamp":false`, `"@timestamp":{}`,
		`"ts":[]`, `"time":"not a time"`, `"ts":-5`, `"TS":1700000000`, `"Time":"2015-07-29T17:41:44Z"`, `"ts ":1700000000`,
		`"s":"with \"quote\" and \\ back, \"ts\":1700000000"`, `"time":""`, `"ts":"2015-07-29T24:00:00Z"`, `"n":-12.5e3`}
	for range g.r.IntN(4) {
		b.WriteString(before[g.r.IntN(len(before))])
		b.WriteString(g.pick(",", " , ", ",\t"))
	}
	spec := torSpec{what: "json"}
	if g.r.IntN(8) == 0 {
		// No time key with a time: the line has no JSON time.
		b.WriteString(`"message":"2015-07-29T17:41:44Z"}`)
		spec.content = []byte(b.String())
		return spec
	}
	b.WriteString(g.pick(`"time"`, `"ts"`, `"timestamp"`, `"@timestamp"`, `"\u0074s"`, `"tim\u0065"`))
	b.WriteString(g.pick(":", " : ", ":\t"))
	switch g.r.IntN(6) {
	case 0, 1: // a layout with a year, in a string ('/' maybe escaped)
		s, c, kind := g.stamp()
		spec.json, spec.jsonOK = c.instant()
		spec.what += "/" + kind
		b.WriteString(`"` + strings.ReplaceAll(s, "/", g.pick("/", `\/`)) + `"`)
	case 2: // a yearless layout: the year from the clock
		s, c, ok, kind := g.yearless()
		t, tok := c.instant()
		spec.json, spec.jsonOK = t, ok && tok
		spec.what += "/" + kind
		b.WriteString(`"` + s + `"`)
	case 3: // a number in a string
		s, t, ok := g.epoch()
		spec.json, spec.jsonOK = t, ok
		spec.what += "/epoch-string"
		b.WriteString(`"` + s + `"`)
	default:
		s, t, ok := g.epoch()
		spec.json, spec.jsonOK = t, ok
		spec.what += "/epoch"
		b.WriteString(s)
	}
	rest := g.pick(`}`, `,"msg":"x"}`, ` , "level":"warn", "x":{"y":[1,2]}}`, `,"broken`, `,"msg":"\u00e9\ud800"}`, `,"time":"1999-01-01T00:00:00Z"}`)
	if !spec.jsonOK && strings.Contains(rest, "1999") {
		// The first time key whose value is a timestamp counts.
		spec.json, spec.jsonOK = time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(), true
	}
	b.WriteString(rest)
	spec.content = []byte(b.String())
	return spec
}

// junk is a line without a timestamp: text, NUL, invalid UTF-8, a CR
// inside, empty.
func (g *torGen) junk() torSpec {
	s := g.pick("", "   at com.example.Main(Main.java:42)", "\x00\x00", "\xff\xfe", "caused by: \xed\xa0\x80", "a\rb", "\t", "continued ...",
		"12345 numbers", "2015 was a year", "Foo 14 15:16:01", "{\"msg\":\"no time\"}", "{}", "[", "<34>", "\r")
	return torSpec{content: []byte(s), what: "junk"}
}

// regime is a set of line kinds: a file's format changes at each regime.
func (g *torGen) line(regime int) torSpec {
	var s torSpec
	switch regime {
	case 0: // plain text only
		if g.r.IntN(5) == 0 {
			s = g.junk()
		} else {
			s = g.plainLine()
		}
	case 1: // JSON only
		if g.r.IntN(6) == 0 {
			s = g.junk()
		} else {
			s = g.jsonLine()
		}
	default: // mixed
		switch g.r.IntN(3) {
		case 0:
			s = g.plainLine()
		case 1:
			s = g.jsonLine()
		default:
			s = g.junk()
		}
	}
	if bytes.IndexByte(s.content, '\n') >= 0 {
		panic("generated a line with a newline")
	}
	s.lineTerminator = g.pick("\n", "\n", "\r\n")
	if bytes.HasSuffix(s.content, []byte("\r")) {
		s.lineTerminator = "\r\n" // else framing would strip the content's "\r"
	}
	return s
}

// torWant is one expected entry.
type torWant struct {
	line []byte
	time int64
	what string
}

// torExpect frames data by the documented rule (split at "\n", strip one
// trailing "\r", a last line without "\n" kept) and gives each line its
// time for the format: its own, else the previous line's, else (lines
// before the first timestamp) the first timestamp's. specs[i] describes
// the i-th framed line (its time was computed on its content, which the
// test keeps free of a trailing "\r" the framing would strip).
func torExpect(data []byte, specs []torSpec, format string) []torWant {
	parts := bytes.Split(data, []byte("\n"))
	if len(parts[len(parts)-1]) == 0 {
		parts = parts[:len(parts)-1]
	}
	if len(parts) != len(specs) {
		panic(fmt.Sprintf("%d lines framed, %d specs", len(parts), len(specs)))
	}
	out := make([]torWant, len(parts))
	has := make([]bool, len(parts))
	first := -1
	for i, p := range parts {
		out[i].line = bytes.TrimSuffix(p, []byte("\r"))
		out[i].what = fmt.Sprintf("line %d (%s)", i+1, specs[i].what)
		s := specs[i]
		switch format {
		case "plain":
			out[i].time, has[i] = s.plain, s.plainOK
		case "jsonl":
			out[i].time, has[i] = s.json, s.jsonOK
		default:
			if s.jsonOK {
				out[i].time, has[i] = s.json, true
			} else {
				out[i].time, has[i] = s.plain, s.plainOK
			}
		}
		if has[i] && first < 0 {
			first = i
		}
	}
	if first < 0 {
		panic("no line with a timestamp")
	}
	last := out[first].time
	for i := range out {
		if has[i] {
			last = out[i].time
		} else {
			out[i].time = last
		}
	}
	return out
}

// torEntry is one entry of `hay search --json`.
type torEntry struct {
	time int64
	line []byte
}

func torSearch(t *testing.T, data string, args ...string) []torEntry {
	t.Helper()
	out, code := hayInProcess(t, append(append([]string{"search", "--data", data, "--json"}, args...), "--", "")...)
	// Exit 1 is grep's "nothing matched": checked against the output.
	if code != 0 && (code != 1 || len(out) > 0) {
		t.Fatalf("hay search %q: exit %d", args, code)
	}
	var es []torEntry
	for _, l := range bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var e struct {
			Time string  `json:"time"`
			Line string  `json:"line"`
			B64  *string `json:"line_base64"`
		}
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		tm, err := time.Parse(time.RFC3339Nano, e.Time)
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		// A line that is not valid UTF-8 comes exactly as line_base64
		// (without it, "line" holds U+FFFD and differs from the oracle).
		line := []byte(e.Line)
		if e.B64 != nil {
			if line, err = base64.StdEncoding.DecodeString(*e.B64); err != nil {
				t.Fatalf("%s: %v", l, err)
			}
		}
		es = append(es, torEntry{time: tm.UnixNano(), line: line})
	}
	return es
}

func torFmt(n int64) string { return time.Unix(0, n).UTC().Format(time.RFC3339Nano) }

// torCompare reports the first differences between got and want.
func torCompare(t *testing.T, what string, got []torEntry, want []torWant) bool {
	t.Helper()
	bad := 0
	for i := 0; i < max(len(got), len(want)) && bad < 8; i++ {
		switch {
		case i >= len(got):
			t.Errorf("%s: missing entry %d: %s %q at %s", what, i, want[i].what, want[i].line, torFmt(want[i].time))
			bad++
		case i >= len(want):
			t.Errorf("%s: extra entry %d: %q at %s", what, i, got[i].line, torFmt(got[i].time))
			bad++
		case !bytes.Equal(got[i].line, want[i].line) || got[i].time != want[i].time:
			t.Errorf("%s: entry %d: got %q at %s, want %s %q at %s", what, i, got[i].line, torFmt(got[i].time), want[i].what, want[i].line, torFmt(want[i].time))
			bad++
		}
	}
	return bad == 0
}

func TestIngestTimeOracle(t *testing.T) {
	seeds := []uint64{1, 2}
	if v := os.Getenv("HAY_TIME_ORACLE_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seeds = []uint64{n}
	} else {
		seeds = append(seeds, testseed.Seed(t, "HAY_TIME_ORACLE_SEED"))
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { torRun(t, seed, 1500, 12, []string{"auto", "plain", "jsonl"}) })
	}
	// A larger file (over 2 MiB): several batches (1 MiB each at most) and, with
	// a small head (256 KiB), several segments, the format changing across
	// them.
	t.Run("large", func(t *testing.T) {
		torRun(t, seeds[len(seeds)-1]+1, 45000, 3, []string{"auto"}, "--head-bytes", "262144")
	})
}

// torRun generates about lines lines with seed, ingests them with each
// format and checks them through n time-window searches each.
func torRun(t *testing.T, seed uint64, lines, windows int, formats []string, ingestArgs ...string) {
	t.Logf("HAY_TIME_ORACLE_SEED=%d", seed)
	r := rand.New(rand.NewPCG(seed, 0x7157))
	dir := t.TempDir()
	now := time.Now()
	// The ingest runs read the clock within this window (a run takes well
	// under a second; ten minutes leave room for a loaded machine).
	g := &torGen{r: r, refLo: now.Add(-time.Second), refHi: now.Add(10 * time.Minute)}

	// Regimes of lines: the format changes midway, several times; times
	// jump backwards and forwards at random.
	var data []byte
	var specs []torSpec
	n := lines + r.IntN(lines/3)
	regime := r.IntN(3)
	for len(specs) < n {
		if r.IntN(200) == 0 {
			regime = r.IntN(3)
		}
		s := g.line(regime)
		specs = append(specs, s)
		data = append(data, s.content...)
		data = append(data, s.lineTerminator...)
	}
	// A content ending in "\r" keeps it before a "\r\n" terminator; and
	// the last line may lack its "\n".
	specs = append(specs, torSpec{content: []byte("trailing cr\r"), what: "cr"})
	data = append(data, "trailing cr\r\r\n"...)
	if r.IntN(2) == 0 {
		last := g.plainLine()
		specs = append(specs, last)
		data = append(data, last.content...)
		if bytes.HasSuffix(last.content, []byte("\r")) {
			data = append(data, "\r\n"...)
		} else if len(last.content) == 0 {
			data = append(data, '\n') // an empty last line without "\n" is no line
		}
	}
	file := filepath.Join(dir, "edge.log")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, format := range formats {
		want := torExpect(data, specs, format)
		// A line's framed bytes must be its content (the "\r" of the
		// content above is kept: it was followed by "\r\n").
		for i, w := range want {
			if !bytes.Equal(w.line, specs[i].content) {
				t.Fatalf("oracle framing: line %d %q vs content %q", i+1, w.line, specs[i].content)
			}
		}
		dataDir := filepath.Join(dir, "data-"+format)
		if out, code := hayInProcess(t, append(append([]string{"ingest", "--data", dataDir, "--format", format}, ingestArgs...), file)...); code != 0 {
			t.Fatalf("ingest --format %s: exit %d: %s", format, code, out)
		}
		if len(ingestArgs) > 0 {
			// The large run is meant to span segments: make sure it does.
			snap, err := store.OpenSnapshot(dataDir)
			if err != nil {
				t.Fatal(err)
			}
			parts := len(snap.Parts)
			snap.Close()
			if parts < 2 {
				t.Fatalf("%d bytes made %d segment(s); the test wants several", len(data), parts)
			}
		}
		got := torSearch(t, dataDir)
		if !torCompare(t, "--format "+format, got, want) {
			continue
		}
		// --order oldest sorts by time (one stream: ties in file order),
		// and newest is its exact reverse; the default is the file's order.
		byTime := slices.Clone(want)
		slices.SortStableFunc(byTime, func(a, b torWant) int { return cmp.Compare(a.time, b.time) })
		torCompare(t, "--format "+format+" --order oldest", torSearch(t, dataDir, "--order", "oldest"), byTime)
		newest := torSearch(t, dataDir, "--order", "newest")
		slices.Reverse(newest)
		torCompare(t, "--format "+format+" --order newest (reversed)", newest, byTime)

		torWindows(t, r, dataDir, "--format "+format, want, windows)
	}

	// The same file ingested in two runs (the second resumes where the
	// first stopped, at a line boundary), then compacted: lines before
	// the first timestamp of each run take that run's first timestamp
	// (docs/STORE.md), and compaction changes no time, byte or order.
	cut := torSplit(r, specs)
	if cut < 0 {
		return
	}
	off := 0
	for _, s := range specs[:cut] {
		off += len(s.content) + len(s.lineTerminator)
	}
	resumed := filepath.Join(dir, "resumed.log")
	if err := os.WriteFile(resumed, data[:off], 0o644); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(dir, "data-resumed")
	if out, code := hayInProcess(t, append(append([]string{"ingest", "--data", dataDir}, ingestArgs...), resumed)...); code != 0 {
		t.Fatalf("ingest (first run): exit %d: %s", code, out)
	}
	if err := os.WriteFile(resumed, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := hayInProcess(t, append(append([]string{"ingest", "--data", dataDir}, ingestArgs...), resumed)...); code != 0 {
		t.Fatalf("ingest (second run): exit %d: %s", code, out)
	}
	want := append(torExpect(data[:off], specs[:cut], "auto"), torExpect(data[off:], specs[cut:], "auto")...)
	if !torCompare(t, "two runs", torSearch(t, dataDir), want) {
		return
	}
	if out, code := hayInProcess(t, "compact", "--data", dataDir); code != 0 {
		t.Fatalf("compact: exit %d: %s", code, out)
	}
	if torCompare(t, "two runs, compacted", torSearch(t, dataDir), want) {
		torWindows(t, r, dataDir, "two runs, compacted", want, (windows+1)/2)
	}
}

// torWindows runs n searches with time windows: bounds on an oracle
// instant, a nanosecond either side, or the 1970/2201 limits, or none;
// each must select exactly the entries with since <= time < until, in
// file order.
func torWindows(t *testing.T, r *rand.Rand, dataDir, what string, want []torWant, n int) {
	t.Helper()
	bound := func() (string, int64) {
		switch r.IntN(8) {
		case 0:
			return torFmt(0), 0
		case 1:
			return torFmt(torMaxNano), torMaxNano
		}
		v := want[r.IntN(len(want))].time + int64(r.IntN(3)-1)
		return torFmt(v), v
	}
	for range n {
		s, since := bound()
		u, until := bound()
		if since > until {
			s, since, u, until = u, until, s, since
		}
		var args []string
		noSince, noUntil := r.IntN(6) == 0, r.IntN(6) == 0
		if !noSince {
			args = append(args, "--since", s)
		}
		if !noUntil {
			args = append(args, "--until", u)
		}
		var sub []torWant
		for _, w := range want {
			if (noSince || w.time >= since) && (noUntil || w.time < until) {
				sub = append(sub, w)
			}
		}
		torCompare(t, fmt.Sprintf("%s %q", what, args), torSearch(t, dataDir, args...), sub)
	}
}

// torSplit picks a line index splitting specs into two runs that both
// hold an "auto" timestamp, with a line without one right after the cut
// when there is such a split (to exercise the second run's leading
// lines); -1 when there is none.
func torSplit(r *rand.Rand, specs []torSpec) int {
	timed := func(s torSpec) bool { return s.jsonOK || s.plainOK }
	var cuts, leading []int
	firstTimed := slices.IndexFunc(specs, timed)
	lastTimed := -1
	for i, s := range specs {
		if timed(s) {
			lastTimed = i
		}
	}
	for i := firstTimed + 1; i <= lastTimed && firstTimed >= 0; i++ {
		cuts = append(cuts, i)
		if !timed(specs[i]) {
			leading = append(leading, i)
		}
	}
	switch {
	case len(leading) > 0:
		return leading[r.IntN(len(leading))]
	case len(cuts) > 0:
		return cuts[r.IntN(len(cuts))]
	}
	return -1
}
