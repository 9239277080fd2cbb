package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"haystack/internal/logtest"
	"haystack/internal/segment"
)

// `hay bench e2e` measures the whole product the way a user meets it:
// generate logs (as `hay gen`), ingest them with `hay ingest`, then time
// `hay search -c` as a whole process (start-up, snapshot open, decoding,
// scanning) against `rg -c -F` on the same raw file, by needle class. The
// needles are picked by counting candidates on the generated data, and
// every count — hay's, ripgrep's and a naive scan of the raw file
// (bytes.Contains per line, the oracle) — must agree before a time is
// reported.
//
// Wall time is the figure the acceptance is written in; CPU time
// (user + sys of the child processes, from rusage) is printed beside it
// because on a shared machine it is the stabler of the two. hay and rg runs
// alternate so that a burst of load hits both alike.

func runBenchE2E(args []string) error {
	return benchE2E(args, os.Stdout, os.Stderr)
}

type e2eOptions struct {
	lines   int64
	dir     string
	runs    int
	json    bool
	keep    bool
	seed    int64
	rg      string
	brute   bool
	compact bool
	codec   string // hay compact --codec; "" leaves compact's default
	jsonOut string
}

// e2eRow is one timed search: a class, its needles and the measurements.
type e2eRow struct {
	Class   string   `json:"class"`
	Label   string   `json:"label"` // why this needle, e.g. "trace id of the middle line"
	Needles []string `json:"needles"`
	Fold    bool     `json:"fold"`
	Count   int64    `json:"count"` // the oracle's
	Share   float64  `json:"share"` // Count / lines

	HayArgs  []string `json:"hay_args"`
	HayMs    float64  `json:"hay_ms"`     // median wall
	HayCPUMs float64  `json:"hay_cpu_ms"` // median user+sys
	HayRSSKB int64    `json:"hay_max_rss_kb"`
	// The same search with --no-index (brute force), when timed.
	BruteMs    float64 `json:"no_index_ms,omitempty"`
	BruteCPUMs float64 `json:"no_index_cpu_ms,omitempty"`
	RgCommand  string  `json:"rg_command,omitempty"`
	RgMs       float64 `json:"rg_ms,omitempty"`
	RgCPUMs    float64 `json:"rg_cpu_ms,omitempty"`
	// Speedup is RgMs / HayMs: above 1 hay is faster.
	Speedup    float64 `json:"speedup,omitempty"`
	CPUSpeedup float64 `json:"cpu_speedup,omitempty"`
	// SkippedBlocks is the fraction of blocks the index let the executor
	// skip, or -1 when the executor does not report it.
	SkippedBlocks float64 `json:"skipped_blocks"`
}

type e2eReport struct {
	Command   string  `json:"command"`
	Date      string  `json:"date"`
	CPU       string  `json:"cpu"`
	Cores     int     `json:"cores"`
	GoVersion string  `json:"go_version"`
	Load      string  `json:"load_at_start"`
	LoadEnd   string  `json:"load_at_end"`
	Lines     int64   `json:"lines"`
	Seed      int64   `json:"seed"`
	RawBytes  int64   `json:"raw_bytes"`
	Runs      int     `json:"runs"`
	Rg        string  `json:"rg_version,omitempty"`
	IngestS   float64 `json:"ingest_s"`
	IngestCPU float64 `json:"ingest_cpu_s"`
	IngestRSS int64   `json:"ingest_max_rss_kb"`
	// The same after `hay compact` (zero when --compact=false); Stored and
	// IndexBytes are then those of the compacted store the searches read.
	CompactS     float64 `json:"compact_s,omitempty"`
	CompactCPU   float64 `json:"compact_cpu_s,omitempty"`
	CompactRSS   int64   `json:"compact_max_rss_kb,omitempty"`
	IngestStored int64   `json:"ingest_stored_bytes"`
	IngestIndex  int64   `json:"ingest_index_bytes"`
	Stored       int64   `json:"stored_bytes"` // every file of the data dir
	// IndexBytes is the skip index's part of Stored, -1 when unknown.
	IndexBytes int64    `json:"index_bytes"`
	Rows       []e2eRow `json:"rows"`
	rawPath    string
	Summary    struct {
		MedianSpeedup    float64 `json:"median_speedup"`
		MinSpeedup       float64 `json:"min_speedup"`
		MinSelective     float64 `json:"min_speedup_absent_rare"`
		MedianCPUSpeedup float64 `json:"median_cpu_speedup"`
	} `json:"summary"`
}

