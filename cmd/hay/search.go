package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"haystack/internal/ingest"
	"haystack/internal/search"
	"haystack/internal/store"
)

func init() {
	register(&command{
		name:    "search",
		summary: "print stored entries containing a literal PATTERN, like grep -F",
		run:     runSearch,
	})
}

func runSearch(args []string) error {
	fs := flag.NewFlagSet("search", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: hay search [flags] [--] PATTERN")
		fmt.Fprintln(fs.Output(), "\nPrints the stored entries that contain PATTERN (a literal string), oldest")
		fmt.Fprintln(fs.Output(), "first; for one ingested file the output is that of LC_ALL=C grep -a -F.")
		fmt.Fprintln(fs.Output(), "Exits 1 when nothing matched.")
		fmt.Fprintln(fs.Output(), "\nFlags:")
		fs.PrintDefaults()
	}
	data := fs.String("data", defaultDataDir(), "data `dir`ectory (default $HAY_DATA, else ./hay-data)")
	fold := fs.Bool("i", false, "ignore ASCII case")
	count := fs.Bool("c", false, "print only the number of matching entries")
	limit := fs.Int64("limit", 0, "stop after `N` matching entries (0: no limit)")
	since := fs.String("since", "", "only entries at or after `T` (RFC 3339, or a duration like 1h for now-1h)")
	until := fs.String("until", "", "only entries before `T` (RFC 3339 or a duration)")
	asJSON := fs.Bool("json", false, "print one JSON object per entry: time, labels, line")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want exactly one PATTERN, got %d arguments", errUsage, fs.NArg())
	}
	now := time.Now()
	q := search.Query{Pattern: []byte(fs.Arg(0)), Fold: *fold, Limit: *limit, Count: *count}
	var err error
	if q.Since, err = parseTimeArg(*since, now); err != nil {
		return fmt.Errorf("%w: --since: %v", errUsage, err)
	}
	if q.Until, err = parseTimeArg(*until, now); err != nil {
		return fmt.Errorf("%w: --until: %v", errUsage, err)
	}
	if *limit < 0 {
		return fmt.Errorf("%w: --limit must be >= 0", errUsage)
	}

	snap, err := store.OpenSnapshot(*data)
	if err != nil {
		return err
	}
	defer snap.Close()
	damaged := 0
	for _, err := range snap.Damaged {
		fmt.Fprintf(os.Stderr, "hay search: %v (skipped)\n", err)
		damaged++
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	out := bufio.NewWriterSize(os.Stdout, 256<<10)
	p := printer{w: out, tty: isTerminal(os.Stdout), snap: snap, json: *asJSON}
	n, err := search.Run(ctx, snap.Parts, q, p.print, func(err error) {
		fmt.Fprintf(os.Stderr, "hay search: %v (skipped)\n", err)
		damaged++
	})
	if err == nil && *count {
		fmt.Fprintln(out, n)
	}
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	switch {
	case err != nil:
		return err
	case damaged > 0:
		return fmt.Errorf("%d damaged part(s) skipped; run hay verify", damaged)
	case n == 0:
		return errNoMatch
	}
	return nil
}

// parseTimeArg reads --since/--until: "" is no bound, a duration d means
// now-d, else RFC 3339 (with or without fraction).
func parseTimeArg(s string, now time.Time) (int64, error) {
	if s == "" {
		return 0, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d).UnixNano(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("%q is neither RFC 3339 nor a duration", s)
	}
	return t.UnixNano(), nil
}

type printer struct {
	w      *bufio.Writer
	tty    bool
	json   bool
	snap   *store.Snapshot
	labels map[uint32][]byte // stream -> JSON object of its labels
	buf    []byte
}

func (p *printer) print(m *search.Match) error {
	if p.json {
		return p.printJSON(m)
	}
	if p.tty {
		p.buf = appendEscaped(p.buf[:0], m.Line)
		p.buf = append(p.buf, '\n')
		_, err := p.w.Write(p.buf)
		return err
	}
	p.w.Write(m.Line)
	return p.w.WriteByte('\n')
}

func (p *printer) printJSON(m *search.Match) error {
	if p.labels == nil {
		p.labels = map[uint32][]byte{}
	}
	lj, ok := p.labels[m.Stream]
	if !ok {
		obj := map[string]string{}
		if ls, err := ingest.ParseLabels(p.snap.Labels(m.Stream)); err == nil {
			for _, l := range ls {
				obj[l.Name] = l.Value
			}
		}
		lj, _ = json.Marshal(obj)
		p.labels[m.Stream] = lj
	}
	b := append(p.buf[:0], `{"time":"`...)
	b = time.Unix(0, m.Time).UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","labels":`...)
	b = append(b, lj...)
	b = append(b, `,"line":`...)
	// JSON text is UTF-8: invalid bytes become U+FFFD, as in every JSON
	// encoder. Control characters are escaped, so this is safe on a
	// terminal too.
	lb, _ := json.Marshal(string(m.Line))
	b = append(b, lb...)
	b = append(b, "}\n"...)
	p.buf = b
	_, err := p.w.Write(b)
	return err
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
