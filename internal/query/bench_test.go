package query

import (
	"regexp"
	"testing"
)

// benchLines is every Loghub line, as the executor would see them one by
// one (about 16k lines, 2.5 MB).
func benchLines(b *testing.B) ([][]byte, int64) {
	var lines [][]byte
	var n int64
	for _, s := range loadLoghub(b) {
		for _, l := range s.lines {
			lines = append(lines, []byte(l))
			n += int64(len(l)) + 1
		}
	}
	return lines, n
}

func mustPlan(b testing.TB, q string) *Plan {
	pq, err := Parse(q)
	if err != nil {
		b.Fatal(err)
	}
	p, err := Compile(pq)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkFoldLiteral compares `|~ "(?i)timeout"` (compiled to a folded
// needle) with `|= "timeout"`, and with Go's regexp doing the same job.
func BenchmarkFoldLiteral(b *testing.B) {
	lines, size := benchLines(b)
	for _, bc := range []struct{ name, q string }{
		{"exact", `{a="b"} |= "timeout"`},
		{"fold", `{a="b"} |~ "(?i)timeout"`},
		{"fold-k", `{a="b"} |~ "(?i)kernel"`},
	} {
		p := mustPlan(b, bc.q)
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				n := 0
				for _, l := range lines {
					if p.Match(l) {
						n++
					}
				}
			}
		})
	}
	re := regexp.MustCompile(`(?i)timeout`)
	b.Run("go-regexp", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			for _, l := range lines {
				re.Match(l)
			}
		}
	})
}

// BenchmarkAndThree compares one plan with three ANDed literal filters
// against three full passes of one filter each (then intersected).
func BenchmarkAndThree(b *testing.B) {
	lines, size := benchLines(b)
	needles := []string{"INFO", "blk_", "terminating"}
	one := mustPlan(b, `{a="b"} |= "INFO" |= "blk_" |= "terminating"`)
	var sep []*Plan
	for _, n := range needles {
		sep = append(sep, mustPlan(b, `{a="b"} |= "`+n+`"`))
	}
	b.Run("one-pass", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			n := 0
			for _, l := range lines {
				if one.Match(l) {
					n++
				}
			}
		}
	})
	hits := make([]uint8, len(lines))
	b.Run("three-passes", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			clear(hits)
			for _, p := range sep {
				for i, l := range lines {
					if p.Match(l) {
						hits[i]++
					}
				}
			}
			n := 0
			for _, h := range hits {
				if h == 3 {
					n++
				}
			}
		}
	})
}

// BenchmarkRegexPrefilter shows the literal prefilter in front of a regex.
func BenchmarkRegexPrefilter(b *testing.B) {
	lines, size := benchLines(b)
	p := mustPlan(b, `{a="b"} |~ "Failed password for (invalid user )?\\w+ from"`)
	re := regexp.MustCompile(`(?s)Failed password for (invalid user )?\w+ from`)
	b.Run("plan", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			for _, l := range lines {
				p.Match(l)
			}
		}
	})
	b.Run("go-regexp", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			for _, l := range lines {
				re.Match(l)
			}
		}
	})
}

// BenchmarkLabelSet runs Plan.LabelSet, what the server calls per entry
// for a query with stages, over every Loghub line of a two-label stream
// with no metadata: the path metadata must not slow down.
func BenchmarkLabelSet(b *testing.B) {
	lines, size := benchLines(b)
	stream := []Label{{"app", "loghub"}, {"level", "info"}}
	for _, bc := range []struct{ name, q string }{
		{"drop", `{a="b"} | drop level`},
		{"logfmt-filter", `{a="b"} | logfmt | level!="debug"`},
		{"filter", `{a="b"} | app="loghub"`},
	} {
		p := mustPlan(b, bc.q)
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				for _, l := range lines {
					p.LabelSet(stream, l)
				}
			}
		})
	}
}
