package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"haystack/internal/logtest"
)

func init() {
	register(&command{
		name:    "gen",
		summary: "write a deterministic corpus of realistic log lines",
		run:     func(args []string) error { return runGen(args, os.Stdout, os.Stderr) },
	})
}

// runGen is `hay gen`, writing to stdout unless -o is given; messages go to
// stderr, with a progress line when stderr is a terminal and -o is used.
func runGen(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintln(w, "Usage: hay gen [--lines N | --size SIZE] [flags]")
		fmt.Fprintln(w, "\nWrites realistic log lines: plain text, logfmt, JSON and Java lines with stack")
		fmt.Fprintln(w, "traces, from several streams, with increasing timestamps, common words and rare")
		fmt.Fprintln(w, "identifiers (trace ids, UUIDs, IPs, user ids) and a few clustered incidents.")
		fmt.Fprintln(w, "The same flags give the same bytes on every machine. Without --lines or --size,")
		fmt.Fprintf(w, "it writes %d lines.\n", logtest.DefaultLines)
		fmt.Fprintln(w, "\nExamples:")
		fmt.Fprintln(w, "  hay gen --lines 100000 > corpus.log")
		fmt.Fprintln(w, "  hay gen --size 1GB --seed 7 -o /tmp/1g.log")
		fmt.Fprintln(w, "  hay gen --size 64MiB --mean-len 1024 --streams 3 --start 2025-06-01T00:00:00Z --span 7d")
		fmt.Fprintln(w, "\nFlags:")
		fs.PrintDefaults()
	}
	lines := fs.Int64("lines", 0, "write exactly `N` lines (excludes --size)")
	size := fs.String("size", "", "write lines until at least `SIZE` bytes (the last line may pass it), e.g. 1GB, 500MB, 64KiB, 1.5GiB, 1000000\n(KB/MB/GB/TB are powers of 1000, KiB/MiB/GiB/TiB of 1024; excludes --lines)")
	meanLen := fs.Int("mean-len", logtest.DefaultMeanLen, "target mean line length in `bytes`, newline excluded; met within 10% from 128 up")
	seed := fs.Int64("seed", 0, "random `seed`; each seed gives a different corpus")
	streams := fs.Int("streams", logtest.DefaultStreams, "number of streams (application/host pairs), `N` >= 1; stream i writes format i%4:\nplain, logfmt, json, java")
	start := fs.String("start", logtest.DefaultStart().Format(time.RFC3339), "timestamp of the first line, RFC 3339 `time`")
	span := fs.String("span", "24h", "time the lines cover, a Go `duration` (90m, 24h) or days (7d)")
	out := fs.String("o", "", "write to `FILE` instead of stdout, and print a summary (and progress on a terminal)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	cfg := logtest.Config{MeanLen: *meanLen, Seed: *seed, Streams: *streams}
	switch {
	case set["lines"] && set["size"]:
		return fmt.Errorf("%w: give --lines or --size, not both", errUsage)
	case set["size"]:
		n, err := parseByteSize(*size)
		if err != nil {
			return fmt.Errorf("%w: --size: %v", errUsage, err)
		}
		if n == 0 {
			return fmt.Errorf("%w: --size must be positive", errUsage)
		}
		cfg.Size = n
	case set["lines"]:
		if *lines < 1 {
			return fmt.Errorf("%w: --lines must be at least 1, got %d", errUsage, *lines)
		}
		cfg.Lines = *lines
	default:
		cfg.Lines = logtest.DefaultLines
	}
	if *meanLen < logtest.MinMeanLen || *meanLen > logtest.MaxMeanLen {
		return fmt.Errorf("%w: --mean-len must be in [%d, %d], got %d", errUsage, logtest.MinMeanLen, logtest.MaxMeanLen, *meanLen)
	}
	if *streams < 1 || *streams > logtest.MaxStreams {
		return fmt.Errorf("%w: --streams must be in [1, %d], got %d", errUsage, logtest.MaxStreams, *streams)
	}
	t, err := time.Parse(time.RFC3339Nano, *start)
	if err != nil {
		return fmt.Errorf("%w: --start: want RFC 3339 like 2026-11-01T00:00:00Z: %v", errUsage, err)
	}
	cfg.Start = t
	d, err := parseSpan(*span)
	if err != nil {
		return fmt.Errorf("%w: --span: %v", errUsage, err)
	}
	if d == 0 {
		return fmt.Errorf("%w: --span must be positive", errUsage)
	}
	cfg.Span = d
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}

	if *out == "" {
		_, _, err := logtest.Generate(stdout, cfg)
		return err
	}
	return genFile(*out, cfg, stderr)
}

