package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"haystack/internal/segment"
	"haystack/internal/store"
)

// The differential test builds stores the way users do (several ingest
// runs, files that grow and are ingested again, new files, compactions
// with a small --merge-bytes in between, so that compacted segments get
// merged), and after every step compares many random `hay search`
// queries with an oracle computed here from the raw lines (bytes.Contains,
// ASCII folding, regexp) and, for one-stream stores, with grep itself.
// Each query also runs with --no-index, which must print the same bytes.
//
// HAY_DIFF_SEED=N runs with another seed; a failure names the seed.

// diffSeeds are the default seeds. An odd seed makes a one-file corpus,
// an even one a multi-stream corpus; seed%4 == 1 starts with a step of
// more than one of ingest's 1 MiB blocks, seed%4 == 0 with many streams,
// seed%4 >= 2 makes repetitive logs.
var diffSeeds = []uint64{1, 2, 3, 4}

// dfile is one input file of a corpus as it is on disk.
type dfile struct {
	name      string
	path      string
	raw       []byte   // what is on disk
	stored    [][]byte // the entries ingest stored from it, oldest first
	times     []int64  // the time of each entry
	rotations int
	rank      int // the order of its stream's id; -1 before it has one
}

// diffEntries is what ingest stores for raw: lines split on "\n", one
// trailing "\r" stripped from each, a last line without "\n" kept.
func diffEntries(raw []byte) [][]byte {
	if len(raw) == 0 {
		return nil
	}
	raw = bytes.TrimSuffix(raw, []byte("\n"))
	ls := bytes.Split(raw, []byte("\n"))
	for i, l := range ls {
		ls[i] = bytes.TrimSuffix(l, []byte("\r"))
	}
	return ls
}

// dentry is one stored entry in the oracle's order.
type dentry struct {
	line   []byte
	time   int64
	stream int // index in dcorpus.files
	rank   int // ties in time go to the lower rank (stream id order)
}

// diffWords are the pieces lines are made of: log words, letters that fold
// only in Unicode (ſ, K), regex metacharacters, invalid UTF-8, control
// bytes. No digits, so that no line looks like it starts with a time.
var diffWords = []string{
	"alpha", "beta", "gamma", "error", "Error", "ERROR", "timeout", "TimeOut",
	"conn", "reset", "user=", "id=", "k", "K", "s", "S", "ſ", "\u212a", "é", "É",
	"\xff", "\xfe\xfd", "\x00", "\t", " ", " ", " ", "a.b", "a*b", "(x)", "[y]",
	"^", "$", "|", "\\", "?", "+", "{", "}", "-", "--", "\r", "q", "Q", "zz",
	"ab", "AB", "aB", "\x1b[0m", "ǅ", "Σσς", "ß", "\u0130", "ı",
}

// diffPlantPool are needles planted into lines at random places.
var diffPlantPool = []string{
	"needle", "NeedLe", "a.b*c", "(?i)", "[x]", "x|y", `\d`, "q", "zz", "Ab",
	"\xff\xfe", "k\u212a", "ſs", "tail\r", "$^", "--", "-e", "Σ", "ERR", "xyzzy",
	"fooBAR", "aa", "é",
}

// dcorpus is one generated corpus, its files and its store.
type dcorpus struct {
	r       *rand.Rand
	r2      *rand.Rand // for features added later, so that r draws as before
	dir     string
	data    string
	multi   bool
	files   []*dfile
	planted []string
	clock   int64 // multi: the next timestamp (unix seconds)
	// bounds are times taken before the first ingest and after each
	// (one-stream corpora: entries have the ingestion time).
	bounds []int64

	streams int      // streams defined so far
	big     bool     // the next step is large
	many    bool     // multi: start with many streams
	queries int      // per phase: oracle queries (and a half against grep)
	split   string   // the rest of a needle the last line began
	prev    []byte   // the last line made
	repeats [][]byte // when set, most lines are copies of these

	stdout, devnull *os.File
}

// content makes one line's content (no "\n"); cont: a continuation line
// of a multi-stream corpus, which must not start like a timestamp.
func (c *dcorpus) content(cont bool) []byte {
	b := c.content1(cont)
	if !cont && len(c.prev) > 0 && c.r2.IntN(20) == 0 {
		// A line that differs from the one before only in case.
		b = bytes.Clone(c.prev)
		for i, ch := range b {
			if ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' {
				b[i] = ch ^ 0x20
			}
		}
	}
	c.prev = b
	return b
}

func (c *dcorpus) content1(cont bool) []byte {
	r := c.r
	var b []byte
	if c.split != "" {
		// The rest of a needle the previous line ended with: the two
		// lines hold it only together, which must not match.
		b = append(b, c.split...)
		c.split = ""
		if cont {
			b = append([]byte("~"), b...)
		}
	}
	if c.repeats != nil && r.IntN(20) > 0 {
		// Repetitive logs (a block compresses well enough for LZ4).
		return append(b, c.repeats[r.IntN(len(c.repeats))]...)
	}
	switch k := r.IntN(100); {
	case k < 5:
		return nil // empty line
	case k < 8:
		// Longer than compact's 4 KiB blocks.
		n := 4200 + r.IntN(3000)
		for len(b) < n {
			b = append(b, diffWords[r.IntN(len(diffWords))]...)
			if r.IntN(50) == 0 {
				b = append(b, c.planted[r.IntN(len(c.planted))]...)
			}
		}
	default:
		n := 1 + r.IntN(25)
		for range n {
			if r.IntN(6) == 0 {
				b = append(b, c.planted[r.IntN(len(c.planted))]...)
			} else {
				b = append(b, diffWords[r.IntN(len(diffWords))]...)
			}
		}
	}
	// Needles at the very start and end.
	if r.IntN(8) == 0 {
		b = append([]byte(c.planted[r.IntN(len(c.planted))]), b...)
	}
	if r.IntN(8) == 0 {
		b = append(b, c.planted[r.IntN(len(c.planted))]...)
	}
	if r.IntN(12) == 0 {
		// The first part of a needle; the next line starts with the rest.
		p := c.planted[r.IntN(len(c.planted))]
		if len(p) > 1 {
			k := 1 + r.IntN(len(p)-1)
			b = append(b, p[:k]...)
			c.split = p[k:]
		}
	}
	if cont && len(b) > 0 {
		// A line without a timestamp must not look like one: its first
		// byte is no letter, digit or what a timestamp may start with.
		ch := b[0]
		if ch < 0x80 && (ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || strings.IndexByte("<[@{ \t\r", ch) >= 0) {
			b = append([]byte("~"), b...)
		}
	}
	return b
}

// ending is a line's end: CRLF for some lines, as in a Windows log.
func (c *dcorpus) ending() string {
	if c.r.IntN(10) < 3 {
		return "\r\n"
	}
	return "\n"
}

