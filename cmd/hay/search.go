package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"haystack/internal/attrs"
	"haystack/internal/ingest"
	"haystack/internal/query"
	"haystack/internal/search"
	"haystack/internal/segment"
	"haystack/internal/store"
)

func init() {
	register(&command{
		name:    "search",
		summary: "print stored entries matching a literal PATTERN (like grep -F) or a LogQL --query",
		run:     runSearch,
	})
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ", ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

const searchHelp = `Usage: hay search [flags] [--] [PATTERN]

Prints the stored entries that match, as stored: each stream in the order
it was ingested (a file's line order, as grep prints it), streams merged by
time; --order oldest or newest sorts them all by time. Exits 0 when
something matched, 1 when nothing did, 2 on bad arguments, a bad query or a
missing or damaged store (as grep: 2 means trouble, even when the undamaged
parts matched), 130 when Ctrl-C stopped it (what was found so far is
printed).

What to match (one of):
  PATTERN            a literal string, exactly as grep -F: for one ingested
                     file the output is that of LC_ALL=C grep -a -F on it
                     (-i: ASCII case only, as grep in the C locale), with
                     two differences made at ingest: a line's final \r is
                     not stored (CRLF files come back with LF endings),
                     and a line over 16 MiB is stored in 16 MiB pieces
                     (ingest warns), each an entry of its own.
  --query LOGQL      a LogQL log query: a stream selector, then line filters
                     (|= != |~ !~, with "or"), parsers (| json, | logfmt,
                     | regexp, | pattern, | unpack), label filters
                     (| status >= 500), | drop, | keep, | label_format,
                     | line_format and | decolorize. Metric queries
                     (sum(count_over_time(...))) go to hay serve's API.
                     Cannot be mixed with PATTERN, -e, -v, -E or -i
                     (write (?i) in a regex instead).
  -e P, -E RE, -v P  grep-style filters compiled to the same plan as a query:
                     an entry matches if it contains any -e literal or any -E
                     regex (RE2 syntax), and none of the -v literals. -v alone
                     keeps every entry without them; PATTERN may be combined
                     with -v (but not with -e/-E). With -i the literals
                     (PATTERN, -e, -v) fold ASCII letters only, as PATTERN
                     does, and -E regexes fold as (?i) (Unicode too).
  A PATTERN or a value of -e, -E or -v that holds newlines is one pattern
  per line, as in grep (an empty line matches every entry); a PATTERN of
  several lines is then read as -e's are. Flags may also follow PATTERN,
  as in GNU grep (-- ends them). Unlike grep's, -v takes a value: -v -i
  is refused (write -i -v P, or -v=-i to drop entries holding "-i").

On a terminal, a search that covers more than one stream prints each
entry's stream before it, as grep names the file of each line when it
searches several: "api.log:" for an ingested file, else the stream's
labels; -H always does, --no-stream never. Matches are coloured there as
grep colours them (--color; NO_COLOR=1 turns it off). -l lists the streams
with a match instead, and -q prints nothing: the exit status says.

--json prints one object per entry: "time", "labels" (the stream's, as
stored), "line" ("line_base64" too when it is not valid UTF-8) and
"metadata" (its structured metadata as stored, when it has some). A
--query with a parser (json, logfmt, regexp, pattern, unpack),
label_format, drop or keep adds the entry's labels after the pipeline in
the split of Loki's categorize-labels answers (hay serve's query_range
gives the same): "parsed" (labels the parsers extracted or label_format
made, a parser's key the stream has suffixed _extracted; __error__ too),
when there are some; "stream" (the stream labels the pipeline kept),
when drop, keep or label_format changed them; "structuredMetadata" (the
metadata after the pipeline), when it differs from "metadata". Context lines
(-A/-B/-C) print as stored, and so does every entry of a --server search
whose query also rewrites lines (line_format, decolorize, unpack).

--server URL searches a running hay serve instead of a data directory,
through the API its web UI uses: every matching entry, page by page, by
time (entries of one time in the server's order, also for --order newest).
With -f it follows the server's live tail instead: each matching entry as
it arrives, until Ctrl-C or --limit. A tail that breaks (the server
restarts, gracefully or not; the network drops; a proxy answers 502, 503
or 504) is reconnected, waiting longer after each failed attempt (up to
5 s), and the entries stored meanwhile are shown from a search (those
stamped more than a minute before the latest one shown, or before the
tail began if none was, by the server's clock, are not; an entry stamped
in the future counts as stamped when it was shown). So are the entries
the server drops for a tail not read in time. A refusal (a bad query,
credentials, a certificate this machine does not trust, a redirect loop)
ends it.

A search that runs longer than a second shows how many blocks it has read
on stderr, when that is a terminal and the entries do not go to it (with
-c, --hist, or stdout redirected).

Examples:
  hay search timeout
  hay search -i -c 'connection reset'
  hay search --query '{source="api.log"} |= "error" != "healthcheck"'
  hay search --query '{app=~"api|web"} |~ "(?i)time ?out" | logfmt | status >= 500'
  hay search -e ERROR -e FATAL -v heartbeat --since 1h --order newest --limit 20
  hay search -E 'user=[0-9]+ denied' -C 2
  hay search --hist --query '{source="sshd.log"} |= "Failed password"'
  hay search --server http://logs:3100 --since 1h -i 'connection reset'

Flags:
`

func runSearch(args []string) error {
	err := searchCommand(args)
	switch {
	case err == nil || errors.Is(err, errUsage) || errors.Is(err, errNoMatch) || errors.Is(err, flag.ErrHelp):
		return err
	case errors.As(err, new(*exitError)):
		return err // its own status (--server's 130 after Ctrl-C)
	case errors.Is(err, context.Canceled):
		// Ctrl-C: what was found is printed; the status is a shell's for
		// a command SIGINT stopped, as grep's would be.
		return &exitError{code: 130, err: errors.New("interrupted")}
	}
	return &exitError{code: 2, err: err}
}

func searchCommand(args []string) error {
	fs := flag.NewFlagSet("search", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), searchHelp)
		fs.PrintDefaults()
	}
	data := fs.String("data", defaultDataDir(), "data `dir`ectory ($HAY_DATA when set)")
	qsrc := fs.String("query", "", "a LogQL log `query`, e.g. '{source=\"a.log\"} |= \"x\"'")
	var inc, exc, res stringList
	fs.Var(&inc, "e", "match entries containing the literal `P` (repeatable: any of them)")
	fs.Var(&exc, "v", "drop entries containing the literal `P` (repeatable: any of them)")
	fs.Var(&res, "E", "match entries matching the regex `RE` (RE2; repeatable, ORed with -e)")
	fold := fs.Bool("i", false, "ignore case: ASCII letters in literals, like grep -F -i in the C locale; (?i) in -E regexes")
	count := fs.Bool("c", false, "print only the number of matching entries")
	after := fs.Int("A", 0, "print `N` entries of the same stream after each match")
	before := fs.Int("B", 0, "print `N` entries of the same stream before each match")
	ctxN := fs.Int("C", 0, "print `N` entries of context before and after (-A/-B override it)")
	limit := fs.Int64("limit", 0, "stop after `N` matching entries (0: no limit)")
	fs.Int64Var(limit, "m", 0, "`N`: --limit, as grep -m, over all streams together (with -H -c, as grep -c -m per file: each stream's count stops at N)")
	order := fs.String("order", "stored", "`order`: stored (each stream in ingestion order, as grep, streams merged by time), oldest (by time, ties by stream then ingestion order) or newest (the exact reverse of oldest); they differ only where a stream's times go backwards. With -A/-B/-C each stream keeps its ingestion order, newest backwards")
	since := fs.String("since", "", "only entries at or after `T`: a time (2026-11-30T10:00:00Z; without a zone, UTC: 2026-11-30 10:00, 2026-11-30), or a duration before now (90m, 36h, 2d, 1w)")
	until := fs.String("until", "", "only entries before `T` (as --since)")
	hist := fs.Bool("hist", false, "print a histogram of matches over time instead of the entries")
	asJSON := fs.Bool("json", false, "print one JSON object per entry: time, labels, line (and context; line_base64 too when the line is not valid UTF-8; metadata when the entry has structured metadata; parsed, stream and structuredMetadata after a --query's parsers, label_format, drop or keep: see above)")
	noIndex := fs.Bool("no-index", false, "do not use the skip index: decode every block in range (brute force; same results)")
	withStream := fs.Bool("H", false, "print each entry's stream before it, as grep -H prints file names: an ingested file's name (its source label), else its labels, then ':' (or '-' for context lines). The default on a terminal when the search covers more than one stream. With -c, a count per stream with a match; --json has the labels anyway")
	word := fs.Bool("w", false, "match whole words only, as grep -w: a match may be neither preceded nor followed by a letter, digit or '_' (applies to PATTERN, -e, -E and -v)")
	wholeLine := fs.Bool("x", false, "match whole entries only, as grep -x (applies to PATTERN, -e, -E and -v)")
	server := fs.String("server", "", "search a running hay serve at `URL` (http://host:3100) through its HTTP API instead of a data directory; a bearer token comes from $HAY_TOKEN, a user and password from the URL (http://user:pass@host:3100)")
	follow := fs.Bool("f", false, "with --server, print the matching entries as they arrive (the server's live tail), as tail -f | grep does, until Ctrl-C or --limit")
	tenant := fs.String("tenant", "", "with --server, the `tenant` (X-Scope-OrgID); empty: the server's default")
	colorMode := fs.String("color", "auto", "colour the matches, and the stream before them, as grep --color: `when` is auto (on a terminal, unless NO_COLOR is set or TERM=dumb), always or never")
	listStreams := fs.Bool("l", false, "print only the streams that have a matching entry, one per line, as grep -l prints file names (an ingested file's name, else its labels)")
	quiet := fs.Bool("q", false, "print nothing; exit 0 at the first match, 1 if there is none (as grep -q)")
	noStream := fs.Bool("no-stream", false, "never print the stream before the entries (as grep -h), even when the search covers several")
	stats := fs.Bool("stats", false, "print block counts to stderr: total, pruned by time, stream and index, decoded (and segments not opened: out of --since/--until)")
	// grep's bundled switches (-ic), flags after PATTERN (grep -A3 too),
	// then grep's -A3 forms.
	args, perr := bundledFlags(fs, args)
	if perr != nil {
		return fmt.Errorf("%w: %v", errUsage, perr)
	}
	grepForms := func(a []string) []string { return grepNumArgs(fs, a) }
	if err := parseFlagsWith(fs, args, map[string]bool{"v": true}, grepForms); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if fs.NArg() > 1 {
		return fmt.Errorf("%w: want at most one PATTERN, got %d arguments", errUsage, fs.NArg())
	}
	now := time.Now()
	q := search.Query{Limit: *limit, Count: *count, Before: *before, After: *after, NoIndex: *noIndex}
	var st search.Stats
	if *stats {
		q.Stats = &st
	}
	if !set["A"] {
		q.After = *ctxN
	}
	if !set["B"] {
		q.Before = *ctxN
	}
	if q.Before < 0 || q.After < 0 || *ctxN < 0 {
		return fmt.Errorf("%w: -A, -B and -C must be >= 0", errUsage)
	}
	// Any of them given, even 0, prints grep's "--" between groups.
	q.Grouped = set["A"] || set["B"] || set["C"]
	switch *order {
	case "stored":
		q.Order = search.Stored
	case "oldest":
	case "newest":
		q.Order = search.Newest
	default:
		return fmt.Errorf("%w: --order must be stored, oldest or newest, not %q", errUsage, *order)
	}
	var err error
	if q.Since, err = parseTimeArg(*since, now); err != nil {
		return fmt.Errorf("%w: --since: %v", errUsage, err)
	}
	if q.Until, err = parseTimeArg(*until, now); err != nil {
		return fmt.Errorf("%w: --until: %v", errUsage, err)
	}
	// A bound of exactly 1970-01-01T00:00:00Z is 0, which alone would read
	// as no bound.
	q.SinceSet, q.UntilSet = *since != "", *until != ""
	if *limit < 0 {
		return fmt.Errorf("%w: --limit must be >= 0", errUsage)
	}
	if *withStream && *noStream {
		return fmt.Errorf("%w: -H and --no-stream cannot be used together", errUsage)
	}
	switch *colorMode {
	case "auto", "always", "never":
	default:
		return fmt.Errorf("%w: --color must be auto, always or never, not %q", errUsage, *colorMode)
	}
	if *listStreams || *quiet {
		for _, f := range []string{"c", "hist", "json", "A", "B", "C"} {
			if set[f] {
				name := "-l"
				if *quiet {
					name = "-q"
				}
				return fmt.Errorf("%w: %s prints no entries, so it cannot be used with -%s", errUsage, name, f)
			}
		}
		if *listStreams && *quiet {
			return fmt.Errorf("%w: -l and -q cannot be used together", errUsage)
		}
	}
	if *quiet {
		// The first match answers: stop there, as grep -q.
		q.Limit = 1
	}
	if set["m"] && *limit == 0 {
		// grep -m 0 reads nothing and finds nothing (where --limit 0 is
		// no limit).
		if *count {
			fmt.Println(0)
		}
		return errNoMatch
	}
	inc, exc, res = splitLines(inc), splitLines(exc), splitLines(res)
	// A PATTERN of several lines is several patterns, as -e's are.
	multiLine := fs.NArg() == 1 && strings.Contains(fs.Arg(0), "\n")
	grepStyle := len(inc)+len(exc)+len(res) > 0 || multiLine || *word || *wholeLine
	switch {
	case set["query"]:
		if grepStyle || *fold || fs.NArg() > 0 {
			return fmt.Errorf("%w: --query cannot be mixed with PATTERN, -e, -v, -E, -i, -w or -x", errUsage)
		}
		pq, err := query.Parse(*qsrc)
		if err == nil {
			q.Plan, err = query.Compile(pq)
		}
		if err != nil {
			return fmt.Errorf("%w: %s", errUsage, queryError(*qsrc, err))
		}
	case grepStyle:
		if fs.NArg() > 0 {
			if len(inc)+len(res) > 0 {
				return fmt.Errorf("%w: give PATTERN or -e/-E, not both", errUsage)
			}
			inc = append(inc, splitLines([]string{fs.Arg(0)})...)
		}
		if (*word || *wholeLine) && len(inc)+len(res) == 0 && len(exc) == 0 {
			return fmt.Errorf("%w: -w and -x need a PATTERN, -e, -E or -v", errUsage)
		}
		if *word || *wholeLine {
			// They become regexes, and Go's take UTF-8 only (a Latin-1
			// pattern needs grep, or a PATTERN without -w/-x).
			for _, p := range slices.Concat(inc, exc) {
				if !utf8.ValidString(p) {
					return fmt.Errorf("%w: -w and -x take patterns that are valid UTF-8; %q is not", errUsage, p)
				}
			}
		}
		gq, err := query.FromGrep(query.GrepOptions{Patterns: inc, Exclude: exc, Regex: res, Fold: *fold, Word: *word, Line: *wholeLine})
		if err == nil {
			q.Plan, err = query.Compile(gq)
		}
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
	case fs.NArg() == 1:
		// The literal path: byte for byte grep -F, ASCII -i.
		q.Pattern, q.Fold = []byte(fs.Arg(0)), *fold
	default:
		return fmt.Errorf("%w: want a PATTERN, --query, or -e/-E/-v", errUsage)
	}

	if *follow && *server == "" {
		return fmt.Errorf("%w: -f follows a running hay serve: give --server URL", errUsage)
	}
	if *server != "" {
		if *count && *withStream {
			return fmt.Errorf("%w: -c -H (a count per stream) is not available with --server", errUsage)
		}
		for _, f := range []string{"data", "A", "B", "C", "hist", "l", "no-index", "stats", "e", "E", "v", "w", "x"} {
			if set[f] {
				return fmt.Errorf("%w: -%s is not available with --server (it searches with PATTERN or --query, -i, -c, -q, --limit, --since, --until, --order, --json, -H and --color)", errUsage, f)
			}
		}
		if multiLine {
			return fmt.Errorf("%w: a PATTERN of several lines is not available with --server", errUsage)
		}
		if *follow {
			for _, f := range []string{"c", "q", "since", "until", "order"} {
				if set[f] {
					return fmt.Errorf("%w: --follow prints the entries that arrive from now on; -%s does not apply", errUsage, f)
				}
			}
		}
		rs := remoteSearch{base: *server, tenant: *tenant, token: os.Getenv("HAY_TOKEN"), src: *qsrc, q: q}
		return rs.run(*asJSON, *withStream, *noStream, *colorMode, *quiet, *follow)
	}

	// Segments wholly outside --since/--until are not even opened.
	lo, hi := q.Bounds()
	snap, err := store.OpenSnapshotRange(*data, lo, hi)
	if err != nil {
		return tenantLayoutHint(*data, err)
	}
	// Unmapping the segments one at a time costs TLB shootdowns on every
	// CPU whose threads touched them (~0.15 ms for 8 segments, measured
	// on a search the skip index answers); exit drops them all at once.
	if !exiting {
		defer snap.Close()
	}
	q.Labels = snap.Labels
	// Only --json entries show structured metadata: text, -c, -l, -q and
	// --hist read segment blocks without it (its section neither
	// decompressed nor validated: with OTel ids on every entry it made a
	// full count ~3x slower). search still reads it for a --query whose
	// label filters may test it (search.NeedsAttrs).
	q.SkipAttrs = !*asJSON || *count || *hist
	if q.Plan != nil && len(q.Plan.Streams) > 0 {
		// The selector from the stream index's postings, as hay serve
		// does; the -H and -l checks share the same index.
		q.Index = snap.Index()
	}
	damaged := 0
	for _, err := range snap.Damaged {
		fmt.Fprintf(os.Stderr, "hay search: %v (skipped)\n", err)
		damaged++
	}
	onErr := func(err error) {
		eol := ""
		if q.Progress != nil {
			eol = "\r\033[K" // over the progress line, which redraws below
		}
		fmt.Fprintf(os.Stderr, "%shay search: %v (skipped)\n", eol, err)
		damaged++
	}

	ctx, stop := interruptContext(context.Background(), interruptDelay)
	defer stop()
	out := bufio.NewWriterSize(os.Stdout, 256<<10)
	// A progress line on stderr for a long search, when it cannot mix
	// with the entries on the terminal.
	stopProgress := func() {}
	if isTerminal(os.Stderr) && (*count || *hist || !isTerminal(os.Stdout)) {
		q.Progress = new(search.Progress)
		stopProgress = showProgress(os.Stderr, q.Progress, time.Second)
		defer stopProgress()
	}
	var n int64
	if *hist {
		n, err = printHist(ctx, out, snap, q, *asJSON, onErr)
	} else {
		p := printer{w: out, tty: isTerminal(os.Stdout), labelsOf: snap.Labels, json: *asJSON, context: q.Before > 0 || q.After > 0 || q.Grouped}
		// As grep names the file of each line when it searches several:
		// a store of many ingested files or pushed streams otherwise
		// leaves no way to tell which one a line came from.
		// On a terminal only by default: output piped to a script stays
		// the bare lines it always was.
		covered := -1 // coversStreams, computed once if asked
		covers := func() int {
			if covered < 0 {
				covered = coversStreams(snap, q.Plan)
			}
			return covered
		}
		p.prefix = !*asJSON && !*count && !*noStream && (*withStream || p.tty && covers() > 1)
		p.list, p.quiet = *listStreams, *quiet
		if p.list {
			// Once every stream the search covers is listed, nothing is
			// left to find (grep -l stops reading a file at its first
			// match). -m, a total here, would cut the list short, where
			// grep's -m counts each file's lines: -l ignores it.
			p.listAll = covers()
			q.Limit = 0
		}
		if !*asJSON && (!*count || *withStream) && !*quiet && useColor(*colorMode, p.tty) {
			p.color = true
			if *word || *wholeLine {
				// The plan's regexes for -w/-x take in the bytes around
				// a word: mark from the patterns themselves.
				p.hl = newGrepHighlighter(inc, res, *fold, *word, *wholeLine)
			} else {
				p.hl = newHighlighter(q.Pattern, q.Fold, q.Plan)
			}
		}
		emit := p.print
		if *asJSON && q.Plan != nil && labelStages(q.Plan) {
			// The labels Loki returns for the entry, and the line a
			// stage rewrote: one run of the pipeline for both.
			p.pipe = newJSONPipeline(q.Plan, snap.Labels)
		} else if q.Plan != nil && q.Plan.RewritesLine() {
			// line_format, decolorize or unpack: print the line they
			// make, as Loki does. The filters' spans are in the stored
			// line, so nothing is coloured in the new one.
			emit, p.hl = rewriteLines(q.Plan, snap.Labels, p.print), nil
		}
		if *count && *withStream {
			// -c -H: a count per stream, as grep -c names each file's.
			n, err = countByStream(ctx, out, snap, q, &p, onErr)
		} else {
			n, err = search.Run(ctx, snap.Parts, q, emit, onErr)
		}
		if errors.Is(err, errAllListed) {
			// Run's count stops short on an emit error; -l found these.
			err, n = nil, max(n, int64(len(p.listed)))
		}
		if err == nil && *count && !*withStream {
			fmt.Fprintln(out, n)
		}
	}
	stopProgress() // and erase its line, before the results reach the terminal
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	// A damaged group of a segment's skip index is not an error: its
	// needles got "maybe" for every block, which were scanned, so the
	// results are exact. Say so once per segment, for hay verify.
	for _, e := range snap.IndexDamage() {
		var ce *segment.CorruptError
		file := e.Error()
		if errors.As(e, &ce) {
			file = ce.File
		}
		fmt.Fprintf(os.Stderr, "hay search: %s: skip index damaged, its blocks were scanned in full; run hay verify\n", file)
	}
	if *stats {
		skipped := ""
		if snap.Skipped > 0 {
			skipped = fmt.Sprintf("; segments not opened (out of time range) %d", snap.Skipped)
		}
		fmt.Fprintf(os.Stderr, "hay search: blocks %d, pruned by time %d, by stream %d, by index %d; decoded %d%s\n",
			st.Blocks, st.PrunedTime, st.PrunedStream, st.PrunedIndex, st.Decoded, skipped)
	}
	switch {
	case err != nil:
		return err
	case *quiet && n > 0:
		// grep -q: a match is exit 0 even when an error was met (a
		// damaged part is still named on stderr above).
		return nil
	case damaged > 0:
		return fmt.Errorf("%d damaged part(s) skipped; run hay verify", damaged)
	case n == 0:
		return errNoMatch
	}
	return nil
}

