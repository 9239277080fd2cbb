package ingest

import (
	"fmt"
	"time"
)

// Entry is one log entry ready for the store.
type Entry struct {
	// Time is the entry's instant in unix nanoseconds. When HasTime is
	// false it is the parser's clock at parse time (ingestion time).
	Time int64
	// HasTime is false when no timestamp was found in the line; the caller
	// may then use its own ingestion time instead of Time.
	HasTime bool
	// Line is the exact bytes of the entry, trailing "\r" stripped. It
	// aliases the slice given to Parse (for a LineReader's line: valid until
	// the next call to Next). JSON lines keep the raw line as the message.
	Line []byte
}

// Format is the format of an input.
type Format int

const (
	// FormatAuto decides line by line, so a mixed stream works: a line
	// starting with '{' (after blanks and a byte order mark) is tried as
	// JSON first, and any line without a JSON time gets LeadingTime.
	FormatAuto Format = iota
	// FormatPlain looks only for a leading timestamp (LeadingTime).
	FormatPlain
	// FormatJSONL looks only for a JSON time key (JSONTime).
	FormatJSONL
)

// String returns the name ParseFormat accepts.
func (f Format) String() string {
	switch f {
	case FormatAuto:
		return "auto"
	case FormatPlain:
		return "plain"
	case FormatJSONL:
		return "jsonl"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// ParseFormat returns the Format named "auto", "plain" or "jsonl".
func ParseFormat(s string) (Format, error) {
	switch s {
	case "auto":
		return FormatAuto, nil
	case "plain":
		return FormatPlain, nil
	case "jsonl":
		return FormatJSONL, nil
	}
	return 0, fmt.Errorf("unknown format %q (want auto, plain or jsonl)", s)
}

// Parser turns lines into entries, detecting timestamps per its Format. It
// reads its clock only for lines that need it: those without a timestamp
// (for ingestion time) and those whose timestamp has no year (syslog, klog),
// whose year is inferred from the clock as LeadingTime describes.
// Parse does not allocate. A Parser is not safe for concurrent use.
type Parser struct {
	format Format
	ref    refTime
}

// NewParser returns a Parser for format f; now is its clock (nil means
// time.Now), which tests can fix.
func NewParser(f Format, now func() time.Time) *Parser {
	if now == nil {
		now = time.Now
	}
	return &Parser{format: f, ref: refTime{now: now}}
}

// Parse returns the entry for line. Line aliases line.
func (p *Parser) Parse(line []byte) Entry {
	p.ref.ok = false // read the clock afresh, if at all, for this line
	var t int64
	var ok bool
	switch p.format {
	case FormatPlain:
		t, ok = leadingTime(line, &p.ref)
	case FormatJSONL:
		t, ok = jsonTime(line, &p.ref)
	default:
		if looksJSON(line) {
			t, ok = jsonTime(line, &p.ref)
		}
		if !ok {
			t, ok = leadingTime(line, &p.ref)
		}
	}
	if !ok {
		p.ref.resolve()
		return Entry{Time: p.ref.nanos, Line: line}
	}
	return Entry{Time: t, HasTime: true, Line: line}
}

func looksJSON(line []byte) bool {
	i := skipWS(line, skipBOM(line))
	return i < len(line) && line[i] == '{'
}