func benchE2E(args []string, stdout, stderr io.Writer) (err error) {
	fset := flag.NewFlagSet("hay bench e2e", flag.ContinueOnError)
	fset.SetOutput(stderr)
	var o e2eOptions
	fset.Int64Var(&o.lines, "lines", 1000000, "number of generated log lines")
	fset.StringVar(&o.dir, "dir", "", "working `dir`ectory for gen.log and data/ (default: a temporary one)")
	fset.IntVar(&o.runs, "runs", 5, "timed runs per search after a warm-up; the median is kept")
	fset.BoolVar(&o.json, "json", false, "write JSON instead of Markdown")
	fset.StringVar(&o.jsonOut, "json-out", "", "also write the JSON report to `file`")
	fset.BoolVar(&o.keep, "keep", false, "keep gen.log and data/ afterwards")
	fset.Int64Var(&o.seed, "seed", 0, "generator seed (as hay gen --seed)")
	fset.StringVar(&o.rg, "rg", "rg", "ripgrep `binary` to compare with; empty to skip it")
	fset.BoolVar(&o.compact, "compact", true, "run hay compact after ingest and search the compacted store")
	fset.StringVar(&o.codec, "codec", "", "block `codec` for hay compact (default, zstd, lz4 or none): what a codec trades between the stored size and the full scans")
	fset.BoolVar(&o.brute, "no-index", true, "also time each search with hay search --no-index (brute force), to show what the index saves")
	fset.Usage = func() {
		fmt.Fprintln(stderr, "Usage: hay bench e2e [--lines N] [--dir DIR] [--runs N] [--json] [--keep]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Generates logs, ingests them, then times `hay search -c` (as a process) by")
		fmt.Fprintln(stderr, "needle class against `rg -c -F` on the raw file; Markdown on stdout,")
		fmt.Fprintln(stderr, "progress on stderr. Counts must agree or it fails.")
		fmt.Fprintln(stderr)
		fset.PrintDefaults()
	}
	if err := parseFlags(fset, args); err != nil {
		return err
	}
	if fset.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fset.Arg(0))
	}
	if o.lines < 1 {
		return fmt.Errorf("%w: --lines must be at least 1", errUsage)
	}
	if o.runs < 1 {
		return fmt.Errorf("%w: --runs must be at least 1", errUsage)
	}
	if _, err := segment.ParseCodec(o.codec); err != nil {
		return fmt.Errorf("%w: --codec: %v", errUsage, err)
	}
	if o.codec != "" && !o.compact {
		return fmt.Errorf("%w: --codec is hay compact's; it needs --compact", errUsage)
	}
	hay, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the hay binary: %w", err)
	}
	rg := ""
	if o.rg != "" {
		if p, err := exec.LookPath(o.rg); err == nil {
			rg = p
		} else {
			fmt.Fprintf(stderr, "hay bench e2e: %s not found, timing hay alone\n", o.rg)
		}
	}

	dir := o.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "hay-e2e-"); err != nil {
			return err
		}
		if !o.keep {
			defer os.RemoveAll(dir)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	raw := filepath.Join(dir, "gen.log")
	data := filepath.Join(dir, "data")
	if o.dir != "" && !o.keep {
		defer os.Remove(raw)
		defer os.RemoveAll(data)
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "hay bench e2e: "+format+"\n", a...) }

	rep := &e2eReport{
		Command:    strings.TrimSpace("hay bench e2e " + strings.Join(args, " ")),
		Date:       time.Now().UTC().Format(time.RFC3339),
		CPU:        cpuModel(),
		Cores:      runtime.NumCPU(),
		GoVersion:  runtime.Version(),
		Load:       loadAvg(),
		Lines:      o.lines,
		Seed:       o.seed,
		Runs:       o.runs,
		IndexBytes: -1,
		rawPath:    raw,
	}

	// Generate.
	t0 := time.Now()
	if rep.RawBytes, err = e2eGenerate(raw, logtest.Config{Lines: o.lines, Seed: o.seed}); err != nil {
		return err
	}
	logf("generated %d lines, %s in %.1f s -> %s", o.lines, humanBytes(float64(rep.RawBytes)), time.Since(t0).Seconds(), raw)

	// Ingest, as a process, into a fresh data dir.
	if err := os.RemoveAll(data); err != nil {
		return err
	}
	logf("ingesting into %s", data)
	ing, err := runTimed(exec.Command(hay, "ingest", "--data", data, raw))
	if err != nil {
		return fmt.Errorf("hay ingest: %w", err)
	}
	rep.IngestS, rep.IngestCPU, rep.IngestRSS = ing.wall.Seconds(), ing.cpu.Seconds(), ing.maxRSSKB
	if rep.Stored, err = dirSize(data); err != nil {
		return err
	}
	rep.IndexBytes = e2eIndexBytes(data)
	logf("ingested in %.1f s wall, %.1f s CPU (%s/s wall); stored %s", rep.IngestS, rep.IngestCPU,
		humanBytes(float64(rep.RawBytes)/rep.IngestS), humanBytes(float64(rep.Stored)))
	rep.IngestStored, rep.IngestIndex = rep.Stored, rep.IndexBytes
	if o.compact {
		logf("compacting %s", data)
		args := []string{"compact", "--data", data}
		if o.codec != "" {
			args = append(args, "--codec", o.codec)
		}
		c, err := runTimed(exec.Command(hay, args...))
		if err != nil {
			return fmt.Errorf("hay compact: %w", err)
		}
		rep.CompactS, rep.CompactCPU, rep.CompactRSS = c.wall.Seconds(), c.cpu.Seconds(), c.maxRSSKB
		if rep.Stored, err = dirSize(data); err != nil {
			return err
		}
		rep.IndexBytes = e2eIndexBytes(data)
		logf("compacted in %.1f s wall, %.1f s CPU; stored %s", rep.CompactS, rep.CompactCPU, humanBytes(float64(rep.Stored)))
	}

	// Pick the needles by counting candidates on the raw file.
	logf("counting candidate needles on the raw file")
	rows, err := e2ePickNeedles(raw, o.lines)
	if err != nil {
		return err
	}
	for _, r := range rows {
		logf("  %-16s %-45s %9d lines (%.4f%%)", r.Class, e2eNeedleText(r), r.Count, 100*r.Share)
	}

	if rg != "" {
		if out, err := exec.Command(rg, "--version").Output(); err == nil {
			rep.Rg, _, _ = strings.Cut(strings.TrimSpace(string(out)), "\n")
		}
	}
	source := filepath.Base(raw)
	for i := range rows {
		r := &rows[i]
		r.HayArgs = e2eHayArgs(data, source, r)
		hayCmd := func() *exec.Cmd { return exec.Command(hay, r.HayArgs...) }
		var rgRun func() (timed, int64, error)
		if rg != "" {
			r.RgCommand, rgRun = e2eRg(rg, raw, r)
		}
		logf("timing %s: %s", r.Class, e2eNeedleText(*r))
		bruteArgs := append([]string{r.HayArgs[0], "--no-index"}, r.HayArgs[1:]...)
		var hw, hc, bw, bc, rw, rc []time.Duration
		for k := 0; k <= o.runs; k++ { // run 0 is the warm-up
			t, n, err := countTimed(hayCmd())
			if err != nil {
				return fmt.Errorf("hay %s: %w", strings.Join(r.HayArgs, " "), err)
			}
			if n != r.Count {
				return fmt.Errorf("%s %s: hay counts %d, the raw file has %d matching lines", r.Class, e2eNeedleText(*r), n, r.Count)
			}
			if k > 0 {
				hw, hc = append(hw, t.wall), append(hc, t.cpu)
				r.HayRSSKB = max(r.HayRSSKB, t.maxRSSKB)
			}
			if o.brute {
				t, n, err := countTimed(exec.Command(hay, bruteArgs...))
				if err != nil {
					return fmt.Errorf("hay %s: %w", strings.Join(bruteArgs, " "), err)
				}
				if n != r.Count {
					return fmt.Errorf("%s %s: hay --no-index counts %d, the raw file has %d matching lines", r.Class, e2eNeedleText(*r), n, r.Count)
				}
				if k > 0 {
					bw, bc = append(bw, t.wall), append(bc, t.cpu)
				}
			}
			if rgRun == nil {
				continue
			}
			t, n, err = rgRun()
			if err != nil {
				return fmt.Errorf("%s: %w", r.RgCommand, err)
			}
			if n != r.Count {
				return fmt.Errorf("%s %s: rg counts %d, the raw file has %d matching lines", r.Class, e2eNeedleText(*r), n, r.Count)
			}
			if k > 0 {
				rw, rc = append(rw, t.wall), append(rc, t.cpu)
			}
		}
		r.HayMs, r.HayCPUMs = medianMs(hw), medianMs(hc)
		if o.brute {
			r.BruteMs, r.BruteCPUMs = medianMs(bw), medianMs(bc)
		}
		r.SkippedBlocks = e2eStats(hay, r)
		if rgRun != nil {
			r.RgMs, r.RgCPUMs = medianMs(rw), medianMs(rc)
			r.Speedup = r.RgMs / r.HayMs
			r.CPUSpeedup = r.RgCPUMs / max(r.HayCPUMs, 1e-3)
		}
	}
	rep.Rows = rows
	rep.LoadEnd = loadAvg()
	if rg != "" {
		var all, sel, cpu []float64
		for _, r := range rows {
			all = append(all, r.Speedup)
			cpu = append(cpu, r.CPUSpeedup)
			if r.Class == "absent" || r.Class == "rare" {
				sel = append(sel, r.Speedup)
			}
		}
		rep.Summary.MedianSpeedup = medianF(all)
		rep.Summary.MinSpeedup = slices.Min(all)
		rep.Summary.MinSelective = slices.Min(sel)
		rep.Summary.MedianCPUSpeedup = medianF(cpu)
	}
	if o.jsonOut != "" {
		js, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.jsonOut, append(js, '\n'), 0o644); err != nil {
			return err
		}
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.markdown(stdout)
}

