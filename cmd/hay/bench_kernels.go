package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"haystack/internal/logtest"
	"haystack/needle"
	"haystack/needle/textbook"
)

// `hay bench kernels` reproduces the seed blog's "string contains" table
// (and Spark PR #59222's row shapes) for the textbook methods, bytes.Index
// and every needle kernel this machine has, plus the acceptance figures of
// issue 2. Every method's hit counts are checked against bytes.Index before
// it is timed: a wrong method must never make the table.

func runBenchKernels(args []string) error {
	return benchKernels(args, os.Stdout, os.Stderr)
}

type kernelsOptions struct {
	lines   int
	needles string
	runs    int
	json    bool
	seed    uint64
	clock   string
}

func benchKernels(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hay bench kernels", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o kernelsOptions
	fs.IntVar(&o.lines, "lines", 100000, "number of generated log lines")
	fs.StringVar(&o.needles, "needles", "", "file of needles, one per line (default: logtest's 25 default needles)")
	fs.IntVar(&o.runs, "runs", 5, "timed runs per needle and method; the median is kept")
	fs.BoolVar(&o.json, "json", false, "write JSON instead of Markdown")
	fs.Uint64Var(&o.seed, "seed", 0, "generator seed (default 0, hay gen's, for which logtest.DefaultNeedles documents hit rates)")
	fs.StringVar(&o.clock, "clock", "cpu", "what to time: cpu (this thread's CPU time, robust on a shared machine) or wall")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: hay bench kernels [--lines N] [--needles FILE] [--runs N] [--json] [--seed N] [--clock cpu|wall]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Times \"contains\" per log line for the textbook methods, bytes.Index and")
		fmt.Fprintln(stderr, "each needle kernel; Markdown on stdout, progress on stderr.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if o.lines < 1 {
		return fmt.Errorf("%w: --lines must be at least 1", errUsage)
	}
	if o.runs < 1 {
		return fmt.Errorf("%w: --runs must be at least 1", errUsage)
	}
	if o.clock != "cpu" && o.clock != "wall" {
		return fmt.Errorf("%w: --clock must be cpu or wall", errUsage)
	}
	needles, err := loadNeedles(o.needles)
	if err != nil {
		return err
	}
	rep := &kernelsReport{
		Command:   strings.TrimSpace("hay bench kernels " + strings.Join(args, " ")),
		Date:      time.Now().UTC().Format(time.RFC3339),
		CPU:       cpuModel(),
		GoVersion: runtime.Version(),
		GOARCH:    runtime.GOARCH,
		Kernels:   needle.Kernels(),
		Runs:      o.runs,
		Seed:      o.seed,
		Clock:     o.clock,
	}
	rep.BestKernel = rep.Kernels[len(rep.Kernels)-1]
	b := &kernelsBench{opts: o, rep: rep, prog: &progress{w: stderr}, clk: newWallClock()}
	if o.clock == "cpu" {
		// Every measurement runs on this goroutine, pinned to one thread
		// so that the thread's CPU time is the goroutine's.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		b.clk = threadCPUClock
	}
	defer b.prog.done()
	if err := b.run(needles); err != nil {
		return err
	}
	b.prog.done()
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.markdown(stdout)
}