// interruptDelay is how long a search runs before Ctrl-C is caught.
const interruptDelay = 20 * time.Millisecond

// interruptContext returns a context that SIGINT cancels, as
// signal.NotifyContext does, but only from delay on: os/signal starts a
// goroutine locked to its own OS thread (two new threads), which costs
// ~0.15 ms, a tenth of a search the skip index answers without decoding a
// block. Before that, SIGINT ends the process as it ends grep; after it,
// the search stops and what it found is printed. A second SIGINT ends the
// process.
func interruptContext(parent context.Context, delay time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	sig := make(chan os.Signal, 1)
	t := time.AfterFunc(delay, func() {
		signal.Notify(sig, os.Interrupt)
		if ctx.Err() != nil {
			// stop ran meanwhile (it cancels before it calls
			// signal.Stop): do not leave the handler behind.
			signal.Stop(sig)
			return
		}
		go func() {
			select {
			case <-sig:
				cancel()
				signal.Stop(sig)
			case <-ctx.Done():
			}
		}()
	})
	return ctx, func() {
		t.Stop()
		cancel()
		signal.Stop(sig)
	}
}

// bundledFlags splits grep's bundled one-letter switches, -ic or -ci,
// into -i -c, before "--" and outside flag values. A bundle with a
// letter that takes a value (-vc: hay's -v takes the literal to drop) is
// refused with the way to write it; anything else is left to the flag
// package.
func bundledFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...), nil
		}
		if f := fs.Lookup(strings.TrimLeft(a, "-")); f != nil && !isBoolFlag(f) && !strings.Contains(a, "=") {
			out = append(out, a) // its value follows, whatever it looks like
			if i+1 < len(args) {
				out = append(out, args[i+1])
				i++
			}
			continue
		}
		if len(a) < 3 || a[0] != '-' || a[1] == '-' || fs.Lookup(a[1:]) != nil || strings.Contains(a, "=") {
			out = append(out, a)
			continue
		}
		var split []string
		for _, c := range a[1:] {
			f := fs.Lookup(string(c))
			if f == nil {
				split = nil
				break
			}
			if !isBoolFlag(f) {
				if _, err := strconv.Atoi(a[2:]); err == nil && strings.ContainsRune("ABCm", rune(a[1])) {
					split = nil // grep's -A3 (and -m1): grepNumArgs reads it
					break
				}
				return nil, fmt.Errorf("%s: only switches (%s) can be bundled; -%c takes a value: write them apart, e.g. -c -v P", a, boolLetters(fs), c)
			}
			split = append(split, "-"+string(c))
		}
		if split == nil {
			out = append(out, a)
			continue
		}
		out = append(out, split...)
	}
	return out, nil
}

