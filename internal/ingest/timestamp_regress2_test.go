package ingest

import (
	"fmt"
	"testing"
	"time"
)

// TestJSONTimeTwoDigitYearPivot: a two-digit year in a JSON time string
// (RFC 850, RFC 822, RFC 822 with a numeric zone) takes LeadingTime's
// documented pivot, 00–69 → 2000–2069 and 70–99 → 1970–1999, for every
// year: the oracle is LeadingTime's own two-digit layout ("yy/MM/dd
// HH:mm:ss", Spark) for the same civil time, with the pivot also written
// out here. time.Parse's pivot made 69 1969: "01-Jan-69" was refused and
// "31-Dec-69 23:00:00 EST" stored at 1970-01-01T04:00Z (ingest finding F6).
func TestJSONTimeTwoDigitYearPivot(t *testing.T) {
	for yy := range 100 {
		year := 1900 + yy
		if yy < 70 {
			year = 2000 + yy
		}
		for _, c := range []struct {
			month, day, hour int
			zone             string // as written
			offHours         int    // east of UTC
		}{
			{1, 1, 0, "UTC", 0},
			{12, 31, 23, "EST", -5},
			{12, 31, 23, "-0500", -5},
			{2, 28, 12, "GMT", 0},
		} {
			d := time.Date(year, time.Month(c.month), c.day, c.hour, 0, 0, 0, time.UTC)
			spark := fmt.Sprintf("%02d/%02d/%02d %02d:00:00", yy, c.month, c.day, c.hour)
			base, ok := LeadingTime([]byte(spark), time.Time{})
			if !ok || base != d.UnixNano() {
				t.Fatalf("oracle LeadingTime(%q) = %s, %v; want %s", spark, fmtNano(base), ok, d.Format(time.RFC3339))
			}
			want := base - int64(c.offHours)*int64(time.Hour)
			var strs []string
			if c.zone[0] != '-' {
				strs = append(strs,
					fmt.Sprintf("%s, %02d-%s-%02d %02d:00:00 %s", d.Weekday(), c.day, d.Month().String()[:3], yy, c.hour, c.zone),
					fmt.Sprintf("%02d %s %02d %02d:00 %s", c.day, d.Month().String()[:3], yy, c.hour, c.zone))
			} else {
				strs = append(strs, fmt.Sprintf("%02d %s %02d %02d:00 %s", c.day, d.Month().String()[:3], yy, c.hour, c.zone))
			}
			for _, s := range strs {
				line := `{"time":"` + s + `"}`
				got, ok := JSONTime([]byte(line))
				if !ok || got != want {
					t.Errorf("JSONTime(%s) = %s, %v; want %s", line, fmtNano(got), ok, fmtNano(want))
				}
			}
		}
	}
}

// TestJSONTimeRFC822UT: RFC 822's "UT" (and "Z") is UTC in every layout
// with a zone name, as rfc822Zones says; time.Parse takes no zone name
// shorter than three letters, so these strings were refused and the line
// took the previous line's time or the ingestion time (ingest finding F7's
// last line). Other short or unknown names stay refused.
func TestJSONTimeRFC822UT(t *testing.T) {
	at := time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC).UnixNano()
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"Mon, 30 Nov 2026 11:00:00 UT", at, true},             // RFC 1123
		{"Monday, 30-Nov-26 11:00:00 UT", at, true},            // RFC 850
		{"30 Nov 26 11:00 UT", at, true},                       // RFC 822
		{"Mon Nov 30 11:00:00 UT 2026", at, true},              // Unix date
		{"Mon, 30 Nov 2026 11:00:00 Z", at, true},              // RFC 822's military Z
		{"30 Nov 26 11:00 Z", at, true},                        //
		{"Mon Nov 30 11:00:00 Z 2026", at, true},               //
		{"Mon, 30 Nov 2026 11:00:00 UTC", at, true},            // unchanged
		{"Mon, 30 Nov 2026 11:00:00 EST", at + 5*3600e9, true}, // unchanged
		{"  Mon, 30 Nov 2026 11:00:00 UT  ", at, true},         // blanks around
		{"Mon, 30 Nov 2026 11:00:00 U", 0, false},
		{"Mon, 30 Nov 2026 11:00:00 UTX", 0, false},
		{"Mon, 30 Nov 2026 11:00:00 UT1", 0, false},
		{"Mon, 30 Nov 2026 11:00:00 ut", 0, false},
		{"Mon, 30 Nov 2026 11:00:00 A", 0, false}, // military zones but Z: signs are unreliable
		{"Mon, 30 Nov 2026 11:00:00 UT UT", 0, false},
	} {
		line := `{"time":"` + c.in + `","msg":"x"}`
		got, ok := JSONTime([]byte(line))
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("JSONTime(%s) = %s, %v; want %s, %v", line, fmtNano(got), ok, fmtNano(c.want), c.ok)
		}
	}
}
