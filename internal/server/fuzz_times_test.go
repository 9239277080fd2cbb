package server

import (
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var unixDecimalRE = regexp.MustCompile(`^(-?)([0-9]*)(?:\.([0-9]*))?$`)

// unixDecimalOracle is parseUnixDecimal's doc in math/big: an optional
// '-', digits, an optional '.' and digits (not both parts empty). Without
// a '.', ten digits or fewer are seconds and more are nanoseconds; with
// one, the whole part (at most ten digits) is seconds and the fraction is
// read exactly, digits past the ninth dropped. A value that int64
// nanoseconds cannot hold is not a time.
func unixDecimalOracle(v string) (int64, bool) {
	ns, ok := unixDecimalExact(v)
	if !ok || !fitsInt64(ns) {
		return 0, false
	}
	return ns.Int64(), true
}

// unixDecimalExact is the value of a decimal time in nanoseconds, however
// large.
func unixDecimalExact(v string) (*big.Int, bool) {
	m := unixDecimalRE.FindStringSubmatch(v)
	if m == nil {
		return nil, false
	}
	neg, whole, frac := m[1] == "-", m[2], m[3]
	dot := strings.Contains(v, ".")
	if whole == "" && frac == "" {
		return nil, false
	}
	w := new(big.Int)
	if whole != "" {
		w.SetString(whole, 10)
	}
	var ns *big.Int
	switch {
	case !dot && len(whole) > 10:
		ns = w
	case len(whole) > 10:
		return nil, false
	default:
		ns = new(big.Int).Mul(w, bigNano)
		if len(frac) > 9 {
			frac = frac[:9]
		}
		if frac != "" {
			fr, _ := new(big.Int).SetString(frac+strings.Repeat("0", 9-len(frac)), 10)
			ns.Add(ns, fr)
		}
	}
	if neg {
		ns.Neg(ns)
	}
	return ns, true
}

// FuzzParseUnixDecimal compares parseUnixDecimal with unixDecimalOracle;
// a value beyond int64 nanoseconds may instead be clamped to the nearest.
func FuzzParseUnixDecimal(f *testing.F) {
	for _, s := range []string{
		"1699999402.4", "1764467400", "1764467400123456789", "0", "-1", "-1.5", ".5", "5.",
		"", "-", ".", "-.", "1.2.3", "+5", "1e9", "9223372036", "9223372037", "9999999999",
		"9223372036.854775807", "9223372036.854775808", "-9223372036.854775808",
		"9223372036854775807", "9223372036854775808", "-9223372036854775808",
		"00000000001", "1.0000000009", "１２",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, ok := parseUnixDecimal(v)
		if x, xok := unixDecimalExact(v); xok && !fitsInt64(x) && ok {
			// Beyond int64 nanoseconds: not a time, or the nearest one.
			clamp := int64(math.MaxInt64)
			if x.Sign() < 0 {
				clamp = math.MinInt64
			}
			if got != clamp {
				t.Fatalf("parseUnixDecimal(%q) = %d; %s ns is outside int64: want false or %d", v, got, x, clamp)
			}
			return
		}
		want, wok := unixDecimalOracle(v)
		if ok != wok || got != want {
			t.Fatalf("parseUnixDecimal(%q) = %d, %v; want %d, %v", v, got, ok, want, wok)
		}
	})
}

// decimalSeconds writes ns as Unix seconds with nine fraction digits, the
// form a client computing from ts would send.
func decimalSeconds(ns int64) string {
	sign, u := "", uint64(ns)
	if ns < 0 {
		sign, u = "-", -u
	}
	return sign + strconv.FormatUint(u/1e9, 10) + "." + strconv.FormatUint(1e9+u%1e9, 10)[1:]
}

// checkParseTime compares parseTime(s) with the chain its doc describes:
// empty is the default; the exact decimal forms; other float syntax as
// seconds to within a nanosecond; RFC 3339 as the same instant; anything
// else a 400.
func checkParseTime(t *testing.T, s string) {
	const def = 42
	got, err := parseTime("start", s, def)
	if s == "" {
		if err != nil || got != def {
			t.Fatalf("parseTime(\"\") = %d, %v; want the default", got, err)
		}
		return
	}
	if ns, ok := unixDecimalExact(s); ok {
		checkInstant(t, s, got, err, ns)
		return
	}
	if fv, ferr := strconv.ParseFloat(s, 64); ferr == nil && !math.IsInf(fv, 0) && !math.IsNaN(fv) && math.Abs(fv) < 9e9 {
		if err != nil {
			t.Fatalf("parseTime(%q): %v; want about %g s", s, err, fv)
		}
		exact := new(big.Float).SetPrec(256).SetFloat64(fv)
		exact.Mul(exact, new(big.Float).SetPrec(256).SetInt64(1e9))
		diff := new(big.Float).SetPrec(256).Sub(exact, new(big.Float).SetPrec(256).SetInt64(got))
		if diff.Abs(diff).Cmp(big.NewFloat(1)) > 0 {
			t.Fatalf("parseTime(%q) = %d; want %s ns to within 1", s, got, exact.Text('f', 3))
		}
		return
	}
	if tm, perr := time.Parse(time.RFC3339Nano, s); perr == nil {
		ns := new(big.Int).Mul(big.NewInt(tm.Unix()), bigNano)
		ns.Add(ns, big.NewInt(int64(tm.Nanosecond())))
		checkInstant(t, s, got, err, ns)
		return
	}
	if err == nil || !isBadRequest(err) {
		t.Fatalf("parseTime(%q) = %d, %v; want a 400", s, got, err)
	}
}