// boolLetters lists fs's one-letter switches, as "-c, -i".
func boolLetters(fs *flag.FlagSet) string {
	var ls []string
	fs.VisitAll(func(f *flag.Flag) {
		if len(f.Name) == 1 && isBoolFlag(f) {
			ls = append(ls, "-"+f.Name)
		}
	})
	return strings.Join(ls, ", ")
}

// grepNumArgs rewrites grep's attached context counts (-A3, -C10) to the
// flag package's -A=3 form, where fs would read a flag: up to "--" or the
// first argument that is not a flag, and never in the value of a flag
// that takes one (`-e -A3` searches for "-A3").
func grepNumArgs(fs *flag.FlagSet, args []string) []string {
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if a == "--" || len(a) < 2 || a[0] != '-' {
			break
		}
		if len(a) > 2 && strings.IndexByte("ABCm", a[1]) >= 0 {
			if _, err := strconv.Atoi(a[2:]); err == nil {
				out[i] = a[:2] + "=" + a[2:]
				continue
			}
		}
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil {
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
				i++ // its value, whatever it looks like
			}
		}
	}
	return out
}

// splitLines returns the patterns of ps with each split at its newlines,
// as grep does: "a\nb" is the two patterns "a" and "b" (an entry never
// holds a newline, so the pattern as a whole could match nothing).
func splitLines(ps []string) []string {
	var out []string
	for _, p := range ps {
		out = append(out, strings.Split(p, "\n")...)
	}
	return out
}

