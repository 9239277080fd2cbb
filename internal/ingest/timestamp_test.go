package ingest

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testRef is the reference clock of the timestamp tests: 2026-11-30 12:00 UTC.
var testRef = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func utc(y int, mo time.Month, d, h, mi, s, ns int) int64 {
	return time.Date(y, mo, d, h, mi, s, ns, time.UTC).UnixNano()
}

func TestLeadingTime(t *testing.T) {
	plus2 := time.FixedZone("", 2*3600)
	minus7 := time.FixedZone("", -7*3600)
	minus530 := time.FixedZone("", -(5*3600 + 30*60))
	tests := []struct {
		line string
		want int64 // 0 means: not a timestamp
	}{
		// RFC 3339 / ISO 8601.
		{"2015-07-29T17:41:44Z msg", utc(2015, 7, 29, 17, 41, 44, 0)},
		{"2015-07-29T17:41:44.747Z", utc(2015, 7, 29, 17, 41, 44, 747e6)},
		{"2015-07-29t17:41:44.123456789z x", utc(2015, 7, 29, 17, 41, 44, 123456789)},
		{"2015-07-29T17:41:44.1234567891234Z", utc(2015, 7, 29, 17, 41, 44, 123456789)},
		{"2015-07-29T17:41:44.5+02:00", time.Date(2015, 7, 29, 17, 41, 44, 5e8, plus2).UnixNano()},
		{"2015-07-29T17:41:44-0700 x", time.Date(2015, 7, 29, 17, 41, 44, 0, minus7).UnixNano()},
		{"2015-07-29T17:41:44-07 x", time.Date(2015, 7, 29, 17, 41, 44, 0, minus7).UnixNano()},
		{"2015-07-29 17:41:44 -05:30 x", time.Date(2015, 7, 29, 17, 41, 44, 0, minus530).UnixNano()},
		{"2015-07-29 17:41:44 +0200 CEST x", time.Date(2015, 7, 29, 17, 41, 44, 0, plus2).UnixNano()},
		{"2015-07-29 17:41:44 UTC x", utc(2015, 7, 29, 17, 41, 44, 0)},
		{"2015-07-29 17:41:44", utc(2015, 7, 29, 17, 41, 44, 0)},
		{"2015-07-29 17:41:44.", utc(2015, 7, 29, 17, 41, 44, 0)},
		{"2015-07-29 17:41:44 - 0700", utc(2015, 7, 29, 17, 41, 44, 0)}, // not a zone
		{"2015-07-29 17:41:44 +99 x", utc(2015, 7, 29, 17, 41, 44, 0)},  // not a zone
		{"1970-01-01T00:00:00Z", 0 + 1},                                 // see below
		{"1970-01-01T01:00:00+01:00", 0 + 1},                            // the epoch itself
		{"1969-12-31T23:00:00-01:00", 0 + 1},                            // the epoch itself
		{"2200-12-31T23:59:59.999999999Z", utc(2200, 12, 31, 23, 59, 59, 999999999)},
		{"2016-02-29 00:00:00", utc(2016, 2, 29, 0, 0, 0, 0)},
		{"2000-02-29 00:00:00", utc(2000, 2, 29, 0, 0, 0, 0)},
		{"2016-12-31 23:59:60", utc(2017, 1, 1, 0, 0, 0, 0)}, // leap second, as time.Date
		// log4j, Hadoop, Zookeeper, Windows CBS.
		{"2015-07-29 17:41:44,747 - INFO  [QuorumPeer", utc(2015, 7, 29, 17, 41, 44, 747e6)},
		{"2015-10-18 18:01:47,978 INFO [main]", utc(2015, 10, 18, 18, 1, 47, 978e6)},
		{"2016-09-28 04:30:30, Info                  CBS", utc(2016, 9, 28, 4, 30, 30, 0)},
		// Go's log package, nginx.
		{"2009/01/23 01:23:23 file.go:23: msg", utc(2009, 1, 23, 1, 23, 23, 0)},
		{"2009/01/23 01:23:23.123123 x", utc(2009, 1, 23, 1, 23, 23, 123123000)},
		// HDFS.
		{"081109 203615 148 INFO dfs.DataNode", utc(2008, 11, 9, 20, 36, 15, 0)},
		{"991231 235959", utc(1999, 12, 31, 23, 59, 59, 0)},
		// Spark.
		{"17/06/09 20:10:40 INFO executor", utc(2017, 6, 9, 20, 10, 40, 0)},
		// Apache error log (asctime).
		{"[Sun Dec 04 04:47:44 2005] [notice] workerEnv", utc(2005, 12, 4, 4, 47, 44, 0)},
		{"[Wed Oct 11 14:32:52.123456 2000] [core:error]", utc(2000, 10, 11, 14, 32, 52, 123456000)},
		{"Mon Jan  2 15:04:05 2006", utc(2006, 1, 2, 15, 4, 5, 0)},
		// Common log format.
		{"[10/Oct/2000:13:55:36 -0700] \"GET /\"", time.Date(2000, 10, 10, 13, 55, 36, 0, minus7).UnixNano()},
		// Tomcat.
		{"29-Jul-2015 17:41:44.747 INFO [main]", utc(2015, 7, 29, 17, 41, 44, 747e6)},
		// A byte order mark before the first line.
		{"\xef\xbb\xbf2015-07-29 17:41:44 x", utc(2015, 7, 29, 17, 41, 44, 0)},
		{"\xef\xbb\xbf[Sun Dec 04 04:47:44 2005]", utc(2005, 12, 4, 4, 47, 44, 0)},
		// Syslog, year from the reference (2026-11-30 12:00).
		{"Jun 14 15:16:01 combo sshd(pam_unix)[19939]", utc(2026, 6, 14, 15, 16, 1, 0)},
		{"Jun  9 06:06:20 combo syslogd", utc(2026, 6, 9, 6, 6, 20, 0)},
		{"Jun 9 06:06:20 combo", utc(2026, 6, 9, 6, 6, 20, 0)},
		{"Dec 10 06:55:46 LabSZ sshd[24200]", utc(2025, 12, 10, 6, 55, 46, 0)}, // would be in the future
		{"Dec  1 11:59:59 host", utc(2026, 12, 1, 11, 59, 59, 0)},              // within a day ahead
		{"Dec  1 12:00:01 host", utc(2025, 12, 1, 12, 0, 1, 0)},                // more than a day ahead
		{"Feb 29 10:00:00 host", utc(2024, 2, 29, 10, 0, 0, 0)},                // latest leap year
		{"Nov 30 12:00:00.25 host", utc(2026, 11, 30, 12, 0, 0, 25e7)},
		{"<34>Oct 11 22:14:15 mymachine su", utc(2026, 10, 11, 22, 14, 15, 0)},
		{"<165>1 2003-10-11T22:14:15.003Z mymachine", utc(2003, 10, 11, 22, 14, 15, 3e6)},
		// klog.
		{"I1130 01:02:03.123456   12345 main.go:10] hello", utc(2026, 11, 30, 1, 2, 3, 123456000)},
		{"E0102 01:02:03.5 1 x.go:1] boom", utc(2026, 1, 2, 1, 2, 3, 5e8)},
		// A leading logfmt time key.
		{"ts=2026-11-01T00:00:03.792Z level=info app=payments", utc(2026, 11, 1, 0, 0, 3, 792e6)},
		{`time="2015-03-26T01:27:38-04:00" level=debug msg="Started observing beach"`, utc(2015, 3, 26, 5, 27, 38, 0)},
		{"time=2022-11-08T15:28:26.000-05:00 level=INFO msg=hello", utc(2022, 11, 8, 20, 28, 26, 0)},
		{"t=2015-07-29T17:41:44Z lvl=info", utc(2015, 7, 29, 17, 41, 44, 0)},
		{"timestamp=2015-07-29T17:41:44Z", utc(2015, 7, 29, 17, 41, 44, 0)},
		{"@timestamp=2015-07-29T17:41:44Z", utc(2015, 7, 29, 17, 41, 44, 0)},
		{"  ts=Jun 14 15:16:01 x", utc(2026, 6, 14, 15, 16, 1, 0)},
		// Leading blanks and brackets.
		{"  \t2015-07-29 17:41:44 x", utc(2015, 7, 29, 17, 41, 44, 0)},
		{"[2015-07-29 17:41:44] x", utc(2015, 7, 29, 17, 41, 44, 0)},
		{"[ 2015-07-29 17:41:44] x", utc(2015, 7, 29, 17, 41, 44, 0)},

		// Not timestamps.
		{"", 0},
		{"   ", 0},
		{"2015 was a year", 0},
		{"12345", 0},
		{"123456", 0},
		{"123456 123456 x", 0}, // month 34
		{"081109 203615123", 0},
		{"081109 2036", 0},
		{"2015-07-29", 0},
		{"2015-07-29 INFO", 0},
		{"2015-07-29 17:41", 0},
		{"2015-07-29T17:41:445", 0},
		{"2015-07-29 17:41:44.5 7", utc(2015, 7, 29, 17, 41, 44, 5e8)}, // a space ends it
		{"2015-13-29 17:41:44", 0},
		{"2015-00-29 17:41:44", 0},
		{"2015-02-29 17:41:44", 0},
		{"1900-02-29 17:41:44", 0},
		{"2015-04-31 17:41:44", 0},
		{"2015-07-00 17:41:44", 0},
		{"2015-07-29 24:00:00", 0},
		{"2015-07-29 23:60:00", 0},
		{"2015-07-29 23:59:61", 0},
		{"2015-07-29X17:41:44", 0},
		{"2015-07/29 17:41:44", 0},
		{"1969-12-31 23:59:59", 0},
		{"1970-01-01T00:00:00+00:01", 0},
		{"2201-01-01 00:00:00", 0},
		{"9999-12-31 23:59:59", 0},
		{"0000-01-01 00:00:00", 0},
		{"17/13/09 20:10:40", 0},
		{"17/06/09 20:10", 0},
		{"Jun 14", 0},
		{"Jun 14 15:16", 0},
		{"Jun 32 15:16:01", 0},
		{"Jun 00 15:16:01", 0},
		{"Jun 31 15:16:01", 0},
		{"June 14 15:16:01", 0},
		{"Junk 14 15:16:01", 0},
		{"Foo Dec 04 04:47:44 2005", 0},
		{"Sun Dec 04 04:47:44", 0},
		{"Sun Dec 04 04:47:44 20051", 0},
		{"[Sun Dec 32 04:47:44 2005]", 0},
		{"<34 Oct 11 22:14:15", 0},
		{"<>Oct 11 22:14:15", 0},
		{"<1234>Oct 11 22:14:15", 0},
		{"I1300 01:02:03.1", 0},
		{"Info 01:02:03", 0},
		{"10/Oct/2000 13:55:36", utc(2000, 10, 10, 13, 55, 36, 0)},
		{"10/Oct-2000:13:55:36", 0},
		{"10-Oct-2000:13:55:36", utc(2000, 10, 10, 13, 55, 36, 0)},
		{"10-Oct-2000T13:55:36", 0},
		{"10/Foo/2000:13:55:36", 0},
		{"x2015-07-29 17:41:44", 0},
		{"tss=2015-07-29T17:41:44Z", 0},
		{"level=info ts=2015-07-29T17:41:44Z", 0}, // only a leading key
		{"ts=", 0},
		{"ts=\"", 0},
		{"ts=1700000000", 0},
		{"time=soon", 0},
		{"timestamps=2015-07-29T17:41:44Z", 0},
		{"tttttttttttttttttt=2015-07-29T17:41:44Z", 0},
		{"\x002015-07-29 17:41:44", 0},
		{"\xff\xfe", 0},
		{"\xef\xbb2015-07-29 17:41:44", 0},
		{"x\xef\xbb\xbf2015-07-29 17:41:44", 0},
	}
	for _, tc := range tests {
		want, wantOK := tc.want, tc.want != 0
		if want == 1 {
			want = 0 // the epoch itself is a valid answer
		}
		got, ok := LeadingTime([]byte(tc.line), testRef)
		if ok != wantOK || got != want {
			t.Errorf("LeadingTime(%q) = %v, %v; want %v, %v", tc.line, fmtNano(got), ok, fmtNano(want), wantOK)
		}
		// Allocation-free.
		b := []byte(tc.line)
		if n := testing.AllocsPerRun(10, func() { LeadingTime(b, testRef) }); n != 0 {
			t.Errorf("LeadingTime(%q) allocates %v times", tc.line, n)
		}
	}
}