// diffStepBytes is about how many bytes each step adds to the corpus: a
// fixed size makes every step's compacted segments small for
// diffMergeBytes, and three steps' worth get merged.
const (
	diffStepBytes  = 40 << 10
	diffMergeBytes = 5 * diffStepBytes
)

// step appends a chunk of lines to some files (new ones too) and returns
// the files to ingest.
func (c *dcorpus) step(t *testing.T, last bool) []*dfile {
	r := c.r
	var touched []*dfile
	chunks := map[*dfile][]byte{}
	var times map[*dfile][]int64
	if !c.multi {
		if len(c.files) == 0 {
			c.files = append(c.files, &dfile{name: "one.log", rank: -1})
		}
		f := c.files[0]
		var b []byte
		size := diffStepBytes
		if c.big {
			// A first step of several of ingest's 1 MiB blocks.
			size, c.big = 1100<<10, false
		}
		for len(b) < size {
			b = append(b, c.content(false)...)
			b = append(b, c.ending()...)
		}
		if last && r.IntN(2) == 0 {
			// The last line without its newline (or with only "\r").
			b = bytes.TrimSuffix(b, []byte("\n"))
		}
		chunks[f] = b
		touched = append(touched, f)
	} else {
		times = map[*dfile][]int64{}
		nf := len(c.files)
		if nf == 0 || r.IntN(2) == 0 {
			n := 1 + r.IntN(2)
			if nf == 0 && c.many {
				// More streams than the searches' 2×workers blocks in
				// flight: the merge holds one block per stream.
				n = 12 + r.IntN(8)
			}
			for range n {
				c.files = append(c.files, &dfile{name: fmt.Sprintf("s%d.log", len(c.files)), rank: -1})
			}
		}
		// This step's files: the new ones and a few old ones.
		for i, f := range c.files {
			if i >= nf || r.IntN(2) == 0 {
				touched = append(touched, f)
			}
		}
		if len(touched) == 0 {
			touched = append(touched, c.files[r.IntN(len(c.files))])
		}
		// Each record (a timestamped line and its continuation lines)
		// goes to a random file; the last one of each file may end
		// without a newline in the last step. Records of different
		// files may share a time (ties go to the older stream).
		total := 0
		for total < diffStepBytes {
			f := touched[r.IntN(len(touched))]
			c.clock += int64(r.IntN(3))
			b := chunks[f]
			n := len(b)
			b = append(b, time.Unix(c.clock, 0).UTC().Format(time.RFC3339)...)
			b = append(b, ' ')
			b = append(b, c.content(false)...)
			times[f] = append(times[f], c.clock*1e9)
			b = append(b, c.ending()...)
			if r.IntN(3) == 0 {
				for range 1 + r.IntN(3) {
					b = append(b, c.content(true)...)
					times[f] = append(times[f], c.clock*1e9)
					b = append(b, c.ending()...)
				}
			}
			total += len(b) - n
			chunks[f] = b
		}
		for _, f := range touched {
			if len(chunks[f]) > 0 && c.r2.IntN(4) == 0 {
				// Lines without a timestamp before the chunk's first
				// one (a banner, or the rest of an entry that an earlier
				// run cut): they take its time.
				var lead []byte
				c.r, c.r2 = c.r2, c.r // these lines from the second stream too
				for range 1 + c.r.IntN(2) {
					lead = append(lead, c.content(true)...)
					lead = append(lead, c.ending()...)
					times[f] = append([]int64{times[f][0]}, times[f]...)
				}
				c.r, c.r2 = c.r2, c.r
				chunks[f] = append(lead, chunks[f]...)
			}
		}
		if last {
			for _, f := range touched { // not the map: the same draws every run
				// The last line without its newline (or with only "\r"),
				// unless it is empty: then there is no line to end.
				if b := chunks[f]; r.IntN(2) == 0 && !bytes.HasSuffix(b, []byte("\n\n")) {
					chunks[f] = bytes.TrimSuffix(b, []byte("\n"))
				}
			}
		}
	}
	for _, f := range touched {
		chunk := chunks[f]
		if len(f.raw) > 0 && len(chunk) > 0 && r.IntN(5) == 0 {
			// Rotated (rewritten) file: ingest takes all of it as new
			// entries of the same stream. Its first line differs from
			// the old one's, so it is not mistaken for a grown file.
			f.rotations++
			marker := fmt.Sprintf("rotated %c\n", 'a'+f.rotations)
			if c.multi {
				// Without a timestamp: it takes the chunk's first.
				times[f] = append([]int64{times[f][0]}, times[f]...)
			}
			chunk = append([]byte(marker), chunk...)
			f.raw = chunk
		} else {
			f.raw = append(f.raw, chunk...)
		}
		es := diffEntries(chunk)
		f.stored = append(f.stored, es...)
		if c.multi {
			if len(times[f]) != len(es) {
				t.Fatalf("generator: %s: %d entries, %d times", f.name, len(es), len(times[f]))
			}
			f.times = append(f.times, times[f]...)
		} else {
			// The ingestion time, set once ingest has run.
			f.times = append(f.times, make([]int64, len(es))...)
		}
		f.path = filepath.Join(c.dir, f.name)
		if err := os.WriteFile(f.path, f.raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return touched
}

// oracle returns the stored entries in search order (oldest first): each
// stream in ingestion order, streams merged by time, ties to the stream
// ingested first (the lower rank).
func (c *dcorpus) oracle(t *testing.T) []dentry {
	var all []dentry
	for si, f := range c.files {
		for i, l := range f.stored {
			all = append(all, dentry{line: l, time: f.times[i], stream: si, rank: f.rank})
		}
	}
	slices.SortStableFunc(all, func(a, b dentry) int {
		if a.time != b.time {
			return cmp.Compare(a.time, b.time)
		}
		return cmp.Compare(a.rank, b.rank)
	})
	return all
}

// readManifestForTest reads dir/MANIFEST: a header line, then the JSON body.
func diffManifest(t *testing.T, dir string) store.Manifest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "MANIFEST"))
	if err != nil {
		t.Fatal(err)
	}
	nl := bytes.IndexByte(data, '\n')
	var m store.Manifest
	if nl < 0 || json.Unmarshal(data[nl+1:], &m) != nil {
		t.Fatalf("manifest: cannot parse %q", data[:min(len(data), 200)])
	}
	return m
}

// diffLower folds ASCII letters only, as grep -i in the C locale.
func diffLower(b []byte) []byte {
	out := make([]byte, len(b))
	for i, ch := range b {
		if ch >= 'A' && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		out[i] = ch
	}
	return out
}