// queryError describes a bad query: the message, then the query's line
// with a caret under the position (*query.ParseError).
func queryError(src string, err error) string {
	var pe *query.ParseError
	if !errors.As(err, &pe) {
		return err.Error()
	}
	pos := min(max(pe.Pos, 0), len(src))
	start := strings.LastIndexByte(src[:pos], '\n') + 1
	end := len(src)
	if i := strings.IndexByte(src[pos:], '\n'); i >= 0 {
		end = pos + i
	}
	// One space per rune before the position keeps the caret under it;
	// tabs stay tabs.
	var pad strings.Builder
	for _, r := range src[start:pos] {
		if r == '\t' {
			pad.WriteByte('\t')
		} else {
			pad.WriteByte(' ')
		}
	}
	msg := fmt.Sprintf("bad query at byte %d: %s\n  %s\n  %s^", pe.Pos, pe.Msg, src[start:end], pad.String())
	if isMetricQuery(src) {
		msg += "\n" + metricQueryHint
	}
	return msg
}

// metricQueryHint is said when --query holds a metric query: someone
// used to Grafana types one, and "expected a stream selector" alone does
// not tell them where such queries go.
const metricQueryHint = `a metric query (sum, rate, count_over_time, ...) is answered by hay serve's Loki API (/loki/api/v1/query_range, Grafana's Explore); hay search takes log queries, and --hist prints a query's matches over time`

