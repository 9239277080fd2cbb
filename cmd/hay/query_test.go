package main

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"haystack/internal/ingest"
	"haystack/internal/query"
	"haystack/internal/segment"
	"haystack/internal/store"
)

// storedEntry is one entry read back from the store by the oracle.
type storedEntry struct {
	time   int64
	stream uint32
	line   []byte
}

// loghubStore ingests every Loghub sample, each file its own stream
// {source="<file>"}, and returns the data directory and every stored
// entry per stream, read block by block without the search executor.
func loghubStore(t *testing.T) (string, map[uint32][]storedEntry, map[uint32][]query.Label) {
	t.Helper()
	files, err := filepath.Glob("../../testdata/loghub/*.log")
	if err != nil || len(files) == 0 {
		t.Fatalf("no loghub samples: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "data")
	for _, f := range files {
		if _, code := hayInProcess(t, "ingest", "--data", dir, "--head-bytes", "200000", f); code != 0 {
			t.Fatalf("ingest %s: exit %d", f, code)
		}
	}
	snap, err := store.OpenSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	per := map[uint32][]storedEntry{}
	labels := map[uint32][]query.Label{}
	for _, p := range snap.Parts {
		for i := range p.NumBlocks() {
			var b segment.Block
			if err := p.ReadBlock(i, &b); err != nil {
				t.Fatal(err)
			}
			for k := range b.Len() {
				s := b.Streams[k]
				per[s] = append(per[s], storedEntry{b.Times[k], s, bytes.Clone(b.Line(k))})
			}
		}
	}
	for s := range per {
		ls, err := ingest.ParseLabels(snap.Labels(s))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			labels[s] = append(labels[s], query.Label(l))
		}
	}
	// The store holds each file's lines exactly (CRs stripped).
	for s, es := range per {
		src := filepath.Join("../../testdata/loghub", labels[s][0].Value)
		data, _ := os.ReadFile(src)
		data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
		data = bytes.TrimSuffix(bytes.TrimSuffix(data, []byte("\n")), []byte("\r"))
		lines := bytes.Split(data, []byte("\n"))
		if len(lines) != len(es) {
			t.Fatalf("%s: %d lines stored, file has %d", src, len(es), len(lines))
		}
		for i := range lines {
			if !bytes.Equal(lines[i], es[i].line) {
				t.Fatalf("%s line %d differs", src, i+1)
			}
		}
	}
	return dir, per, labels
}

// oracleArgs are the options a test query uses, parsed by the oracle
// itself (not by the command).
type oracleArgs struct {
	plan          *query.Plan
	pattern       *string // positional literal (grep -F), when no plan
	fold          bool
	since, until  int64
	limit         int64
	newest        bool
	before, after int
	count         bool
}

// parseOracleArgs reads the subset of hay search flags the table uses.
func parseOracleArgs(t *testing.T, args []string) oracleArgs {
	t.Helper()
	var o oracleArgs
	var g query.GrepOptions
	ctx := -1
	var qsrc string
	hasQuery := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() string { i++; return args[i] }
		atoi := func(s string) int {
			n, err := strconv.Atoi(s)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		tm := func(s string) int64 {
			tt, err := time.Parse(time.RFC3339, s)
			if err != nil {
				t.Fatal(err)
			}
			return tt.UnixNano()
		}
		switch a {
		case "--query":
			qsrc, hasQuery = next(), true
		case "-e":
			g.Patterns = append(g.Patterns, next())
		case "-v":
			g.Exclude = append(g.Exclude, next())
		case "-E":
			g.Regex = append(g.Regex, next())
		case "-i":
			o.fold = true
		case "-c":
			o.count = true
		case "-A":
			o.after = atoi(next())
		case "-B":
			o.before = atoi(next())
		case "-C":
			ctx = atoi(next())
		case "--limit":
			o.limit = int64(atoi(next()))
		case "--order":
			o.newest = next() == "newest"
		case "--since":
			o.since = tm(next())
		case "--until":
			o.until = tm(next())
		case "--":
			p := next()
			o.pattern = &p
		default:
			t.Fatalf("oracle: unknown arg %q", a)
		}
	}
	if ctx >= 0 {
		o.before, o.after = ctx, ctx
	}
	grep := len(g.Patterns)+len(g.Exclude)+len(g.Regex) > 0
	switch {
	case hasQuery:
		q, err := query.Parse(qsrc)
		if err != nil {
			t.Fatal(err)
		}
		if o.plan, err = query.Compile(q); err != nil {
			t.Fatal(err)
		}
	case grep:
		if o.pattern != nil {
			g.Patterns = append(g.Patterns, *o.pattern)
			o.pattern = nil
		}
		g.Fold = o.fold
		q, err := query.FromGrep(g)
		if err != nil {
			t.Fatal(err)
		}
		if o.plan, err = query.Compile(q); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

func foldASCII(b []byte) []byte {
	b = bytes.Clone(b)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 32
		}
	}
	return b
}

// searchOracle renders what hay search must print, by brute force: every
// stored entry through the plan (or bytes.Contains), context per stream,
// streams merged by time (ties: lower stream id; Newest: the reverse),
// limit with the last match's trailing context, "--" between groups.
func searchOracle(per map[uint32][]storedEntry, labels map[uint32][]query.Label, o oracleArgs) []byte {
	until := o.until
	if until == 0 {
		until = 1<<63 - 1
	}
	since := o.since
	if since == 0 {
		since = -1 << 63
	}
	before, after := o.before, o.after
	if o.newest {
		before, after = after, before
	}
	type item struct {
		e        storedEntry
		ctx, grp bool
		pos      int
	}
	var ids []uint32
	for s := range per {
		ids = append(ids, s)
	}
	slices.Sort(ids)
	runs := map[uint32][]item{}
	all := map[uint32][]storedEntry{}
	for _, s := range ids {
		if o.plan != nil && !o.plan.MatchStream(labels[s]) {
			continue
		}
		var ents []storedEntry
		var hit []bool
		for _, e := range per[s] {
			if e.time < since || e.time >= until {
				continue
			}
			var ok bool
			switch {
			case o.plan != nil:
				ok = o.plan.MatchEntry(labels[s], e.line)
			case o.fold:
				ok = bytes.Contains(foldASCII(e.line), foldASCII([]byte(*o.pattern)))
			default:
				ok = bytes.Contains(e.line, []byte(*o.pattern))
			}
			ents = append(ents, e)
			hit = append(hit, ok)
		}
		if o.newest {
			slices.Reverse(ents)
			slices.Reverse(hit)
		}
		all[s] = ents
		show := make([]bool, len(ents))
		for i, h := range hit {
			if h {
				for j := max(0, i-before); j <= min(len(ents)-1, i+after); j++ {
					show[j] = true
				}
			}
		}
		for i, e := range ents {
			if show[i] {
				runs[s] = append(runs[s], item{e, !hit[i], i == 0 || !show[i-1], i})
			}
		}
	}
	if o.newest && before == 0 && after == 0 {
		// --order newest sorts by time, the exact reverse of --order
		// oldest, even where a stream's times go backwards (Zookeeper's
		// sample does); only context keeps a stream's stored order.
		for _, s := range ids {
			slices.SortStableFunc(runs[s], func(a, b item) int { return cmp.Compare(b.e.time, a.e.time) })
		}
	}
	less := func(a, b storedEntry) bool {
		if o.newest {
			a, b = b, a
		}
		if a.time != b.time {
			return a.time < b.time
		}
		return a.stream < b.stream
	}
	var res []item
	n := int64(0)
	for {
		best, found := uint32(0), false
		for _, s := range ids {
			if len(runs[s]) > 0 && (!found || less(runs[s][0].e, runs[best][0].e)) {
				best, found = s, true
			}
		}
		if !found {
			break
		}
		it := runs[best][0]
		runs[best] = runs[best][1:]
		res = append(res, it)
		if !it.ctx {
			n++
			if o.limit > 0 && n == o.limit {
				ents := all[best]
				for i := it.pos + 1; i < min(len(ents), it.pos+1+after); i++ {
					res = append(res, item{ents[i], true, false, i})
				}
				break
			}
		}
	}
	var out bytes.Buffer
	if o.count {
		fmt.Fprintln(&out, n)
		return out.Bytes()
	}
	ctx := o.before > 0 || o.after > 0
	for i, it := range res {
		if ctx && i > 0 && (it.grp || it.e.stream != res[i-1].e.stream) {
			out.WriteString("--\n")
		}
		out.Write(it.e.line)
		out.WriteByte('\n')
	}
	return out.Bytes()
}

// queryTable is the end-to-end table: each row is the arguments after
// `hay search --data DIR`. Expected output comes from searchOracle.
var queryTable = [][]string{
	// Selectors.
	{"--query", `{source="HDFS_2k.log"}`},
	{"--query", `{source=~"H.*"}`, "--limit", "50"},
	{"--query", `{source=~"Linux.*|OpenSSH.*"}`, "-c"},
	{"--query", `{source!="HDFS_2k.log", source=~".+"}`, "-c"},
	{"--query", `{source!~"(HDFS|Hadoop|Spark).*", source=~".+"}`, "--limit", "300"},
	{"--query", `{source="nope.log"}`},
	{"--query", `{source=~".+"}`, "--order", "newest", "--limit", "40"},
	// Line filters across streams.
	{"--query", `{source=~".+"} |= "error"`},
	{"--query", `{source=~".+"} |= "ERROR"`, "--order", "newest"},
	{"--query", `{source=~".+"} |~ "(?i)error"`},
	{"--query", `{source=~".+"} |~ "(?i)error"`, "-c"},
	{"--query", `{source=~".+"} |~ "(?i)kernel"`},
	{"--query", `{source=~".+"} |~ "(?i)failed password"`, "--limit", "7"},
	{"--query", `{source=~".+"} |= "error" != "mod_jk"`},
	{"--query", `{source=~".+"} |= "session" |= "opened" |= "root"`},
	{"--query", `{source=~".+"} |= "session" |= "opened" |= "root"`, "-c"},
	{"--query", `{source=~".+"} |= "WARN" or "ERROR" or "FATAL"`},
	{"--query", `{source=~".+"} |= "WARN" or "ERROR" or "FATAL"`, "--order", "newest", "--limit", "25"},
	{"--query", `{source=~".+"} != "INFO" != "info"`, "-c"},
	{"--query", `{source=~".+"} != "a" or "e"`},
	{"--query", `{source=~".+"} != "INFO" or "info" or "WARN"`, "--order", "newest"},
	{"--query", `{source=~".+"} |~ "blk_-?[0-9]{5}"`, "--limit", "100"},
	{"--query", `{source=~".+"} |~ "port [0-9]+ ssh2$"`, "-c"},
	{"--query", `{source=~".+"} |~ "^\\[Sun Dec 04"`},
	{"--query", `{source=~".+"} !~ "[0-9]{4}"`},
	{"--query", `{source=~".+"} |~ "Failed|Invalid" !~ "root"`, "--limit", "60"},
	{"--query", `{source=~".+"} |~ "(?i)(timeout|timed out)"`},
	{"--query", `{source=~".+"} |~ "user=\\w+ "`, "-c"},
	{"--query", `{source=~".+"} |~ "(?i)exception" or "(?i)error"`, "-c"},
	{"--query", `{source=~".+"} |= ""`, "-c"},
	{"--query", `{source=~".+"} |= "no such text in loghub"`},
	{"--query", `{source="Windows_2k.log"} |= "CBS" |~ "Warning|Error"`},
	{"--query", `{source="Zookeeper_2k.log"} |= "WARN" |= "Connection"`, "--order", "newest"},
	{"--query", "{source=~\".+\"} |= `sshd[` |= `]: Accepted`"},
	// Parsers and label filters.
	{"--query", `{source=~".+"} | logfmt | rhost != ""`},
	{"--query", `{source=~".+"} |= "=" | logfmt | user="root"`, "-c"},
	{"--query", `{source=~".+"} | json | __error__=""`, "-c"},
	{"--query", `{source=~"OpenSSH.*"} | logfmt | uid >= 0 | ruser=""`, "--limit", "20"},
	{"--query", `{source=~".+"} | source="Apache_2k.log" |= "notice"`, "-c"},
	// Time ranges.
	{"--query", `{source=~".+"} |= "error"`, "--since", "2005-12-05T00:00:00Z", "--until", "2005-12-06T00:00:00Z"},
	{"--query", `{source=~".+"}`, "--since", "2015-10-18T18:01:00Z", "--until", "2015-10-18T18:10:00Z", "-c"},
	{"--query", `{source=~".+"} |~ "(?i)info"`, "--since", "2016-09-28T04:30:00Z", "--order", "newest", "--limit", "30"},
	// Grep-style sugar.
	{"-e", "error", "-e", "Failed"},
	{"-e", "error", "-e", "Failed", "--order", "newest", "--limit", "33"},
	{"-e", "ERROR", "-v", "SessionTracker"},
	{"-v", "INFO", "-v", "info", "-v", "notice", "--limit", "200"},
	{"-E", "[0-9]+\\.[0-9]+\\.[0-9]+\\.[0-9]+:[0-9]+"},
	{"-E", "ssh2$", "-e", "Accepted", "-c"},
	{"-i", "-e", "error"},
	{"-i", "-e", "ERROR", "-v", "mod_jk"},
	{"-i", "-E", "fail(ed|ure)", "-c"},
	{"-v", "a", "--", "e"},
	{"-i", "-v", "X", "--", "kernel"},
	// The literal path across streams.
	{"--", "error"},
	{"-i", "--", "ERROR"},
	{"-c", "--", "INFO"},
	{"--order", "newest", "--limit", "10", "--", "INFO"},
	{"--limit", "1", "--", "WARN"},
	{"--", ""},
	// Context across streams.
	{"-C", "1", "--", "error"},
	{"-A", "2", "--order", "newest", "--", "Failed password for invalid"},
	{"-B", "3", "-e", "FATAL", "-e", "fatal"},
	{"-C", "2", "--limit", "5", "--query", `{source=~".+"} |~ "(?i)exception"`},
	{"-A", "1", "-B", "2", "--order", "newest", "--limit", "4", "--query", `{source=~"Linux.*|OpenSSH.*"} |~ "(?i)fail"`},
	{"-C", "50", "--query", `{source="HDFS_2k.log"} |= "blk_38865049064139660"`},
}

// TestQueryTable runs every row of queryTable through hay search and
// compares stdout and exit status with the oracle's.
func TestQueryTable(t *testing.T) {
	if len(queryTable) < 60 {
		t.Fatalf("only %d queries", len(queryTable))
	}
	dir, per, labels := loghubStore(t)
	matched := 0
	for _, row := range queryTable {
		o := parseOracleArgs(t, row)
		want := searchOracle(per, labels, o)
		wcode := 0
		if len(want) == 0 || o.count && string(want) == "0\n" {
			wcode = 1
		}
		got, code := hayInProcess(t, append([]string{"search", "--data", dir}, row...)...)
		if !bytes.Equal(got, want) || code != wcode {
			t.Errorf("hay search %q: exit %d, %d bytes; want exit %d, %d bytes; first diff at line %d",
				row, code, len(got), wcode, len(want), firstDiffLine(got, want))
		}
		if wcode == 0 {
			matched++
		}
		if testing.Verbose() {
			t.Logf("%q: %d bytes, %d lines", row, len(want), bytes.Count(want, []byte("\n")))
		}
	}
	// The table must mostly find something, or it tests little.
	if matched < len(queryTable)-6 {
		t.Errorf("only %d of %d queries matched anything", matched, len(queryTable))
	}
}

// TestContextVsGrep: one file in the store, -A/-B/-C (with --limit as
// grep -m) print exactly what grep prints, separators included.
func TestContextVsGrep(t *testing.T) {
	if _, err := exec.LookPath("grep"); err != nil {
		t.Skip("no grep binary")
	}
	for _, name := range []string{"OpenSSH_2k.log", "Apache_2k.log", "HDFS_2k.log"} {
		src := filepath.Join("../../testdata/loghub", name)
		plain := stripCR(t, src)
		dir := filepath.Join(t.TempDir(), "data")
		if _, code := hayInProcess(t, "ingest", "--data", dir, "--head-bytes", "60000", src); code != 0 {
			t.Fatal("ingest failed")
		}
		for _, nd := range []string{"error", "Failed", "authentication failure", "notice", "INFO", "blk_38865049064139660", "zzz absent", "e"} {
			for _, ctx := range [][]string{{"-A", "1"}, {"-B", "2"}, {"-C", "1"}, {"-C", "3"}, {"-A", "5", "-B", "1"}, {"-C", "2", "-m", "3"}, {"-A", "4", "-m", "1"}, {"-C3"}} {
				want, wcode := grepOut(t, nd, plain, ctx...)
				args := []string{"search", "--data", dir}
				for _, a := range ctx {
					if a == "-m" {
						a = "--limit"
					}
					args = append(args, a)
				}
				got, gcode := hayInProcess(t, append(args, "--", nd)...)
				if !bytes.Equal(got, want) || gcode != wcode {
					t.Fatalf("%s %v %q: exit %d, %d bytes; grep exit %d, %d bytes; first diff at line %d",
						name, ctx, nd, gcode, len(got), wcode, len(want), firstDiffLine(got, want))
				}
				// -e compiles to a plan; for a plain literal it must agree.
				got, gcode = hayInProcess(t, append(args, "-e", nd)...)
				if !bytes.Equal(got, want) || gcode != wcode {
					t.Fatalf("-e: %s %v %q: exit %d, %d bytes; grep exit %d, %d bytes", name, ctx, nd, gcode, len(got), wcode, len(want))
				}
			}
		}
	}
}

var histLine = regexp.MustCompile(`^[0-9-]{10}( [0-9:]{5}(:[0-9]{2})?)? +([0-9]+) █*$`)

// TestHistSumsCount: --hist bucket counts add up to -c, every bar fits 80
// columns, and the chart has at most 60 buckets.
func TestHistSumsCount(t *testing.T) {
	dir, _, _ := loghubStore(t)
	for _, row := range [][]string{
		{"--query", `{source=~".+"} |= "error"`},
		{"--query", `{source="OpenSSH_2k.log"} |= "Failed password"`},
		{"--query", `{source=~"H.*"}`},
		{"-i", "-e", "warn"},
		{"--", "INFO"},
		{"--query", `{source=~".+"} |= "error"`, "--since", "2005-12-05T00:00:00Z", "--until", "2005-12-06T00:00:00Z"},
	} {
		c, code := hayInProcess(t, append([]string{"search", "--data", dir, "-c"}, row...)...)
		if code != 0 {
			t.Fatalf("%q -c: exit %d", row, code)
		}
		want, _ := strconv.ParseInt(strings.TrimSpace(string(c)), 10, 64)
		h, code := hayInProcess(t, append([]string{"search", "--data", dir, "--hist"}, row...)...)
		if code != 0 {
			t.Fatalf("%q --hist: exit %d", row, code)
		}
		lines := strings.Split(strings.TrimSuffix(string(h), "\n"), "\n")
		var sum int64
		for _, l := range lines[:len(lines)-1] {
			m := histLine.FindStringSubmatch(l)
			if m == nil || len([]rune(l)) > 80 {
				t.Fatalf("%q: bad histogram line %q", row, l)
			}
			n, _ := strconv.ParseInt(m[3], 10, 64)
			sum += n
		}
		if sum != want || len(lines)-1 > 60 || !strings.HasPrefix(lines[len(lines)-1], fmt.Sprintf("total %d in ", want)) {
			t.Fatalf("%q: histogram sums to %d over %d buckets (%q), -c says %d", row, sum, len(lines)-1, lines[len(lines)-1], want)
		}
	}
}

// TestSearchArgErrors: bad queries and flag mixes exit 2; a bad query's
// message shows the query with a caret under the position.
func TestSearchArgErrors(t *testing.T) {
	dir, _, _ := loghubStore(t)
	for _, args := range [][]string{
		{"--query", `{source="x"} |= "a`},
		{"--query", `{source="x"} | foo`},
		{"--query", `|= "x"`},
		{"--query", `{source="x"}`, "-e", "a"},
		{"--query", `{source="x"}`, "-i"},
		{"--query", `{source="x"}`, "pat"},
		{"-e", "a", "pat"},
		{"-E", "(unclosed"},
		{"--order", "sideways", "x"},
		{"-A", "-1", "x"},
		{},
		{"a", "b"},
	} {
		if _, code := hayInProcess(t, append([]string{"search", "--data", dir}, args...)...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
	msg := queryError(`{source="x"} |= "a" |~ "(" `, &query.ParseError{Pos: 20, Msg: "bad regex"})
	want := "bad query at byte 20: bad regex\n  {source=\"x\"} |= \"a\" |~ \"(\" \n                      ^"
	if msg != want {
		t.Errorf("queryError:\n%s\nwant\n%s", msg, want)
	}
	pq, err := query.Parse(`{a="b"} |= "x" |~ "(?i)é" | json | n > "oops`)
	if err == nil {
		t.Fatalf("parsed %v", pq)
	}
	if m := queryError(`{a="b"} |= "x" |~ "(?i)é" | json | n > "oops`, err); !strings.Contains(m, "\n  {a=\"b\"}") || !strings.HasSuffix(m, "^") {
		t.Errorf("queryError: %s", m)
	}
	// A metric query gets the caret and a hint where such queries go; a
	// log query that merely names a label "sum" does not.
	for src, hint := range map[string]bool{
		`sum by (source) (count_over_time({source=~".+"} |= "error" [1h]))`: true,
		` (rate({a="b"}[5m]))`:                    true,
		`count_over_time({a="b"}[1m])`:            true,
		`topk(3, sum by (a) (rate({a="b"}[1m])))`: true,
		`{sum="1"} |= "x`:                         false,
		`summary`:                                 false,
		`{a="b"} | json | count > 2 | rate = "x`:  false,
	} {
		pq, err := query.Parse(src)
		if err == nil {
			t.Fatalf("%s: parsed %v", src, pq)
		}
		m := queryError(src, err)
		if strings.Contains(m, metricQueryHint) != hint || !strings.Contains(m, "^") {
			t.Errorf("%s: hint %v wanted; message:\n%s", src, hint, m)
		}
	}
}