func fmtNano(n int64) string { return time.Unix(0, n).UTC().Format(time.RFC3339Nano) }

// TestLeadingTimeNoRef: without a reference, yearless formats are not
// recognised; the others are.
func TestLeadingTimeNoRef(t *testing.T) {
	if _, ok := LeadingTime([]byte("Jun 14 15:16:01 combo"), time.Time{}); ok {
		t.Error("syslog time recognised without a reference")
	}
	if _, ok := LeadingTime([]byte("I1130 01:02:03.123456 1 x.go:1] m"), time.Time{}); ok {
		t.Error("klog time recognised without a reference")
	}
	if got, ok := LeadingTime([]byte("2015-07-29 17:41:44"), time.Time{}); !ok || got != utc(2015, 7, 29, 17, 41, 44, 0) {
		t.Errorf("ISO time without a reference: %v %v", fmtNano(got), ok)
	}
	// A reference in another zone: its UTC year counts.
	ref := time.Date(2027, 1, 1, 1, 0, 0, 0, time.FixedZone("", 3*3600)) // 2026-12-31 22:00 UTC
	if got, ok := LeadingTime([]byte("Dec 31 21:00:00"), ref); !ok || got != utc(2026, 12, 31, 21, 0, 0, 0) {
		t.Errorf("zoned reference: %v %v", fmtNano(got), ok)
	}
}