// isMetricQuery reports whether src starts with a LogQL aggregation or
// range function, the way a metric query does.
func isMetricQuery(src string) bool {
	word := strings.TrimLeft(src, " \t\r\n(")
	if i := strings.IndexFunc(word, func(r rune) bool { return !(r == '_' || r >= 'a' && r <= 'z') }); i >= 0 {
		word = word[:i]
	}
	switch word {
	case "sum", "avg", "min", "max", "count", "stddev", "stdvar", "topk", "bottomk", "sort", "sort_desc",
		"rate", "rate_counter", "count_over_time", "bytes_rate", "bytes_over_time", "avg_over_time",
		"sum_over_time", "min_over_time", "max_over_time", "stddev_over_time", "stdvar_over_time",
		"quantile_over_time", "first_over_time", "last_over_time", "absent_over_time",
		"label_replace", "vector", "approx_topk":
		return true
	}
	return false
}

// printHist prints the histogram of q's matches: one line per bucket with
// its start time (UTC), count and a bar, scaled to 80 columns; or with
// asJSON one object per bucket. It returns the total.
func printHist(ctx context.Context, w *bufio.Writer, snap *store.Snapshot, q search.Query, asJSON bool, onErr func(error)) (int64, error) {
	lo, hi, ok := search.TimeRange(snap.Parts, q)
	if !ok {
		return 0, nil
	}
	b := search.ChooseBuckets(lo, hi, 60)
	counts, err := search.Hist(ctx, snap.Parts, q, b, onErr)
	if err != nil {
		return 0, err
	}
	layout := "2006-01-02 15:04:05"
	switch {
	case b.Width%86400e9 == 0:
		layout = "2006-01-02"
	case b.Width%60e9 == 0:
		layout = "2006-01-02 15:04"
	}
	var total, most int64
	for _, c := range counts {
		total += c
		most = max(most, c)
	}
	if asJSON {
		for i, c := range counts {
			t := time.Unix(0, b.Start+int64(i)*b.Width).UTC().Format(time.RFC3339Nano)
			fmt.Fprintf(w, "{\"start\":%q,\"width_seconds\":%g,\"count\":%d}\n", t, float64(b.Width)/1e9, c)
		}
		return total, nil
	}
	cw := len(strconv.FormatInt(most, 10))
	barW := max(10, 80-len(layout)-cw-2)
	for i, c := range counts {
		t := time.Unix(0, b.Start+int64(i)*b.Width).UTC().Format(layout)
		bar := 0
		if most > 0 {
			bar = int((c*int64(barW) + most - 1) / most) // round up: any hit shows
		}
		fmt.Fprintf(w, "%s %*d %s\n", t, cw, c, strings.Repeat("█", bar))
	}
	fmt.Fprintf(w, "total %d in %d buckets of %v (UTC)\n", total, len(counts), time.Duration(b.Width))
	return total, nil
}

