package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"haystack/internal/segment"
	"haystack/internal/store"
)

// The differential test of `hay ingest`: random inputs mixing every
// timestamp layout internal/ingest documents (rendered from a known instant),
// JSON lines, near-miss timestamps, CRLF, bare CR, NUL, invalid UTF-8, empty
// lines, missing final newlines, lines over the 16 MiB limit, several files
// and stdin, --stream labels, --format, resumed and rotated files. Every
// stored entry is compared with an oracle computed here from the documented
// contract (docs/STORE.md "Entries, times, streams" and "Re-running
// ingest"): bytes, time, labels, order and count.
//
// HAY_INGEST_DIFF_SEED=n reruns one seed.

// diffSpec is one generated line: its content (no "\n") and the time each
// detector must find in it.
type diffSpec struct {
	content []byte
	plain   int64 // leading timestamp (unix ns), when plainOK
	plainOK bool
	json    int64 // JSON time field, when jsonOK
	jsonOK  bool
}

// diffWant is one expected entry.
type diffWant struct {
	labels string
	line   []byte
	time   int64 // when !ingestTime
	// ingestTime: the entry takes the ingestion time, some instant during
	// the run [lo, hi].
	ingestTime bool
	lo, hi     int64
	what       string // where it came from, for failure messages
}

// diffGen generates lines; now is the clock the yearless layouts (syslog,
// klog) are inferred from.
type diffGen struct {
	r   *rand.Rand
	now time.Time
	n   int
}

var diffZones = []int{0, 2 * 3600, -7 * 3600, 5*3600 + 1800, 14 * 3600, -12 * 3600, 45 * 60, -(3*3600 + 30*60)}

// instant returns a random UTC instant in [from, to) years, with nanoseconds.
func (g *diffGen) instant(fromYear, toYear int) time.Time {
	lo := time.Date(fromYear, 1, 2, 0, 0, 0, 0, time.UTC).UnixNano()
	hi := time.Date(toYear, 12, 30, 0, 0, 0, 0, time.UTC).UnixNano()
	return time.Unix(0, lo+g.r.Int64N(hi-lo)).UTC()
}

// trunc truncates t to d fraction digits.
func trunc(t time.Time, d int) time.Time {
	p := int64(1)
	for range 9 - d {
		p *= 10
	}
	return time.Unix(0, t.UnixNano()-int64(t.Nanosecond())%p).UTC()
}

// frac renders t's fraction with d digits after sep (d may exceed 9: the
// extra digits must be ignored).
func frac(t time.Time, sep string, d int) string {
	if d == 0 {
		return ""
	}
	s := fmt.Sprintf("%09d", t.Nanosecond())
	for len(s) < d {
		s += "7"
	}
	return sep + s[:d]
}

func zoneString(off int, form int) string {
	sign := "+"
	if off < 0 {
		sign, off = "-", -off
	}
	h, m := off/3600, off%3600/60
	switch form {
	case 0:
		return fmt.Sprintf("%s%02d:%02d", sign, h, m)
	case 1:
		return fmt.Sprintf("%s%02d%02d", sign, h, m)
	}
	return fmt.Sprintf("%s%02d", sign, h) // only when m == 0
}

func (g *diffGen) pick(s ...string) string { return s[g.r.IntN(len(s))] }

// iso renders an RFC 3339 / ISO 8601 family timestamp and returns it with
// its instant.
func (g *diffGen) iso() (string, time.Time) {
	t := g.instant(1970, 2200)
	d := []int{0, 1, 3, 6, 9, 12}[g.r.IntN(6)]
	fsep := g.pick(".", ",")
	dsep := g.pick("-", "-", "/")
	tsep := g.pick("T", " ")
	var zone string
	loc := time.UTC
	switch k := g.r.IntN(6); k {
	case 0: // no zone: UTC
	case 1:
		zone = g.pick("Z", " UTC", " GMT")
	default:
		off := diffZones[g.r.IntN(len(diffZones))]
		form := g.r.IntN(3)
		if form == 2 && off%3600 != 0 {
			form = 0
		}
		zone = g.pick("", " ") + zoneString(off, form)
		loc = time.FixedZone("", off)
	}
	lt := t.In(loc)
	s := lt.Format("2006"+dsep+"01"+dsep+"02"+tsep+"15:04:05") + frac(lt, fsep, d) + zone
	return s, trunc(t, min(d, 9))
}