// TestCivilAgainstTime checks the hand-written calendar against time.Date
// on every day of the supported range.
func TestCivilAgainstTime(t *testing.T) {
	for d := time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC); d.Year() <= 2200; d = d.AddDate(0, 0, 1) {
		got, ok := civil(d.Year(), int(d.Month()), d.Day(), 3723, 5, 0)
		if want := d.UnixNano() + 3723e9 + 5; !ok || got != want {
			t.Fatalf("civil(%v) = %d, %v; want %d", d.Format(time.DateOnly), got, ok, want)
		}
	}
}

// loghubPinned is, for each sample: its lines, how many get a timestamp
// (every line of every sample starts with one), how often a line's time is
// before the previous line's (real logs interleave writers: 0 means the file
// is ordered and must stay so), and the layout of its timestamps for the
// time.Parse oracle with the byte range it covers.
var loghubPinned = map[string]struct {
	lines, timed, decreases int
	layout                  string
	from, to                int
}{
	"Apache_2k.log":    {2000, 2000, 33, "Mon Jan 02 15:04:05 2006", 1, 25},
	"HDFS_2k.log":      {2000, 2000, 0, "060102 150405", 0, 13},
	"Hadoop_2k.log":    {2000, 2000, 0, "2006-01-02 15:04:05,000", 0, 23},
	"Linux_2k.log":     {2000, 2000, 3, time.Stamp, 0, 15},
	"OpenSSH_2k.log":   {2000, 2000, 0, time.Stamp, 0, 15},
	"Spark_2k.log":     {2000, 2000, 0, "06/01/02 15:04:05", 0, 17},
	"Windows_2k.log":   {2000, 2000, 0, time.DateTime, 0, 19},
	"Zookeeper_2k.log": {2000, 2000, 2, "2006-01-02 15:04:05,000", 0, 23},
}