// loadNeedles reads one needle per line (a trailing CR is dropped, empty
// lines are skipped), or returns logtest's defaults for an empty name.
func loadNeedles(name string) ([][]byte, error) {
	var strs []string
	if name == "" {
		strs = logtest.DefaultNeedles()
	} else {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("read needles: %w", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			if s := strings.TrimSuffix(sc.Text(), "\r"); s != "" {
				strs = append(strs, s)
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("read needles: %w", err)
		}
	}
	if len(strs) == 0 {
		return nil, fmt.Errorf("%w: no needles", errUsage)
	}
	out := make([][]byte, len(strs))
	for i, s := range strs {
		out[i] = []byte(s)
	}
	return out, nil
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for line := range strings.Lines(string(data)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return runtime.GOARCH
}

// offheap is a set of lines held in one anonymous mapping, outside the Go
// heap (as the blog held its lines in direct memory), each line followed by
// '\n' so that the mapping is also the whole-buffer haystack.
type offheap struct {
	mem   []byte   // the mapping
	buf   []byte   // all lines, each followed by '\n'
	off   []int    // off[i] is where line i starts; off[n] == len(buf)
	lines [][]byte // line i without its '\n', with cap == len
	bytes int64    // sum of line lengths, newlines excluded
}

// newOffheap fills a mapping with n lines from a producer. mk is called
// twice and must produce the same lines both times: once to size the
// mapping and once to fill it, so no line is ever held on the heap in bulk.
func newOffheap(n int, mk func() func(dst []byte) []byte) (*offheap, error) {
	var total int
	next := mk()
	var scratch []byte
	for range n {
		scratch = next(scratch[:0])
		total += len(scratch) + 1
	}
	mem, err := unix.Mmap(-1, 0, total, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("mmap %d bytes: %w", total, err)
	}
	o := &offheap{mem: mem, buf: mem[:total:total], off: make([]int, n+1), lines: make([][]byte, n)}
	next = mk()
	pos := 0
	for i := range n {
		scratch = next(scratch[:0])
		if pos+len(scratch)+1 > total {
			o.close()
			return nil, errors.New("line producer is not deterministic")
		}
		o.off[i] = pos
		copy(mem[pos:], scratch)
		o.lines[i] = mem[pos : pos+len(scratch) : pos+len(scratch)]
		pos += len(scratch)
		mem[pos] = '\n'
		pos++
		o.bytes += int64(len(scratch))
	}
	if pos != total {
		o.close()
		return nil, errors.New("line producer is not deterministic")
	}
	o.off[n] = total
	return o, nil
}

func (o *offheap) close() {
	if o.mem != nil {
		unix.Munmap(o.mem)
		o.mem, o.buf, o.lines = nil, nil, nil
	}
}

// logLines generates the benchmark's log lines with internal/logtest.
func logLines(n int, seed uint64) (*offheap, error) {
	return newOffheap(n, func() func([]byte) []byte {
		g := logtest.NewGenerator(logtest.Config{Lines: int64(n), Seed: int64(seed)})
		return func(dst []byte) []byte {
			line, _, _ := g.Next(dst)
			// One line per entry: a line holding '\n' would be split in
			// the whole-buffer view, so it is cut there.
			if i := bytes.IndexByte(line, '\n'); i >= 0 {
				line = line[:i]
			}
			return line
		}
	})
}

// countWhole counts the lines of o that contain a match, searching the
// whole buffer with index: after a hit the line is counted and the search
// resumes at the next line's start; a hit that runs past its line's end
// (through the '\n') is not a line match, and the search resumes one byte
// later.
func countWhole(o *offheap, m int, index func([]byte) int) int {
	buf, off := o.buf, o.off
	count, li := 0, 0
	for pos := 0; pos < len(buf); {
		j := index(buf[pos:])
		if j < 0 {
			break
		}
		p := pos + j
		for off[li+1] <= p {
			li++
		}
		if p+m < off[li+1] { // the line's '\n' is at off[li+1]-1
			count++
			li++
			pos = off[li]
		} else {
			pos = p + 1
		}
	}
	return count
}

// A lineMethod is one row of the per-line tables: prep prepares a needle
// and returns a pass that counts the lines containing it. Each pass is its
// own loop with a direct call, so no method pays for an indirect call per
// line.
type lineMethod struct {
	name string
	prep func(n []byte) (func(lines [][]byte) int, error)
}

func lineMethods(kernels []string) []lineMethod {
	ms := []lineMethod{
		{"naive", func(n []byte) (func([][]byte) int, error) {
			return func(ls [][]byte) (c int) {
				for _, l := range ls {
					if textbook.Naive(l, n) >= 0 {
						c++
					}
				}
				return c
			}, nil
		}},
		{"horspool", func(n []byte) (func([][]byte) int, error) {
			h := textbook.NewHorspool(n)
			return func(ls [][]byte) (c int) {
				for _, l := range ls {
					if h.Index(l) >= 0 {
						c++
					}
				}
				return c
			}, nil
		}},
		{"kmp", func(n []byte) (func([][]byte) int, error) {
			k := textbook.NewKMP(n)
			return func(ls [][]byte) (c int) {
				for _, l := range ls {
					if k.Index(l) >= 0 {
						c++
					}
				}
				return c
			}, nil
		}},
		{"swar", func(n []byte) (func([][]byte) int, error) {
			return func(ls [][]byte) (c int) {
				for _, l := range ls {
					if textbook.SWAR(l, n) >= 0 {
						c++
					}
				}
				return c
			}, nil
		}},
		{"swar2", func(n []byte) (func([][]byte) int, error) {
			return func(ls [][]byte) (c int) {
				for _, l := range ls {
					if textbook.SWAR2(l, n) >= 0 {
						c++
					}
				}
				return c
			}, nil
		}},
		{"bytes.Index", func(n []byte) (func([][]byte) int, error) {
			return func(ls [][]byte) (c int) {
				for _, l := range ls {
					//lint:ignore S1003 this row times bytes.Index itself
					if bytes.Index(l, n) >= 0 {
						c++
					}
				}
				return c
			}, nil
		}},
	}
	for _, k := range kernels {
		ms = append(ms, lineMethod{"needle " + k, func(n []byte) (func([][]byte) int, error) {
			s, err := needle.NewKernel(n, false, k)
			if err != nil {
				return nil, err
			}
			return func(ls [][]byte) (c int) {
				for _, l := range ls {
					if s.Index(l) >= 0 {
						c++
					}
				}
				return c
			}, nil
		}})
	}
	return ms
}

// minSample is the shortest timed sample: a pass faster than this is
// repeated within the sample, so that timer granularity and scheduling
// noise stay small against it.
const minSample = 2 * time.Millisecond

// A clock reads elapsed time; only differences between readings matter.
type clock func() time.Duration

func newWallClock() clock {
	t0 := time.Now()
	return func() time.Duration { return time.Since(t0) }
}

// threadCPUClock reads the CPU time of the calling OS thread: on a machine
// shared with other work it leaves out the time other processes held the
// core, which wall time would charge to whatever method was running. The
// caller must hold runtime.LockOSThread while it measures.
func threadCPUClock() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic("clock_gettime(CLOCK_THREAD_CPUTIME_ID): " + err.Error())
	}
	return time.Duration(ts.Nano())
}