// dquery is one search: hay's arguments and the oracle's predicate.
type dquery struct {
	args  []string
	match func(line []byte) bool
	// streams, when set, are the streams a --query selects.
	streams map[int]bool
	// since/until filter by time (0: none); limit, newest, count as the flags.
	since, until int64
	limit        int
	newest       bool
	count        bool
	// before and after are the context entries wanted (-B, -A); grouped
	// says -A/-B/-C were given, even as 0, which prints "--" between
	// groups as grep does.
	before, after int
	grouped       bool
	// shown is set by expect with context: the entries printed, in order.
	shown [][]byte
}

// expect is the oracle: what hay search must print for q over es, and
// its exit status.
func (q *dquery) expect(es []dentry) ([]byte, int) {
	if q.before > 0 || q.after > 0 || q.grouped {
		return q.expectContext(es)
	}
	var hits [][]byte
	for _, e := range es {
		if q.since != 0 && e.time < q.since || q.until != 0 && e.time >= q.until {
			continue
		}
		if (q.streams == nil || q.streams[e.stream]) && q.match(e.line) {
			hits = append(hits, e.line)
		}
	}
	if q.newest {
		slices.Reverse(hits)
	}
	if q.limit > 0 && len(hits) > q.limit {
		hits = hits[:q.limit]
	}
	code := 0
	if len(hits) == 0 {
		code = 1
	}
	if q.count {
		return []byte(strconv.Itoa(len(hits)) + "\n"), code
	}
	var out []byte
	for _, h := range hits {
		out = append(out, h...)
		out = append(out, '\n')
	}
	return out, code
}

// expectContext is grep's context applied to each stream (its entries in
// the time range, in ingestion order), the matches and context entries of
// all streams then merged in search order, with "--" between two printed
// entries that are not of the same group of the same stream. Newest
// first is that output backwards.
func (q *dquery) expectContext(es []dentry) ([]byte, int) {
	byStream := map[int][]int{} // stream -> positions in es
	var streams []int
	for i, e := range es {
		if q.since != 0 && e.time < q.since || q.until != 0 && e.time >= q.until {
			continue
		}
		if _, ok := byStream[e.stream]; !ok {
			streams = append(streams, e.stream)
		}
		byStream[e.stream] = append(byStream[e.stream], i)
	}
	shown := make([]bool, len(es))
	group := make([]int, len(es)) // group number, unique over streams
	matched, groups := 0, 0
	for _, s := range streams {
		pos := byStream[s]
		for i, p := range pos {
			if (q.streams == nil || q.streams[s]) && q.match(es[p].line) {
				matched++
				for j := max(0, i-q.before); j <= min(len(pos)-1, i+q.after); j++ {
					shown[pos[j]] = true
				}
			}
		}
		for i, p := range pos {
			if shown[p] {
				if i == 0 || !shown[pos[i-1]] {
					groups++
				}
				group[p] = groups
			}
		}
	}
	var lines [][]byte
	q.shown = q.shown[:0]
	last := -1
	for i, e := range es {
		if !shown[i] {
			continue
		}
		if last >= 0 && group[i] != group[last] {
			lines = append(lines, []byte("--"))
		}
		lines = append(lines, e.line)
		q.shown = append(q.shown, e.line)
		last = i
	}
	if q.newest {
		slices.Reverse(q.shown)
	}
	if q.newest {
		slices.Reverse(lines)
	}
	var out []byte
	for _, l := range lines {
		out = append(append(out, l...), '\n')
	}
	if matched == 0 {
		return out, 1
	}
	return out, 0
}

// needle picks a search string: a planted needle, a word, a piece of a
// line (possibly case-changed or mutated to be absent), or a short one.
func (c *dcorpus) needle(es []dentry) string {
	r := c.r
	switch k := r.IntN(10); {
	case k < 3:
		return c.planted[r.IntN(len(c.planted))]
	case k < 4:
		return diffWords[r.IntN(len(diffWords))]
	case k < 5:
		return []string{"", "a", "e", "-", "\r", " ", "k", "s", "ab", "zzz", "!!", "{}"}[r.IntN(12)]
	case r.IntN(30) == 0:
		// Several patterns, one per line (or a trailing newline: an
		// empty one, which matches every line).
		return c.needle(es) + "\n" + c.needle(es)
	}
	for range 20 {
		l := es[r.IntN(len(es))].line
		if len(l) == 0 {
			continue
		}
		m := 1 + r.IntN(min(24, len(l)))
		if r.IntN(8) == 0 {
			m = min(len(l), 100+r.IntN(400))
		}
		i := r.IntN(len(l) - m + 1)
		s := []byte(string(l[i : i+m]))
		switch r.IntN(4) {
		case 0:
			s[r.IntN(len(s))] = "~`#@%"[r.IntN(5)]
		case 1:
			for j := range s {
				if r.IntN(2) == 0 && s[j] >= 'a' && s[j] <= 'z' {
					s[j] -= 32
				} else if r.IntN(2) == 0 && s[j] >= 'A' && s[j] <= 'Z' {
					s[j] += 32
				}
			}
		}
		return string(s)
	}
	return "alpha"
}

// lineNeedle is a valid UTF-8 needle without a newline (for regexes and
// LogQL strings).
func (c *dcorpus) lineNeedle(es []dentry) string {
	for {
		if s := c.validNeedle(es); !strings.Contains(s, "\n") {
			return s
		}
	}
}

// validNeedle is a needle that is valid UTF-8 (for the regex-based modes).
func (c *dcorpus) validNeedle(es []dentry) string {
	for {
		if s := c.needle(es); utf8.ValidString(s) {
			return s
		}
	}
}

// diffAny matches a line that one of pat's lines matches: a pattern with
// newlines is one pattern per line, as in grep.
func diffAny(pat string, one func(string) func([]byte) bool) func([]byte) bool {
	var ms []func([]byte) bool
	for _, p := range strings.Split(pat, "\n") {
		ms = append(ms, one(p))
	}
	return func(l []byte) bool {
		for _, m := range ms {
			if m(l) {
				return true
			}
		}
		return false
	}
}

// diffContainsFold is PATTERN with -i: ASCII folding only.
func diffContainsFold(pat string) func([]byte) bool {
	return diffAny(pat, func(pat string) func([]byte) bool {
		p := diffLower([]byte(pat))
		return func(l []byte) bool { return bytes.Contains(diffLower(l), p) }
	})
}

// diffContains is a literal: grep -F.
func diffContains(pat string) func([]byte) bool {
	return diffAny(pat, func(pat string) func([]byte) bool {
		p := []byte(pat)
		return func(l []byte) bool { return bytes.Contains(l, p) }
	})
}

// diffFoldLit is a literal of -e or -v with -i: ASCII folding only, as
// PATTERN's (and grep -F -i in the C locale).
func diffFoldLit(t *testing.T, pat string) func([]byte) bool {
	return diffContainsFold(pat)
}