// e2eGenerate writes the corpus of cfg to path, as `hay gen -o` does.
func e2eGenerate(path string, cfg logtest.Config) (n int64, err error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	_, n, err = logtest.Generate(bw, cfg)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// e2eCandidate is a needle (or an AND of two) tried for a class.
type e2eCandidate struct {
	needles []string
	fold    bool
	label   string
}

// e2eClass is a class of search and the candidates tried for it, in order
// of preference; the first whose count fits is taken.
type e2eClass struct {
	name  string
	cands []e2eCandidate
	fits  func(count, lines int64) bool
}

func lit(label string, n ...string) e2eCandidate { return e2eCandidate{needles: n, label: label} }

// e2eClasses are the classes of issue 6. Absent needles come in two kinds:
// rare bytes, and common bytes at both ends (what defeats a prefilter, and
// an n-gram index whose grams all occur). Rare needles too: an incident
// word, and an identifier (random hex) taken from the data, whose grams
// are everywhere.
func e2eClasses() []e2eClass {
	few := func(c, lines int64) bool { return c >= 1 && c <= max(10, lines/10000) }
	return []e2eClass{
		{name: "absent", fits: func(c, _ int64) bool { return c == 0 },
			cands: []e2eCandidate{lit("rare bytes", "needle-absent-7c3e9a"), lit("rare bytes", "zqxjvw_absent")}},
		{name: "absent", fits: func(c, _ int64) bool { return c == 0 },
			cands: []e2eCandidate{lit("common bytes", "status=999"), lit("common bytes", "user_id=0000000")}},
		{name: "rare", fits: few,
			cands: []e2eCandidate{lit("incident word", "panic:"), lit("incident word", "OutOfMemoryError"),
				lit("incident words", "no space left on device"), lit("incident words", "Caused by:"),
				lit("incident words", "connection refused")}},
		{name: "rare", fits: few}, // the id: candidates filled in from the data
		{name: "frequent", fits: func(c, lines int64) bool { return 10*c >= lines && 2*c <= lines },
			cands: []e2eCandidate{lit("logfmt level", "level=info"), lit("method", "GET"), lit("level", "INFO"),
				lit("path", "/healthz"), lit("word", "user")}},
		{name: "case-insensitive", fits: func(c, _ int64) bool { return c >= 1 },
			cands: []e2eCandidate{{needles: []string{"TIMEOUT"}, fold: true, label: "upper case"},
				{needles: []string{"ERROR"}, fold: true, label: "upper case"}}},
		{name: "and", fits: func(c, _ int64) bool { return c >= 1 },
			cands: []e2eCandidate{lit("level AND word", "level=error", "timeout"), lit("AND", "ERROR", "timeout"),
				lit("AND", "GET", "/healthz"), lit("AND", "INFO", "user")}},
	}
}

// e2ePickNeedles counts every candidate on the raw file (bytes.Contains
// per line: the oracle) and returns one row per class.
func e2ePickNeedles(raw string, lines int64) ([]e2eRow, error) {
	classes := e2eClasses()
	// The identifier: the first 32-hex-digit token (a trace id) at or
	// after the middle line, so it exists for any corpus size.
	id, err := e2eMiddleID(raw, lines/2)
	if err != nil {
		return nil, err
	}
	for i := range classes {
		if classes[i].name == "rare" && classes[i].cands == nil {
			classes[i].cands = []e2eCandidate{lit("trace id of the middle line", id)}
		}
	}
	var all []e2eCandidate
	for _, c := range classes {
		all = append(all, c.cands...)
	}
	counts, n, err := e2eCount(raw, all)
	if err != nil {
		return nil, err
	}
	if n != lines {
		return nil, fmt.Errorf("%s has %d lines, want %d", raw, n, lines)
	}
	var rows []e2eRow
	k := 0
	for _, c := range classes {
		chosen := -1
		for j := range c.cands {
			if chosen < 0 && c.fits(counts[k+j], lines) {
				chosen = j
			}
		}
		if chosen < 0 {
			var tried []string
			for j, cand := range c.cands {
				tried = append(tried, fmt.Sprintf("%q: %d", strings.Join(cand.needles, " AND "), counts[k+j]))
			}
			return nil, fmt.Errorf("no needle fits the class %s (%s)", c.name, strings.Join(tried, ", "))
		}
		cand := c.cands[chosen]
		rows = append(rows, e2eRow{Class: c.name, Label: cand.label, Needles: cand.needles, Fold: cand.fold,
			Count: counts[k+chosen], Share: float64(counts[k+chosen]) / float64(lines)})
		k += len(c.cands)
	}
	return rows, nil
}

// e2eMiddleID returns the first run of exactly 32 lower-case hex digits
// in the lines from line from on.
func e2eMiddleID(raw string, from int64) (string, error) {
	f, err := os.Open(raw)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for i := int64(0); sc.Scan(); i++ {
		if i < from {
			continue
		}
		line := sc.Bytes()
		run := 0
		for j := 0; j <= len(line); j++ {
			if j < len(line) && (line[j] >= '0' && line[j] <= '9' || line[j] >= 'a' && line[j] <= 'f') {
				run++
				continue
			}
			if run == 32 {
				return string(line[j-32 : j]), nil
			}
			run = 0
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("no 32-digit hex id in %s after line %d", raw, from)
}

// e2eCount returns how many lines of raw contain each candidate (all of
// its needles; ASCII case folded when fold), and the number of lines. A
// line is what rg and grep count: the bytes up to a '\n', or a last line
// without one.
func e2eCount(raw string, cands []e2eCandidate) ([]int64, int64, error) {
	f, err := os.Open(raw)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	type prep struct {
		needles [][]byte
		fold    bool
	}
	ps := make([]prep, len(cands))
	anyFold := false
	for i, c := range cands {
		ps[i].fold = c.fold
		anyFold = anyFold || c.fold
		for _, n := range c.needles {
			if c.fold {
				n = string(asciiLower([]byte(n)))
			}
			ps[i].needles = append(ps[i].needles, []byte(n))
		}
	}
	counts := make([]int64, len(cands))
	var n int64
	var lower []byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		n++
		if anyFold {
			lower = append(lower[:0], line...)
			asciiLower(lower)
		}
		for i, p := range ps {
			h := line
			if p.fold {
				h = lower
			}
			ok := true
			for _, nd := range p.needles {
				if !bytes.Contains(h, nd) {
					ok = false
					break
				}
			}
			if ok {
				counts[i]++
			}
		}
	}
	return counts, n, sc.Err()
}

func asciiLower(b []byte) []byte {
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return b
}

func e2eNeedleText(r e2eRow) string {
	var q []string
	for _, n := range r.Needles {
		q = append(q, strconv.Quote(n))
	}
	s := strings.Join(q, " AND ")
	if r.Fold {
		s += " (-i)"
	}
	return s
}

// e2eHayArgs is the hay command line for a row: the literal path for one
// needle (grep -F), a LogQL query for an AND.
func e2eHayArgs(data, source string, r *e2eRow) []string {
	args := []string{"search", "--data", data, "-c"}
	if len(r.Needles) == 1 {
		if r.Fold {
			args = append(args, "-i")
		}
		return append(args, "--", r.Needles[0])
	}
	q := "{source=" + strconv.Quote(source) + "}"
	for _, n := range r.Needles {
		if r.Fold {
			n = "(?i)" + n
			q += " |~ " + strconv.Quote(n)
		} else {
			q += " |= " + strconv.Quote(n)
		}
	}
	return append(args, "--query", q)
}

// e2eRg returns the ripgrep command for a row, as text for the report, and
// a function that runs it and returns its count. An AND is a pipeline,
// `rg -F a FILE | rg -c -F b`, timed as a whole (both processes' CPU).
func e2eRg(rg, raw string, r *e2eRow) (string, func() (timed, int64, error)) {
	flags := []string{"-F"}
	if r.Fold {
		flags = append(flags, "-i")
	}
	if len(r.Needles) == 1 {
		args := append(append([]string{"-c"}, flags...), "--", r.Needles[0], raw)
		return "rg " + shellJoin(args), func() (timed, int64, error) { return countTimed(exec.Command(rg, args...)) }
	}
	var parts []string
	var argv [][]string
	for i, n := range r.Needles {
		a := append(slices.Clone(flags), "--", n)
		if i == 0 {
			a = append(a, raw)
		}
		if i == len(r.Needles)-1 {
			a = append([]string{"-c"}, a...)
		}
		argv = append(argv, a)
		parts = append(parts, "rg "+shellJoin(a))
	}
	return strings.Join(parts, " | "), func() (timed, int64, error) { return pipeTimed(rg, argv) }
}

func shellJoin(args []string) string {
	var out []string
	for _, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=/.:,") == "" {
			out = append(out, a)
		} else {
			out = append(out, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
		}
	}
	return strings.Join(out, " ")
}

// timed is one process run's wall time, CPU time (user + sys) and peak
// resident set.
type timed struct {
	wall, cpu time.Duration
	maxRSSKB  int64
}

func procUsage(ps *os.ProcessState) (time.Duration, int64) {
	var rss int64
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss // KiB on Linux
	}
	return ps.UserTime() + ps.SystemTime(), rss
}