func TestLeadingTimeLoghub(t *testing.T) {
	for _, f := range loghubFiles(t) {
		name := filepath.Base(f)
		pin, ok := loghubPinned[name]
		if !ok {
			t.Errorf("%s: no pinned counts", name)
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := refLines(data)
		timed, decreases := 0, 0
		var prev int64
		for i, l := range lines {
			ts, ok := LeadingTime(l, testRef)
			if !ok {
				if startsWithDigitOrMonth(l) {
					t.Errorf("%s:%d: no timestamp in %q", name, i+1, l)
				}
				continue
			}
			timed++
			// The oracle: time.Parse with the file's layout.
			want, err := time.Parse(pin.layout, string(l[pin.from:pin.to]))
			if err != nil {
				t.Fatalf("%s:%d: oracle: %v", name, i+1, err)
			}
			if want.Year() == 0 { // syslog: the year rule by hand
				want = want.AddDate(testRef.Year(), 0, 0)
				if want.After(testRef.Add(24 * time.Hour)) {
					want = want.AddDate(-1, 0, 0)
				}
			}
			if ts != want.UnixNano() {
				t.Errorf("%s:%d: %v, oracle says %v", name, i+1, fmtNano(ts), fmtNano(want.UnixNano()))
			}
			if ts < prev {
				decreases++
			}
			prev = ts
		}
		if len(lines) != pin.lines || timed != pin.timed || decreases != pin.decreases {
			t.Errorf("%s: %d lines, %d timed, %d decreases; pinned %d, %d, %d",
				name, len(lines), timed, decreases, pin.lines, pin.timed, pin.decreases)
		}
		if timed*100 < len(lines)*95 {
			t.Errorf("%s: only %d of %d lines timed", name, timed, len(lines))
		}
	}
}

func startsWithDigitOrMonth(l []byte) bool {
	l = bytes.TrimLeft(l, " [")
	if len(l) == 0 {
		return false
	}
	_, month := monthAt(l, 0)
	return isDigit(l[0]) || month
}

func FuzzLeadingTime(f *testing.F) {
	f.Add([]byte("2015-07-29 17:41:44,747 - INFO"), int64(1796040000))
	f.Add([]byte("Jun  9 06:06:20 combo"), int64(1796040000))
	f.Add([]byte("081109 203615 148 INFO"), int64(0))
	f.Add([]byte("[Sun Dec 04 04:47:44 2005] [notice]"), int64(-1))
	f.Fuzz(func(t *testing.T, line []byte, refSec int64) {
		ref := time.Unix(refSec%(1<<40), 0)
		ts, ok := LeadingTime(line, ref)
		if !ok {
			if ts != 0 {
				t.Fatalf("not ok but %d", ts)
			}
			return
		}
		if y := time.Unix(0, ts).UTC().Year(); y < 1970 || y > 2200 {
			t.Fatalf("LeadingTime(%q) = %v, outside 1970..2200", line, fmtNano(ts))
		}
		// A timestamp does not depend on what follows a separating space.
		ts2, ok2 := LeadingTime(append(bytes.Clone(line), " trailing"...), ref)
		if !ok2 || ts2 != ts {
			t.Fatalf("LeadingTime(%q + \" trailing\") = %v, %v; want %v", line, fmtNano(ts2), ok2, fmtNano(ts))
		}
	})
}

// TestLeadingTimeRoundTrip formats random instants with time.Format in every
// supported layout and expects LeadingTime to read back the same instant
// (to the layout's precision).
func TestLeadingTimeRoundTrip(t *testing.T) {
	zones := []*time.Location{time.UTC, time.FixedZone("", 5*3600+45*60), time.FixedZone("", -10*3600)}
	layouts := []struct {
		layout   string
		zoned    bool // the layout carries the zone; otherwise it is read as UTC
		yearless bool // year from the reference
		trunc    time.Duration
		years    [2]int // supported years (two-digit years cover 1970..2069)
	}{
		{time.RFC3339Nano, true, false, 1, [2]int{1971, 2199}},
		{time.RFC3339, true, false, time.Second, [2]int{1971, 2199}},
		{"2006-01-02T15:04:05.000-0700", true, false, time.Millisecond, [2]int{1971, 2199}},
		{"2006-01-02 15:04:05.999999 -07:00", true, false, time.Microsecond, [2]int{1971, 2199}},
		{"2006-01-02 15:04:05,000", false, false, time.Millisecond, [2]int{1970, 2200}},
		{time.DateTime + ",", false, false, time.Second, [2]int{1970, 2200}},
		{"2006/01/02 15:04:05.000000", false, false, time.Microsecond, [2]int{1970, 2200}},
		{"060102 150405", false, false, time.Second, [2]int{1970, 2069}},
		{"06/01/02 15:04:05", false, false, time.Second, [2]int{1970, 2069}},
		{"[" + time.ANSIC + "]", false, false, time.Second, [2]int{1970, 2200}},
		{"Mon Jan 02 15:04:05.000000 2006", false, false, time.Microsecond, [2]int{1970, 2200}},
		{"[02/Jan/2006:15:04:05 -0700]", true, false, time.Second, [2]int{1971, 2199}},
		{"02-Jan-2006 15:04:05.000", false, false, time.Millisecond, [2]int{1970, 2200}},
		{time.StampMicro, false, true, time.Microsecond, [2]int{2025, 2026}},
		{"Jan 02 15:04:05", false, true, time.Second, [2]int{2025, 2026}},
		{"I0102 15:04:05.000000", false, true, time.Microsecond, [2]int{2025, 2026}},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, l := range layouts {
		lo := time.Date(l.years[0], 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
		hi := time.Date(l.years[1], 12, 31, 23, 59, 59, 0, time.UTC).UnixNano()
		if l.yearless { // the year before the reference, up to a day after it
			lo, hi = testRef.AddDate(-1, 0, 1).UnixNano(), testRef.Add(24*time.Hour).UnixNano()
		}
		for k := range 3000 {
			zone := time.UTC
			if l.zoned {
				zone = zones[k%len(zones)]
			}
			inst := time.Unix(0, lo+rng.Int64N(hi-lo)).In(zone)
			line := inst.Format(l.layout) + " payload 123"
			want := inst.Truncate(l.trunc)
			if !l.zoned {
				// Read as UTC: the wall clock in zone is taken as UTC.
				want = time.Date(want.Year(), want.Month(), want.Day(), want.Hour(), want.Minute(), want.Second(), want.Nanosecond(), time.UTC)
			}
			got, ok := LeadingTime([]byte(line), testRef)
			if !ok || got != want.UnixNano() {
				t.Fatalf("LeadingTime(%q) = %v, %v; want %v", line, fmtNano(got), ok, fmtNano(want.UnixNano()))
			}
		}
	}
}

// TestLeadingTimePriVersionBracket: after a syslog "<pri>" and an RFC 5424
// version "1 ", one "[" is skipped too, as the doc says. Found by the
// ingest differential test.
func TestLeadingTimePriVersionBracket(t *testing.T) {
	now := time.Date(2021, 6, 1, 0, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"<34>1 [2020-01-01T00:00:00Z] x":       time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
		"<34>1 [10/Oct/2000:13:55:36 -0700] x": time.Date(2000, 10, 10, 20, 55, 36, 0, time.UTC),
		"<34>1 2020-01-01T00:00:00Z x":         time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
		"<34>[2020-01-01T00:00:00Z] x":         time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		got, ok := LeadingTime([]byte(in), now)
		if !ok || got != want.UnixNano() {
			t.Errorf("LeadingTime(%q) = %s, %v; want %s", in, time.Unix(0, got).UTC(), ok, want)
		}
	}
	if _, ok := LeadingTime([]byte("<34>1 [x] 2020-01-01T00:00:00Z"), now); ok {
		t.Error("a time after a bracketed word was taken as the line's")
	}
}

// TestUnixNano: inside int64 nanoseconds UnixNano is time's; outside it
// saturates instead of wrapping.
func TestUnixNano(t *testing.T) {
	for _, c := range []struct {
		t    time.Time
		want int64
	}{
		{time.Unix(0, 0), 0},
		{time.Unix(0, math.MaxInt64), math.MaxInt64},
		{time.Unix(0, math.MinInt64), math.MinInt64},
		{time.Unix(0, math.MaxInt64).Add(1), math.MaxInt64},
		{time.Unix(0, math.MinInt64).Add(-1), math.MinInt64},
		{time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), math.MaxInt64},
		{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), math.MinInt64},
		{time.Date(2262, 4, 11, 23, 47, 16, 854775807, time.UTC), math.MaxInt64},
		{time.Date(2262, 4, 11, 23, 47, 16, 854775806, time.UTC), math.MaxInt64 - 1},
		{time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC), time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC).UnixNano()},
	} {
		if got := UnixNano(c.t); got != c.want {
			t.Errorf("UnixNano(%v) = %d, want %d", c.t, got, c.want)
		}
	}
}