// checkInstant checks parseTime(s) = got, err against the instant ns it
// names: that instant when int64 nanoseconds hold it, else a 400 or the
// nearest representable instant; never another time.
func checkInstant(t *testing.T, s string, got int64, err error, ns *big.Int) {
	t.Helper()
	switch {
	case fitsInt64(ns):
		if err != nil || got != ns.Int64() {
			t.Fatalf("parseTime(%q) = %d, %v; want %d", s, got, err, ns.Int64())
		}
	case err == nil:
		clamp := int64(math.MaxInt64)
		if ns.Sign() < 0 {
			clamp = math.MinInt64
		}
		if got != clamp {
			t.Fatalf("parseTime(%q) = %d (%s); the instant is %s ns, outside int64: want a 400 or %d",
				s, got, time.Unix(0, got).UTC().Format(time.RFC3339Nano), ns, clamp)
		}
	case !isBadRequest(err):
		t.Fatalf("parseTime(%q): %v is not a 400", s, err)
	}
}

func FuzzParseTime(f *testing.F) {
	for _, s := range []string{
		"", "1764467400", "1764467400.5", "1699999402.4", "1764467400123456789", "-1",
		"2025-11-30T01:50:00Z", "2025-11-30T01:50:00.123456789+05:30", "2025-11-30T01:50:00.1234567891Z",
		"2025-11-30 01:50:00Z", "2025-11-30T01:50:00", "1e9", "+1764467400", "0x1p30", "Inf", "NaN",
		"8999999999.9999999", "9999999999", "9223372037", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z",
		"1677-09-21T00:12:43.145224192Z", "2262-04-11T23:47:16.854775807Z", "2262-04-11T23:47:16.854775808Z",
		"now", "-9223372036854775808",
	} {
		f.Add(s, int64(1764467400123456789), int16(0))
	}
	f.Add("", int64(math.MinInt64), int16(-90))
	f.Add("", int64(math.MaxInt64), int16(23*60+59))
	f.Add("", int64(-1), int16(330))
	f.Add("", int64(9999999999), int16(0))
	f.Fuzz(func(t *testing.T, s string, ns int64, zone int16) {
		checkParseTime(t, s)
		// What the API writes (ts as RFC 3339 in any zone, or as decimal
		// seconds) reads back as the same nanosecond.
		z := time.FixedZone("", int(zone)%(24*60)*60)
		forms := []string{time.Unix(0, ns).In(z).Format(time.RFC3339Nano), decimalSeconds(ns)}
		if ns <= -1e10 || ns >= 1e10 {
			forms = append(forms, strconv.FormatInt(ns, 10)) // over ten digits: nanoseconds
		}
		for _, form := range forms {
			checkParseTime(t, form)
			if got, err := parseTime("end", form, 0); err != nil || got != ns {
				t.Fatalf("parseTime(%q) = %d, %v; want %d", form, got, err, ns)
			}
		}
	})
}

// promDurationOracle: what time.ParseDuration accepts, else a positive
// Prometheus duration (whole y, w, d, h, m, s, ms in that order; years of
// 365 days) that fits a Duration.
func promDurationOracle(v string) (time.Duration, bool) {
	if d, err := time.ParseDuration(v); err == nil {
		return d, true
	}
	// Prometheus' form: whole numbers of y w d h m s ms, in that order.
	m := promCompoundRE.FindStringSubmatch(v)
	if m == nil || v == "" {
		return 0, false
	}
	units := []int64{365 * 24 * 3600e9, 7 * 24 * 3600e9, 24 * 3600e9, 3600e9, 60e9, 1e9, 1e6}
	d := new(big.Int)
	for i, u := range units {
		if m[i+1] == "" {
			continue
		}
		k, _ := new(big.Int).SetString(m[i+1], 10)
		d.Add(d, k.Mul(k, big.NewInt(u)))
	}
	if d.Sign() <= 0 || !fitsInt64(d) {
		return 0, false
	}
	return time.Duration(d.Int64()), true
}

