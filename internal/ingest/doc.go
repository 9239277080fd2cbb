// Package ingest is the parsing half of ingestion: it turns a byte stream
// into log entries ready for the store.
//
// The pieces, in the order data flows through them:
//
//   - LineReader frames a byte stream into lines. A line ends at "\n"; one
//     trailing "\r" is stripped (so CRLF and LF files give the same lines); a
//     last line without "\n" is kept; empty lines are kept; every other byte
//     is kept exactly (invalid UTF-8, NUL, escape codes, a lone "\r" inside a
//     line). Lines are slices of an internal buffer, so framing costs no
//     allocation and no copy.
//   - Parser turns a line into an Entry: it finds the entry's timestamp
//     according to the input Format (plain text, JSON lines or auto).
//   - LeadingTime and JSONTime are the timestamp detectors. They are
//     hand-written digit parsers: no regexp, no allocation, and time.Parse only
//     as a last-resort fallback for rarer layouts inside JSON strings.
//   - Labels identify a stream: ParseLabels reads them as given to
//     `hay ingest --stream` or in Loki's {k="v"} form, and Labels.String
//     writes the canonical Loki form.
//
// Timestamps are unix nanoseconds. A timestamp without a zone is taken as
// UTC. Detectors only report instants between 1970-01-01 and the end of
// 2200: anything outside that is far more likely a misread number than a log
// time, and it keeps every result well inside int64 nanoseconds.
package ingest