// TestAccessLogTime: Apache's and nginx's access logs (common and
// combined log format) put the time after "host ident authuser "; the
// whole log used to take the time it was ingested.
func TestAccessLogTime(t *testing.T) {
	ref := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	checkLeadingTimes(t, ref, []leadingCase{
		{`127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326`, time.Date(2000, 10, 10, 20, 55, 36, 0, time.UTC)},
		{`192.168.1.20 - - [30/Nov/2026:10:00:00 +0100] "POST /api HTTP/1.1" 500 12 "-" "curl/8.0"`, time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)},
		{`2001:db8::1 - - [01/Jan/2026:00:00:00 +0000] "GET / HTTP/2.0" 200 5`, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		{`a b c d [10/Oct/2000:13:55:36 -0700] four tokens`, time.Time{}},
		{`a b [10/Oct/2000:13:55:36 -0700] two tokens`, time.Time{}},
		{`a  b c [10/Oct/2000:13:55:36 -0700] two spaces`, time.Time{}},
		{`host - - [not a time] x`, time.Time{}},
		{`host - - [10/Oct/2000:13:55:36 -0700`, time.Date(2000, 10, 10, 20, 55, 36, 0, time.UTC)},
		{`host - - [32/Oct/2000:13:55:36 -0700] bad day`, time.Time{}},
		{`host - - `, time.Time{}},
	})
}