// stamp returns a plain-text timestamp in a random documented layout and
// its instant; yearOnly restricts to layouts that carry a year.
func (g *diffGen) stamp(yearOnly bool) (string, time.Time, string) {
	n := 9
	if yearOnly {
		n = 7
	}
	switch g.r.IntN(n) {
	case 0, 1:
		s, t := g.iso()
		return s, t, "iso"
	case 2: // HDFS yyMMdd HHmmss
		t := trunc(g.instant(1970, 2069), 0)
		return t.Format("060102 150405"), t, "hdfs"
	case 3: // Spark yy/MM/dd HH:mm:ss[.frac]
		t := g.instant(1970, 2069)
		d := g.pick("0", "3")[0] - '0'
		return t.Format("06/01/02 15:04:05") + frac(t, ".", int(d)), trunc(t, int(d)), "spark"
	case 4: // asctime, optional fraction
		t := g.instant(1970, 2200)
		d := []int{0, 3, 6}[g.r.IntN(3)]
		day := g.pick("_2", "02")
		lt := trunc(t, d)
		return lt.Format("Mon Jan "+day+" 15:04:05") + frac(lt, ".", d) + lt.Format(" 2006"), lt, "asctime"
	case 5: // common log format, zone optional
		t := trunc(g.instant(1970, 2200), 0)
		if g.r.IntN(3) == 0 {
			return t.Format("02/Jan/2006:15:04:05"), t, "clf"
		}
		off := diffZones[g.r.IntN(len(diffZones))]
		return t.In(time.FixedZone("", off)).Format("02/Jan/2006:15:04:05 -0700"), t, "clf"
	case 6: // Tomcat, Windows CBS
		if g.r.IntN(2) == 0 {
			t := trunc(g.instant(1970, 2200), 0)
			return t.Format("2006-01-02 15:04:05") + ",", t, "cbs"
		}
		t := g.instant(1970, 2200)
		d := []int{0, 3}[g.r.IntN(2)]
		return t.Format("02-Jan-2006 15:04:05") + frac(t, ".", d), trunc(t, d), "tomcat"
	case 7: // syslog: no year, inferred from the clock; within the last 300 days
		t := g.yearless()
		d := []int{0, 0, 3, 6}[g.r.IntN(4)]
		lt := trunc(t, d)
		return lt.Format(g.pick("Jan _2", "Jan 02", "Jan 2")+" 15:04:05") + frac(lt, ".", d), inferredYear(lt, g.now), "syslog"
	default: // klog
		t := g.yearless()
		d := []int{0, 6, 6, 9}[g.r.IntN(4)]
		lt := trunc(t, d)
		return g.pick("I", "W", "E", "F") + lt.Format("0102 15:04:05") + frac(lt, ".", d), inferredYear(lt, g.now), "klog"
	}
}

// yearless returns an instant for a layout without a year: mostly within
// the last year, sometimes years ago (the year is then wrong, by the
// documented rule) or up to 20 hours ahead (clock skew).
func (g *diffGen) yearless() time.Time {
	switch g.r.IntN(8) {
	case 0:
		return g.now.Add(time.Duration(g.r.Int64N(int64(20 * time.Hour)))).UTC()
	case 1:
		return g.instant(1972, g.now.Year()-1)
	}
	return g.now.Add(-time.Duration(g.r.Int64N(int64(365 * 24 * time.Hour)))).UTC()
}

