package query

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// stream is one test file treated as a stream.
type stream struct {
	labels []Label
	app    string
	lines  []string
}

// loadLoghub reads the Loghub samples, one stream per file labelled
// {source="<file>", app="<lower-case system>"}. CRLF endings are stripped.
func loadLoghub(t testing.TB) []stream {
	t.Helper()
	files, err := filepath.Glob("../../testdata/loghub/*.log")
	if err != nil || len(files) != 8 {
		t.Fatalf("loghub samples: %v (%d files)", err, len(files))
	}
	var out []stream
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(f)
		app := strings.ToLower(strings.TrimSuffix(base, "_2k.log"))
		s := stream{labels: []Label{{"source", base}, {"app", app}}, app: app}
		for _, l := range strings.Split(strings.TrimRight(string(data), "\r\n"), "\n") {
			s.lines = append(s.lines, strings.TrimSuffix(l, "\r"))
		}
		out = append(out, s)
	}
	return out
}

func rx(p string) func(string) bool { return regexp.MustCompile("(?s)" + p).MatchString }
func has(s string) func(string) bool {
	return func(l string) bool { return strings.Contains(l, s) }
}
func hasFold(s string) func(string) bool {
	return func(l string) bool { return strings.Contains(strings.ToLower(l), strings.ToLower(s)) }
}
func not(f func(string) bool) func(string) bool { return func(l string) bool { return !f(l) } }
func all(fs ...func(string) bool) func(string) bool {
	return func(l string) bool {
		for _, f := range fs {
			if !f(l) {
				return false
			}
		}
		return true
	}
}
func anyOf(fs ...func(string) bool) func(string) bool {
	return func(l string) bool {
		for _, f := range fs {
			if f(l) {
				return true
			}
		}
		return false
	}
}
func apps(names ...string) func(string) bool {
	return func(a string) bool { return slices.Contains(names, a) }
}
func anyApp(string) bool { return true }

type loghubCase struct {
	q     string
	app   func(app string) bool // oracle for the selector
	line  func(line string) bool
	empty bool // the expected result is empty (otherwise it must not be)
}