// TestInvalidNumericZone: a zone out of range right after the clock makes
// no timestamp (it was dropped and the clock read as UTC, up to 15 h off);
// valid ones, and a sign after a space that is not a zone, are unchanged.
func TestInvalidNumericZone(t *testing.T) {
	ref := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	at := time.Date(2015, 7, 29, 17, 41, 44, 0, time.UTC)
	checkLeadingTimes(t, ref, []leadingCase{
		{"2015-07-29T17:41:44+15:00 x", time.Time{}},
		{"2015-07-29T17:41:44+05:60 x", time.Time{}},
		{"2015-07-29T17:41:44+05:3 x", time.Time{}},
		{"2015-07-29T17:41:44+530 x", time.Time{}},
		{"2015-07-29T17:41:44+2:00 x", time.Time{}},
		{"2015-07-29T17:41:44+14:00 x", at.Add(-14 * time.Hour)},
		{"2015-07-29T17:41:44-0530 x", at.Add(5*time.Hour + 30*time.Minute)},
		{"2015-07-29T17:41:44-07 x", at.Add(7 * time.Hour)},
		{"2015-07-29T17:41:44Z x", at},
		{"2015-07-29 17:41:44 -1 retries", at},
		{"2015-07-29T17:41:44-x", at},
	})
}

