package logtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func gen(t testing.TB, cfg Config) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, b, err := Generate(&buf, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if b != int64(buf.Len()) {
		t.Fatalf("Generate reported %d bytes, wrote %d", b, buf.Len())
	}
	if got := int64(bytes.Count(buf.Bytes(), []byte("\n"))); got != n {
		t.Fatalf("Generate reported %d lines, wrote %d", n, got)
	}
	return buf.Bytes()
}

func splitLines(data []byte) [][]byte {
	if len(data) == 0 {
		return nil
	}
	return bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
}

func sum(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// golden is the SHA-256 of Generate(Config{Lines: 3000}): a change means
// the output changed, on purpose (update it, and the needle table) or by a
// platform dependence (a bug: the output must be the same everywhere).
const golden = "c1a3664450b3f543fd373d32fac3762ab6793858b1b0ba31405c76fdbcbee8fa"

func TestDeterminism(t *testing.T) {
	cfg := Config{Lines: 3000}
	a := gen(t, cfg)
	b := gen(t, cfg)
	if !bytes.Equal(a, b) {
		t.Fatal("same config, different output")
	}
	if got := sum(a); got != golden {
		t.Errorf("output SHA-256 = %s, want %s (did the generator change?)", got, golden)
	}
	for _, c := range []Config{
		{Lines: 3000, Seed: 1},
		{Lines: 3000, Seed: -1},
		{Lines: 3000, Streams: 9},
		{Lines: 3000, MeanLen: 256},
		{Lines: 3000, Span: time.Hour},
		{Lines: 3000, Start: DefaultStart().Add(time.Millisecond)},
	} {
		if bytes.Equal(gen(t, c), a) {
			t.Errorf("%+v gives the same output as the default", c)
		}
	}
	// Seed 0 and the default Config are the same thing.
	if !bytes.Equal(gen(t, Config{Lines: 3000, MeanLen: 255, Streams: 8, Span: 24 * time.Hour, Start: DefaultStart()}), a) {
		t.Error("explicit defaults differ from zero values")
	}
}

// TestGeneratorMatchesGenerate checks that the line API gives the same bytes
// as Generate.
func TestGeneratorMatchesGenerate(t *testing.T) {
	cfg := Config{Lines: 5000, Seed: 42, Streams: 5}
	want := gen(t, cfg)
	g := NewGenerator(cfg)
	var got []byte
	for range cfg.Lines {
		got, _, _ = g.Next(got)
		got = append(got, '\n')
	}
	if !bytes.Equal(got, want) {
		t.Fatal("Generator.Next output differs from Generate")
	}
}

func TestExactLines(t *testing.T) {
	for _, n := range []int64{1, 2, 3, 17, 1000, 12345} {
		data := gen(t, Config{Lines: n, Seed: n})
		if got := int64(bytes.Count(data, []byte("\n"))); got != n {
			t.Errorf("Lines %d: got %d lines", n, got)
		}
		if data[len(data)-1] != '\n' {
			t.Errorf("Lines %d: no final newline", n)
		}
	}
	if data := gen(t, Config{}); len(data) != 0 {
		t.Errorf("zero Config wrote %d bytes", len(data))
	}
}

func TestSize(t *testing.T) {
	for _, size := range []int64{1, 100, 4096, 1 << 20, 5_000_000} {
		data := gen(t, Config{Size: size})
		n := int64(len(data))
		lines := splitLines(data)
		last := int64(len(lines[len(lines)-1]) + 1)
		// Lines are written until the size is reached: at least size,
		// and less than size plus the last line.
		if n < size || n-last >= size {
			t.Errorf("Size %d: wrote %d bytes, last line %d", size, n, last)
		}
	}
}

func TestMeanLen(t *testing.T) {
	for _, mean := range []int{128, 200, 255, 512, 1024, 4096} {
		lines := int64(4_000_000 / mean)
		data := gen(t, Config{Lines: lines, MeanLen: mean, Seed: int64(mean)})
		got := float64(len(data)-int(lines)) / float64(lines)
		if got < 0.9*float64(mean) || got > 1.1*float64(mean) {
			t.Errorf("MeanLen %d: mean %.1f over %d lines", mean, got, lines)
		} else {
			t.Logf("MeanLen %d: mean %.1f", mean, got)
		}
	}
}

func TestLengthSpread(t *testing.T) {
	lines := splitLines(gen(t, Config{Lines: 100_000}))
	lens := make([]int, len(lines))
	for i, l := range lines {
		lens[i] = len(l)
	}
	slices.Sort(lens)
	pct := func(p int) int { return lens[len(lens)*p/100] }
	t.Logf("length p1 %d p10 %d p50 %d p90 %d p99 %d max %d", pct(1), pct(10), pct(50), pct(90), pct(99), lens[len(lens)-1])
	if pct(10) > 150 || pct(90) < 330 || pct(99) < 600 || lens[len(lens)-1] < 2000 || lens[len(lens)-1] > 16*255 {
		t.Error("length spread is not realistic")
	}
}

// Timestamp layouts the generator writes; an ingester recognizes them all.
var layouts = []string{
	"2006-01-02T15:04:05.000Z",
	"2006-01-02T15:04:05.000000Z",
	"2006-01-02 15:04:05,000",
}

// leadingTS parses the timestamp a line starts with: bare, after "ts=",
// or in a JSON object's "time" member.
func leadingTS(line []byte) (time.Time, bool) {
	if len(line) > 0 && line[0] == '{' {
		var v struct {
			Time string `json:"time"`
		}
		if err := json.Unmarshal(line, &v); err != nil {
			return time.Time{}, false
		}
		ts, err := time.Parse(time.RFC3339Nano, v.Time)
		return ts, err == nil
	}
	s := string(line)
	s = strings.TrimPrefix(s, "ts=")
	for _, l := range layouts {
		if len(s) >= len(l) && (len(s) == len(l) || s[len(l)] == ' ') {
			if ts, err := time.Parse(l, s[:len(l)]); err == nil {
				return ts, true
			}
		}
	}
	return time.Time{}, false
}

// continuation matches the lines of stack traces, which carry no timestamp.
var continuation = regexp.MustCompile(`^(` +
	`\tat [\w$./]+\([\w]+\.java:\d+\)` + // java frame
	`|\t\.\.\. \d+ more` +
	`|Caused by: [a-z][\w.]*\.[A-Z]\w*: .*` +
	`|[a-z][\w.]*\.[A-Z]\w*(Exception|Error): .*` + // exception
	`|goroutine \d+ \[running\]:` +
	`|[\w./]+\.(\(\*\w+\)\.)?\w+\(0xc[0-9a-f]+, \{0x[0-9a-f]+, 0xc[0-9a-f]+\}\)` + // go function
	`|\t/[\w/.]+\.go:\d+ \+0x[0-9a-f]+` + // go file:line
	`|created by [\w./()*]+ in goroutine \d+` +
	`)$`)

var logfmtHeader = regexp.MustCompile(`^ts=\S+ level=(\w+) app=(\S+)(?: host=(\S+))? msg="`)

// TestLineShape checks every line of a few corpora: no line breaks inside,
// a parseable leading timestamp that never decreases and matches Next's,
// or a stack-trace line right after an error line or another trace line.
func TestLineShape(t *testing.T) {
	for _, cfg := range []Config{
		{Lines: 100_000},
		{Lines: 20_000, Seed: 7, Streams: 1},
		{Lines: 20_000, Seed: 8, Streams: 3, Span: time.Second, MeanLen: 128},
		{Lines: 20_000, Seed: 9, Streams: 37, Span: 365 * 24 * time.Hour, MeanLen: 1000,
			Start: time.Date(2025, 3, 30, 1, 59, 0, 0, time.FixedZone("CET", 3600))},
	} {
		t.Run(fmt.Sprintf("seed%d-streams%d", cfg.Seed, cfg.Streams), func(t *testing.T) {
			checkShape(t, cfg)
		})
	}
}

func checkShape(t *testing.T, cfg Config) {
	g := NewGenerator(cfg)
	start := cfg.Start
	if start.IsZero() {
		start = DefaultStart()
	}
	span := cfg.Span
	if span == 0 {
		span = DefaultSpan
	}
	var (
		last                   time.Time
		prevLevel              string
		prevCont               bool
		formats                = map[string]int{}
		levels                 = map[string]int{}
		conts, javaConts, goEs int
		buf                    []byte
		si                     int
		ts                     time.Time
	)
	for i := range cfg.Lines {
		buf, si, ts = g.Next(buf[:0])
		if si < 0 || si >= g.NumStreams() {
			t.Fatalf("line %d: stream %d", i, si)
		}
		if bytes.ContainsAny(buf, "\r\n") {
			t.Fatalf("line %d has a line break: %q", i, buf)
		}
		if ts.Before(last) {
			t.Fatalf("line %d: timestamp %v before %v", i, ts, last)
		}
		if ts.Before(start) || !ts.Before(start.Add(span)) {
			t.Fatalf("line %d: timestamp %v outside [%v, +%v)", i, ts, start, span)
		}
		if i == 0 && !ts.Equal(start) {
			t.Fatalf("first line at %v, want Start %v", ts, start)
		}
		last = ts
		parsed, ok := leadingTS(buf)
		if !ok {
			if !continuation.Match(buf) {
				t.Fatalf("line %d: no timestamp and not a stack trace: %q", i, buf)
			}
			if !prevCont && prevLevel != "error" && prevLevel != "fatal" {
				t.Fatalf("line %d: stack trace after a %s line: %q", i, prevLevel, buf)
			}
			conts++
			if bytes.HasPrefix(buf, []byte("\tat ")) {
				javaConts++
			}
			if bytes.HasPrefix(buf, []byte("goroutine ")) {
				goEs++
			}
			prevCont = true
			continue
		}
		prevCont = false
		// The text is the timestamp Next returned, to the format's precision.
		if d := ts.Sub(parsed); d < 0 || d >= time.Millisecond {
			t.Fatalf("line %d: text says %v, Next says %v: %q", i, parsed, ts, buf)
		}
		f := g.Stream(si).Format
		formats[f]++
		var lvl string
		switch f {
		case "json":
			var v map[string]any
			if err := json.Unmarshal(buf, &v); err != nil {
				t.Fatalf("line %d: bad JSON %v: %s", i, err, buf)
			}
			lvl, _ = v["level"].(string)
			if v["service"] != g.Stream(si).App || v["host"] != nil && v["host"] != g.Stream(si).Host {
				t.Fatalf("line %d: service/host do not match stream %+v: %s", i, g.Stream(si), buf)
			}
		case "logfmt":
			m := logfmtHeader.FindSubmatch(buf)
			if m == nil || string(m[2]) != g.Stream(si).App || m[3] != nil && string(m[3]) != g.Stream(si).Host {
				t.Fatalf("line %d: bad logfmt header for %+v: %s", i, g.Stream(si), buf)
			}
			lvl = string(m[1])
		case "plain", "java":
			fs := strings.Fields(string(buf))
			lvl = strings.ToLower(fs[1])
			if f == "java" {
				lvl = strings.ToLower(fs[2])
			}
		}
		if !slices.Contains([]string{"debug", "info", "warn", "error", "fatal"}, lvl) {
			t.Fatalf("line %d: level %q: %s", i, lvl, buf)
		}
		levels[lvl]++
		prevLevel = lvl
	}
	t.Logf("formats %v levels %v continuation %d (java frames %d, goroutines %d)", formats, levels, conts, javaConts, goEs)
	n := int(cfg.Lines)
	if levels["info"]+levels["debug"] < n*3/4 || levels["warn"] < n/100 ||
		levels["error"] > n/20 || levels["error"] < n/200 {
		t.Errorf("level mix %v is not mostly INFO/DEBUG, some WARN, rare ERROR", levels)
	}
	if cfg.Streams == 0 || cfg.Streams >= 4 {
		for _, f := range formatNames {
			if formats[f] < n/10 {
				t.Errorf("format %s has %d lines of %d", f, formats[f], n)
			}
		}
		if javaConts == 0 {
			t.Error("no java stack traces")
		}
	}
	if conts > n/20 {
		t.Errorf("%d continuation lines of %d", conts, n)
	}
}

// TestMix checks the default corpus has each kind of line and incident.
func TestMix(t *testing.T) {
	data := gen(t, Config{Lines: 100_000})
	for _, s := range []string{
		`{"time":"`, "ts=", " INFO  [", " ERROR [", "\tat com.example.", "Caused by: ", " more\n",
		"goroutine ", "panic: ", "java.lang.OutOfMemoryError", "connection refused",
		"no space left on device", "i/o timeout", "SELECT ", "trace_id", "span_id", "user_id",
		"GET /", "POST", "status=500", `"status":200`, ".java:", "-4", // UUID version nibble
	} {
		if !bytes.Contains(data, []byte(s)) {
			t.Errorf("corpus lacks %q", s)
		}
	}
	// Incidents cluster: the connection-refused lines fall in a short
	// stretch of the timeline.
	lines := splitLines(data)
	var first, last = -1, -1
	count := 0
	for i, l := range lines {
		if bytes.Contains(l, []byte("connection refused")) {
			if first < 0 {
				first = i
			}
			last = i
			count++
		}
	}
	if count < 20 || last-first > 2000 {
		t.Errorf("connection refused: %d lines from line %d to %d, want a burst", count, first, last)
	}
}

// TestTokens checks the token distribution is log-like: a few tokens are
// everywhere, most are rare.
func TestTokens(t *testing.T) {
	data := gen(t, Config{Lines: 50_000})
	counts := map[string]int{}
	total := 0
	for _, tok := range bytes.FieldsFunc(data, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-')
	}) {
		counts[string(tok)]++
		total++
	}
	freq := make([]int, 0, len(counts))
	once := 0
	for _, c := range counts {
		freq = append(freq, c)
		if c == 1 {
			once++
		}
	}
	slices.Sort(freq)
	slices.Reverse(freq)
	top := 0
	for _, c := range freq[:20] {
		top += c
	}
	t.Logf("%d tokens, %d distinct, %d once, top 20 cover %.1f%%", total, len(counts), once, 100*float64(top)/float64(total))
	if top < total/5 {
		t.Errorf("top 20 tokens cover %d of %d: too flat", top, total)
	}
	if once < len(counts)/2 {
		t.Errorf("%d of %d distinct tokens occur once: too few rare identifiers", once, len(counts))
	}
	for _, w := range []string{"the", "request", "user", "INFO", "GET"} {
		if counts[w] < total/1000 {
			t.Errorf("common token %q occurs %d times of %d", w, counts[w], total)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []Config{
		{Lines: -1},
		{Size: -5},
		{Lines: 1, MeanLen: -1},
		{Lines: 1, MeanLen: 3},
		{Lines: 1, MeanLen: MaxMeanLen + 1},
		{Lines: 1, Streams: -2},
		{Lines: 1, Streams: MaxStreams + 1},
		{Lines: 1, Span: -time.Second},
		{Lines: 1, Start: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)},
		{Lines: 1, Start: time.Date(-5, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		if _, _, err := Generate(&bytes.Buffer{}, c); err == nil {
			t.Errorf("Generate(%+v) accepted a bad config", c)
		}
		// NewGenerator falls back to defaults rather than failing.
		g := NewGenerator(c)
		if line, _, _ := g.Next(nil); len(line) == 0 {
			t.Errorf("NewGenerator(%+v) produced an empty line", c)
		}
	}
}

type failWriter struct{ n int }

var errFail = errors.New("disk full")

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n--; w.n < 0 {
		return 0, errFail
	}
	return len(p), nil
}

func TestWriteError(t *testing.T) {
	for _, n := range []int{0, 1} {
		_, _, err := Generate(&failWriter{n}, Config{Size: 4 << 20})
		if !errors.Is(err, errFail) {
			t.Errorf("after %d writes: err = %v, want %v", n, err, errFail)
		}
	}
}

func TestStreams(t *testing.T) {
	g := NewGenerator(Config{Streams: 40})
	seen := map[string]bool{}
	for i := range g.NumStreams() {
		s := g.Stream(i)
		if s.App == "" || !strings.HasPrefix(s.Host, s.App+"-") || s.Format != formatNames[i%4] {
			t.Errorf("stream %d: %+v", i, s)
		}
		if seen[s.App] || seen[s.Host] {
			t.Errorf("stream %d: duplicate name %+v", i, s)
		}
		seen[s.App], seen[s.Host] = true, true
	}
	counts := make([]int, g.NumStreams())
	for range 40_000 {
		_, si, _ := g.Next(nil)
		counts[si]++
	}
	for i, c := range counts {
		if c == 0 {
			t.Errorf("stream %d never written", i)
		}
	}
	if counts[0] < 2*counts[39] {
		t.Errorf("streams are not skewed: %v", counts)
	}
}

// FuzzGenerate checks the invariants on small corpora of any config.
func FuzzGenerate(f *testing.F) {
	f.Add(int64(0), uint16(100), uint16(255), uint8(8), int64(0))
	f.Add(int64(-3), uint16(1), uint16(16), uint8(1), int64(1))
	f.Add(int64(99), uint16(500), uint16(2000), uint8(0), int64(3600e9))
	f.Fuzz(func(t *testing.T, seed int64, lines, mean uint16, streams uint8, span int64) {
		// Keep each input small enough to check quickly (at most ~12 MB).
		cfg := Config{Lines: int64(lines % 3000), MeanLen: int(mean % 4200), Seed: seed, Streams: int(streams), Span: time.Duration(span)}
		var buf bytes.Buffer
		n, b, err := Generate(&buf, cfg)
		if cfg.Validate() != nil {
			if err == nil {
				t.Fatal("invalid config accepted")
			}
			return
		}
		if err != nil || n != cfg.Lines || b != int64(buf.Len()) || bytes.Count(buf.Bytes(), []byte("\n")) != int(n) {
			t.Fatalf("Generate = %d, %d, %v; wrote %d bytes", n, b, err, buf.Len())
		}
		if bytes.IndexByte(buf.Bytes(), '\r') >= 0 {
			t.Fatal("carriage return in output")
		}
		var last time.Time
		for i, l := range splitLines(buf.Bytes()) {
			ts, ok := leadingTS(l)
			if !ok {
				if !continuation.Match(l) {
					t.Fatalf("line %d: %q", i, l)
				}
				continue
			}
			if ts.Before(last) {
				t.Fatalf("line %d: time goes back", i)
			}
			last = ts
		}
	})
}
