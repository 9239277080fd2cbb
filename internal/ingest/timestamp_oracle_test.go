package ingest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// FuzzLeadingTimeOracle renders a timestamp from civil fields the fuzzer
// picks (in or out of range: month 13, hour 24, second 60 and 61, day 0,
// Feb 29 of any year, years 0000-9999, offsets to ±14:00) in one of
// LeadingTime's documented layouts, behind a documented prefix (or one
// that is not, so the timestamp is not leading), and checks LeadingTime
// against an oracle that reads the same fields with time.Date: every
// field range-checked, second 60 the next minute's first (time.Date's
// rule), the instant in [1970, 2201), two-digit years 00-69 in 20xx, and
// the year of syslog and klog from ref by the documented rule. The
// reference instant is fuzzed too, so the year rule meets leap days and
// New Year.
func FuzzLeadingTimeOracle(f *testing.F) {
	// layout, y, mo, d, h, mi, s, ns, fracDigits, offMin, pre, suf, refDays, refSec
	f.Add(uint8(0), uint16(2016), uint8(12), uint8(31), uint8(23), uint8(59), uint8(60), uint32(123456789), uint8(9), int16(0), uint8(0), uint8(0), uint16(20000), uint32(0))
	f.Add(uint8(0), uint16(1970), uint8(1), uint8(1), uint8(0), uint8(0), uint8(0), uint32(0), uint8(0), int16(1), uint8(1), uint8(1), uint16(20000), uint32(0))
	f.Add(uint8(0), uint16(2200), uint8(12), uint8(31), uint8(23), uint8(59), uint8(59), uint32(999999999), uint8(12), int16(-720), uint8(2), uint8(2), uint16(0), uint32(0))
	f.Add(uint8(1), uint16(2026), uint8(11), uint8(30), uint8(10), uint8(0), uint8(0), uint32(0), uint8(0), int16(60), uint8(6), uint8(3), uint16(20000), uint32(0))
	f.Add(uint8(2), uint16(2024), uint8(2), uint8(29), uint8(24), uint8(0), uint8(0), uint32(0), uint8(3), int16(0), uint8(0), uint8(4), uint16(20000), uint32(0))
	f.Add(uint8(3), uint16(2005), uint8(12), uint8(4), uint8(4), uint8(47), uint8(44), uint32(5e8), uint8(6), int16(0), uint8(6), uint8(0), uint16(20000), uint32(0))
	f.Add(uint8(4), uint16(2069), uint8(12), uint8(31), uint8(23), uint8(59), uint8(59), uint32(0), uint8(0), int16(0), uint8(0), uint8(0), uint16(20000), uint32(0))
	f.Add(uint8(5), uint16(2070), uint8(1), uint8(1), uint8(0), uint8(0), uint8(0), uint32(1e6), uint8(3), int16(0), uint8(0), uint8(0), uint16(20000), uint32(0))
	f.Add(uint8(6), uint16(0), uint8(1), uint8(1), uint8(0), uint8(30), uint8(0), uint32(0), uint8(0), int16(0), uint8(0), uint8(0), uint16(20453), uint32(84600)) // ref 2026-12-31T23:30Z
	// Exactly one day after ref (this year) and a second more (last year).
	f.Add(uint8(6), uint16(0), uint8(6), uint8(15), uint8(12), uint8(0), uint8(0), uint32(0), uint8(0), int16(0), uint8(0), uint8(0), uint16(20253), uint32(43200))
	f.Add(uint8(6), uint16(0), uint8(6), uint8(15), uint8(12), uint8(0), uint8(1), uint32(0), uint8(0), int16(0), uint8(0), uint8(0), uint16(20253), uint32(43200))
	f.Add(uint8(7), uint16(0), uint8(2), uint8(29), uint8(1), uint8(2), uint8(3), uint32(123456000), uint8(6), int16(0), uint8(5), uint8(0), uint16(20512), uint32(0))
	f.Add(uint8(0), uint16(1969), uint8(12), uint8(31), uint8(23), uint8(59), uint8(59), uint32(0), uint8(0), int16(-60), uint8(0), uint8(0), uint16(20000), uint32(0))
	f.Add(uint8(0), uint16(2015), uint8(7), uint8(29), uint8(17), uint8(41), uint8(44), uint32(0), uint8(0), int16(0), uint8(9), uint8(0), uint16(20000), uint32(0))
	f.Fuzz(func(t *testing.T, layout uint8, y uint16, mo, d, h, mi, s uint8, ns uint32, fracDigits uint8, offMin int16, pre, suf uint8, refDays uint16, refSec uint32) {
		c := oracleCivil{y: int(y % 10000), mo: int(mo % 100), d: int(d % 100), h: int(h % 100), mi: int(mi % 100), s: int(s % 100),
			ns: int(ns % 1e9), off: int(offMin%(14*60+1)) * 60}
		// The reference: 1970-01-01 plus refDays, kept within 1971-2199.
		ref := time.Unix(int64(365+int(refDays)%(229*365))*86400+int64(refSec%86400), 0).UTC()
		line, kind := renderStamp(&c, layout%8, int(fracDigits%16), pre%12, suf%8)
		got, gotOK := LeadingTime([]byte(line), ref)
		if kind == "yearless" {
			c.y = oracleYear(c, ref)
		}
		want, wantOK := c.instant()
		if pre%12 >= 10 {
			wantOK = false // not leading
		}
		if gotOK != wantOK || gotOK && got != want {
			t.Fatalf("LeadingTime(%q, ref %s) = %s %v, oracle %s %v", line, ref.Format(time.RFC3339), fmtNano(got), gotOK, fmtNano(want), wantOK)
		}
	})
}