// measure runs pass once untimed and checks its count against want (the
// bytes.Index oracle; want < 0 skips the check), then times runs samples
// on clk and returns the median time of one pass. A method that disagrees
// with the oracle is never timed.
func measure(clk clock, runs, want int, what string, pass func() int) (time.Duration, error) {
	t0 := clk()
	got := pass()
	first := clk() - t0
	if want >= 0 && got != want {
		return 0, fmt.Errorf("%s: %d hits, bytes.Index has %d: the method is wrong, not timing it", what, got, want)
	}
	reps := 1
	if first < minSample {
		reps = int(minSample/max(first, time.Microsecond)) + 1
	}
	samples := make([]time.Duration, runs)
	for r := range samples {
		t := clk()
		for range reps {
			if c := pass(); c != got {
				return 0, fmt.Errorf("%s: %d hits, then %d: not deterministic", what, got, c)
			}
		}
		samples[r] = (clk() - t) / time.Duration(reps)
	}
	return median(samples), nil
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// progress keeps one line on stderr up to date: section, method, percent.
type progress struct {
	w       io.Writer
	section string
	width   int // length of the line shown, 0 when none
}

func (p *progress) set(method string, done, total int) {
	pct := 100
	if total > 0 {
		pct = 100 * done / total
	}
	msg := fmt.Sprintf("hay bench kernels: %s: %s %d%%", p.section, method, pct)
	// Pad to the previous line's length so no tail of it is left behind.
	fmt.Fprintf(p.w, "\r%-*s", p.width, msg)
	p.width = max(p.width, len(msg))
}

func (p *progress) done() {
	if p.width > 0 {
		fmt.Fprintf(p.w, "\r%*s\r", p.width, "")
		p.width = 0
	}
}

// The report, also the --json output.

type kernelsReport struct {
	Command     string         `json:"command"`
	Date        string         `json:"date"`
	CPU         string         `json:"cpu"`
	GoVersion   string         `json:"go_version"`
	GOARCH      string         `json:"goarch"`
	Kernels     []string       `json:"kernels"`
	BestKernel  string         `json:"best_kernel"`
	Lines       int            `json:"lines"`
	LineBytes   int64          `json:"line_bytes"`
	MeanLineLen float64        `json:"mean_line_len"`
	Runs        int            `json:"runs"`
	Seed        uint64         `json:"seed"`
	Clock       string         `json:"clock"` // "cpu" (thread CPU time) or "wall"
	Needles     []needleInfo   `json:"needles"`
	PerLine     []methodRow    `json:"per_line"`
	Whole       wholeSection   `json:"whole_buffer"`
	Rows        []rowShape     `json:"row_shapes"`
	Pathology   []pathologyRow `json:"pathology"`
}

type needleInfo struct {
	Needle string  `json:"needle"`
	Hits   int     `json:"hits"`
	Rate   float64 `json:"rate"` // fraction of lines
}

// methodRow summarizes one method over all needles: per needle the median
// of the runs, then the median, min and max of those across needles.
type methodRow struct {
	Method       string    `json:"method"`
	MedianMs     float64   `json:"median_ms"`
	MinMs        float64   `json:"min_ms"`
	MaxMs        float64   `json:"max_ms"`
	NsPerLine    float64   `json:"ns_per_line,omitempty"`
	GBps         float64   `json:"gb_per_s"`
	VsNaive      float64   `json:"vs_naive,omitempty"` // naive median ms / this median ms
	VsBytesIndex float64   `json:"vs_bytes_index"`     // bytes.Index median ms / this median ms
	NeedleMs     []float64 `json:"needle_ms"`
	Hits         []int     `json:"hits"`
}

type wholeSection struct {
	BufferBytes  int64       `json:"buffer_bytes"`
	Rows         []methodRow `json:"rows"`
	AbsentNeedle string      `json:"absent_needle"`
	AbsentByte   int         `json:"absent_byte"`
	CeilingMs    float64     `json:"indexbyte_ms"`
	CeilingGBps  float64     `json:"indexbyte_gb_per_s"`
	Absent       []absentRow `json:"absent"`
}

type absentRow struct {
	Method    string  `json:"method"`
	Ms        float64 `json:"ms"`
	GBps      float64 `json:"gb_per_s"`
	OfCeiling float64 `json:"of_indexbyte"`
}

type rowShape struct {
	RowLen   int     `json:"row_len"`
	Case     string  `json:"case"`
	Needle   string  `json:"needle"`
	Rows     int     `json:"rows"`
	Hits     int     `json:"hits"`
	Method   string  `json:"method"`
	NsPerRow float64 `json:"ns_per_row"`
}

type pathologyRow struct {
	Case         string  `json:"case"`
	Needle       string  `json:"needle"`
	Unit         string  `json:"unit"` // what a ns figure is per: "line" or "row"
	Kernel       string  `json:"kernel"`
	NeedleNs     float64 `json:"needle_ns"`
	BytesIndexNs float64 `json:"bytes_index_ns"`
	Ratio        float64 `json:"ratio"` // needle time / bytes.Index time
	Pass         bool    `json:"pass"`
}

// kernelsBench carries the state of one run.
type kernelsBench struct {
	opts kernelsOptions
	clk  clock
	rep  *kernelsReport
	prog *progress
}

func (b *kernelsBench) run(needles [][]byte) error {
	for _, n := range needles {
		if len(n) == 0 {
			return fmt.Errorf("%w: empty needle", errUsage)
		}
	}
	b.prog.section = "generating lines"
	b.prog.set("logtest", 0, 1)
	lines, err := logLines(b.opts.lines, b.opts.seed)
	if err != nil {
		return err
	}
	defer lines.close()
	rep := b.rep
	rep.Lines = len(lines.lines)
	rep.LineBytes = lines.bytes
	rep.MeanLineLen = float64(lines.bytes) / float64(len(lines.lines))

	methods := lineMethods(rep.Kernels)
	oracle, err := b.perLine(lines, needles, methods)
	if err != nil {
		return err
	}
	if err := b.wholeBuffer(lines, needles, oracle); err != nil {
		return err
	}
	if err := b.rowShapes(methods); err != nil {
		return err
	}
	return b.pathology(lines, methods)
}

// perLine fills the needle list and the per-line table, and returns the
// bytes.Index hit count of each needle.
func (b *kernelsBench) perLine(lines *offheap, needles [][]byte, methods []lineMethod) ([]int, error) {
	rep := b.rep
	b.prog.section = "per line"
	oracle := make([]int, len(needles))
	for i, n := range needles {
		b.prog.set("bytes.Index oracle", i, len(needles))
		for _, l := range lines.lines {
			if bytes.Contains(l, n) {
				oracle[i]++
			}
		}
		rep.Needles = append(rep.Needles, needleInfo{
			Needle: string(n), Hits: oracle[i], Rate: float64(oracle[i]) / float64(len(lines.lines)),
		})
	}
	total := len(methods) * len(needles)
	for mi, m := range methods {
		row := methodRow{Method: m.name}
		var times []time.Duration
		for i, n := range needles {
			b.prog.set(m.name, mi*len(needles)+i, total)
			pass, err := m.prep(n)
			if err != nil {
				return nil, err
			}
			d, err := measure(b.clk, b.opts.runs, oracle[i], fmt.Sprintf("%s, needle %q", m.name, n), func() int { return pass(lines.lines) })
			if err != nil {
				return nil, err
			}
			times = append(times, d)
			row.NeedleMs = append(row.NeedleMs, ms(d))
			row.Hits = append(row.Hits, oracle[i])
		}
		summarize(&row, times, lines.bytes)
		row.NsPerLine = row.MedianMs * 1e6 / float64(len(lines.lines))
		rep.PerLine = append(rep.PerLine, row)
	}
	ratios(rep.PerLine, true)
	return oracle, nil
}

func summarize(row *methodRow, times []time.Duration, nbytes int64) {
	med := median(times)
	row.MedianMs = ms(med)
	row.MinMs = ms(slices.Min(times))
	row.MaxMs = ms(slices.Max(times))
	row.GBps = float64(nbytes) / float64(med) // bytes per ns == GB/s
}

// ratios fills the speedups against the naive and bytes.Index rows.
func ratios(rows []methodRow, naive bool) {
	var naiveMs, bytesMs float64
	for _, r := range rows {
		switch r.Method {
		case "naive":
			naiveMs = r.MedianMs
		case "bytes.Index":
			bytesMs = r.MedianMs
		}
	}
	for i := range rows {
		if naive && naiveMs > 0 {
			rows[i].VsNaive = naiveMs / rows[i].MedianMs
		}
		if bytesMs > 0 {
			rows[i].VsBytesIndex = bytesMs / rows[i].MedianMs
		}
	}
}

// wholeBuffer times the whole-buffer search with hits mapped back to lines,
// and the absent-needle throughput against bytes.IndexByte's ceiling.
func (b *kernelsBench) wholeBuffer(lines *offheap, needles [][]byte, oracle []int) error {
	rep := b.rep
	w := &rep.Whole
	w.BufferBytes = int64(len(lines.buf))
	b.prog.section = "whole buffer"
	type idx struct {
		name string
		prep func(n []byte) (func([]byte) int, error)
	}
	idxs := []idx{{"bytes.Index", func(n []byte) (func([]byte) int, error) {
		return func(h []byte) int { return bytes.Index(h, n) }, nil
	}}}
	for _, k := range rep.Kernels {
		idxs = append(idxs, idx{"needle " + k, func(n []byte) (func([]byte) int, error) {
			s, err := needle.NewKernel(n, false, k)
			if err != nil {
				return nil, err
			}
			return s.Index, nil
		}})
	}
	total := len(idxs) * len(needles)
	for mi, m := range idxs {
		row := methodRow{Method: m.name}
		var times []time.Duration
		for i, n := range needles {
			b.prog.set(m.name, mi*len(needles)+i, total)
			index, err := m.prep(n)
			if err != nil {
				return err
			}
			d, err := measure(b.clk, b.opts.runs, oracle[i], fmt.Sprintf("whole buffer, %s, needle %q", m.name, n),
				func() int { return countWhole(lines, len(n), index) })
			if err != nil {
				return err
			}
			times = append(times, d)
			row.NeedleMs = append(row.NeedleMs, ms(d))
			row.Hits = append(row.Hits, oracle[i])
		}
		summarize(&row, times, w.BufferBytes)
		w.Rows = append(w.Rows, row)
	}
	ratios(w.Rows, false)

	// The ceiling: bytes.IndexByte for a byte the buffer lacks.
	b.prog.set("bytes.IndexByte ceiling", 0, 1)
	var seen [256]bool
	for _, c := range lines.buf {
		seen[c] = true
	}
	w.AbsentByte = -1
	for c := range seen {
		if !seen[c] {
			w.AbsentByte = c
			break
		}
	}
	if w.AbsentByte < 0 {
		return errors.New("whole buffer: every byte value occurs, no absent byte for the ceiling")
	}
	ab := byte(w.AbsentByte)
	d, err := measure(b.clk, b.opts.runs, -1, "bytes.IndexByte", func() int { return bytes.IndexByte(lines.buf, ab) })
	if err != nil {
		return err
	}
	w.CeilingMs = ms(d)
	w.CeilingGBps = float64(w.BufferBytes) / float64(d)

	// The absent needle: the first needle that matches no line, else a
	// fixed one checked to be absent.
	var absent []byte
	for i, n := range needles {
		if oracle[i] == 0 && !bytes.Contains(n, []byte{'\n'}) {
			absent = n
			break
		}
	}
	if absent == nil {
		absent = []byte("hay-absent-needle-7Qz")
	}
	if bytes.Contains(lines.buf, absent) {
		return fmt.Errorf("whole buffer: absent needle %q occurs", absent)
	}
	w.AbsentNeedle = string(absent)
	for mi, m := range idxs {
		b.prog.set(m.name+" absent", mi, len(idxs))
		index, err := m.prep(absent)
		if err != nil {
			return err
		}
		d, err := measure(b.clk, b.opts.runs, -1, m.name+" absent",
			func() int { return index(lines.buf) })
		if err != nil {
			return err
		}
		gbps := float64(w.BufferBytes) / float64(d)
		w.Absent = append(w.Absent, absentRow{Method: m.name, Ms: ms(d), GBps: gbps, OfCeiling: gbps / w.CeilingGBps})
	}
	return nil
}

// sparkCase is one of Spark PR #59222's row shapes.
type sparkCase struct {
	name   string
	needle func(rowLen int) []byte
	row    func(dst []byte, rowLen int, r *lcg) []byte
}

// lcg is a tiny deterministic generator for filler text, so that the row
// shapes do not depend on logtest.
type lcg uint64

func (r *lcg) next() uint64 {
	*r = *r*6364136223846793005 + 1442695040888963407
	return uint64(*r >> 33)
}

// fillerWords are log-ish words in lower case, digits and '=', so that the
// upper-case and '#' needles below are certainly absent.
var fillerWords = strings.Fields("the request user error info debug connection timeout retry status=200 " +
	"latency_ms=12 service=api took 17ms from to ok done starting stopping worker queue id=42 path=/v1/items")

func filler(dst []byte, n int, r *lcg) []byte {
	start := len(dst)
	for len(dst)-start < n {
		dst = append(dst, fillerWords[r.next()%uint64(len(fillerWords))]...)
		dst = append(dst, ' ')
	}
	return dst[:start+n]
}

var sparkCases = []sparkCase{
	{"not present", func(int) []byte { return []byte("QXZ") }, filler},
	{"frequent first byte", func(int) []byte { return []byte(" #q") }, filler},
	{"found in the middle", func(int) []byte { return []byte("MIDDLE") },
		func(dst []byte, n int, r *lcg) []byte {
			start := len(dst)
			dst = filler(dst, n, r)
			copy(dst[start+max(0, n/2-3):], "MIDDLE")
			return dst
		}},
	{"all a, aQa", func(int) []byte { return []byte("aQa") },
		func(dst []byte, n int, _ *lcg) []byte {
			for range n {
				dst = append(dst, 'a')
			}
			return dst
		}},
	{"needle = row", func(n int) []byte { r := lcg(7); return filler(nil, n, &r) },
		func(dst []byte, n int, _ *lcg) []byte { r := lcg(7); return filler(dst, n, &r) }},
}

var sparkRowLens = []int{16, 128, 1024}

// sparkBytes is the size of each row-shape data set: about 1 MiB at the
// default size (L2-resident, as the PR's microbenchmarks were), less for a
// small --lines so tests stay fast.
func (b *kernelsBench) sparkBytes() int {
	return min(1<<20, max(16<<10, b.opts.lines*16))
}

func (b *kernelsBench) rowShapes(methods []lineMethod) error {
	b.prog.section = "row shapes"
	total := len(sparkRowLens) * len(sparkCases) * len(methods)
	done := 0
	for _, rl := range sparkRowLens {
		nrows := max(16, b.sparkBytes()/rl)
		for _, sc := range sparkCases {
			r := lcg(b.opts.seed)
			rows, err := newOffheap(nrows, func() func([]byte) []byte {
				r = lcg(b.opts.seed)
				return func(dst []byte) []byte { return sc.row(dst, rl, &r) }
			})
			if err != nil {
				return err
			}
			n := sc.needle(rl)
			want := 0
			for _, l := range rows.lines {
				if bytes.Contains(l, n) {
					want++
				}
			}
			for _, m := range methods {
				b.prog.set(fmt.Sprintf("%d-byte rows, %s, %s", rl, sc.name, m.name), done, total)
				done++
				pass, err := m.prep(n)
				if err != nil {
					rows.close()
					return err
				}
				d, err := measure(b.clk, b.opts.runs, want, fmt.Sprintf("%d-byte rows, %s, %s", rl, sc.name, m.name),
					func() int { return pass(rows.lines) })
				if err != nil {
					rows.close()
					return err
				}
				b.rep.Rows = append(b.rep.Rows, rowShape{
					RowLen: rl, Case: sc.name, Needle: string(n), Rows: nrows, Hits: want,
					Method: m.name, NsPerRow: float64(d) / float64(nrows),
				})
			}
			rows.close()
		}
	}
	return nil
}

// pathology measures issue 2's no-pathology cases: needle's best kernel
// must be within 3x of bytes.Index.
func (b *kernelsBench) pathology(lines *offheap, methods []lineMethod) error {
	rep := b.rep
	best := "needle " + rep.BestKernel
	// aQa in all-'a' rows, from the row-shape section.
	for _, rl := range sparkRowLens {
		var nb, bi float64
		for _, r := range rep.Rows {
			if r.RowLen == rl && r.Case == "all a, aQa" {
				switch r.Method {
				case best:
					nb = r.NsPerRow
				case "bytes.Index":
					bi = r.NsPerRow
				}
			}
		}
		rep.Pathology = append(rep.Pathology, pathologyRow{
			Case: fmt.Sprintf("all-'a' %d-byte rows", rl), Needle: "aQa", Unit: "row",
			Kernel: rep.BestKernel, NeedleNs: nb, BytesIndexNs: bi,
		})
	}
	// The rest over the log lines.
	hundred := longNeedle(lines, 100)
	cases := []struct{ name, needle string }{
		{"common first and last bytes", " timeout"},
		{"common first and last bytes", "status=50"},
		{"1-byte needle", "="},
		{"100-byte needle (from a line)", string(hundred)},
	}
	var byName = map[string]lineMethod{}
	for _, m := range methods {
		byName[m.name] = m
	}
	b.prog.section = "pathology"
	for ci, c := range cases {
		n := []byte(c.needle)
		want := 0
		for _, l := range lines.lines {
			if bytes.Contains(l, n) {
				want++
			}
		}
		var ns [2]float64
		for j, name := range []string{best, "bytes.Index"} {
			b.prog.set(name, 2*ci+j, 2*len(cases))
			pass, err := byName[name].prep(n)
			if err != nil {
				return err
			}
			d, err := measure(b.clk, b.opts.runs, want, fmt.Sprintf("pathology, %s, needle %q", name, n),
				func() int { return pass(lines.lines) })
			if err != nil {
				return err
			}
			ns[j] = float64(d) / float64(len(lines.lines))
		}
		rep.Pathology = append(rep.Pathology, pathologyRow{
			Case: c.name, Needle: c.needle, Unit: "line", Kernel: rep.BestKernel,
			NeedleNs: ns[0], BytesIndexNs: ns[1],
		})
	}
	for i := range rep.Pathology {
		p := &rep.Pathology[i]
		if p.BytesIndexNs > 0 {
			p.Ratio = p.NeedleNs / p.BytesIndexNs
		}
		p.Pass = p.Ratio <= 3
	}
	return nil
}

// longNeedle returns n bytes from the end of a line in the middle of the
// corpus that is at least n bytes long (so the needle is found at least
// once), or n bytes of filler when no line is that long.
func longNeedle(o *offheap, n int) []byte {
	ls := o.lines
	for i := range ls {
		l := ls[(len(ls)/2+i)%len(ls)]
		if len(l) >= n {
			return slices.Clone(l[len(l)-n:])
		}
	}
	r := lcg(1)
	return filler(nil, n, &r)
}

// Markdown output.

func (rep *kernelsReport) markdown(w io.Writer) error {
	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	p("# hay bench kernels\n\n")
	p("`%s` · %s · %s · %s/%s · needle kernels: %s (best: %s)\n\n", rep.Command, rep.Date, rep.CPU, rep.GoVersion, rep.GOARCH,
		strings.Join(rep.Kernels, ", "), rep.BestKernel)
	clk := "thread CPU time"
	if rep.Clock == "wall" {
		clk = "wall time"
	}
	p("%d lines, %.1f MB, mean %.1f bytes a line, held off the Go heap (anonymous mmap); %d needles; median of %d runs per needle; timed by %s.\n\n",
		rep.Lines, float64(rep.LineBytes)/1e6, rep.MeanLineLen, len(rep.Needles), rep.Runs, clk)

	p("## Contains, line by line\n\n")
	p("Per needle the median of the runs of one pass over all lines; then median / min / max across needles. × naive and × bytes.Index are speedups (their median ms / this median ms).\n\n")
	p("| method | median ms | min ms | max ms | ns/line | GB/s | × naive | × bytes.Index |\n")
	p("|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rep.PerLine {
		p("| %s | %s | %s | %s | %.1f | %.2f | %.2f | %.2f |\n",
			r.Method, fmtMs(r.MedianMs), fmtMs(r.MinMs), fmtMs(r.MaxMs), r.NsPerLine, r.GBps, r.VsNaive, r.VsBytesIndex)
	}
	p("\n")

	wh := rep.Whole
	p("## Whole buffer, hits mapped back to lines\n\n")
	p("All lines joined with \"\\n\" (%.1f MB); each hit counts its line and the search resumes at the next line.\n\n", float64(wh.BufferBytes)/1e6)
	p("| method | median ms | min ms | max ms | GB/s | × bytes.Index |\n")
	p("|---|--:|--:|--:|--:|--:|\n")
	for _, r := range wh.Rows {
		p("| %s | %s | %s | %s | %.2f | %.2f |\n", r.Method, fmtMs(r.MedianMs), fmtMs(r.MinMs), fmtMs(r.MaxMs), r.GBps, r.VsBytesIndex)
	}
	p("\nAbsent needle %s over the whole buffer, against bytes.IndexByte of an absent byte (0x%02X), the ceiling:\n\n", mdNeedle(wh.AbsentNeedle), wh.AbsentByte)
	p("| method | ms | GB/s | of IndexByte |\n|---|--:|--:|--:|\n")
	p("| bytes.IndexByte (absent byte) | %s | %.2f | 100%% |\n", fmtMs(wh.CeilingMs), wh.CeilingGBps)
	for _, a := range wh.Absent {
		mark := ""
		if a.Method == "needle "+rep.BestKernel {
			mark = " (issue 2: ≥ 50%: " + passFail(a.OfCeiling >= 0.5) + ")"
		}
		p("| %s | %s | %.2f | %.0f%%%s |\n", a.Method, fmtMs(a.Ms), a.GBps, 100*a.OfCeiling, mark)
	}
	p("\n")

	p("## Spark PR #59222 row shapes (ns per row)\n\n")
	for _, rl := range sparkRowLens {
		var rows []rowShape
		for _, r := range rep.Rows {
			if r.RowLen == rl {
				rows = append(rows, r)
			}
		}
		if len(rows) == 0 {
			continue
		}
		p("%d-byte rows (%d rows):\n\n", rl, rows[0].Rows)
		p("| method |")
		for _, c := range sparkCases {
			p(" %s |", c.name)
		}
		p("\n|---|")
		for range sparkCases {
			p("--:|")
		}
		p("\n")
		var methods []string
		for _, r := range rows {
			if !slices.Contains(methods, r.Method) {
				methods = append(methods, r.Method)
			}
		}
		for _, m := range methods {
			p("| %s |", m)
			for _, c := range sparkCases {
				for _, r := range rows {
					if r.Method == m && r.Case == c.name {
						p(" %.1f |", r.NsPerRow)
					}
				}
			}
			p("\n")
		}
		p("\n")
	}

	p("## Pathologies (issue 2: needle %s within 3x of bytes.Index)\n\n", rep.BestKernel)
	p("| case | needle | needle ns | bytes.Index ns | ratio | verdict |\n|---|---|--:|--:|--:|---|\n")
	for _, c := range rep.Pathology {
		p("| %s | %s | %.1f/%s | %.1f/%s | %.2f | %s |\n", c.Case, mdNeedle(c.Needle), c.NeedleNs, c.Unit, c.BytesIndexNs, c.Unit, c.Ratio, passFail(c.Pass))
	}
	p("\n")

	p("## Needles\n\n")
	p("With each method's median ms for the needle, line by line.\n\n")
	p("| # | needle | lines | hit rate |")
	for _, r := range rep.PerLine {
		p(" %s |", r.Method)
	}
	p("\n|--:|---|--:|--:|%s\n", strings.Repeat("--:|", len(rep.PerLine)))
	for i, n := range rep.Needles {
		p("| %d | %s | %d | %.3f%% |", i+1, mdNeedle(n.Needle), n.Hits, 100*n.Rate)
		for _, r := range rep.PerLine {
			if i < len(r.NeedleMs) {
				p(" %s |", fmtMs(r.NeedleMs[i]))
			}
		}
		p("\n")
	}
	return bw.Flush()
}

// fmtMs prints milliseconds with three significant digits or more, so that
// sub-millisecond figures do not round to 0.00.
func fmtMs(x float64) string {
	switch {
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	case x >= 1:
		return fmt.Sprintf("%.2f", x)
	default:
		return fmt.Sprintf("%.3f", x)
	}
}

func passFail(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// mdNeedle quotes a needle for a Markdown table cell: Go-quoted (so spaces
// and control bytes show), inside a code span, with '|' escaped.
func mdNeedle(s string) string {
	q := fmt.Sprintf("%q", s)
	q = strings.ReplaceAll(q, "|", `\|`)
	if strings.Contains(q, "`") {
		return q
	}
	return "`" + q + "`"
}
