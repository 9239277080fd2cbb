package server

import (
	"errors"
	"math"
	"math/big"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"haystack/internal/query"
)

// Query parameters come from any client: these targets check each
// parameter parser against an independent oracle written from its doc
// comment (and API.md, and Loki's documented rules), not only that it
// does not panic.

var (
	bigNano   = big.NewInt(1e9)
	bigMinI64 = big.NewInt(math.MinInt64)
	bigMaxI64 = big.NewInt(math.MaxInt64)
)

// isBadRequest reports whether err is the 400 a client's bad parameter gets.
func isBadRequest(err error) bool {
	var he *httpError
	return errors.As(err, &he) && he.status == http.StatusBadRequest
}

func fitsInt64(x *big.Int) bool { return x.Cmp(bigMinI64) >= 0 && x.Cmp(bigMaxI64) <= 0 }

var intRE = regexp.MustCompile(`^[+-]?[0-9]+$`)

// FuzzParseLimit: empty is the default; a non-negative integer is itself,
// with 0 and anything over max meaning max; negatives and non-integers are
// a 400 (an integer beyond int may be a 400 or max).
func FuzzParseLimit(f *testing.F) {
	for _, s := range []string{"", "0", "1", "500", "5000", "5001", "-1", "-0", "+7", "1.5", "1e3", " 5", "5 ", "abc",
		"9223372036854775807", "9223372036854775808", "99999999999999999999", "0x10", "1_000"} {
		f.Add(s, uint16(500), uint16(5000))
	}
	f.Fuzz(func(t *testing.T, v string, def16, max16 uint16) {
		def, maxN := int(def16), int(max16)+1 // the server's cap is at least 1
		got, err := parseLimit(v, def, maxN)
		if v == "" {
			if err != nil || got != def {
				t.Fatalf("parseLimit(\"\") = %d, %v; want %d", got, err, def)
			}
			return
		}
		if err != nil && !isBadRequest(err) {
			t.Fatalf("parseLimit(%q): %v is not a 400", v, err)
		}
		if !intRE.MatchString(v) {
			if err == nil {
				t.Fatalf("parseLimit(%q) = %d; want a 400", v, got)
			}
			return
		}
		x, _ := new(big.Int).SetString(strings.TrimPrefix(v, "+"), 10)
		switch {
		case x.Sign() < 0:
			if err == nil {
				t.Fatalf("parseLimit(%q) = %d; want a 400", v, got)
			}
		case x.Sign() == 0 || x.Cmp(big.NewInt(int64(maxN))) > 0:
			if x.Cmp(big.NewInt(math.MaxInt)) > 0 && err != nil {
				return
			}
			if err != nil || got != maxN {
				t.Fatalf("parseLimit(%q, max %d) = %d, %v; want %d", v, maxN, got, err, maxN)
			}
		default:
			if err != nil || int64(got) != x.Int64() {
				t.Fatalf("parseLimit(%q) = %d, %v; want %s", v, got, err, x)
			}
		}
	})
}

// FuzzParseDirection: forward or backward in any case (Unicode simple
// folding, as strings.ToLower does for these letters), empty is backward,
// anything else a 400.
func FuzzParseDirection(f *testing.F) {
	for _, s := range []string{"", "backward", "forward", "BACKWARD", "Forward", "forwards", " forward", "back", "FORWARD\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		back, err := parseDirection(v)
		switch {
		case v == "" || strings.EqualFold(v, "backward"):
			if err != nil || !back {
				t.Fatalf("parseDirection(%q) = %v, %v; want backward", v, back, err)
			}
		case strings.EqualFold(v, "forward"):
			if err != nil || back {
				t.Fatalf("parseDirection(%q) = %v, %v; want forward", v, back, err)
			}
		default:
			if err == nil || !isBadRequest(err) {
				t.Fatalf("parseDirection(%q) = %v, %v; want a 400", v, back, err)
			}
		}
	})
}

// FuzzParseSelection: after leading white space a '{' means LogQL, which
// is accepted exactly when query.Parse and Compile accept it (else a 400);
// anything else is the literal bytes of q, whatever they are, with fold
// as given. Either way the time range starts unbounded.
func FuzzParseSelection(f *testing.F) {
	for _, s := range []string{
		"", "timeout", `{app="api"} |= "timeout"`, ` 	{app="api"}`, `{app="api"`, `{}`, "a.b*", "\xff\xfe",
		"\u00a0{app=\"x\"}", "\u2028{app=\"x\"}", `{app=~"a|b"} | json | status >= 500`, "{", " x {app=\"a\"}",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, q string, fold bool) {
		sel, err := parseSelection(q, fold)
		logql := strings.HasPrefix(strings.TrimLeftFunc(q, isSpaceRune), "{")
		if !logql {
			if err != nil || sel.plan != nil || string(sel.pat) != q || sel.fold != fold {
				t.Fatalf("parseSelection(%q, %v) = %+v, %v; want the literal", q, fold, sel, err)
			}
		} else {
			_, perr := compileLogQL(strings.TrimSpace(q))
			if (err == nil) != (perr == nil) {
				t.Fatalf("parseSelection(%q): %v; query package says %v", q, err, perr)
			}
			if err != nil {
				if !isBadRequest(err) {
					t.Fatalf("parseSelection(%q): %v is not a 400", q, err)
				}
				return
			}
			if sel.plan == nil || sel.pat != nil {
				t.Fatalf("parseSelection(%q) = %+v; want a plan", q, sel)
			}
		}
		if sel.start != math.MinInt64 || sel.end != math.MaxInt64 {
			t.Fatalf("parseSelection(%q): range [%d, %d], want unbounded", q, sel.start, sel.end)
		}
	})
}

func isSpaceRune(r rune) bool { return unicode.IsSpace(r) }

func compileLogQL(q string) (*query.Plan, error) {
	ast, err := query.Parse(q)
	if err != nil {
		return nil, err
	}
	return query.Compile(ast)
}