// parseTimeArg reads --since/--until: "" is no bound, a duration d means
// now-d, else RFC 3339 (with or without fraction).
func parseTimeArg(s string, now time.Time) (int64, error) {
	if s == "" {
		return 0, nil
	}
	// Times beyond int64 nanoseconds (before 1677, after 2262) saturate,
	// so --until 9999-12-31 is "no end", not a wrapped time in 1816.
	if d, err := time.ParseDuration(s); err == nil {
		if d == math.MinInt64 { // -d overflows
			return ingest.UnixNano(now.Add(math.MaxInt64).Add(1)), nil
		}
		return ingest.UnixNano(now.Add(-d)), nil
	}
	if n, unit, ok := wholeDays(s); ok {
		// Days and weeks, "since 2d": whole ones of 24 h (UTC has no
		// daylight saving), from now; saturating.
		if n > math.MaxInt32/unit {
			return math.MinInt64, nil
		}
		return ingest.UnixNano(now.UTC().AddDate(0, 0, -int(n*unit))), nil
	}
	if t, err := parseTimeOfDay(s); err == nil {
		if subNanosecond(s) {
			// The layout dropped digits past the ninth: the bound lies
			// after t, and entries are at whole nanoseconds, so the
			// next one is where it falls (since <= t, t < until),
			// rather than on the wrong side of an entry at t.
			t = t.Add(time.Nanosecond)
		}
		return ingest.UnixNano(t), nil
	}
	return 0, fmt.Errorf("%q is not a time: want a duration before now (90m, 36h, 2d, 1w) or a time (2026-11-30T10:00:00Z, 2026-11-30 10:00 and 2026-11-30 in UTC)", s)
}

// wholeDays reads "<N>d" or "<N>w" (N a whole number): N and the days in
// the unit.
func wholeDays(s string) (n, unit int64, ok bool) {
	if len(s) < 2 {
		return 0, 0, false
	}
	switch s[len(s)-1] {
	case 'd':
		unit = 1
	case 'w':
		unit = 7
	default:
		return 0, 0, false
	}
	digits := s[:len(s)-1]
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, 0, false
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return math.MaxInt64, unit, true // all digits, too many: far back
	}
	return n, unit, true
}

// subNanosecond reports whether time text s has a fraction of a second
// with a non-zero digit past the ninth, which time.Parse drops.
func subNanosecond(s string) bool {
	dot := strings.IndexByte(s, '.')
	if dot < 0 {
		return false
	}
	digits := s[dot+1:]
	if end := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }); end >= 0 {
		digits = digits[:end]
	}
	return len(digits) > 9 && strings.Trim(digits[9:], "0") != ""
}

// timeLayouts are the times --since and --until read besides durations:
// RFC 3339, and without a zone (as UTC, as ingest reads such times) to the
// second, to the minute, or a date; a space may stand for the T.
var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02T15:04", "2006-01-02"}