// inferredYear is LeadingTime's documented rule for a date without a year:
// the next year when that puts the time at most a day after ref, else
// ref's year (UTC), or the year before when that would put the time more
// than one day after ref. Feb 29 goes to the latest leap year at or before.
func inferredYear(t, ref time.Time) time.Time {
	leap := func(y int) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }
	at := func(y int) time.Time {
		return time.Date(y, t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
	}
	y := ref.UTC().Year()
	feb29 := t.Month() == 2 && t.Day() == 29
	if n := y + 1; (!feb29 || leap(n)) && !at(n).After(ref.Add(24*time.Hour)) {
		return at(n) // just after New Year
	}
	for feb29 && !leap(y) {
		y--
	}
	if at(y).After(ref.Add(24 * time.Hour)) {
		y--
		for feb29 && !leap(y) {
			y--
		}
	}
	return at(y)
}

// plainLine is a line with a leading timestamp behind documented prefixes.
func (g *diffGen) plainLine() diffSpec {
	s, t, kind := g.stamp(false)
	var pre string
	if g.r.IntN(8) == 0 {
		pre += "\xEF\xBB\xBF"
	}
	pre += g.pick("", "", "", " ", "\t", " \t ")
	version := false
	switch g.r.IntN(10) {
	case 0:
		pre += g.pick("ts=", "t=", "time=", "timestamp=", "@timestamp=")
	case 1:
		pre += g.pick("ts=\"", "time=\"")
	case 2:
		pre += g.pick("<34>", "<0>", "<191>")
		if kind != "syslog" && kind != "klog" && kind != "asctime" && g.r.IntN(2) == 0 && kind != "tomcat" {
			pre += "1 "
			version = true
		}
	}
	// "<pri>1 [" is not skipped: the version must be followed by a digit
	// (see the report).
	if !version && g.r.IntN(4) == 0 {
		pre += g.pick("[", "[ ")
	}
	suf := g.pick("", " msg", "] GET /x", "\" level=info", " \x00\xff body", "\r mid", "\tx")
	g.n++
	return diffSpec{content: []byte(pre + s + suf), plain: t.UnixNano(), plainOK: true}
}