// TestZoneAfterUTCName: "GMT+01:00", "UTC+02:00" and "GMT-0800" after the
// time carry their offset, and so do RFC 822's US zone names (all were
// read as UTC).
func TestZoneAfterUTCName(t *testing.T) {
	ref := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	at := time.Date(2015, 7, 29, 17, 41, 44, 0, time.UTC)
	checkLeadingTimes(t, ref, []leadingCase{
		{"2015-07-29 17:41:44 GMT+01:00 x", at.Add(-time.Hour)},
		{"2015-07-29 17:41:44 UTC+02:00 x", at.Add(-2 * time.Hour)},
		{"2015-07-29 17:41:44 GMT-0800 x", at.Add(8 * time.Hour)},
		{"2015-07-29 17:41:44 GMT x", at},
		{"2015-07-29 17:41:44 UTC", at},
		{"2015-07-29 17:41:44 GMT+15:00 x", time.Time{}},
		// RFC 822's US names, as PostgreSQL writes them; others stay text.
		{"2015-07-29 17:41:44.000 PST [1234] LOG: ready", at.Add(8 * time.Hour)},
		{"2015-07-29 17:41:44 EDT x", at.Add(4 * time.Hour)},
		{"2015-07-29 17:41:44 IST x", at},
		{"2015-07-29 17:41:44 PSTX x", at},
	})
}

// leadingCase is a line and the time LeadingTime must find in it (zero:
// none).
type leadingCase struct {
	line string
	want time.Time
}

func checkLeadingTimes(t *testing.T, ref time.Time, cases []leadingCase) {
	t.Helper()
	for _, c := range cases {
		got, ok := LeadingTime([]byte(c.line), ref)
		if c.want.IsZero() {
			if ok {
				t.Errorf("LeadingTime(%q) = %s, want none", c.line, time.Unix(0, got).UTC())
			}
			continue
		}
		if !ok || got != c.want.UnixNano() {
			t.Errorf("LeadingTime(%q) = %s, %v; want %s", c.line, time.Unix(0, got).UTC(), ok, c.want)
		}
	}
}