// diffRegex is what -E (or a folded -e/-v) means: RE2 on the entry's bytes.
func diffRegex(t *testing.T, re string) func([]byte) bool {
	x, err := regexp.Compile(re)
	if err != nil {
		t.Fatalf("test bug: regex %q: %v", re, err)
	}
	return x.Match
}

// genRegex makes an -E expression from corpus text: quoted needles,
// alternations, anchors, dots and classes, (?i).
func (c *dcorpus) genRegex(es []dentry) string {
	r := c.r
	a := regexp.QuoteMeta(c.lineNeedle(es))
	b := regexp.QuoteMeta(c.lineNeedle(es))
	switch r.IntN(9) {
	case 0:
		return a + "|" + b
	case 1:
		return "(?i)" + a
	case 2:
		return "^" + a
	case 3:
		return a + "$"
	case 4:
		// A dot in place of one character (matches invalid bytes too).
		s := []rune(c.lineNeedle(es))
		if len(s) > 1 {
			i := r.IntN(len(s))
			return regexp.QuoteMeta(string(s[:i])) + "." + regexp.QuoteMeta(string(s[i+1:]))
		}
		return "a.b"
	case 5:
		return []string{"[Kk]\\W", "x+y*", "[^a-z]{3}", "(?i)ſ", "(?i)k", "é|É", "a\\.b", "^$", "^-", "\\$\\^", "(?i)needle.*needle", "ERR(OR)?", "\\x{212a}", "(ab){2}", "[[:upper:]]{4}"}[r.IntN(15)]
	case 6:
		return a + ".*" + b
	case 7:
		return "(?i)" + a + "|" + b
	}
	return a
}

// battery generates the queries for one corpus state.
func (c *dcorpus) battery(t *testing.T, es []dentry, n int) []*dquery {
	r := c.r
	var qs []*dquery
	lo, hi := int64(0), int64(0)
	if c.multi && len(es) > 0 {
		lo, hi = es[0].time, es[len(es)-1].time
	}
	for i := range n {
		p := c.needle(es)
		var q *dquery
		k := r.IntN(17)
		switch i {
		case 0:
			// Counting every entry (the count can come from block
			// metadata alone), and every entry but some.
			q = &dquery{args: []string{"-c", ""}, match: diffContains(""), count: true}
			k = -1
		case 1:
			v := c.validNeedle(es)
			vm := diffContains(v)
			q = &dquery{args: []string{"-c", "-v", v}, match: func(l []byte) bool { return !vm(l) }, count: true}
			k = -1
		}
		switch {
		case k < 0:
		case k < 3:
			q = &dquery{args: []string{"--", p}, match: diffContains(p)}
		case k < 5:
			q = &dquery{args: []string{"-i", "--", p}, match: diffContainsFold(p)}
		case k < 6:
			q = &dquery{args: []string{"-c", "--", p}, match: diffContains(p), count: true}
			if r.IntN(2) == 0 {
				q.args = append([]string{"-i"}, q.args...)
				q.match = diffContainsFold(p)
			}
		case k < 8:
			// A limit in either order: the first N of the full output.
			q = &dquery{match: diffContains(p), limit: 1 + r.IntN(20), newest: r.IntN(2) == 0}
			q.args = []string{"--limit", strconv.Itoa(q.limit)}
			if q.newest {
				q.args = append(q.args, "--order", "newest")
			}
			if r.IntN(3) == 0 {
				q.args = append(q.args, "-i")
				q.match = diffContainsFold(p)
			}
			q.args = append(q.args, "--", p)
		case k < 9:
			// Several -e literals (with -i: ASCII folding, as PATTERN's).
			ps := []string{c.validNeedle(es), c.validNeedle(es)}
			if r.IntN(2) == 0 {
				ps = append(ps, c.validNeedle(es))
			}
			fold := r.IntN(2) == 0
			var ms []func([]byte) bool
			for _, x := range ps {
				q0 := diffContains(x)
				if fold {
					q0 = diffFoldLit(t, x)
				}
				ms = append(ms, q0)
				// args filled below
			}
			q = &dquery{match: func(l []byte) bool {
				for _, m := range ms {
					if m(l) {
						return true
					}
				}
				return false
			}}
			if fold {
				q.args = append(q.args, "-i")
			}
			for _, x := range ps {
				q.args = append(q.args, "-e", x)
			}
		case k < 10:
			// -v, alone or with a PATTERN.
			v := c.validNeedle(es)
			fold := r.IntN(3) == 0
			vm := diffContains(v)
			if fold {
				vm = diffFoldLit(t, v)
			}
			if r.IntN(2) == 0 {
				q = &dquery{args: []string{"-v", v}, match: func(l []byte) bool { return !vm(l) }}
			} else {
				pv := c.validNeedle(es)
				pm := diffContains(pv)
				if fold {
					pm = diffFoldLit(t, pv)
				}
				q = &dquery{args: []string{"-v", v, "--", pv}, match: func(l []byte) bool { return pm(l) && !vm(l) }}
			}
			if fold {
				q.args = append([]string{"-i"}, q.args...)
			}
		case k < 12:
			// -E, possibly with an -e literal and -i.
			re := c.genRegex(es)
			args := []string{"-E", re}
			fold := r.IntN(4) == 0
			pre := ""
			if fold {
				pre = "(?i)"
				args = append([]string{"-i"}, args...)
			}
			ms := []func([]byte) bool{diffRegex(t, pre+re)}
			if r.IntN(3) == 0 {
				e := c.validNeedle(es)
				args = append(args, "-e", e)
				if fold {
					ms = append(ms, diffFoldLit(t, e))
				} else {
					ms = append(ms, diffContains(e))
				}
			}
			q = &dquery{args: args, match: func(l []byte) bool {
				for _, m := range ms {
					if m(l) {
						return true
					}
				}
				return false
			}}
		case k < 13 && c.multi:
			// LogQL: a selector of some streams, line filters.
			q = c.logql(t, es)
		case k < 14:
			// The whole output newest first.
			q = &dquery{args: []string{"--order", "newest", "--", p}, match: diffContains(p), newest: true}
		default:
			// Context in every stream: a literal, or a plan.
			q = &dquery{match: diffContains(p), newest: r.IntN(3) == 0}
			if r.IntN(2) == 0 {
				q.before = r.IntN(4)
				q.after = r.IntN(4)
				q.args = []string{"-B", strconv.Itoa(q.before), "-A", strconv.Itoa(q.after)}
				q.grouped = true
			} else {
				q.before = 1 + r.IntN(3)
				q.after = q.before
				q.args = []string{"-C", strconv.Itoa(q.before)}
				q.grouped = true
			}
			if q.newest {
				q.args = append(q.args, "--order", "newest")
			}
			switch r.IntN(3) {
			case 0:
				q.args = append(q.args, "-i")
				q.match = diffContainsFold(p)
			case 1:
				v := c.validNeedle(es)
				vm := diffContains(v)
				q.args = append(q.args, "-v", v)
				q.match = func(l []byte) bool { return !vm(l) }
			}
			q.args = append(q.args, "--", p)
			if len(q.args) > 0 && slices.Contains(q.args, "-v") && r.IntN(2) == 0 {
				// -v alone.
				q.args = q.args[:len(q.args)-2]
			} else if slices.Contains(q.args, "-v") {
				vm := q.match
				pm := diffContains(p)
				q.match = func(l []byte) bool { return pm(l) && vm(l) }
			}
		}
		context := q.before > 0 || q.after > 0 || q.grouped
		if !context && !q.count && q.limit == 0 && r.IntN(6) == 0 {
			// Any query counted, or limited (a limited count is the
			// count of the first N, as grep -c -m N).
			q.count = true
			q.args = append([]string{"-c"}, q.args...)
		}
		if !context && q.limit == 0 && r.IntN(6) == 0 {
			q.limit = 1 + r.IntN(30)
			q.args = append([]string{"--limit", strconv.Itoa(q.limit)}, q.args...)
			if !q.newest && r.IntN(2) == 0 {
				q.newest = true
				q.args = append([]string{"--order", "newest"}, q.args...)
			}
		}
		if !c.multi && r.IntN(4) == 0 {
			// Bounds between ingest runs.
			i := r.IntN(len(c.bounds))
			j := i + r.IntN(len(c.bounds)-i)
			if i > 0 || r.IntN(2) == 0 {
				q.since = c.bounds[i]
				q.args = append([]string{"--since", time.Unix(0, q.since).UTC().Format(time.RFC3339Nano)}, q.args...)
			}
			if j > i && r.IntN(3) > 0 {
				q.until = c.bounds[j]
				q.args = append([]string{"--until", time.Unix(0, q.until).UTC().Format(time.RFC3339Nano)}, q.args...)
			}
		}
		if c.multi && r.IntN(3) == 0 && hi > lo {
			// A time range, bounds on entry times or between them.
			q.since = lo + r.Int64N(hi-lo+1)
			q.since -= q.since % 1e9 * int64(r.IntN(2))
			q.until = q.since + r.Int64N(hi-q.since+2e9)
			q.until -= q.until % 1e9 * int64(r.IntN(2))
			if q.until <= q.since {
				q.until = q.since + 1
			}
			q.args = append([]string{"--since", time.Unix(0, q.since).UTC().Format(time.RFC3339Nano), "--until", time.Unix(0, q.until).UTC().Format(time.RFC3339Nano)}, q.args...)
		}
		qs = append(qs, q)
	}
	return qs
}

