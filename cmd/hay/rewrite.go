package main

import (
	"haystack/internal/ingest"
	"haystack/internal/query"
	"haystack/internal/search"
)

// rewriteLines wraps emit so that a match's line is the one the plan's
// line_format, decolorize or unpack stages make of it, as Loki returns it
// and hay serve prints it. Context entries are not matches: they keep
// their stored line. labelsOf gives a stream's canonical labels, which
// templates may read.
func rewriteLines(plan *query.Plan, labelsOf func(uint32) string, emit func(*search.Match) error) func(*search.Match) error {
	streams := map[uint32][]query.Label{}
	return func(m *search.Match) error {
		if m.Context {
			return emit(m)
		}
		ls, ok := streams[m.Stream]
		if !ok {
			parsed, _ := ingest.ParseLabels(labelsOf(m.Stream)) // unparsed: no labels
			for _, l := range parsed {
				ls = append(ls, query.Label(l))
			}
			streams[m.Stream] = ls
		}
		l, _, pass := plan.LabelSetAttrs(ls, m.Attrs, m.Line)
		if !pass || l.Line == nil {
			return emit(m)
		}
		rm := *m
		rm.Line = l.Line
		return emit(&rm)
	}
}