var loghubCases = []loghubCase{
	{q: `{app="zookeeper"} |= "timeout"`, app: apps("zookeeper"), line: has("timeout")},
	{q: `{app="zookeeper"} |~ "(?i)timeout"`, app: apps("zookeeper"), line: hasFold("timeout")},
	{q: `{app=~".+"} |~ "(?i)timeout"`, app: anyApp, line: hasFold("timeout")},
	{q: `{app=~"hadoop|zookeeper"} |= "WARN"`, app: apps("hadoop", "zookeeper"), line: has("WARN")},
	{q: `{app!="hadoop", source=~".*\\.log"} |= "WARN"`, app: not(apps("hadoop")), line: has("WARN")},
	{q: `{app=~".+"} |= "error" or "fail"`, app: anyApp, line: anyOf(has("error"), has("fail"))},
	{q: `{app=~".+"} != "INFO" != "WARN"`, app: anyApp, line: all(not(has("INFO")), not(has("WARN")))},
	{q: `{app="openssh"} |= "Invalid user" != "admin"`, app: apps("openssh"), line: all(has("Invalid user"), not(has("admin")))},
	{q: `{app="openssh"} |~ "Failed password for (invalid user )?root"`, app: apps("openssh"), line: anyOf(has("Failed password for root"), has("Failed password for invalid user root"))},
	{q: `{app="openssh"} |~ "from 1[0-9]{2}\\.[0-9]+"`, app: apps("openssh"), line: rx(`from 1[0-9][0-9]\.[0-9]`)},
	{q: `{app="linux"} |~ "rhost=[0-9.]+"`, app: apps("linux"), line: rx(`rhost=[0-9.]`)},
	{q: `{app="linux"} |= "session opened" |= "root"`, app: apps("linux"), line: all(has("session opened"), has("root"))},
	{q: `{app="hdfs"} |= "blk_-" |= "terminating"`, app: apps("hdfs"), line: all(has("blk_-"), has("terminating"))},
	{q: `{app="hdfs"} |~ "blk_-?[0-9]+ terminating"`, app: apps("hdfs"), line: rx(`blk_-?[0-9]+ terminating`)},
	{q: `{app="apache"} |= "[error]" != "mod_jk"`, app: apps("apache"), line: all(has("[error]"), not(has("mod_jk")))},
	{q: `{app="apache"} |~ "\\[(error|notice)\\]"`, app: apps("apache"), line: anyOf(has("[error]"), has("[notice]"))},
	{q: `{app="apache"} |~ "(?i)JK2_INIT"`, app: apps("apache"), line: hasFold("jk2_init")},
	{q: `{app="spark"} |~ "Finished task [0-9.]+ in stage"`, app: apps("spark"), line: rx(`Finished task [0-9.]+ in stage`)},
	{q: `{app="spark"} |= "INFO" |~ "MB|KB"`, app: apps("spark"), line: all(has("INFO"), anyOf(has("MB"), has("KB")))},
	{q: `{app="windows"} |~ "(?i)session"`, app: apps("windows"), line: hasFold("session")},
	{q: `{app="windows"} |~ "Info\\s+CBS"`, app: apps("windows"), line: rx(`Info[ \t\n\r\f\v]+CBS`)},
	{q: `{app="windows"} !~ "CBS"`, app: apps("windows"), line: not(has("CBS"))},
	{q: `{app="zookeeper"} |~ "(?i)error.*timeout"`, app: apps("zookeeper"), line: rx(`(?i)error.*timeout`), empty: true},
	{q: `{app=~".+"} |~ "(foo|bar)baz"`, app: anyApp, line: anyOf(has("foobaz"), has("barbaz")), empty: true},
	{q: `{app=~".+"} |~ "[Ee]xception"`, app: anyApp, line: anyOf(has("Exception"), has("exception"))},
	{q: `{app=~".+"} |~ "(?i)exception" != "java"`, app: anyApp, line: all(hasFold("exception"), not(has("java")))},
	{q: `{app=~".+"} |= "a" or "b" or "c"`, app: anyApp, line: anyOf(has("a"), has("b"), has("c"))},
	{q: `{app=~".+"} != "e" or "a"`, app: anyApp, line: all(not(has("e")), not(has("a")))},
	{q: `{app=~".+"} |~ "^[0-9]{4}-"`, app: anyApp, line: rx(`^\d\d\d\d-`)},
	{q: `{app=~".+"} |~ "\\d+\\.\\d+\\.\\d+\\.\\d+"`, app: anyApp, line: rx(`[0-9]+\.[0-9]+\.[0-9]+\.[0-9]`)},
	{q: `{app=~".+"} |~ "(?i)(error|warn)"`, app: anyApp, line: anyOf(hasFold("error"), hasFold("warn"))},
	{q: `{app=~".+"} !~ "(?i)(info|notice)"`, app: anyApp, line: all(not(hasFold("info")), not(hasFold("notice")))},
	{q: `{app=~"h.*"} |= "Exception"`, app: apps("hdfs", "hadoop"), line: has("Exception")},
	{q: `{app!~"h.*", app=~".+"} |= "Exception"`, app: not(apps("hdfs", "hadoop")), line: has("Exception")},
	{q: `{source="Hadoop_2k.log"} |~ "attempt_[0-9_]+m_[0-9]+"`, app: apps("hadoop"), line: rx(`attempt_[0-9_]+m_[0-9]`)},
	{q: `{app="hadoop"} |~ "(?i)RMCommunicator"`, app: apps("hadoop"), line: hasFold("rmcommunicator")},
	{q: `{app="hadoop"} |= "ERROR" or "FATAL"`, app: apps("hadoop"), line: anyOf(has("ERROR"), has("FATAL"))},
	{q: `{app="zookeeper"} |~ "Notification time ?out"`, app: apps("zookeeper"), line: anyOf(has("Notification time out"), has("Notification timeout"))},
	{q: `{app="zookeeper"} |~ "myid=[123]"`, app: apps("zookeeper"), line: anyOf(has("myid=1"), has("myid=2"), has("myid=3"))},
	{q: `{app="zookeeper"} |~ "(?i)connection (broken|request)"`, app: apps("zookeeper"), line: anyOf(hasFold("connection broken"), hasFold("connection request"))},
	{q: `{app="openssh"} |~ "port \\d+ ssh2$"`, app: apps("openssh"), line: rx(`port [0-9]+ ssh2\z`)},
	{q: `{app="openssh"} |~ "(?i)^dec 10"`, app: apps("openssh"), line: func(l string) bool { return strings.HasPrefix(strings.ToLower(l), "dec 10") }},
	{q: `{app="openssh"} |= "preauth" |~ "(?i)invalid" != "webmaster"`, app: apps("openssh"), line: all(has("preauth"), hasFold("invalid"), not(has("webmaster")))},
	{q: `{app="linux"} |~ "(?i)authentication failure.*user=root"`, app: apps("linux"), line: rx(`(?i)authentication failure.*user=root`)},
	{q: `{app="linux"} |= ""`, app: apps("linux"), line: has("")},
	{q: `{app="linux"} |~ ""`, app: apps("linux"), line: has("")},
	{q: `{app="linux"} != ""`, app: apps("linux"), line: not(has("")), empty: true},
	{q: `{app="apache"} |= "child" or "Child"`, app: apps("apache"), line: anyOf(has("child"), has("Child"))},
	{q: `{app="apache"} |~ "(?i)child"`, app: apps("apache"), line: hasFold("child")},
	{q: `{app="apache"} |~ "scoreboard slot 1[0-9]$"`, app: apps("apache"), line: rx(`scoreboard slot 1[0-9]\z`)},
	{q: `{app="hdfs"} |~ "10\\.251\\.\\d+\\.\\d+:50010"`, app: apps("hdfs"), line: rx(`10\.251\.[0-9]+\.[0-9]+:50010`)},
	{q: `{app="hdfs"} |= "addStoredBlock" |= "size" |= "blockMap"`, app: apps("hdfs"), line: all(has("addStoredBlock"), has("size"), has("blockMap"))},
	{q: `{app="spark"} |~ "(?i)BLOCKMANAGER|(?i)broadcast_\\d"`, app: apps("spark"), line: anyOf(hasFold("blockmanager"), rx(`(?i)broadcast_[0-9]`))},
	{q: `{app="spark"} |~ "\\bstage 0\\.0\\b"`, app: apps("spark"), line: rx(`\bstage 0\.0\b`)},
	{q: `{app="windows"} |~ "(?i)servicingstack|TrustedInstaller"`, app: apps("windows"), line: anyOf(hasFold("servicingstack"), has("TrustedInstaller"))},
	{q: `{app="windows"} |= "Warning" or "Error" != "CSI"`, app: apps("windows"), line: all(anyOf(has("Warning"), has("Error")), not(has("CSI")))},
	{q: `{app=~".+"} |~ "(?i)k"`, app: anyApp, line: hasFold("k")},
	{q: `{app=~".+"} |~ "(?i)ssh"`, app: anyApp, line: hasFold("ssh")},
	{q: `{app=~".+"} |~ "ab+c"`, app: anyApp, line: rx(`abb*c`)},
	{q: `{app=~".+"} |~ "f{2,}"`, app: anyApp, line: has("ff")},
	{q: `{app=~".+"} |~ "[[:upper:]]{5}"`, app: anyApp, line: rx(`[A-Z][A-Z][A-Z][A-Z][A-Z]`)},
	{q: `{app=~".+"} |~ "(?i)\\Qdfs.DataNode$\\E"`, app: anyApp, line: hasFold("dfs.datanode$")},
	{q: `{app=~".+"} |= "dfs.DataNode$PacketResponder"`, app: anyApp, line: has("dfs.DataNode$PacketResponder")},
	{q: `{app=~".+"} |~ "colou?r"`, app: anyApp, line: anyOf(has("color"), has("colour"))},
	{q: `{app=~".+", app!="windows"} |~ "(?i)fail(ed|ure)"`, app: not(apps("windows")), line: anyOf(hasFold("failed"), hasFold("failure"))},
	{q: `{app="openssh"} |~ "(?i)password" or "(?i)publickey"`, app: apps("openssh"), line: anyOf(hasFold("password"), hasFold("publickey"))},
	{q: `{app="openssh"} !~ "Invalid" or "Fail(ed|ure)"`, app: apps("openssh"), line: all(not(has("Invalid")), not(has("Failed")), not(has("Failure")))},
	{q: `{app="zookeeper"} |= "WARN" | app="zookeeper"`, app: apps("zookeeper"), line: has("WARN")},
	{q: `{app="zookeeper"} |= "WARN" | app!="zookeeper"`, app: apps("zookeeper"), line: func(string) bool { return false }, empty: true},
	{q: `{app=~"z.*"} |= "INFO" or "WARN" |~ "Quorum[A-Z][a-z]+"`, app: apps("zookeeper"), line: all(anyOf(has("INFO"), has("WARN")), rx(`Quorum[A-Z][a-z]`))},
	{q: "{app=~`.+`} |~ `\\d{6} \\d{6}` |= `INFO`", app: anyApp, line: all(rx(`[0-9]{6} [0-9]{6}`), has("INFO"))},
	{q: `{app="openssh"} |~ "user (root|admin|test)\\b"`, app: apps("openssh"), line: rx(`user (root|admin|test)\b`)},
}