// hay runs `hay args...` in process as hayInProcess does, with stdout
// captured, but into one reused file: a new temporary directory per call
// cost most of this test's time.
func (c *dcorpus) hay(t *testing.T, args ...string) ([]byte, int) {
	t.Helper()
	args = vEquals(args)
	if c.stdout == nil {
		var err error
		if c.stdout, err = os.Create(filepath.Join(c.dir, "stdout")); err != nil {
			t.Fatal(err)
		}
		if c.devnull, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.stdout.Close(); c.devnull.Close() })
	}
	if err := c.stdout.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.stdout.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	oldOut, oldErr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = c.stdout, c.devnull
	code := runMain(args)
	os.Stdout, os.Stderr = oldOut, oldErr
	out, err := os.ReadFile(c.stdout.Name())
	if err != nil {
		t.Fatal(err)
	}
	return out, code
}

// logql makes a --query: a stream selector (by name, regex or negated),
// then |= != |~ filters on needles from the corpus.
func (c *dcorpus) logql(t *testing.T, es []dentry) *dquery {
	r := c.r
	q := &dquery{streams: map[int]bool{}}
	var sel string
	switch r.IntN(3) {
	case 0:
		i := r.IntN(len(c.files))
		q.streams[i] = true
		sel = fmt.Sprintf("{source=%q}", c.files[i].name)
	case 1:
		var alt []string
		for i, f := range c.files {
			if r.IntN(2) == 0 {
				q.streams[i] = true
				alt = append(alt, regexp.QuoteMeta(f.name))
			}
		}
		if len(alt) == 0 {
			alt = append(alt, "none")
		}
		sel = fmt.Sprintf("{source=~%q}", strings.Join(alt, "|"))
	default:
		i := r.IntN(len(c.files))
		for j := range c.files {
			q.streams[j] = j != i
		}
		sel = fmt.Sprintf("{source=~\".+\", source!=%q}", c.files[i].name)
	}
	tick := func() string {
		for {
			if p := c.lineNeedle(es); !strings.Contains(p, "`") {
				return p
			}
		}
	}
	var ms []func([]byte) bool
	src := sel
	for range 1 + r.IntN(3) {
		switch r.IntN(4) {
		case 0, 1:
			p := tick()
			src += " |= `" + p + "`"
			ms = append(ms, diffContains(p))
		case 2:
			p := tick()
			src += " != `" + p + "`"
			m := diffContains(p)
			ms = append(ms, func(l []byte) bool { return !m(l) })
		default:
			re := c.genRegex(es)
			for strings.Contains(re, "`") {
				re = c.genRegex(es)
			}
			src += " |~ `" + re + "`"
			ms = append(ms, diffRegex(t, re))
		}
	}
	q.args = []string{"--query", src}
	q.match = func(l []byte) bool {
		for _, m := range ms {
			if !m(l) {
				return false
			}
		}
		return true
	}
	return q
}

// diffStats counts what the differential test compared.
type diffStats struct {
	queries, grepChecks, merges int
	during                      int // queries run while a compaction ran
}

