// Package query parses the log-query part of LogQL and compiles it into a
// plan the search engine runs: stream matchers, line filters ordered
// cheapest first, parser (json, logfmt, regexp, pattern, unpack),
// label-filter, drop, keep, line_format, label_format and decolorize
// stages, and the literals every matching line must contain (for the skip
// index and the needle kernel).
//
// # Grammar
//
// In EBNF (Go spec style; whitespace separates tokens and is otherwise
// ignored, and so is a comment: '#' outside a string up to the end of the
// line, as in Loki):
//
//	Query        = Selector { Stage } .
//	Selector     = "{" Matcher { "," Matcher } "}" .
//	Matcher      = Ident MatchOp String .
//	MatchOp      = "=" | "!=" | "=~" | "!~" .
//	Stage        = LineFilter | "|" ( Parser | Drop | Format | LabelExpr ) .
//	LineFilter   = FilterOp String { "or" String } .
//	FilterOp     = "|=" | "!=" | "|~" | "!~" .
//	Parser       = "json" [ Params ] | "logfmt" { "--strict" | "--keep-empty" } [ Params ]
//	             | "regexp" String | "pattern" String | "unpack" .
//	Params       = Param { "," Param } .
//	Param        = Ident [ "=" String ] .
//	Format       = "line_format" String | "decolorize"
//	             | "label_format" LabelFmt { "," LabelFmt } .
//	LabelFmt     = Ident "=" ( Ident | String ) .
//	Drop         = ( "drop" | "keep" ) DropLabel { "," DropLabel } .
//	DropLabel    = Ident [ MatchOp String ] .
//	LabelExpr    = LabelTerm { [ "and" | "or" | "," ] LabelTerm } .
//	LabelTerm    = "(" LabelExpr ")" | Ident MatchOp String
//	             | Ident ( "==" | "=" | "!=" | ">" | ">=" | "<" | "<=" ) Value .
//	Value        = Number | Duration | Bytes .
//	Number       = [ "-" ] Digits [ "." Digits ] .
//	Duration     = a Go time.ParseDuration string: "300ms", "1h30m" .
//	Bytes        = Number Unit, Unit one of B kB KB MB GB TB PB EB KiB MiB GiB TiB PiB EiB
//	               (case-insensitive) .
//	String       = `"` Go-escaped text `"` | "`" raw text "`" .
//	Ident        = ( letter | "_" ) { letter | digit | "_" | ":" } .
//
// "==" with a string means "=". In a label expression, "," and plain
// juxtaposition mean "and"; "and" and "or" have equal precedence and fold
// left to right as Loki documents (a or b and c is (a or b) and c);
// parentheses group. The stage keywords (json, logfmt, regexp, pattern,
// unpack, line_format, label_format, decolorize, drop, keep) name stages
// only when no operator follows them (`| drop="x"` filters on a label
// named drop).
//
// # Semantics (Loki's, as documented)
//
//   - Selector: at least one matcher must reject the empty value. A missing
//     label has the value "". Regexes are fully anchored and '.' does not
//     match '\n'.
//   - Line filters: |= and != are substring tests; |~ and !~ are unanchored
//     RE2 (Go regexp) searches in which '.' matches '\n'. `|= "a" or "b"`
//     keeps lines containing either; `!= "a" or "b"` keeps lines containing
//     neither; likewise for |~ and !~. All line filters are ANDed.
//   - json: a line that is a JSON object yields one label per scalar;
//     nested keys join with "_", arrays are skipped, strings are unescaped,
//     numbers and booleans keep their text, null becomes "". Anything else
//     sets __error__=JSONParserErr and keeps the line.
//   - logfmt: key=value and key="quoted" pairs. Malformed pairs are skipped;
//     with --strict the first one sets __error__=LogfmtParserErr and stops.
//     Standalone keys are kept (as "") only with --keep-empty.
//   - json and logfmt with parameters extract only the labels named:
//     `| json first="servers[0]", ua="request.headers[\"User-Agent\"]"`
//     follows the path (keys joined by '.', [n] array indexes, ["k"]
//     quoted keys); strings are unescaped, numbers and booleans keep their
//     text, objects and arrays keep their JSON text, null is "", a
//     missing path adds nothing. `| logfmt host, level="lvl"` takes the
//     first value of each key (a bare name is its own key).
//   - regexp: Go RE2 (unanchored, '.' not matching '\n', as Loki compiles
//     it); each named group of the first match becomes a label (a group
//     that does not take part gives ""). At least one named group is
//     required and names must be distinct label names. No match adds
//     nothing and sets no error.
//   - pattern: <name> captures, <_> skips, the rest is literal (a '<'
//     that starts no capture too). Matching is anchored at the line's
//     start: a leading literal must begin the line, else nothing is
//     added. Each capture ends at the first occurrence of the literal
//     after it; the last capture takes the rest of the line. When a
//     literal is not found, the capture before it takes the rest of the
//     line and the later captures are not added. Two adjacent captures,
//     a pattern with no named capture and a repeated name are refused.
//   - unpack: a JSON object's string members become labels, except
//     _entry, which replaces the line (Promtail's pack stage); other
//     members are ignored; a line that is not a JSON object sets
//     __error__=JSONParserErr.
//   - line_format "tmpl": the line becomes the output of the Go
//     text/template over the entry's current labels ({{.level}}; a
//     missing label is "") and the line (__line__). Functions: ToLower,
//     ToUpper, lower, upper, title (strings.Title), Replace (s old new n), replace (old
//     new s), Trim, TrimLeft, TrimRight, TrimPrefix, TrimSuffix,
//     TrimSpace, trim, trimAll, trimPrefix, trimSuffix, contains,
//     hasPrefix, hasSuffix, default, trunc, substr, repeat,
//     regexReplaceAll, regexReplaceAllLiteral and text/template's own
//     (printf, len, index, eq, and, or, not, ...). Any other function
//     (__timestamp__, date, ...) is refused at parse time, and so are
//     define, block, template and range actions and variables ($x :=,
//     $x =; $ itself reads the root data). A template that fails on an
//     entry keeps the line and sets __error__=TemplateFormatErr with the
//     message in __error_details__. Memory is bounded per entry: one
//     output and one function result (print, printf, println, html, js
//     and urlquery are bounded versions of text/template's; printf's
//     widths and precisions count, * widths are refused) are at most
//     1 MiB; all results and outputs of the entry's templates together at
//     most 4 MiB; all label_format values made for the entry at most
//     1 MiB. Past a bound the template fails as above.
//     Line filters after line_format, decolorize or unpack test the new
//     line; the result carries the new line (EntryLabels.Line).
//   - label_format a=b, c="tmpl": a takes b's value and b is removed
//     (nothing happens when the entry has no b); c gets the template's
//     output. Every operand reads the labels as they were before the
//     stage; the target replaces a label of that name wherever it came
//     from (a stream label too). A target named twice, __error__ and
//     __error_details__ are refused; a failing template sets
//     __error__=TemplateFormatErr and leaves its label unchanged.
//   - decolorize removes ANSI escape sequences from the line.
//   - Extracted keys are sanitized (bytes other than [A-Za-z0-9_:] become
//     '_', a leading digit gets a '_' prefix); a name that a stream label
//     already has, and __error__ or __error_details__ (which only the
//     pipeline sets), gets the suffix "_extracted"; the first value of a
//     repeated name wins.
//   - drop removes labels from the entry's label set: a bare name whatever
//     its value, a matcher (`drop level="debug"`, `drop app=~"api.*"`)
//     only when the label's value matches; a label the entry does not
//     have is never selected. keep removes every label no operand selects,
//     except __error__ and __error_details__ (Loki: only drop removes
//     those). Both apply to stream and extracted labels and never filter
//     lines. Later stages see the result: after `drop __error__` the
//     entry carries no error (a number predicate filters it again, and a
//     metric query does not fail with a pipeline error), a later parser
//     may set a new one, and a dropped extracted name may be extracted
//     again; a key named like a dropped stream label still gets the
//     _extracted suffix.
//   - Structured metadata (an entry's name=value pairs, package attrs;
//     Plan.LabelSetAttrs, MatchEntryAttrs) are labels of the entry, as in
//     Loki 3: label filters, drop and keep see them, and the result holds
//     them. A metadata name the stream has gets the suffix _extracted,
//     and so do __error__ and __error_details__ (Loki would take those
//     for the pipeline's error). A parser's key of a metadata label's
//     name replaces it (Loki's precedence: parsed, then metadata, then
//     stream). Line filters test the line only, never the metadata.
//   - String label predicates are Prometheus matchers on the current labels
//     (missing = ""). Number, duration and bytes predicates convert the
//     value: a missing label drops the line, a failed conversion keeps it
//     and sets __error__=LabelFilterErr, and once __error__ is set they no
//     longer filter (only string predicates, e.g. __error__="", can).
//
// # Plan
//
// Compile checks and prepares everything once. Each regex line filter is
// analysed with regexp/syntax: a regex that is a plain literal becomes a
// literal filter, and one that is a (?i) literal becomes an ASCII-folded
// literal run with needle.NewFold; Go's Unicode folding also maps k and s
// to U+212A and U+017F, so such a filter confirms with the regex the lines
// that contain those runes' lead bytes. Other regexes get a prefilter: the
// AND/OR tree of literals every match contains (RequiredLiterals, after
// the idea of Google's codesearch), checked with the needle kernel before
// the regex runs. The whole query's Plan.Required is the AND of its
// positive filters' requirements. Drop and keep stages change labels
// only, so they add nothing to Required: dropping labels never changes
// which lines can match. Line filters after a stage that rewrites the line
// (line_format, decolorize, unpack) run in the pipeline on the new line
// and add nothing to Required either: the index and the scan see the
// stored line.
//
// Label filters add Plan.LabelIndex. Before the first parser: for an
// entry of a given stream, the literals some of its structured metadata
// values must contain (`| trace_id="5f89..."` needs a value holding
// "5f89..."), for a skip index that also covers metadata values
// (segment format 5). Without a parser before it, a label's value is a
// stream label, a metadata value (under its name or name_extracted) or
// the pipeline's own __error__, so a matcher that rejects "" and whose
// label the stream lacks needs a metadata value.
//
// After json, logfmt,
// regexp, pattern and unpack (`| json | trace_id="5f89..."`, `| logfmt |
// user_id="7545245"`): the value may also come from the line, so for a
// stream without the label the requirement is a metadata value holding
// the literals OR a line holding them as the parser reads them: for
// regexp and pattern verbatim; for json and logfmt, whose values are
// unescaped, the pieces of the literal between characters only an escape
// can spell ('"', '\', control characters, U+FFFD, and '/' in JSON), OR
// a 4-byte gram that starts an escape of one of its other characters
// (JSON `\u` and two hex digits; logfmt also `\x`, octal and `\u00`).
// A label the stream has decides by the stream's value, as before. The
// analysis stops at label_format, line_format, decolorize, a parser
// after unpack, and any stage it does not know; !=, !~, an empty value,
// a regex that matches "", comparisons and an `or` with any of those
// need nothing. parsedindex.go has the rules and why they are exact
// enough never to lose a match; search evaluates the tree on both
// indexes (a format-4 segment's metadata is not indexed: the metadata
// side is then a maybe, so such blocks are kept).
//
// # Measured
//
// BenchmarkFoldLiteral and BenchmarkAndThree run Plan.Match per line over
// all Loghub samples (16k lines, 2.0 MB). On the 2-core development
// machine (shared, load ~10; medians of 10 runs) `|~ "(?i)timeout"` took
// 325 µs per pass against 350 µs for `|= "timeout"` (ratio 0.93; Go's
// regexp on the same pattern: about 44 ms), and three ANDed literal
// filters in one plan took 475 µs against 1060 µs for three separate
// passes, because the first filter rejects most lines before the others
// run.
//
// BenchmarkStages runs LabelSetAttrs per line over the same lines: logfmt
// 4.8 ms a pass, pattern "<first> <second> <_>" 8.5 ms, regexp with two
// named groups 21 ms, line_format "{{.app}} {{ __line__ | lower }}" 26 ms
// (a template execution per line, over a label map reused from entry to
// entry), label_format 15 ms, decolorize 0.9 ms (a line without escape
// bytes is not copied).
//
// # Out of scope
//
// Metric queries, `|>`/`!>` pattern filters, ip(), the unwrap stage and
// the template functions not listed above (among them __timestamp__ and
// the date, math and encoding ones) are refused with a ParseError. Time ranges belong to the executor. Metric queries
// are internal/server's: it cuts `| unwrap label` and what follows off
// the log query before Parse, converts values with ParseBytesValue for
// bytes(...), and runs the label filters Loki allows after the unwrap
// with Plan.FilterLabels.
package query