// oracleCivil is a wall-clock time, fields possibly out of range, with
// the offset east of UTC the line writes.
type oracleCivil struct {
	y, mo, d, h, mi, s, ns, off int
}

func (c oracleCivil) instant() (int64, bool) {
	if c.mo < 1 || c.mo > 12 || c.d < 1 || c.d > time.Date(c.y, time.Month(c.mo)+1, 0, 0, 0, 0, 0, time.UTC).Day() ||
		c.h > 23 || c.mi > 59 || c.s > 60 {
		return 0, false
	}
	t := time.Date(c.y, time.Month(c.mo), c.d, c.h, c.mi, c.s, c.ns, time.FixedZone("", c.off))
	if t.Before(time.Unix(0, 0)) || !t.Before(time.Date(2201, 1, 1, 0, 0, 0, 0, time.UTC)) {
		return 0, false
	}
	return t.UnixNano(), true
}

// oracleYear is the documented year of a date without one: the next
// year when that puts it at most a day after ref, else ref's UTC year, or
// the year before when that would put it more than a day after ref; Feb
// 29 takes the latest leap year at or before.
func oracleYear(c oracleCivil, ref time.Time) int {
	leap := func(y int) bool { return time.Date(y, 2, 29, 0, 0, 0, 0, time.UTC).Day() == 29 }
	fix := func(y int) int {
		for c.mo == 2 && c.d == 29 && !leap(y) {
			y--
		}
		return y
	}
	y := fix(ref.Year())
	if c.mo >= 1 && c.mo <= 12 && c.h <= 23 && c.mi <= 59 && c.s <= 60 && c.d >= 1 {
		at := func(y int) time.Time { return time.Date(y, time.Month(c.mo), c.d, c.h, c.mi, c.s, c.ns, time.UTC) }
		if n := ref.Year() + 1; (c.mo != 2 || c.d != 29 || leap(n)) && !at(n).After(ref.Add(24*time.Hour)) {
			return n // just after New Year
		}
		if at(y).After(ref.Add(24 * time.Hour)) {
			y = fix(y - 1)
		}
	}
	return y
}

var oracleMonths = [...]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}

// monthName writes month m in a case picked by k, or a non-month when m is
// out of range.
func monthName(m int, k uint8) string {
	if m < 1 || m > 12 {
		return "Xyz"
	}
	s := oracleMonths[m-1]
	switch k % 3 {
	case 1:
		return strings.ToLower(s)
	case 2:
		return strings.ToUpper(s)
	}
	return s
}

// fracText writes c.ns with n digits (beyond 9: extra digits, ignored)
// and truncates c.ns to what is written.
func fracText(c *oracleCivil, n int) string {
	if n == 0 {
		c.ns = 0
		return ""
	}
	s := fmt.Sprintf("%09d", c.ns)
	for len(s) < n {
		s += "7"
	}
	s = s[:n]
	if n < 9 {
		var v int
		fmt.Sscanf(s+strings.Repeat("0", 9-n), "%d", &v)
		c.ns = v
	}
	return "." + s
}

func zoneText(off int, form uint8) string {
	sign := "+"
	if off < 0 {
		sign, off = "-", -off
	}
	h, m := off/3600, off%3600/60
	switch form % 3 {
	case 0:
		return fmt.Sprintf("%s%02d:%02d", sign, h, m)
	case 1:
		return fmt.Sprintf("%s%02d%02d", sign, h, m)
	}
	if m == 0 {
		return fmt.Sprintf("%s%02d", sign, h)
	}
	return fmt.Sprintf("%s%02d:%02d", sign, h, m)
}