// digest summarises a result set for failure messages and stability.
func digest(lines []string) string {
	h := sha256.New()
	for _, l := range lines {
		h.Write([]byte(l))
		h.Write([]byte{'\n'})
	}
	return fmt.Sprintf("%x", h.Sum(nil)[:8])
}

func TestLoghubQueries(t *testing.T) {
	streams := loadLoghub(t)
	if len(loghubCases) < 60 {
		t.Fatalf("only %d cases", len(loghubCases))
	}
	for _, tc := range loghubCases {
		t.Run(tc.q, func(t *testing.T) {
			q, err := Parse(tc.q)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Compile(q)
			if err != nil {
				t.Fatal(err)
			}
			var got, want []string
			for _, s := range streams {
				sel := p.MatchStream(s.labels)
				if sel != tc.app(s.app) {
					t.Fatalf("MatchStream(%v) = %v, oracle says %v", s.labels, sel, !sel)
				}
				if sel != p.MatchStreamMap(map[string]string{"source": s.labels[0].Value, "app": s.app}) {
					t.Fatalf("MatchStreamMap disagrees with MatchStream on %v", s.labels)
				}
				for _, l := range s.lines {
					if sel && p.MatchEntry(s.labels, []byte(l)) {
						got = append(got, l)
					}
					if tc.app(s.app) && tc.line(l) {
						want = append(want, l)
					}
					// Required is necessary for every line the filters pass.
					if p.MatchLine([]byte(l)) && !p.Required.Eval([]byte(l)) {
						t.Fatalf("line passes the filters but not Required %v: %q", p.Required, l)
					}
				}
			}
			if (len(want) == 0) != tc.empty {
				t.Fatalf("oracle found %d lines; the case says empty=%v", len(want), tc.empty)
			}
			if len(got) != len(want) || digest(got) != digest(want) {
				t.Fatalf("got %d lines (%s), want %d (%s)\nfirst got %q\nfirst want %q", len(got), digest(got), len(want), digest(want), first(got), first(want))
			}
		})
	}
}