// runTimed runs cmd to completion; its stdout is discarded, and its stderr
// is kept for the error.
func runTimed(cmd *exec.Cmd) (timed, error) {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	t0 := time.Now()
	err := cmd.Run()
	t := timed{wall: time.Since(t0)}
	if err != nil {
		return t, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	t.cpu, t.maxRSSKB = procUsage(cmd.ProcessState)
	return t, nil
}

// countTimed runs a counting command (hay search -c, rg -c on one file)
// and parses the count it prints. Exit status 1 with nothing matched is
// grep's "no match", not an error; rg prints nothing then.
func countTimed(cmd *exec.Cmd) (timed, int64, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	err := cmd.Run()
	t := timed{wall: time.Since(t0)}
	if cmd.ProcessState != nil {
		t.cpu, t.maxRSSKB = procUsage(cmd.ProcessState)
	}
	return e2eParseCount(t, err, stdout.String(), stderr.String())
}

func e2eParseCount(t timed, err error, stdout, stderr string) (timed, int64, error) {
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1 && stderr == "") {
		return t, 0, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr))
	}
	s := strings.TrimSpace(stdout)
	if s == "" {
		if err != nil {
			return t, 0, nil
		}
		return t, 0, errors.New("printed no count")
	}
	n, perr := strconv.ParseInt(s, 10, 64)
	if perr != nil {
		return t, 0, fmt.Errorf("printed %q, not a count", s)
	}
	return t, n, nil
}