func parseTimeOfDay(s string) (time.Time, error) {
	if len(s) > 10 && s[10] == ' ' {
		s = s[:10] + "T" + s[11:]
	}
	var err error
	for _, l := range timeLayouts {
		var t time.Time
		if t, err = time.ParseInLocation(l, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, err
}

type printer struct {
	w        *bufio.Writer
	tty      bool
	json     bool
	context  bool // print "--" between context groups, as grep
	prefix   bool // print each entry's stream first, as grep -H
	printed  bool
	last     uint32              // stream of the last entry printed
	labelsOf func(uint32) string // a stream's canonical labels
	labels   map[uint32][]byte   // stream -> JSON object of its labels
	prefixes map[uint32][]byte   // stream -> its name for the prefix
	buf      []byte
	// pipe, for --json and a query with label stages, adds each entry's
	// labels after the pipeline (and rewrites its line); nil without.
	pipe *jsonPipeline

	color bool         // --color: SGR sequences around matches and the prefix
	hl    *highlighter // what to colour in a line; nil: nothing
	spans [][2]int     // scratch for hl

	list    bool            // -l: each stream's name once, no entries
	listed  map[uint32]bool // streams -l has printed
	listAll int             // streams the search covers: -l stops when all are listed
	quiet   bool            // -q: nothing at all
}

// countByStream prints, for each stream with a match, its name (as -H
// prints it), ':' and its number of matching entries, in the order of the
// streams' names; it returns the total.
func countByStream(ctx context.Context, out *bufio.Writer, snap *store.Snapshot, q search.Query, p *printer, onErr func(error)) (int64, error) {
	counts := map[uint32]int64{}
	q.Count = false // each match is needed for its stream
	// -m caps each stream's count, as grep -c -m N caps each file's.
	perStream := q.Limit
	q.Limit = 0
	q.Before, q.After, q.Grouped = 0, 0, false // context lines are not counted
	n, err := search.Run(ctx, snap.Parts, q, func(m *search.Match) error {
		counts[m.Stream]++
		return nil
	}, onErr)
	if perStream > 0 {
		n = 0
		for id, c := range counts {
			counts[id] = min(c, perStream)
			n += counts[id]
		}
	}
	if err != nil {
		return n, err
	}
	ids := make([]uint32, 0, len(counts))
	for id := range counts {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b uint32) int { return bytes.Compare(p.streamName(a), p.streamName(b)) })
	for _, id := range ids {
		name := p.streamName(id)
		if p.tty {
			name = appendEscaped(nil, name)
		}
		if p.color {
			fmt.Fprintf(out, "%s%s%s%s:%s%d\n", colorName, name, colorEnd, colorSep, colorEnd, counts[id])
		} else {
			fmt.Fprintf(out, "%s:%d\n", name, counts[id])
		}
	}
	return n, nil
}

// coversStreams returns how many of snap's streams the search can read:
// those plan's selector picks, or all of them for a plain PATTERN.
func coversStreams(snap *store.Snapshot, plan *query.Plan) int {
	if plan == nil || len(plan.Streams) == 0 {
		return snap.NumStreams()
	}
	return len(search.SelectStreams(snap.Index(), plan))
}

// streamName returns what the prefix shows for stream id: the file name
// of an ingested file (its only label is source), else its labels as
// stored ({app="api", pod="x"}).
func (p *printer) streamName(id uint32) []byte {
	if b, ok := p.prefixes[id]; ok {
		return b
	}
	if p.prefixes == nil {
		p.prefixes = map[uint32][]byte{}
	}
	text := p.labelsOf(id)
	name := []byte(text)
	if ls, err := ingest.ParseLabels(text); err == nil && len(ls) == 1 && ls[0].Name == "source" {
		name = []byte(ls[0].Value)
	}
	p.prefixes[id] = name
	return name
}

func (p *printer) print(m *search.Match) error {
	switch {
	case p.quiet:
		return nil
	case p.list:
		return p.printList(m)
	}
	if p.context && !p.json {
		if p.printed && (m.GroupStart || m.Stream != p.last) {
			if p.color {
				p.w.WriteString(colorSep + "--" + colorEnd + "\n") // as grep colours it
			} else {
				p.w.WriteString("--\n")
			}
		}
		p.printed, p.last = true, m.Stream
	}
	if p.json {
		if err := p.printJSON(m); err != nil || !p.tty {
			return err
		}
		return p.w.Flush()
	}
	sep := byte(':')
	if m.Context {
		sep = '-' // as grep marks context lines
	}
	if p.color {
		p.buf = p.appendColored(p.buf[:0], m, sep)
		if _, err := p.w.Write(p.buf); err != nil {
			return err
		}
		if p.tty {
			return p.w.Flush()
		}
		return nil
	}
	if p.tty {
		p.buf = p.buf[:0]
		if p.prefix {
			// Escaped too: a pushed label value is client text.
			p.buf = appendEscaped(p.buf, p.streamName(m.Stream))
			p.buf = append(p.buf, sep)
		}
		p.buf = appendEscaped(p.buf, m.Line)
		p.buf = append(p.buf, '\n')
		if _, err := p.w.Write(p.buf); err != nil {
			return err
		}
		// Line by line on a terminal, as grep's stdio: the rare match of
		// an incident shows when found, not when the scan ends.
		return p.w.Flush()
	}
	if p.prefix {
		p.w.Write(p.streamName(m.Stream))
		p.w.WriteByte(sep)
	}
	p.w.Write(m.Line)
	return p.w.WriteByte('\n')
}

// appendColored appends entry m as print writes it, with grep's colours
// around the prefix and the matches. On a terminal the text is escaped
// piece by piece (a span's bounds are offsets in the raw line); with
// --color=always into a pipe it is raw, as grep's.
func (p *printer) appendColored(b []byte, m *search.Match, sep byte) []byte {
	text := func(b, t []byte) []byte {
		if p.tty {
			return appendEscaped(b, t)
		}
		return append(b, t...)
	}
	if p.prefix {
		b = append(b, colorName...)
		b = text(b, p.streamName(m.Stream))
		b = append(b, colorEnd...)
		b = append(b, colorSep...)
		b = append(b, sep)
		b = append(b, colorEnd...)
	}
	line := m.Line
	if p.hl != nil && !m.Context {
		p.spans = p.hl.spans(line, p.spans)
		at := 0
		for _, s := range p.spans {
			b = text(b, line[at:s[0]])
			b = append(b, colorMatch...)
			b = text(b, line[s[0]:s[1]])
			b = append(b, colorEnd...)
			at = s[1]
		}
		line = line[at:]
	}
	b = text(b, line)
	return append(b, '\n')
}

// printList prints m's stream the first time one of its entries matches
// (-l). Context entries never come: -l refuses -A/-B/-C.
func (p *printer) printList(m *search.Match) error {
	if p.listed[m.Stream] {
		return nil
	}
	if p.listed == nil {
		p.listed = map[uint32]bool{}
	}
	p.listed[m.Stream] = true
	name := p.streamName(m.Stream)
	b := p.buf[:0]
	if p.color {
		b = append(b, colorName...)
	}
	if p.tty {
		b = appendEscaped(b, name)
	} else {
		b = append(b, name...)
	}
	if p.color {
		b = append(b, colorEnd...)
	}
	b = append(b, '\n')
	p.buf = b
	if _, err := p.w.Write(b); err != nil {
		return err
	}
	if p.tty {
		if err := p.w.Flush(); err != nil {
			return err
		}
	}
	if len(p.listed) == p.listAll {
		return errAllListed
	}
	return nil
}

// errAllListed stops a -l search once every stream it covers is listed.
var errAllListed = errors.New("every stream listed")

func (p *printer) printJSON(m *search.Match) error {
	if p.labels == nil {
		p.labels = map[uint32][]byte{}
	}
	lj, ok := p.labels[m.Stream]
	if !ok {
		obj := map[string]string{}
		if ls, err := ingest.ParseLabels(p.labelsOf(m.Stream)); err == nil {
			for _, l := range ls {
				obj[l.Name] = l.Value
			}
		}
		lj, _ = json.Marshal(obj)
		p.labels[m.Stream] = lj
	}
	line, extra := m.Line, []byte(nil)
	if p.pipe != nil {
		line, extra = p.pipe.run(m)
	}
	b := append(p.buf[:0], `{"time":"`...)
	b = time.Unix(0, m.Time).UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","labels":`...)
	b = append(b, lj...)
	b = append(b, `,"line":`...)
	// JSON text is UTF-8: invalid bytes become U+FFFD, as in every JSON
	// encoder, so a line that is not valid UTF-8 also comes exactly as
	// "line_base64". Control characters are escaped, so this is safe on a
	// terminal too.
	lb, _ := json.Marshal(string(line))
	b = append(b, lb...)
	if !utf8.Valid(line) {
		b = append(b, `,"line_base64":"`...)
		b = base64.StdEncoding.AppendEncode(b, line)
		b = append(b, '"')
	}
	b = appendMetadataJSON(b, m.Attrs)
	b = append(b, extra...)
	if m.Context {
		b = append(b, `,"context":true`...)
	}
	b = append(b, "}\n"...)
	if p.tty {
		b = escapeJSONControls(b)
	}
	p.buf = b
	_, err := p.w.Write(b)
	return err
}

// appendMetadataJSON appends ,"metadata":{...}, the entry's structured
// metadata as stored (names in order), as the server's native API gives
// it; nothing when the entry has none.
func appendMetadataJSON(b, meta []byte) []byte {
	if len(meta) == 0 {
		return b
	}
	b = append(b, `,"metadata":{`...)
	first := true
	err := attrs.Each(meta, func(name, value []byte) bool {
		if !first {
			b = append(b, ',')
		}
		first = false
		nj, _ := json.Marshal(string(name))
		vj, _ := json.Marshal(string(value))
		b = append(append(append(b, nj...), ':'), vj...)
		return true
	})
	if err != nil {
		// Not reached: the store validated it. Say so rather than cut.
		b = append(b, `"":"corrupt metadata"`...)
	}
	return append(b, '}')
}

// escapeJSONControls writes DEL and the C1 controls (U+0080-U+009F) of a
// JSON line as \u escapes, which encoding/json leaves raw: on a
// terminal, U+009B is CSI, so a pushed line could drive it as an ESC
// could (the plain output escapes the same characters).
func escapeJSONControls(b []byte) []byte {
	n := 0
	for i := 0; i < len(b); i++ {
		if b[i] == 0x7f || b[i] == 0xc2 && i+1 < len(b) && b[i+1] >= 0x80 && b[i+1] <= 0x9f {
			n++
		}
	}
	if n == 0 {
		return b
	}
	out := make([]byte, 0, len(b)+5*n)
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] == 0x7f:
			out = append(out, `\u007f`...)
		case b[i] == 0xc2 && i+1 < len(b) && b[i+1] >= 0x80 && b[i+1] <= 0x9f:
			out = append(out, `\u00`...)
			out = append(out, "0123456789abcdef"[b[i+1]>>4], "0123456789abcdef"[b[i+1]&15])
			i++
		default:
			out = append(out, b[i])
		}
	}
	return out
}

