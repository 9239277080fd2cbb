package ingest

import (
	"math/big"
	"strings"
	"testing"
)

// FuzzJSONEpochOracle writes a number (digits, an optional fraction, maybe
// quoted) under a time key and checks JSONTime against an exact oracle
// from JSONTime's doc: the unit judged by the integer part's magnitude
// (below 1e11 seconds, 1e14 milliseconds, 1e17 microseconds, else
// nanoseconds), the fraction kept (truncated to nanoseconds), the instant
// in [1970, 2201). Numbers with an exponent are checked to float64
// precision (the doc: "Precision is that of a float64").
func FuzzJSONEpochOracle(f *testing.F) {
	f.Add("1700000000", "", int8(0), false, false, uint8(0))
	f.Add("1700000000123", "4567", int8(0), true, false, uint8(1))
	f.Add("99999999999", "999", int8(0), false, false, uint8(2))
	f.Add("100000000000", "", int8(0), false, false, uint8(3))
	f.Add("7289654399", "999999999999", int8(0), false, false, uint8(0))
	f.Add("7289654400", "", int8(0), false, false, uint8(0))
	f.Add("17", "", int8(8), false, true, uint8(0))
	f.Add("1", "7", int8(12), true, true, uint8(1))
	f.Add("0", "", int8(0), false, false, uint8(0))
	f.Add("9223372036854775807", "", int8(0), false, false, uint8(0))
	f.Add("99999999999999999999", "", int8(0), false, false, uint8(0))
	f.Fuzz(func(t *testing.T, intPart, frac string, exp int8, quoted, withExp bool, key uint8) {
		if len(intPart) == 0 || len(intPart) > 25 || len(frac) > 25 || strings.Trim(intPart, "0123456789") != "" || strings.Trim(frac, "0123456789") != "" {
			return
		}
		if withExp && len(intPart) > 18 {
			// Refused before the exponent is seen (beyond int64): such a
			// mantissa is no encoder's output.
			return
		}
		num := intPart
		if frac != "" {
			num += "." + frac
		}
		if withExp {
			num += "e" + big.NewInt(int64(exp)).String()
		}
		v := num
		if quoted {
			v = `"` + num + `"`
		}
		k := []string{"ts", "time", "timestamp", "@timestamp"}[key%4]
		line := `{"level":"info","` + k + `":` + v + `,"msg":"x"}`
		got, ok := JSONTime([]byte(line))

		const maxNs = 7289654400 * 1e9 // 2201-01-01T00:00:00Z
		if withExp {
			// The value as an exact rational, judged as a float64.
			r, _ := new(big.Rat).SetString(num)
			fv, _ := r.Float64()
			var ns float64
			switch {
			case fv < 1e11:
				ns = fv * 1e9
			case fv < 1e14:
				ns = fv * 1e6
			case fv < 1e17:
				ns = fv * 1e3
			default:
				ns = fv
			}
			wantOK := ns >= 0 && ns < maxNs
			if ok != wantOK {
				// At the very edge float rounding may decide either way.
				if ns > maxNs-1e4 && ns < maxNs+1e4 {
					return
				}
				t.Fatalf("JSONTime(%s) ok=%v, oracle %v (%.0f ns)", line, ok, wantOK, ns)
			}
			if ok {
				if d := float64(got) - ns; d > ns*1e-15+1 || d < -(ns*1e-15+1) {
					t.Fatalf("JSONTime(%s) = %d, oracle %.0f", line, got, ns)
				}
			}
			return
		}
		n, _ := new(big.Int).SetString(intPart, 10)
		var unit int64
		switch {
		case n.Cmp(big.NewInt(1e11)) < 0:
			unit = 1e9
		case n.Cmp(big.NewInt(1e14)) < 0:
			unit = 1e6
		case n.Cmp(big.NewInt(1e17)) < 0:
			unit = 1e3
		default:
			unit = 1
		}
		want := new(big.Int).Mul(n, big.NewInt(unit))
		scale := unit
		for _, d := range frac {
			if scale == 1 {
				break
			}
			scale /= 10
			want.Add(want, big.NewInt(int64(d-'0')*scale))
		}
		wantOK := want.Cmp(big.NewInt(maxNs)) < 0
		if ok != wantOK || ok && got != want.Int64() {
			t.Fatalf("JSONTime(%s) = %d %v, oracle %s %v", line, got, ok, want, wantOK)
		}
	})
}