// check runs one query with and without the index against the oracle.
func (c *dcorpus) check(t *testing.T, data string, es []dentry, q *dquery, phase string, st *diffStats) {
	t.Helper()
	want, wcode := q.expect(es)
	for _, noIdx := range []bool{false, true} {
		args := []string{"search", "--data", data}
		if noIdx {
			args = append(args, "--no-index")
		}
		args = append(args, q.args...)
		got, code := c.hay(t, args...)
		st.queries++
		if code != wcode || !bytes.Equal(got, want) {
			d := firstDiffLine(got, want)
			t.Fatalf("%s: hay %s\nexit %d, want %d; %d bytes, want %d; first differing line %d:\n got %q\nwant %q\nlines %d-%d:\n got %q\nwant %q",
				phase, diffQuoteArgs(args), code, wcode, len(got), len(want), d, diffLineAt(got, d), diffLineAt(want, d),
				max(1, d-3), d+3, diffLines(got, d-3, d+3), diffLines(want, d-3, d+3))
		}
	}
	if q.before > 0 || q.after > 0 || q.grouped {
		// --json: the same entries without the "--" lines, the context
		// ones (not matching) marked.
		args := append([]string{"search", "--data", data, "--json"}, q.args...)
		got, code := c.hay(t, args...)
		st.queries++
		var wantJSON, gotJSON []string
		for _, l := range q.shown {
			wantJSON = append(wantJSON, fmt.Sprintf("%q context=%v", l, !q.match(l)))
		}
		for _, obj := range bytes.Split(bytes.TrimSuffix(got, []byte("\n")), []byte("\n")) {
			if len(obj) == 0 {
				continue
			}
			var v struct {
				Line    string `json:"line"`
				Line64  string `json:"line_base64"`
				Context bool   `json:"context"`
			}
			if err := json.Unmarshal(obj, &v); err != nil {
				t.Fatalf("%s: hay %s: bad JSON %q: %v", phase, diffQuoteArgs(args), obj, err)
			}
			l := []byte(v.Line)
			if v.Line64 != "" {
				l, _ = base64.StdEncoding.DecodeString(v.Line64)
			}
			gotJSON = append(gotJSON, fmt.Sprintf("%q context=%v", l, v.Context))
		}
		if code != wcode || !slices.Equal(gotJSON, wantJSON) {
			i := 0
			for i < min(len(gotJSON), len(wantJSON)) && gotJSON[i] == wantJSON[i] {
				i++
			}
			t.Fatalf("%s: hay %s: exit %d, want %d; %d entries, want %d; first difference at %d:\n got %v\nwant %v",
				phase, diffQuoteArgs(args), code, wcode, len(gotJSON), len(wantJSON), i, gotJSON[i:min(i+1, len(gotJSON))], wantJSON[i:min(i+1, len(wantJSON))])
		}
	}
	if q.count && q.limit == 0 {
		// The histogram's buckets add up to the count.
		args := []string{"search", "--data", data, "--hist", "--json"}
		for _, a := range q.args {
			if a != "-c" {
				args = append(args, a)
			}
		}
		got, code := c.hay(t, args...)
		st.queries++
		var total int64
		for _, obj := range bytes.Split(bytes.TrimSuffix(got, []byte("\n")), []byte("\n")) {
			if len(obj) == 0 {
				continue
			}
			var v struct {
				Count int64 `json:"count"`
			}
			if err := json.Unmarshal(obj, &v); err != nil {
				t.Fatalf("%s: hay %s: bad JSON %q: %v", phase, diffQuoteArgs(args), obj, err)
			}
			total += v.Count
		}
		if code != wcode || fmt.Sprintf("%d\n", total) != string(want) {
			t.Fatalf("%s: hay %s: buckets add up to %d (exit %d), want %s (exit %d)", phase, diffQuoteArgs(args), total, code, bytes.TrimSpace(want), wcode)
		}
	}
}

// diffLines returns lines from to to of b (from 1), each cut to 80 bytes.
func diffLines(b []byte, from, to int) []string {
	var out []string
	for i := max(1, from); i <= to; i++ {
		if l := diffLineAt(b, i); l != nil {
			out = append(out, string(l[:min(len(l), 80)]))
		}
	}
	return out
}

// diffLineAt returns line n of b (from 1), cut to 300 bytes.
func diffLineAt(b []byte, n int) []byte {
	ls := bytes.Split(b, []byte("\n"))
	if n-1 < len(ls) {
		l := ls[n-1]
		return l[:min(len(l), 300)]
	}
	return nil
}

func diffQuoteArgs(args []string) string {
	var b strings.Builder
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		if a != "" && !strings.ContainsAny(a, " \t\r\n'\"\\$`|*?[](){}^<>;&#~!") && utf8.ValidString(a) {
			b.WriteString(a)
		} else {
			b.WriteString("$" + diffShellQuote(a))
		}
	}
	return b.String()
}