// appendEscaped appends line for display on a terminal: control
// characters (C0, DEL, C1) and invalid UTF-8 are written as Go escapes so
// that log text can never drive the terminal; tab and printable text are
// unchanged.
func appendEscaped(dst, line []byte) []byte {
	for i := 0; i < len(line); {
		c := line[i]
		if c >= 0x20 && c < 0x7f || c == '\t' {
			dst = append(dst, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(line[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			dst = append(dst, `\x`...)
			dst = append(dst, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
		case unicode.IsControl(r):
			q := strconv.QuoteRune(r) // '\x1b', '\n', '\u0085'
			dst = append(dst, q[1:len(q)-1]...)
		default:
			dst = append(dst, line[i:i+n]...)
		}
		i += n
	}
	return dst
}

// showProgress draws "hay search: N of M blocks (P%)" on w every 250 ms
// once the search has run for delay. The returned function stops it and
// erases the line (it may be called more than once). It runs on its own
// goroutine, so the search never waits for the terminal.
func showProgress(w *os.File, p *search.Progress, delay time.Duration) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTimer(delay)
		defer t.Stop()
		drawn := false
		for {
			select {
			case <-done:
				if drawn {
					fmt.Fprint(w, "\r\033[K")
				}
				return
			case <-t.C:
			}
			if d, total := p.Done.Load(), p.Total.Load(); total > 0 {
				fmt.Fprintf(w, "\rhay search: %d of %d blocks (%d%%) ", d, total, d*100/total)
				drawn = true
			}
			t.Reset(250 * time.Millisecond)
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			<-finished
		})
	}
}