// genFile writes the corpus to path, with progress and a summary on stderr.
// A partial file is removed on error.
func genFile(path string, cfg logtest.Config, stderr io.Writer) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	cw := &countingWriter{w: f}
	t0 := time.Now()
	var stop func()
	if ef, ok := stderr.(*os.File); ok && isTerminal(ef) {
		stop = genProgress(stderr, cw, cfg, t0)
	}
	lines, n, err := logtest.Generate(cw, cfg)
	if stop != nil {
		stop()
	}
	if err != nil {
		return err
	}
	secs := time.Since(t0).Seconds()
	mean := 0.0
	if lines > 0 {
		mean = float64(n-lines) / float64(lines)
	}
	fmt.Fprintf(stderr, "hay gen: %d lines, %d bytes (%s), mean %.1f bytes/line, %.2f s (%s/s) -> %s\n",
		lines, n, humanBytes(float64(n)), mean, secs, humanBytes(float64(n)/max(secs, 1e-9)), path)
	return nil
}

// countingWriter counts the bytes and lines written through it, for the
// progress line, which reads them from another goroutine.
type countingWriter struct {
	w            io.Writer
	bytes, lines atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.bytes.Add(int64(n))
	c.lines.Add(int64(bytes.Count(p[:n], []byte{'\n'})))
	return n, err
}

// genProgress redraws a progress line on w every 200 ms until the returned
// function is called, which erases it.
func genProgress(w io.Writer, cw *countingWriter, cfg logtest.Config, t0 time.Time) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(w, "\r\033[K")
				return
			case <-tick.C:
			}
			b := float64(cw.bytes.Load())
			pct := 0.0
			if cfg.Size > 0 {
				pct = 100 * b / float64(cfg.Size)
			} else {
				pct = 100 * float64(cw.lines.Load()) / float64(cfg.Lines)
			}
			rate := b / max(time.Since(t0).Seconds(), 1e-9)
			fmt.Fprintf(w, "\r\033[Khay gen: %s written, %s/s, %.0f%%", humanBytes(b), humanBytes(rate), min(pct, 100))
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// humanBytes formats n bytes in decimal units, as --size reads them.
func humanBytes(n float64) string {
	switch {
	case n >= 1e9:
		return strconv.FormatFloat(n/1e9, 'f', 2, 64) + " GB"
	case n >= 1e6:
		return strconv.FormatFloat(n/1e6, 'f', 1, 64) + " MB"
	case n >= 1e3:
		return strconv.FormatFloat(n/1e3, 'f', 1, 64) + " KB"
	}
	return strconv.FormatFloat(n, 'f', 0, 64) + " B"
}

// byteUnits are the --size suffixes, matched case-insensitively.
var byteUnits = []struct {
	suffix string
	mult   int64
}{
	// Longest first, so that "KiB" is not read as "B".
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"t", 1e12},
	{"b", 1},
}

// parseByteSize reads a byte count: a non-negative decimal number, maybe
// with a fraction, and an optional unit (B, KB, MB, GB, TB in powers of
// 1000; KiB, MiB, GiB, TiB in powers of 1024; case-insensitive). The
// result is rounded to whole bytes.
func parseByteSize(s string) (int64, error) {
	num := strings.TrimSpace(s)
	mult := int64(1)
	lower := strings.ToLower(num)
	for _, u := range byteUnits {
		if strings.HasSuffix(lower, u.suffix) {
			num, mult = strings.TrimSpace(num[:len(num)-len(u.suffix)]), u.mult
			break
		}
	}
	// Digits, at most one '.', at least one digit: no signs, exponents,
	// "inf" or hex that ParseFloat would take.
	digits, dots := 0, 0
	for _, c := range num {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			dots++
		default:
			return 0, fmt.Errorf("bad size %q: want a number and a unit like 1GB, 500MB, 64KiB", s)
		}
	}
	if digits == 0 || dots > 1 {
		return 0, fmt.Errorf("bad size %q: want a number and a unit like 1GB, 500MB, 64KiB", s)
	}
	if dots == 0 {
		// Integers exactly, whatever their size.
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n > math.MaxInt64/mult {
			return 0, fmt.Errorf("size %q is too large", s)
		}
		return n * mult, nil
	}
	if mult == 1 {
		return 0, fmt.Errorf("bad size %q: a fraction of a byte", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("bad size %q: %v", s, err)
	}
	v := math.Round(f * float64(mult))
	if v >= 1<<62 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(v), nil
}

// parseSpan reads a Go duration, or a number of days such as "7d" or
// "1.5d". It must not be negative.
func parseSpan(s string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok && days != "" && !strings.ContainsAny(days, "hmsuµn") {
		f, err := strconv.ParseFloat(days, 64)
		if err != nil || math.IsNaN(f) || f < 0 || f*24 > float64(math.MaxInt64/int64(time.Hour)) {
			return 0, fmt.Errorf("bad duration %q: want e.g. 90m, 24h or 7d", s)
		}
		d = time.Duration(f * 24 * float64(time.Hour))
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("bad duration %q: want e.g. 90m, 24h or 7d", s)
		}
	}
	if d < 0 {
		return 0, fmt.Errorf("negative duration %q", s)
	}
	return d, nil
}