// jsonLine is a JSON object line with a time field in a documented form.
func (g *diffGen) jsonLine() diffSpec {
	var b strings.Builder
	b.WriteString(g.pick("{", " {", "\xEF\xBB\xBF{", "{ "))
	before := []string{`"level":"info"`, `"n":-12.5e3`, `"nested":{"time":"2001-01-01T00:00:00Z","a":[1,{"ts":5}]}`,
		`"s":"with \"quote\" and \\ back"`, `"time":"not a time"`, `"ts":null`, `"arr":[["time"],{}]`, `"ok":true`}
	for range g.r.IntN(3) {
		b.WriteString(before[g.r.IntN(len(before))])
		b.WriteString(g.pick(",", " , ", ",\t"))
	}
	b.WriteString(g.pick(`"time"`, `"ts"`, `"timestamp"`, `"@timestamp"`, `"\u0074s"`))
	b.WriteString(g.pick(":", " : "))
	var t time.Time
	switch g.r.IntN(12) {
	case 0, 1: // RFC 3339 with nanoseconds, any zone
		t = g.instant(1970, 2200)
		off := diffZones[g.r.IntN(len(diffZones))]
		b.WriteString(`"` + t.In(time.FixedZone("", off)).Format(time.RFC3339Nano) + `"`)
	case 2: // a LeadingTime layout with a year
		s, tt, _ := g.stamp(true)
		t = tt
		b.WriteString(`"` + strings.ReplaceAll(s, "/", `\/`) + `"`)
	case 3: // unix seconds, integer or with a fraction
		t = g.instant(1974, 2200)
		d := []int{0, 3, 6, 9}[g.r.IntN(4)]
		t = trunc(t, d)
		s := strconv.FormatInt(t.Unix(), 10) + frac(t, ".", d)
		if g.r.IntN(4) == 0 {
			s = `"` + s + `"`
		}
		b.WriteString(s)
	case 4: // milliseconds, maybe with a fraction
		t = g.instant(1974, 2200)
		d := []int{0, 3}[g.r.IntN(2)]
		t = trunc(t, 3+d)
		ms := t.UnixNano() / 1e6
		s := strconv.FormatInt(ms, 10)
		if d > 0 {
			s += fmt.Sprintf(".%03d", t.UnixNano()%1e6/1e3)
		}
		b.WriteString(s)
	case 5: // microseconds
		t = trunc(g.instant(1974, 2200), 6)
		b.WriteString(strconv.FormatInt(t.UnixNano()/1e3, 10))
	case 6: // nanoseconds
		t = g.instant(1974, 2200)
		b.WriteString(strconv.FormatInt(t.UnixNano(), 10))
	case 7: // RFC 1123 (numeric zone, or UTC)
		t = trunc(g.instant(1970, 2200), 0)
		if g.r.IntN(2) == 0 {
			b.WriteString(`"` + t.Format(time.RFC1123) + `"`)
		} else {
			off := diffZones[g.r.IntN(len(diffZones))]
			b.WriteString(`"` + t.In(time.FixedZone("", off)).Format(time.RFC1123Z) + `"`)
		}
	case 8: // RFC 850 (two-digit year) in UTC
		t = trunc(g.instant(1970, 2068), 0)
		b.WriteString(`"` + t.Format(time.RFC850) + `"`)
	case 9: // Unix date (UTC), Ruby date (numeric zone)
		t = trunc(g.instant(1970, 2200), 0)
		if g.r.IntN(2) == 0 {
			b.WriteString(`"` + t.Format(time.UnixDate) + `"`)
		} else {
			off := diffZones[g.r.IntN(len(diffZones))]
			b.WriteString(`"` + t.In(time.FixedZone("", off)).Format(time.RubyDate) + `"`)
		}
	case 10: // syslog string, year from the clock
		lt := trunc(g.yearless(), 0)
		b.WriteString(`"` + lt.Format("Jan _2 15:04:05") + `"`)
		t = inferredYear(lt, g.now)
	default: // exponent float seconds (exact in float64)
		sec := g.instant(1974, 2200).Unix() / 1000 * 1000
		t = time.Unix(sec, 0).UTC()
		b.WriteString(strconv.FormatFloat(float64(sec), 'e', -1, 64))
	}
	after := []string{`,"msg":"x"}`, `}`, ` , "level":"warn", "x":{"y":[1,2]}}`, `,"broken`, `,"msg":"\u00e9\ud800"}`}
	b.WriteString(after[g.r.IntN(len(after))])
	return diffSpec{content: []byte(b.String()), json: t.UnixNano(), jsonOK: true}
}

// nearMiss lines look like timestamps but are not, by the documented rules.
var diffNearMiss = []string{
	"2015-13-29T17:41:44Z month 13",
	"2015-02-30 10:00:00 no such day",
	"2015-07-29T24:00:00Z hour 24",
	"2015-07-29T17:61:44 minute 61",
	"2015-07-29T17:41:61 second 61",
	"2015-07-29T17:41:44.747Z5 digit after",
	"2015-07-29T17:41:445",
	"2015-07-29 17:41",
	"2015-07-29",
	"20150729T174144Z basic format",
	"12345 foo",
	"2015 was a year",
	"1969-12-31T23:59:59Z before 1970",
	"2201-01-01T00:00:00Z after 2200",
	"Jun 31 10:00:00 no June 31",
	"Jun 14 25:16:01 hour 25",
	"Foo 14 15:16:01",
	"I1330 01:02:03.123456 month 13",
	"X1130 01:02:03.123456 no level X",
	"081109 246615 hour 24",
	"081109 2036155",
	"<9999>2015-07-29T17:41:44Z",
	"<34 2015-07-29T17:41:44Z",
	"timestamps=2015-07-29T17:41:44Z",
	"x2015-07-29T17:41:44Z",
	"msg 2015-07-29T17:41:44Z",
	"[[2015-07-29T17:41:44Z",
	"32/Oct/2000:13:55:36 -0700",
	"10/Oxt/2000:13:55:36 -0700",
	"Sun Dec 32 04:47:44 2005",
	"Sun Dec 04 04:47:44 20056",
	"17/13/09 20:10:40",
	"29-Jul-2015",
	"{\"time\":\"soon\",\"msg\":\"2015-07-29T17:41:44Z\"}",
	"{\"time\":-5}",
	"{\"ts\":\"\"}",
	"{\"msg\":\"2015-07-29T17:41:44Z\",\"when\":1700000000}",
	"{\"a\":{\"time\":1700000000},\"b\":1}",
	"{time:1700000000}",
	"{\"ts\":1e400}",
	"{\"ts\":\"02 Jan 06 15:04 XYZ\"", // no such zone (MST, RFC 822's, is a time)
	"",
	"  \t",
	"\r",
	"\x00\x00",
	"\xff\xfe\xfd",
}