func first(xs []string) string {
	if len(xs) == 0 {
		return ""
	}
	return xs[0]
}

// '.' matches '\n' in line filters but not in label matchers (Loki's
// documented difference); empty and CRLF lines behave like any other.
func TestNewlinesAndEdges(t *testing.T) {
	for _, tc := range []struct {
		q      string
		stream []Label
		line   string
		want   bool
	}{
		{`{a="b"} |~ "x.y"`, nil, "x\ny", true},
		{`{a="b"} !~ "x.y"`, nil, "x\ny", false},
		{`{a="b"} |~ "^y"`, nil, "x\ny", false},
		{`{a="b"} |~ "(?m)^y"`, nil, "x\ny", true},
		{`{a="b"} | c=~"x.y"`, []Label{{"c", "x\ny"}}, "", false},
		{`{a="b"} | c=~"(?s)x.y"`, []Label{{"c", "x\ny"}}, "", true},
		{`{a="b"} |= "x"`, nil, "", false},
		{`{a="b"} != "x"`, nil, "", true},
		{`{a="b"} |~ "^$"`, nil, "", true},
		{`{a="b"} |~ "y$"`, nil, "x y\r", false},
		{`{a="b"} |= "y\r"`, nil, "x y\r", true},
		{`{a="b"} |~ "(?i)Y\\r"`, nil, "x y\r", true},
		{`{a="b"} |= "\xff"`, nil, "a\xffb", true},
		{`{a="b"} |~ "a.b"`, nil, "a\xffb", true},
		{`{a="b"} |~ "(?i)é"`, nil, "É", true},
		{`{a="b"} |~ "(?i)straße"`, nil, "STRAẞE", true},
	} {
		q, err := Parse(tc.q)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Compile(q)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.MatchEntry(tc.stream, []byte(tc.line)); got != tc.want {
			t.Errorf("%s on %q: %v, want %v", tc.q, tc.line, got, tc.want)
		}
	}
	q, _ := Parse(`{a=~"x.y"}`)
	p, _ := Compile(q)
	if p.MatchStream([]Label{{"a", "x\ny"}}) || !p.MatchStream([]Label{{"a", "x-y"}}) {
		t.Error("selector regex: '.' must not match a newline and must match '-'")
	}
}
