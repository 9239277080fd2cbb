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
	streams := newStreamLabels(labelsOf)
	return func(m *search.Match) error {
		if m.Context {
			return emit(m)
		}
		l, _, pass := plan.LabelSetAttrs(streams.of(m.Stream), m.Attrs, m.Line)
		if !pass || l.Line == nil {
			return emit(m)
		}
		rm := *m
		rm.Line = l.Line
		return emit(&rm)
	}
}

// streamLabels gives each stream's labels in the form a plan's pipeline
// takes, parsing a stream's canonical labels once.
type streamLabels struct {
	labelsOf func(uint32) string
	parsed   map[uint32][]query.Label
}

func newStreamLabels(labelsOf func(uint32) string) *streamLabels {
	return &streamLabels{labelsOf: labelsOf, parsed: map[uint32][]query.Label{}}
}

// of returns stream id's labels (none when they do not parse).
func (s *streamLabels) of(id uint32) []query.Label {
	ls, ok := s.parsed[id]
	if !ok {
		parsed, _ := ingest.ParseLabels(s.labelsOf(id))
		for _, l := range parsed {
			ls = append(ls, query.Label(l))
		}
		s.parsed[id] = ls
	}
	return ls
}