// junk is text without a timestamp: bytes of every kind but "\n".
func (g *diffGen) junk() diffSpec {
	n := g.r.IntN(40)
	b := []byte("j")
	for range n {
		switch g.r.IntN(6) {
		case 0:
			b = append(b, byte(g.r.IntN(256)))
		case 1:
			b = append(b, g.pick("\r", "\x00", "\xff", "\xc3", "\x1b[31m", "\t", "é", "\xed\xa0\x80")...)
		default:
			b = append(b, byte('a'+g.r.IntN(26)))
		}
	}
	return diffSpec{content: bytes.ReplaceAll(b, []byte("\n"), []byte("N"))}
}

func (g *diffGen) line() diffSpec {
	switch k := g.r.IntN(20); {
	case k < 7:
		return g.plainLine()
	case k < 11:
		return g.jsonLine()
	case k < 14:
		return diffSpec{content: []byte(diffNearMiss[g.r.IntN(len(diffNearMiss))])}
	case k < 16:
		return diffSpec{}
	default:
		return g.junk()
	}
}

// chunk generates n lines as bytes (terminators "\n" or "\r\n", the last
// one maybe missing) with their specs.
func (g *diffGen) chunk(n int, noFinalNewline bool) ([]byte, []diffSpec) {
	var data []byte
	var specs []diffSpec
	for i := range n {
		s := g.line()
		if g.r.IntN(10) == 0 && len(s.content) > 0 && s.content[len(s.content)-1] != '\r' {
			// A content that ends in "\r": only the terminator's "\r" goes.
			s.content = append(s.content, '\r')
		}
		specs = append(specs, s)
		data = append(data, s.content...)
		if i == n-1 && noFinalNewline && len(s.content) > 0 {
			// (An empty last line without "\n" is no line at all.)
			break
		}
		data = append(data, g.pick("\n", "\n", "\r\n")...)
	}
	return data, specs
}

// frameOracle splits one run's bytes of an input into lines by the
// documented rule (naively), cutting lines over maxLine into pieces.
func frameOracle(data []byte, max int) (lines [][]byte, pieceOf []int) {
	if len(data) == 0 {
		return nil, nil
	}
	parts := bytes.Split(data, []byte("\n"))
	if len(parts[len(parts)-1]) == 0 {
		parts = parts[:len(parts)-1]
	}
	for i, p := range parts {
		p = bytes.TrimSuffix(p, []byte("\r"))
		if len(p) <= max {
			lines, pieceOf = append(lines, p), append(pieceOf, i)
			continue
		}
		for len(p) > 0 {
			n := min(len(p), max)
			lines, pieceOf = append(lines, p[:n]), append(pieceOf, i)
			p = p[n:]
		}
	}
	return lines, pieceOf
}

// specTime is the time the --format format finds in a line.
func specTime(s diffSpec, format string) (int64, bool) {
	switch format {
	case "plain":
		return s.plain, s.plainOK
	case "jsonl":
		return s.json, s.jsonOK
	}
	if s.jsonOK {
		return s.json, true
	}
	return s.plain, s.plainOK
}

