package main

import (
	"encoding/json"

	"haystack/internal/attrs"
	"haystack/internal/query"
	"haystack/internal/search"
)

// labelStages reports whether plan has a stage that makes or removes an
// entry's labels: a parser (json, logfmt, regexp, pattern, unpack),
// label_format, drop or keep. Only then does --json print the labels
// Loki would return (pipelineLabels); a label filter alone keeps the
// stored labels and metadata, as the server's native API gives them.
func labelStages(plan *query.Plan) bool {
	for _, st := range plan.Query.Stages {
		switch st.(type) {
		case *query.ParserStage, *query.LabelFormatStage, *query.DropStage:
			return true
		}
	}
	return false
}

// jsonPipeline gives --json, for a query with label stages
// (labelStages), each entry's labels in the split of Loki's
// categorize-labels answers, which printJSON adds after the stored
// fields:
//
//	"stream":{...}              the stream labels the pipeline kept, only when
//	                            drop, keep or label_format changed them
//	"structuredMetadata":{...}  the metadata as labels after the pipeline, only
//	                            when it differs from "metadata" (a name the
//	                            stream has gets _extracted; drop removes)
//	"parsed":{...}              labels parsers extracted or label_format made,
//	                            with __error__ and __error_details__
//
// The pipeline runs once an entry, for these and for the line a stage
// rewrote (as rewriteLines). Context entries did not go through the
// pipeline: they print as stored.
type jsonPipeline struct {
	plan    *query.Plan
	streams *streamLabels
	extra   []byte
}

func newJSONPipeline(plan *query.Plan, labelsOf func(uint32) string) *jsonPipeline {
	return &jsonPipeline{plan: plan, streams: newStreamLabels(labelsOf)}
}

// run returns m's line after the pipeline and the JSON fields to add
// (valid until the next call; nil for none).
func (jp *jsonPipeline) run(m *search.Match) (line, extra []byte) {
	if m.Context {
		return m.Line, nil
	}
	ls := jp.streams.of(m.Stream)
	l, changed, pass := jp.plan.LabelSetAttrs(ls, m.Attrs, m.Line)
	if !pass {
		// Not reached: search already ran the same plan.
		return m.Line, nil
	}
	line = m.Line
	if l.Line != nil {
		line = l.Line
	}
	if !changed {
		return line, nil
	}
	kept, parsed := l.Split(ls)
	extra = jp.extra[:0]
	// kept is a subset of ls (Split): the same length is the same set.
	if len(kept) != len(ls) {
		extra = appendLabelsField(extra, "stream", kept)
	}
	if !sameMetadata(l.Meta, m.Attrs) {
		extra = appendLabelsField(extra, "structuredMetadata", l.Meta)
	}
	if len(parsed) > 0 {
		extra = appendLabelsField(extra, "parsed", parsed)
	}
	jp.extra = extra
	return line, extra
}

// appendLabelsField appends ,"name":{...} with ls, sorted by name (as
// EntryLabels' sets are), as a JSON object escaped as the "labels"
// field's (encoding/json's map encoding): without a map and its
// reflection, which were half the cost of a logfmt query's --json.
func appendLabelsField(b []byte, name string, ls []query.Label) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':', '{')
	for i, l := range ls {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, l.Name)
		b = append(b, ':')
		b = appendJSONString(b, l.Value)
	}
	return append(b, '}')
}

// appendJSONString appends s as json.Marshal writes a string, copying a
// plain one directly.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			j, _ := json.Marshal(s)
			return append(b, j...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// sameMetadata reports whether the pipeline's metadata labels are the
// stored metadata's pairs (in any order), so that "metadata" says it all.
func sameMetadata(meta []query.Label, stored []byte) bool {
	n := 0
	same := true
	err := attrs.Each(stored, func(name, value []byte) bool {
		n++
		for _, l := range meta {
			if l.Name == string(name) {
				same = l.Value == string(value)
				return same
			}
		}
		same = false
		return false
	})
	return err == nil && same && n == len(meta)
}