// shellQuote is a's bash $'...' form.
func diffShellQuote(a string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for i := 0; i < len(a); i++ {
		ch := a[i]
		switch {
		case ch == '\'' || ch == '\\':
			b.WriteByte('\\')
			b.WriteByte(ch)
		case ch < 0x20 || ch >= 0x7f:
			fmt.Fprintf(&b, "\\x%02x", ch)
		default:
			b.WriteByte(ch)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// diffGrep runs LC_ALL=C grep -a -F args... file.
func diffGrep(t *testing.T, file string, args ...string) ([]byte, int) {
	t.Helper()
	return grepArgs(t, file, append([]string{"-F"}, args...)...)
}

// grepChecks compares hay with grep on a one-stream store: literal
// searches, -i, -c, -v, several -e, context (-A/-B/-C, with and without
// --limit as grep -m), newest-first context as the oldest output
// backwards, and --json lines against the plain output.
func (c *dcorpus) grepChecks(t *testing.T, es []dentry, n int, phase string, st *diffStats) {
	r := c.r
	plain := filepath.Join(c.dir, "plain.txt")
	var buf []byte
	for _, e := range es {
		buf = append(append(buf, e.line...), '\n')
	}
	if err := os.WriteFile(plain, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	noNUL := func() string {
		p := c.needle(es)
		for strings.IndexByte(p, 0) >= 0 { // exec cannot pass NUL
			p = c.needle(es)
		}
		return p
	}
	for range n {
		p := noNUL()
		// hay's and grep's arguments for what to match.
		hpat, gpat := []string{"--", p}, []string{"--", p}
		var flags []string
		switch r.IntN(8) {
		case 0:
			// -v: hay's takes the literal as its value (no -i here, to
			// keep the draws of earlier seeds). Not -v '': GNU grep 3.8
			// -c -v '' prints no count at all.
			for p == "" {
				p = noNUL()
			}
			hpat, gpat = []string{"-v", p}, []string{"-v", "--", p}
		case 1:
			// Several literals (grep-style path in hay).
			q := noNUL()
			hpat = []string{"-e", p, "-e", q}
			gpat = hpat
		default:
			if r.IntN(3) == 0 {
				flags = append(flags, "-i")
			}
		}
		ctx := false
		switch r.IntN(7) {
		case 0:
			flags = append(flags, "-c")
		case 1, 2:
			ctx = true
			flags = append(flags, fmt.Sprintf("-%c%d", "ABC"[r.IntN(3)], 1+r.IntN(4)))
		case 3:
			ctx = true
			flags = append(flags, fmt.Sprintf("-C%d", r.IntN(3)+1))
			if r.IntN(2) == 0 {
				flags = append(flags, fmt.Sprintf("-B%d", r.IntN(3)))
			}
		}
		want, wcode := diffGrep(t, plain, append(slices.Clone(flags), gpat...)...)
		st.grepChecks++
		gdesc := "grep -a -F " + diffQuoteArgs(append(slices.Clone(flags), gpat...))
		for _, noIdx := range []bool{false, true} {
			args := []string{"search", "--data", c.data}
			if noIdx {
				args = append(args, "--no-index")
			}
			args = append(args, flags...)
			args = append(args, hpat...)
			got, code := c.hay(t, args...)
			st.queries++
			if code != wcode || !bytes.Equal(got, want) {
				d := firstDiffLine(got, want)
				t.Fatalf("%s: hay %s vs %s\nexit %d, grep %d; %d bytes, grep %d; first differing line %d:\n got %q\nwant %q",
					phase, diffQuoteArgs(args), gdesc, code, wcode, len(got), len(want), d, diffLineAt(got, d), diffLineAt(want, d))
			}
			if !ctx {
				continue
			}
			// Newest first: the same lines backwards ("--" included).
			nargs := append([]string{"search", "--data", c.data, "--order", "newest"}, args[3:]...)
			got, code = c.hay(t, nargs...)
			st.queries++
			rev := diffReverseLines(want)
			if code != wcode || !bytes.Equal(got, rev) {
				d := firstDiffLine(got, rev)
				t.Fatalf("%s: hay %s: not the output of %s backwards\nexit %d, want %d; first differing line %d:\n got %q\nwant %q",
					phase, diffQuoteArgs(nargs), gdesc, code, wcode, d, diffLineAt(got, d), diffLineAt(rev, d))
			}
		}
		if r.IntN(2) == 0 {
			// grep -m N: hay --limit N (with -c, with context).
			m := 1 + r.IntN(5)
			gflags := append(slices.Clone(flags), fmt.Sprintf("-m%d", m))
			want, wcode := diffGrep(t, plain, append(gflags, gpat...)...)
			st.grepChecks++
			args := append([]string{"search", "--data", c.data, "--limit", strconv.Itoa(m)}, flags...)
			args = append(args, hpat...)
			got, code := c.hay(t, args...)
			st.queries++
			if code != wcode || !bytes.Equal(got, want) {
				d := firstDiffLine(got, want)
				t.Fatalf("%s: hay %s vs grep -a -F %s\nexit %d, grep %d; first differing line %d:\n got %q\nwant %q",
					phase, diffQuoteArgs(args), diffQuoteArgs(append(gflags, gpat...)), code, wcode, d, diffLineAt(got, d), diffLineAt(want, d))
			}
		}
		if !ctx && !slices.Contains(flags, "-c") && r.IntN(3) == 0 {
			// --json: each object's exact line is the plain output's.
			args := append([]string{"search", "--data", c.data, "--json"}, flags...)
			args = append(args, hpat...)
			got, code := c.hay(t, args...)
			st.queries++
			var lines []byte
			for _, obj := range bytes.Split(bytes.TrimSuffix(got, []byte("\n")), []byte("\n")) {
				if len(obj) == 0 {
					continue
				}
				var v struct {
					Line   string `json:"line"`
					Line64 string `json:"line_base64"`
				}
				if err := json.Unmarshal(obj, &v); err != nil {
					t.Fatalf("%s: hay %s: bad JSON %q: %v", phase, diffQuoteArgs(args), obj, err)
				}
				l := []byte(v.Line)
				if v.Line64 != "" {
					var err error
					if l, err = base64.StdEncoding.DecodeString(v.Line64); err != nil {
						t.Fatal(err)
					}
				}
				lines = append(append(lines, l...), '\n')
			}
			if code != wcode || !bytes.Equal(lines, want) {
				d := firstDiffLine(lines, want)
				t.Fatalf("%s: hay %s: JSON lines differ from %s at line %d:\n got %q\nwant %q", phase, diffQuoteArgs(args), gdesc, d, diffLineAt(lines, d), diffLineAt(want, d))
			}
		}
	}
}

// diffReverseLines returns b's lines in reverse order.
func diffReverseLines(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	ls := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	slices.Reverse(ls)
	return append(bytes.Join(ls, []byte("\n")), '\n')
}

// streamContext compares a one-stream LogQL query with context on a
// multi-stream store with grep -C on that stream's entries.
func (c *dcorpus) streamContext(t *testing.T, n int, phase string, st *diffStats) {
	r := c.r
	for range n {
		f := c.files[r.IntN(len(c.files))]
		es := f.stored
		if len(es) == 0 {
			continue
		}
		plain := filepath.Join(c.dir, "stream.txt")
		var buf []byte
		for _, l := range es {
			buf = append(append(buf, l...), '\n')
		}
		os.WriteFile(plain, buf, 0o644)
		// A word needle that LogQL's backquoted string takes as is.
		p := c.planted[r.IntN(len(c.planted))]
		for !utf8.ValidString(p) || strings.ContainsAny(p, "`\r\x00") {
			p = diffWords[r.IntN(len(diffWords))]
		}
		k := 1 + r.IntN(3)
		want, wcode := grepOut(t, p, plain, fmt.Sprintf("-C%d", k))
		st.grepChecks++
		for _, noIdx := range []bool{false, true} {
			args := []string{"search", "--data", c.data, "-C", strconv.Itoa(k), "--query", fmt.Sprintf("{source=%q} |= `%s`", f.name, p)}
			if noIdx {
				args = append(args, "--no-index")
			}
			got, code := c.hay(t, args...)
			st.queries++
			if code != wcode || !bytes.Equal(got, want) {
				d := firstDiffLine(got, want)
				t.Fatalf("%s: hay %s vs grep -C%d on %s\nexit %d, grep %d; first differing line %d:\n got %q\nwant %q",
					phase, diffQuoteArgs(args), k, f.name, code, wcode, d, diffLineAt(got, d), diffLineAt(want, d))
			}
		}
	}
}

func TestDifferentialSearch(t *testing.T) {
	if _, err := exec.LookPath("grep"); err != nil {
		t.Fatal("the differential test needs grep")
	}
	seeds := diffSeeds
	if s := os.Getenv("HAY_DIFF_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("HAY_DIFF_SEED: %v", err)
		}
		seeds = []uint64{n}
	}
	var total diffStats
	start := time.Now()
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			st := runDifferential(t, seed)
			total.queries += st.queries
			total.grepChecks += st.grepChecks
			total.merges += st.merges
			total.during += st.during
		})
	}
	t.Logf("%d hay searches compared (%d of them against grep, %d queries while a compaction ran), %d merges of compacted segments, in %v",
		total.queries, total.grepChecks, total.during, total.merges, time.Since(start).Round(time.Millisecond))
}