// oracleRun computes the expected entries of one run of one input: data are
// the bytes the run reads, specs the line specs in order (one per line of
// data; pieces of a long line share theirs).
func oracleRun(data []byte, specs []diffSpec, format string, labels string, lo, hi int64, what string) []diffWant {
	lines, pieceOf := frameOracle(data, maxLine)
	if len(lines) > 0 && pieceOf[len(pieceOf)-1] != len(specs)-1 {
		panic(fmt.Sprintf("%s: %d lines framed, %d specs", what, pieceOf[len(pieceOf)-1]+1, len(specs)))
	}
	times := make([]int64, len(lines))
	has := make([]bool, len(lines))
	for i := range lines {
		s := specs[pieceOf[i]]
		if i > 0 && pieceOf[i-1] == pieceOf[i] {
			continue // a continuation piece: not a line start
		}
		times[i], has[i] = specTime(s, format)
	}
	var out []diffWant
	last, have := int64(0), false
	first := -1
	for i := range lines {
		if has[i] {
			first = i
			break
		}
	}
	for i, l := range lines {
		w := diffWant{labels: labels, line: l, what: fmt.Sprintf("%s line %d", what, pieceOf[i]+1)}
		switch {
		case has[i]:
			last, have = times[i], true
			w.time = times[i]
		case have:
			w.time = last
		case first >= 0:
			w.time = times[first]
		default:
			w.ingestTime, w.lo, w.hi = true, lo, hi
		}
		out = append(out, w)
	}
	return out
}

