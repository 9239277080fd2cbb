package query

import (
	"testing"
	"unsafe"
)

// TestRewrittenLineOwnMemory: EntryLabels.Line is nil when the stages gave
// the stored line back (decolorize without an escape, a line_format whose
// template failed), and otherwise never points into the line passed in.
// The server keeps a rewritten line without copying it, while the stored
// line lives in a pooled block buffer that the next block overwrites
// (review 13 R13-4: every decolorize answer came back with other entries'
// lines).
func TestRewrittenLineOwnMemory(t *testing.T) {
	cases := []struct {
		query, line string
		rewritten   bool
	}{
		{`{a="b"} | decolorize`, "plain line", false},
		{`{a="b"} | decolorize`, "\x1b[31mred\x1b[0m line", true},
		{`{a="b"} | line_format "{{ repeat 2000000 \"x\" }}"`, "too big a result", false},
		{`{a="b"} | line_format "{{.a}}"`, "x", true},
		{`{a="b"} | line_format "{{ __line__ }}"`, "same text, new memory", true},
		{`{a="b"} | decolorize | decolorize`, "plain", false},
		{`{a="b"} | line_format "{{ __line__ }}" | decolorize`, "plain", true},
		{`{a="b"} | unpack`, `{"_entry":"inner","k":"v"}`, true},
		{`{a="b"} | unpack`, `{"k":"v"}`, false},
	}
	for _, tc := range cases {
		q, err := Parse(tc.query)
		if err != nil {
			t.Fatalf("%s: %v", tc.query, err)
		}
		p, err := Compile(q)
		if err != nil {
			t.Fatalf("%s: %v", tc.query, err)
		}
		stored := []byte(tc.line)
		l, _, ok := p.LabelSetAttrs([]Label{{"a", "b"}}, nil, stored)
		if !ok {
			t.Fatalf("%s on %q: dropped", tc.query, tc.line)
		}
		if got := l.Line != nil; got != tc.rewritten {
			t.Errorf("%s on %q: rewritten %v (%q), want %v", tc.query, tc.line, got, l.Line, tc.rewritten)
		}
		if len(l.Line) > 0 && overlaps(l.Line, stored) {
			t.Errorf("%s on %q: the rewritten line shares memory with the stored one", tc.query, tc.line)
		}
	}
}

// overlaps reports whether a and b share any byte of memory.
func overlaps(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0, b0 := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return a0 < b0+uintptr(len(b)) && b0 < a0+uintptr(len(a))
}