func runDifferential(t *testing.T, seed uint64) diffStats {
	t.Logf("seed %d (rerun with HAY_DIFF_SEED=%d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	c := &dcorpus{r: r, r2: rand.New(rand.NewPCG(seed, 2)), dir: t.TempDir(), multi: seed%2 == 0, clock: 1600000000}
	c.data = filepath.Join(c.dir, "data")
	for len(c.planted) < 8 {
		p := diffPlantPool[r.IntN(len(diffPlantPool))]
		if !slices.Contains(c.planted, p) {
			c.planted = append(c.planted, p)
		}
	}
	c.big = seed%4 == 1
	c.many = seed%4 == 0
	c.queries = 25
	if c.big {
		c.queries = 12 // each search decodes a megabyte or more
	}
	if seed%4 >= 2 {
		for range 4 {
			c.repeats = append(c.repeats, c.content(false))
		}
	}
	var st diffStats
	steps := 6
	headBytes := strconv.Itoa(8<<10 + r.IntN(24<<10))
	if c.big {
		// One segment of several blocks.
		headBytes = strconv.Itoa(8 << 20)
	}
	mergeBytes := diffMergeBytes
	for s := range steps {
		touched := c.step(t, s == steps-1)
		if c.multi && r.IntN(3) == 0 {
			// Files with nothing new are ingested again too.
			touched = c.files
		}
		var paths []string
		for _, f := range touched {
			paths = append(paths, f.path)
			if f.rank < 0 && len(f.stored) > 0 {
				// Streams are numbered as their first entries are
				// stored (a file ingested empty defines none).
				f.rank = c.streams
				c.streams++
			}
		}
		if len(c.bounds) == 0 {
			c.bounds = append(c.bounds, time.Now().UnixNano())
		}
		// Sometimes one run per file, sometimes all at once.
		if r.IntN(2) == 0 {
			for _, p := range paths {
				if out, code := c.hay(t, "ingest", "--data", c.data, "--head-bytes", headBytes, p); code != 0 {
					t.Fatalf("ingest %s: exit %d %s", p, code, out)
				}
			}
		} else {
			args := append([]string{"ingest", "--data", c.data, "--head-bytes", headBytes}, paths...)
			if out, code := c.hay(t, args...); code != 0 {
				t.Fatalf("ingest: exit %d %s", code, out)
			}
		}
		now := time.Now().UnixNano()
		if !c.multi {
			// Ingested between the last bound and now.
			for _, f := range c.files {
				for i := range f.times {
					if f.times[i] == 0 {
						f.times[i] = c.bounds[len(c.bounds)-1] + 1
					}
				}
			}
		}
		c.bounds = append(c.bounds, now)
		es := c.oracle(t)
		phase := fmt.Sprintf("seed %d step %d before compaction", seed, s)
		qs := c.battery(t, es, c.queries)
		c.runPhase(t, es, qs, phase, &st)

		before := diffManifest(t, c.data)
		compacted := map[string]bool{}
		for _, sm := range before.Segments {
			if sm.Compacted {
				compacted[sm.Name] = true
			}
		}
		// Blocks smaller than the long lines; every codec level.
		layout := segment.Options{BlockSize: 4096 << r.IntN(3), Level: 1 + r.IntN(4)}
		if s%2 == 0 {
			args := []string{"compact", "--data", c.data, "--merge-bytes", strconv.Itoa(mergeBytes), "--workers", "2",
				"--block-size", strconv.Itoa(layout.BlockSize), "--level", strconv.Itoa(layout.Level)}
			if out, code := c.hay(t, args...); code != 0 {
				t.Fatalf("compact: exit %d %s", code, out)
			}
		} else {
			// What hay compact does, while the same queries run: a
			// search may see the old or the new segments, never a mix
			// or a missing one.
			stor, err := store.Open(c.data, store.Options{FsyncInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := stor.Compact(context.Background(), store.CompactOptions{Segment: &layout, MergeBytes: int64(mergeBytes), Workers: 2})
				if cerr := stor.Close(); err == nil {
					err = cerr
				}
				done <- err
			}()
			during := fmt.Sprintf("seed %d step %d during compaction", seed, s)
			var err2 error
			n := 0
		loop:
			for ; ; n++ {
				select {
				case err2 = <-done:
					break loop
				default:
				}
				c.check(t, c.data, es, qs[n%len(qs)], during, &st)
			}
			if err2 != nil {
				t.Fatalf("compact: %v", err2)
			}
			st.during += n
		}
		after := diffManifest(t, c.data)
		gone := 0
		for _, sm := range after.Segments {
			delete(compacted, sm.Name)
			if !sm.Compacted {
				t.Fatalf("segment %s not compacted after hay compact", sm.Name)
			}
		}
		gone = len(compacted)
		phase = fmt.Sprintf("seed %d step %d after compaction (%d -> %d segments)", seed, s, len(before.Segments), len(after.Segments))
		if gone >= 2 {
			st.merges++
			phase += fmt.Sprintf(", %d compacted segments merged", gone)
		}
		var sizes []string
		for _, sm := range after.Segments {
			sizes = append(sizes, fmt.Sprintf("%d (%.1fx)", sm.RawBytes, float64(sm.RawBytes)/float64(sm.Size)))
		}
		if out, code := c.hay(t, "verify", "--data", c.data); code != 0 {
			t.Fatalf("%s: hay verify: exit %d: %s", phase, code, out)
		}
		t.Logf("%s, merge-bytes %d, %d entries, segment raw bytes %s", phase, mergeBytes, len(es), strings.Join(sizes, ", "))
		c.runPhase(t, es, qs, phase, &st)
	}
	if st.merges == 0 {
		t.Fatalf("seed %d: no compaction merged compacted segments: the test did not exercise merging", seed)
	}
	return st
}

// runPhase runs the queries and the grep comparisons on the store as it
// is. The same queries run before and after each compaction.
func (c *dcorpus) runPhase(t *testing.T, es []dentry, qs []*dquery, phase string, st *diffStats) {
	for _, q := range qs {
		c.check(t, c.data, es, q, phase, st)
	}
	if c.multi {
		c.streamContext(t, 4, phase, st)
	} else {
		c.grepChecks(t, es, c.queries/2, phase, st)
	}
}

// vEquals writes "-v P" as "-v=P" where P starts with '-': hay search
// refuses a -v whose value is one of its flags (a grep user's -v -i), and
// the generated literals to drop include such words on purpose.
func vEquals(args []string) []string {
	out := slices.Clone(args)
	for i := 0; i+1 < len(out); i++ {
		if out[i] == "--" {
			break
		}
		if out[i] == "-v" && strings.HasPrefix(out[i+1], "-") {
			out[i] = "-v=" + out[i+1]
			out = slices.Delete(out, i+1, i+2)
		}
	}
	return out
}