// lokiLabels writes labels in the canonical Loki form, names sorted.
func lokiLabels(m map[string]string) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	var parts []string
	for _, k := range names {
		parts = append(parts, k+"="+strconv.Quote(m[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// ingestWithStdin runs hay ingest in process with stdin read from the file
// stdinPath.
func ingestWithStdin(t *testing.T, stdinPath string, args ...string) {
	t.Helper()
	in, err := os.Open(stdinPath)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	old := os.Stdin
	os.Stdin = in
	defer func() { os.Stdin = old }()
	if out, code := hayInProcess(t, append([]string{"ingest"}, args...)...); code != 0 {
		t.Fatalf("hay ingest %q: exit %d: %s", args, code, out)
	}
}

// diffFile is one input file across runs.
type diffFile struct {
	path string
	data []byte // current content
	read int64  // bytes consumed by the runs so far
}

func TestIngestDiff(t *testing.T) {
	seed := envSeed(t, "HAY_INGEST_DIFF_SEED")
	t.Logf("seed %d (rerun with HAY_INGEST_DIFF_SEED=%d)", seed, seed)
	g := &diffGen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), now: time.Now()}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")

	files := []*diffFile{
		{path: filepath.Join(dir, "a.log")},
		{path: filepath.Join(dir, "sub", "b.log")},
		{path: filepath.Join(dir, "c \"q\" é\t,x=y}.txt")}, // the source label is the base name, whatever its bytes
	}
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	// specs[i] are the line specs of files[i]'s bytes from read onwards.
	fileSpecs := make([][]diffSpec, len(files))
	grow := func(i int, n int) {
		f := files[i]
		// A file whose last line has no "\n" yet and that grows: the
		// continuation becomes an entry of its own (docs/STORE.md).
		b, s := g.chunk(n, g.r.IntN(3) == 0)
		f.data = append(f.data, b...)
		fileSpecs[i] = append(fileSpecs[i], s...)
		if err := os.WriteFile(f.path, f.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var want []diffWant
	compared := 0
	streamChoices := []map[string]string{nil, {"env": "diff"}, {"team": "a b", "env": "diff"}, {"source": "custom"}}
	for run := range 4 {
		// Mutate the files: grow, rotate, or leave alone.
		for i, f := range files {
			switch k := g.r.IntN(5); {
			case run == 0 || k < 3:
				grow(i, g.r.IntN(250))
			case k == 3 && f.read > 0:
				// Rotation: rewritten with different first bytes.
				marker := fmt.Sprintf("# rotated in run %d\n", run)
				f.data, f.read, fileSpecs[i] = []byte(marker), 0, []diffSpec{{content: []byte(marker[:len(marker)-1])}}
				grow(i, g.r.IntN(250))
			}
		}
		stream := streamChoices[g.r.IntN(len(streamChoices))]
		format := []string{"auto", "auto", "plain", "jsonl"}[g.r.IntN(4)]
		// Stdin: never resumed, so each run stores all of it again. It
		// is read through the idle reader, which stores what it has read
		// whenever the next read is not ready yet: lines before the first
		// timestamp then keep the ingestion time (see the report). It is
		// under 64 KiB (one read), so that happens only when the first
		// timestamp is on a last line without "\n" (the line reader
		// needs the EOF to return it); that case gets its "\n" here.
		sb, sspecs := g.chunk(g.r.IntN(150), g.r.IntN(2) == 0)
		if len(sb) > 0 && sb[len(sb)-1] != '\n' {
			first := slices.IndexFunc(sspecs, func(s diffSpec) bool { _, ok := specTime(s, format); return ok })
			if first == len(sspecs)-1 {
				sb = append(sb, '\n')
			}
		}
		if len(sb) >= 64<<10 {
			t.Fatalf("stdin input of %d bytes", len(sb))
		}
		stdinPath := filepath.Join(dir, fmt.Sprintf("stdin%d", run))
		os.WriteFile(stdinPath, sb, 0o644)

		args := []string{"--data", data, "--format", format, "--fsync-interval", "0"}
		if g.r.IntN(2) == 0 {
			// Small heads: segments flushed in the middle of an input.
			args = append(args, "--head-bytes", strconv.Itoa(1024+g.r.IntN(16<<10)))
		}
		if len(stream) > 0 {
			var kv []string
			for k, v := range stream {
				kv = append(kv, k+"="+v)
			}
			sort.Strings(kv)
			args = append(args, "--stream", strings.Join(kv, ","))
		}
		// Inputs in a random order, stdin among them.
		order := g.r.Perm(len(files) + 1)
		var inputs []string
		for _, k := range order {
			if k == len(files) {
				inputs = append(inputs, "-")
			} else {
				inputs = append(inputs, files[k].path)
			}
		}
		labelsFor := func(name string) string {
			m := map[string]string{"source": name}
			for k, v := range stream {
				m[k] = v
			}
			return lokiLabels(m)
		}
		lo := time.Now().UnixNano()
		ingestWithStdin(t, stdinPath, append(args, inputs...)...)
		hi := time.Now().UnixNano()
		for _, k := range order {
			if k == len(files) {
				want = append(want, oracleRun(sb, sspecs, format, labelsFor("stdin"), lo, hi, fmt.Sprintf("run %d stdin", run))...)
				continue
			}
			f := files[k]
			w := oracleRun(f.data[f.read:], fileSpecs[k], format, labelsFor(filepath.Base(f.path)), lo, hi, fmt.Sprintf("run %d %s", run, filepath.Base(f.path)))
			want = append(want, w...)
			f.read = int64(len(f.data))
			fileSpecs[k] = nil
		}
	}
	compared += diffCompare(t, data, want)

	// Lines at and over the 16 MiB limit, in a store of their own: a
	// line of exactly maxLine bytes ending "\r\r\n" (one "\r" kept), one of
	// maxLine+1 bytes (two entries), each taking the time before it.
	long := filepath.Join(dir, "long.log")
	data2 := filepath.Join(dir, "data2")
	var lb []byte
	var ls []diffSpec
	add := func(s diffSpec, term string) {
		ls = append(ls, s)
		lb = append(append(lb, s.content...), term...)
	}
	add(g.plainLine(), "\n")
	l1 := bytes.Repeat([]byte("x"), maxLine)
	l1[maxLine-1] = '\r'
	add(diffSpec{content: l1}, "\r\n")
	add(g.plainLine(), "\r\n")
	l2 := bytes.Repeat([]byte("y\x00\xff"), maxLine/3+1)[:maxLine+1]
	add(diffSpec{content: l2}, "\n")
	add(diffSpec{content: []byte("after")}, "")
	os.WriteFile(long, lb, 0o644)
	lo := time.Now().UnixNano()
	if out, code := hayInProcess(t, "ingest", "--data", data2, "--fsync-interval", "0", long); code != 0 {
		t.Fatalf("ingest long: exit %d %s", code, out)
	}
	wl := oracleRun(lb, ls, "auto", lokiLabels(map[string]string{"source": "long.log"}), lo, time.Now().UnixNano(), "long.log")
	if len(wl) != 6 {
		t.Fatalf("oracle: %d long-line entries, want 6", len(wl))
	}
	compared += diffCompare(t, data2, wl)
	t.Logf("%d entries compared", compared)
}

// diffCompare reads the store at dir with a snapshot and compares it with
// want: count, order, bytes, times and labels. It cross-checks the small
// stores with hay search --json ” (each stream's entries in order, every
// entry exactly once). It returns the number of entries compared.
func diffCompare(t *testing.T, dir string, want []diffWant) int {
	t.Helper()
	type got struct {
		labels string
		line   []byte
		time   int64
	}
	var gs []got
	storedEntries(t, dir, func(s *store.Snapshot, b *segment.Block, k int) string {
		gs = append(gs, got{s.Labels(b.Streams[k]), bytes.Clone(b.Line(k)), b.Times[k]})
		return ""
	})
	bad := 0
	for i := range max(len(gs), len(want)) {
		if bad >= 10 {
			t.Fatalf("too many differences")
		}
		switch {
		case i >= len(gs):
			t.Errorf("entry %d missing: want %s %q (%s)", i, want[i].labels, trimQ(want[i].line), want[i].what)
			bad++
			continue
		case i >= len(want):
			t.Errorf("entry %d extra: %s %q at %d", i, gs[i].labels, trimQ(gs[i].line), gs[i].time)
			bad++
			continue
		}
		w, g := want[i], gs[i]
		if !bytes.Equal(w.line, g.line) || w.labels != g.labels {
			t.Errorf("entry %d (%s): got %s %q, want %s %q", i, w.what, g.labels, trimQ(g.line), w.labels, trimQ(w.line))
			bad++
			continue
		}
		if w.ingestTime {
			if g.time < w.lo || g.time > w.hi {
				t.Errorf("entry %d (%s) %q: time %d, want the ingestion time in [%d, %d]", i, w.what, trimQ(g.line), g.time, w.lo, w.hi)
				bad++
			}
		} else if g.time != w.time {
			t.Errorf("entry %d (%s) %q: time %s, want %s", i, w.what, trimQ(g.line),
				time.Unix(0, g.time).UTC().Format(time.RFC3339Nano), time.Unix(0, w.time).UTC().Format(time.RFC3339Nano))
			bad++
		}
	}
	if bad > 0 || len(gs) > 20000 {
		return len(gs)
	}
	// hay search --json with an empty PATTERN: every entry, each stream's
	// in ingestion order, exact bytes (line_base64 for invalid UTF-8).
	out, code := hayInProcess(t, "search", "--data", dir, "--json", "--", "")
	if code != 0 {
		t.Fatalf("search --json: exit %d", code)
	}
	perStream := map[string][]string{}
	for _, l := range bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var e struct {
			Time   time.Time         `json:"time"`
			Labels map[string]string `json:"labels"`
			Line   string            `json:"line"`
			B64    string            `json:"line_base64"`
		}
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		line := []byte(e.Line)
		if e.B64 != "" {
			var err error
			if line, err = base64.StdEncoding.DecodeString(e.B64); err != nil {
				t.Fatal(err)
			}
		}
		ls := lokiLabels(e.Labels)
		perStream[ls] = append(perStream[ls], fmt.Sprintf("%d %q", e.Time.UnixNano(), line))
	}
	wantStream := map[string][]string{}
	for _, g := range gs {
		wantStream[g.labels] = append(wantStream[g.labels], fmt.Sprintf("%d %q", g.time, g.line))
	}
	for ls, w := range wantStream {
		if !slices.Equal(perStream[ls], w) {
			t.Errorf("search --json, stream %s:\n got %q\nwant %q", ls, perStream[ls], w)
		}
	}
	if len(perStream) != len(wantStream) {
		t.Errorf("search --json: %d streams, want %d", len(perStream), len(wantStream))
	}
	return len(gs)
}

func trimQ(b []byte) []byte {
	if len(b) > 80 {
		return append(bytes.Clone(b[:80]), "..."...)
	}
	return b
}