var promCompoundRE = regexp.MustCompile(`^(?:([0-9]+)y)?(?:([0-9]+)w)?(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?(?:([0-9]+)ms)?$`)

func FuzzParsePromDuration(f *testing.F) {
	for _, s := range []string{
		"5m", "1h30m", "1.5h", "-5m", "0", "", "7d", "2w", "1y", "0d", "+3d", "-3d", "1d12h", "1.5d",
		"106751d", "106752d", "15250w", "292y", "293y", "1000000000y", "585y", "9223372036854775807d", "5D",
		"1w1d", "1y2w3d4h5m6s7ms", "1d1y", "1h1d", "1m1ms", "1ms1m", "292y1w", "0d0h", "1d0s", "5m5m", "ms", "1dd",
	} {
		f.Add(s, int64(90*time.Second))
	}
	f.Add("", int64(math.MinInt64))
	f.Fuzz(func(t *testing.T, v string, n int64) {
		got, err := parsePromDuration(v)
		want, ok := promDurationOracle(v)
		if (err == nil) != ok || got != want {
			t.Fatalf("parsePromDuration(%q) = %v, %v; want %v, %v", v, got, err, want, ok)
		}
		// Duration.String and whole days read back exactly.
		d := time.Duration(n)
		if got, err := parsePromDuration(d.String()); err != nil || got != d {
			t.Fatalf("parsePromDuration(%q) = %v, %v; want %v", d.String(), got, err, d)
		}
		days := n % 106751
		if days < 0 {
			days = -days
		}
		if days > 0 {
			s := strconv.FormatInt(days, 10) + "d"
			if got, err := parsePromDuration(s); err != nil || got != time.Duration(days)*24*time.Hour {
				t.Fatalf("parsePromDuration(%q) = %v, %v; want %d days", s, got, err, days)
			}
		}
	})
}

var plainSecondsRE = regexp.MustCompile(`^([0-9]+)(?:\.([0-9]{0,9}))?$|^\.([0-9]{1,9})$`)

// FuzzParseDurationParam: an accepted step is positive; a plain decimal
// number of seconds (nine fraction digits at most) is that exact number
// of nanoseconds, or a 400 beyond a Duration; other float syntax under
// 1e10 is seconds to within a nanosecond; else a positive Prometheus
// duration; anything else a 400.
func FuzzParseDurationParam(f *testing.F) {
	for _, s := range []string{
		"15", "0.5", "30s", "5m", "1d", "1.001", "0.29", "60.001", "0", "-1", "0s", "-5m", "1e3", "Inf",
		"NaN", "9999999999", "10000000000", ".5", "5.", "0.000000001", "0.0000000001", "1y", "1000000000y", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, err := parseDurationParam("step", v)
		if err == nil && got <= 0 {
			t.Fatalf("parseDurationParam(%q) = %v, not positive", v, got)
		}
		if err != nil && !isBadRequest(err) {
			t.Fatalf("parseDurationParam(%q): %v is not a 400", v, err)
		}
		if m := plainSecondsRE.FindStringSubmatch(v); m != nil {
			whole, frac := m[1], m[2]+m[3]
			exact, _ := new(big.Int).SetString("0"+whole+(frac + "000000000")[:9], 10)
			switch {
			case exact.Sign() > 0 && fitsInt64(exact):
				if err != nil || int64(got) != exact.Int64() {
					t.Fatalf("parseDurationParam(%q) = %d ns, %v; want %s ns", v, int64(got), err, exact)
				}
				return
			case exact.Sign() > 0:
				if err == nil {
					t.Fatalf("parseDurationParam(%q) = %d ns; %s ns is beyond a Duration: want a 400", v, int64(got), exact)
				}
				return
			}
		}
		if fv, ferr := strconv.ParseFloat(v, 64); ferr == nil && fv > 0 && fv < 1e10 {
			want := fv * 1e9
			if want < 1 {
				// Under a nanosecond: a 400, or the smallest positive step.
				if err == nil && got != 1 {
					t.Fatalf("parseDurationParam(%q) = %d ns; want a 400 or 1 ns", v, int64(got))
				}
				return
			}
			if err != nil || math.Abs(float64(got)-want) > 1+want*1e-15 {
				t.Fatalf("parseDurationParam(%q) = %d ns, %v; want about %g ns", v, int64(got), err, want)
			}
			return
		}
		if d, ok := promDurationOracle(v); ok && d > 0 {
			if err != nil || got != d {
				t.Fatalf("parseDurationParam(%q) = %v, %v; want %v", v, got, err, d)
			}
			return
		}
		if err == nil {
			t.Fatalf("parseDurationParam(%q) = %v; want a 400", v, got)
		}
	})
}