// renderStamp writes c in layout k behind prefix pre and before suffix
// suf, adjusting c to what the text says (the truncated fraction, offset
// 0 where the layout has no zone, a two-digit year's century). It returns
// the line and "yearless" for syslog and klog.
func renderStamp(c *oracleCivil, k uint8, frac int, pre, suf uint8) (string, string) {
	var s, kind string
	digitFirst := false
	switch k {
	case 0, 1: // RFC 3339 / ISO 8601 with a zone
		ds, ts := "-", "T"
		if c.ns%3 == 1 {
			ds = "/"
		}
		if c.ns%5 == 1 {
			ts = " "
		}
		s = fmt.Sprintf("%04d%s%02d%s%02d%s%02d:%02d:%02d", c.y, ds, c.mo, ds, c.d, ts, c.h, c.mi, c.s)
		s += strings.Replace(fracText(c, frac), ".", []string{".", ","}[k], 1)
		switch {
		case c.off == 0 && frac%3 == 0:
			s += []string{"", "Z", " UTC"}[c.d%3]
		default:
			sp := ""
			if c.mi%2 == 1 {
				sp = " "
			}
			s += sp + zoneText(c.off, uint8(c.h))
		}
		digitFirst = true
	case 2: // common log format
		s = fmt.Sprintf("%02d/%s/%04d:%02d:%02d:%02d %s", c.d, monthName(c.mo, uint8(c.s)), c.y, c.h, c.mi, c.s, zoneText(c.off, 1))
		c.ns = 0
		digitFirst = true
	case 3: // asctime, optional fraction
		s = fmt.Sprintf("%s %s %02d %02d:%02d:%02d%s %04d", []string{"Sun", "mon", "TUE", "Wed", "Thu", "Fri", "Sat"}[c.h%7], monthName(c.mo, uint8(c.d)), c.d, c.h, c.mi, c.s, fracText(c, min(frac, 9)), c.y)
		if c.d < 10 && c.mi%2 == 0 {
			s = strings.Replace(s, fmt.Sprintf(" %02d ", c.d), fmt.Sprintf("  %d ", c.d), 1)
		}
		c.off = 0
	case 4: // HDFS yyMMdd HHmmss
		s = fmt.Sprintf("%02d%02d%02d %02d%02d%02d", c.y%100, c.mo, c.d, c.h, c.mi, c.s)
		c.y, c.ns, c.off = century(c.y%100), 0, 0
		digitFirst = true
	case 5: // Spark yy/MM/dd HH:mm:ss[.frac], Tomcat dd-Mon-yyyy HH:mm:ss[.frac]
		if c.off%7 == 0 {
			s = fmt.Sprintf("%02d-%s-%04d %02d:%02d:%02d%s", c.d, monthName(c.mo, uint8(c.h)), c.y, c.h, c.mi, c.s, fracText(c, min(frac, 9)))
		} else {
			s = fmt.Sprintf("%02d/%02d/%02d %02d:%02d:%02d%s", c.y%100, c.mo, c.d, c.h, c.mi, c.s, fracText(c, min(frac, 9)))
			c.y = century(c.y % 100)
		}
		c.off = 0
		digitFirst = true
	case 6: // syslog
		day := fmt.Sprintf("%02d", c.d)
		if c.d < 10 {
			day = []string{day, fmt.Sprintf("%2d", c.d), fmt.Sprint(c.d)}[c.s%3]
		}
		s = fmt.Sprintf("%s %s %02d:%02d:%02d%s", monthName(c.mo, uint8(c.mi)), day, c.h, c.mi, c.s, fracText(c, min(frac, 9)))
		c.off, kind = 0, "yearless"
	default: // klog
		s = fmt.Sprintf("%c%02d%02d %02d:%02d:%02d%s", "IWEF"[c.s%4], c.mo, c.d, c.h, c.mi, c.s, fracText(c, frac))
		c.off, kind = 0, "yearless"
	}
	prefixes := []string{"", " \t", "\xEF\xBB\xBF", "ts=", "time=\"", "<34>", "[", "[ ", "<191>1 ", "@timestamp=",
		// not leading:
		"x", "\x00"}
	p := prefixes[pre]
	if p == "<191>1 " && !digitFirst {
		p = "<191>"
	}
	sufs := []string{"", " msg", " - INFO", "] GET /", "\tx", " \x00\xff", "\" level=info", "\r"}
	return p + s + sufs[suf], kind
}

// century reads a two-digit year: 00-69 are 2000-2069, 70-99 1970-1999.
func century(yy int) int {
	if yy < 70 {
		return 2000 + yy
	}
	return 1900 + yy
}