// pipeTimed runs the processes argv[0] | argv[1] | ... of the binary bin,
// and parses the count the last prints. Wall time spans the whole
// pipeline, CPU time is summed.
func pipeTimed(bin string, argv [][]string) (timed, int64, error) {
	cmds := make([]*exec.Cmd, len(argv))
	var stderr bytes.Buffer
	for i, a := range argv {
		cmds[i] = exec.Command(bin, a...)
		cmds[i].Stderr = &stderr
	}
	var stdout bytes.Buffer
	cmds[len(cmds)-1].Stdout = &stdout
	var closers []io.Closer
	for i := 0; i+1 < len(cmds); i++ {
		r, w, err := os.Pipe()
		if err != nil {
			return timed{}, 0, err
		}
		cmds[i].Stdout, cmds[i+1].Stdin = w, r
		closers = append(closers, r, w)
	}
	t0 := time.Now()
	var err error
	for _, c := range cmds {
		if err = c.Start(); err != nil {
			break
		}
	}
	// The parent's copies of the pipe ends must go, or the readers never
	// see end of file.
	for _, c := range closers {
		c.Close()
	}
	var t timed
	var firstErr error
	for i, c := range cmds {
		if c.Process == nil {
			continue
		}
		werr := c.Wait()
		cpu, rss := procUsage(c.ProcessState)
		t.cpu += cpu
		t.maxRSSKB = max(t.maxRSSKB, rss)
		if i < len(cmds)-1 && werr != nil && firstErr == nil {
			var ee *exec.ExitError
			// A stage that matched nothing exits 1; the last still prints 0.
			if !(errors.As(werr, &ee) && ee.ExitCode() == 1) {
				firstErr = werr
			}
		}
		if i == len(cmds)-1 {
			err = orErr(err, werr)
		}
	}
	t.wall = time.Since(t0)
	if firstErr != nil {
		return t, 0, fmt.Errorf("%w: %s", firstErr, strings.TrimSpace(stderr.String()))
	}
	return e2eParseCount(t, err, stdout.String(), stderr.String())
}

func orErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func medianMs(ds []time.Duration) float64 {
	f := make([]float64, len(ds))
	for i, d := range ds {
		f[i] = float64(d) / 1e6
	}
	return medianF(f)
}

func medianF(f []float64) float64 {
	if len(f) == 0 {
		return 0
	}
	s := slices.Clone(f)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// dirSize is the sum of the sizes of the regular files under dir (du -sb
// without the directories' own blocks).
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	return n, err
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "n/a"
	}
	return strings.Join(f[:3], " ")
}

// e2eStats runs the row's search once more with --stats and returns the
// fraction of blocks the skip index pruned, from the executor's own
// counters (search.Stats), or -1 when the binary does not report it.
func e2eStats(hay string, r *e2eRow) float64 {
	args := append([]string{r.HayArgs[0], "--stats"}, r.HayArgs[1:]...)
	cmd := exec.Command(hay, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Run() // exit status 1 is "no match"; the stats line is what counts
	for line := range strings.Lines(stderr.String()) {
		var blocks, byTime, byStream, byIndex, decoded int64
		if _, err := fmt.Sscanf(line, "hay search: blocks %d, pruned by time %d, by stream %d, by index %d; decoded %d",
			&blocks, &byTime, &byStream, &byIndex, &decoded); err == nil && blocks > 0 {
			return float64(byIndex) / float64(blocks)
		}
	}
	return -1
}

// e2eIndexBytes returns the bytes of skip index in the stored segments
// (segment.Info.SkipBytes summed), or -1 when none can be read.
func e2eIndexBytes(data string) int64 {
	names, err := filepath.Glob(filepath.Join(data, "segments", "*.seg"))
	if err != nil || len(names) == 0 {
		return -1
	}
	var n int64
	for _, name := range names {
		r, err := segment.Open(name)
		if err != nil {
			return -1
		}
		n += r.Info().SkipBytes
		r.Close()
	}
	return n
}

func (rep *e2eReport) markdown(w io.Writer) error {
	bw := bufio.NewWriter(w)
	p := func(format string, a ...any) { fmt.Fprintf(bw, format, a...) }
	p("`%s` · %s · %s, %d cores · %s/%s · load average %s at start, %s at end\n\n",
		rep.Command, rep.Date, rep.CPU, rep.Cores, rep.GoVersion, runtime.GOARCH, rep.Load, rep.LoadEnd)
	mb := float64(rep.RawBytes) / 1e6
	p("- Data: %d generated lines (`hay gen --lines %d --seed %d`), %s raw.\n", rep.Lines, rep.Lines, rep.Seed, humanBytes(float64(rep.RawBytes)))
	p("- Ingest (`hay ingest`, one process): %.2f s wall, **%.0f MB/s**; %.2f s CPU (%.0f MB/s per CPU-second); peak RSS %.0f MB.\n",
		rep.IngestS, mb/rep.IngestS, rep.IngestCPU, mb/max(rep.IngestCPU, 1e-9), float64(rep.IngestRSS)/1024)
	if rep.CompactS > 0 {
		p("- Compaction (`hay compact`, one process): %.2f s wall; %.2f s CPU (%.0f MB/s per CPU-second); peak RSS %.0f MB. Stored %s after ingest (index %.1f%%); the searches read the compacted store.\n",
			rep.CompactS, rep.CompactCPU, mb/max(rep.CompactCPU, 1e-9), float64(rep.CompactRSS)/1024,
			humanBytes(float64(rep.IngestStored)), 100*float64(rep.IngestIndex)/float64(max(rep.IngestStored, 1)))
	}
	idx := "n/a (no v2 segment to read it from)"
	if rep.IndexBytes >= 0 {
		idx = fmt.Sprintf("%s, %.1f%% of the stored size", humanBytes(float64(rep.IndexBytes)), 100*float64(rep.IndexBytes)/float64(rep.Stored))
	}
	p("- Stored: %s (%.2fx smaller than raw); skip index: %s.\n", humanBytes(float64(rep.Stored)), float64(rep.RawBytes)/float64(rep.Stored), idx)
	if rep.Rg != "" {
		p("- Compared with %s on the raw file. ", rep.Rg)
	}
	p("Each time is the median of %d run(s) after a warm-up run (warm page cache); wall time, with user+sys CPU beside it. Counts agree with a naive scan of the raw file.\n\n", rep.Runs)

	p("| class | needle | lines | share | hay ms | hay CPU ms | rg ms | rg CPU ms | hay vs rg (wall) | (CPU) | blocks skipped by the index | hay max RSS | --no-index ms | --no-index CPU ms |\n")
	p("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rep.Rows {
		rgMs, rgCPU, sp, cpusp := "–", "–", "–", "–"
		if rep.Rg != "" {
			rgMs, rgCPU, sp, cpusp = fmt.Sprintf("%.0f", r.RgMs), fmt.Sprintf("%.0f", r.RgCPUMs), speedText(r.Speedup), speedText(r.CPUSpeedup)
		}
		skip := "n/a"
		if r.SkippedBlocks >= 0 {
			skip = fmt.Sprintf("%.1f%%", 100*r.SkippedBlocks)
		}
		bms, bcpu := "–", "–"
		if r.BruteMs > 0 {
			bms, bcpu = fmt.Sprintf("%.0f", r.BruteMs), fmt.Sprintf("%.0f", r.BruteCPUMs)
		}
		p("| %s | %s (%s) | %d | %s | %.0f | %.0f | %s | %s | %s | %s | %s | %.0f MB | %s | %s |\n",
			r.Class, strings.ReplaceAll(e2eNeedleText(r), "|", `\|`), r.Label, r.Count, shareText(r.Share),
			r.HayMs, r.HayCPUMs, rgMs, rgCPU, sp, cpusp, skip, float64(r.HayRSSKB)/1024, bms, bcpu)
	}
	p("\n")
	if rep.Rg != "" {
		s := rep.Summary
		p("hay vs rg by wall time: median over the rows **%s**, worst row %s, worst absent/rare row %s (by CPU time: median %s).\n\n",
			speedText(s.MedianSpeedup), speedText(s.MinSpeedup), speedText(s.MinSelective), speedText(s.MedianCPUSpeedup))
		met := func(ok bool) string {
			if ok {
				return "met"
			}
			return "NOT met"
		}
		p("- never more than 1.5x slower than rg: %s (worst %s)\n", met(s.MinSpeedup >= 1/1.5), speedText(s.MinSpeedup))
		p("- at least 2x faster at the median: %s (%s)\n", met(s.MedianSpeedup >= 2), speedText(s.MedianSpeedup))
		p("- at least 5x faster for absent and rare: %s (worst %s)\n", met(s.MinSelective >= 5), speedText(s.MinSelective))
	}
	p("\nCommands (DATA = the data dir, FILE = the raw file):\n\n")
	for _, r := range rep.Rows {
		hay := slices.Clone(r.HayArgs)
		for i := 1; i < len(hay); i++ {
			if hay[i-1] == "--data" {
				hay[i] = "DATA"
			}
		}
		p("- %s: `hay %s`", r.Class, shellJoin(hay))
		if r.RgCommand != "" {
			p(" · `%s`", strings.ReplaceAll(r.RgCommand, rep.rawPath, "FILE"))
		}
		p("\n")
	}
	return bw.Flush()
}

func speedText(s float64) string {
	switch {
	case s <= 0:
		return "–"
	case s >= 1:
		return fmt.Sprintf("%.2fx faster", s)
	}
	return fmt.Sprintf("%.2fx slower", 1/s)
}

func shareText(s float64) string {
	switch {
	case s == 0:
		return "0%"
	case s < 0.001:
		return fmt.Sprintf("%.4f%%", 100*s)
	}
	return fmt.Sprintf("%.1f%%", 100*s)
}
