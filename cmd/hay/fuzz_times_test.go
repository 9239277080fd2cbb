package main

import (
	"math"
	"math/big"
	"regexp"
	"strings"
	"testing"
	"time"
)

var (
	bigNano   = big.NewInt(1e9)
	bigMinI64 = big.NewInt(math.MinInt64)
	bigMaxI64 = big.NewInt(math.MaxInt64)
)

func fitsInt64(x *big.Int) bool { return x.Cmp(bigMinI64) >= 0 && x.Cmp(bigMaxI64) <= 0 }

// checkTimeArg checks parseTimeArg(s) against its doc: "" is no bound
// (0), a Go duration d is now-d, else RFC 3339 (with or without a
// fraction) is that instant (a fraction past nanoseconds: the next whole
// one), else an error. An instant int64 nanoseconds
// cannot hold is an error or the nearest one, never another time.
func checkTimeArg(t *testing.T, s string, now time.Time) {
	t.Helper()
	got, err := parseTimeArg(s, now)
	if s == "" {
		if err != nil || got != 0 {
			t.Fatalf("parseTimeArg(\"\") = %d, %v; want 0", got, err)
		}
		return
	}
	var want *big.Int
	if d, derr := time.ParseDuration(s); derr == nil {
		want = new(big.Int).Sub(big.NewInt(now.UnixNano()), big.NewInt(int64(d)))
	} else if m := daysForm.FindStringSubmatch(s); m != nil {
		// Whole days or weeks before now, in exact arithmetic.
		n, _ := new(big.Int).SetString(m[1], 10)
		day := big.NewInt(int64(24 * time.Hour))
		if m[2] == "w" {
			day.Mul(day, big.NewInt(7))
		}
		want = new(big.Int).Sub(big.NewInt(now.UnixNano()), n.Mul(n, day))
	} else if tm, ok := oracleTimeOfDay(s); ok {
		want = new(big.Int).Mul(big.NewInt(tm.Unix()), bigNano)
		want.Add(want, big.NewInt(int64(tm.Nanosecond())))
		if m := fractionForm.FindStringSubmatch(s); m != nil && len(m[1]) > 9 && strings.Trim(m[1][9:], "0") != "" {
			// Past the nanosecond: the bound is the next whole one.
			want.Add(want, big.NewInt(1))
		}
	} else {
		if err == nil {
			t.Fatalf("parseTimeArg(%q) = %d; want an error", s, got)
		}
		return
	}
	switch {
	case fitsInt64(want):
		if err != nil || got != want.Int64() {
			t.Fatalf("parseTimeArg(%q, now %d) = %d, %v; want %s", s, now.UnixNano(), got, err, want)
		}
	case err == nil:
		clamp := int64(math.MaxInt64)
		if want.Sign() < 0 {
			clamp = math.MinInt64
		}
		if got != clamp {
			t.Fatalf("parseTimeArg(%q, now %d) = %d (%s); the instant is %s ns, outside int64: want an error or %d",
				s, now.UnixNano(), got, time.Unix(0, got).UTC().Format(time.RFC3339Nano), want, clamp)
		}
	}
}

// fractionForm finds a time's fraction of a second.
var fractionForm = regexp.MustCompile(`:[0-9]{2}\.([0-9]+)`)

// daysForm is "<N>d" or "<N>w", N a whole number.
var daysForm = regexp.MustCompile(`^([0-9]+)([dw])$`)

// oracleTimeOfDay reads the documented time forms independently of
// parseTimeOfDay: RFC 3339, or one of the zone-less forms in UTC, with a
// space or a T between date and time.
func oracleTimeOfDay(s string) (time.Time, bool) {
	if tm, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return tm, true
	}
	if m := regexp.MustCompile(`^([0-9]{4}-[0-9]{2}-[0-9]{2})[ T](.*)$`).FindStringSubmatch(s); m != nil {
		if tm, err := time.Parse(time.RFC3339Nano, m[1]+"T"+m[2]); err == nil {
			return tm, true
		}
		for _, l := range []string{"2006-01-02T15:04:05.999999999", "2006-01-02T15:04"} {
			if tm, err := time.ParseInLocation(l, m[1]+"T"+m[2], time.UTC); err == nil {
				return tm, true
			}
		}
		return time.Time{}, false
	}
	tm, err := time.ParseInLocation("2006-01-02", s, time.UTC)
	return tm, err == nil
}

func FuzzParseTimeArg(f *testing.F) {
	const now = int64(1764467400123456789)
	for _, s := range []string{
		"", "1h", "90m", "-1h", "0", "1.5h", "2025-11-30T01:50:00Z", "2025-11-30T01:50:00.123456789+05:30",
		"2025-11-30T01:50:00.1234567891Z", "2025-11-30 01:50:00Z", "2025-11-30T01:50:00", "1d", "yesterday",
		"2d", "1w", "3.5d", "99999999999999999999d", "106751d", "106752d", "2026-11-30", "2026-11-30 10:00", "2026-11-30T10:00",
		"2026-11-30 10:00:01.5", "2026-02-30", " 2026-11-30", "2026-11-30 ", "d", "-2d",
		"0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "2262-04-11T23:47:16.854775807Z", "2262-04-11T23:47:16.854775808Z",
		"1677-09-21T00:12:43.145224192Z", "1677-09-21T00:12:43.145224191Z", "-2562047h", "2562047h47m16.854775807s",
	} {
		f.Add(s, now, int64(now), int16(0))
	}
	f.Add("", int64(0), int64(math.MinInt64), int16(-90))
	f.Add("", int64(math.MaxInt64), int64(math.MaxInt64), int16(23*60+59))
	f.Add("", int64(-1), int64(-1), int16(330))
	f.Fuzz(func(t *testing.T, s string, nowNS, ns int64, zone int16) {
		nowT := time.Unix(0, nowNS)
		checkTimeArg(t, s, nowT)
		// Every instant, as time.Format writes it in RFC 3339 in any zone,
		// with nanoseconds or whole seconds, reads back; so does every
		// duration Go prints.
		z := time.FixedZone("", int(zone)%(24*60)*60)
		tm := time.Unix(0, ns).In(z)
		for _, form := range []string{tm.Format(time.RFC3339Nano), tm.Format(time.RFC3339), time.Duration(ns).String()} {
			checkTimeArg(t, form, nowT)
		}
		if got, err := parseTimeArg(tm.Format(time.RFC3339Nano), nowT); err != nil || got != ns {
			t.Fatalf("parseTimeArg(%q) = %d, %v; want %d", tm.Format(time.RFC3339Nano), got, err, ns)
		}
	})
}
