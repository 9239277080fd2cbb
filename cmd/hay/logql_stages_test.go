package main

import (
	"os"
	"path/filepath"
	"testing"
)

// hay search --query prints the line line_format, decolorize or unpack
// made (as Loki and hay serve return it), and later line filters test it;
// context lines keep their stored text.
func TestSearchLineFormat(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	src := filepath.Join(t.TempDir(), "app.log")
	lines := "level=info status=200 path=/a\r\n" +
		"level=error status=500 path=/b\r\n" +
		"\x1b[31mERROR\x1b[0m plain\n" +
		"level=warn status=404 path=/c"
	if err := os.WriteFile(src, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, code := hayInProcess(t, "ingest", "--data", dir, src); code != 0 {
		t.Fatalf("ingest: exit %d", code)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{`{source=~".+"} | logfmt | line_format "{{.status}} {{.path}} {{.level | upper}}"`},
			"200 /a INFO\n500 /b ERROR\n  \n404 /c WARN\n"}, // the coloured line has no keys
		{[]string{`{source=~".+"} | pattern "level=<l> status=<s> <_>" | s >= 400 | line_format "{{.l}}"`},
			"error\nwarn\n"},
		// "level=" is in the stored lines, not in the new ones.
		{[]string{`{source=~".+"} | line_format "{{ __line__ | lower }}" |= "level="`},
			"level=info status=200 path=/a\nlevel=error status=500 path=/b\nlevel=warn status=404 path=/c\n"},
		{[]string{`{source=~".+"} | regexp "path=(?P<p>\\S+)" | line_format "{{.p}}" |= "/b"`}, "/b\n"},
		{[]string{`{source=~".+"} | decolorize |= "ERROR plain"`}, "ERROR plain\n"},
		{[]string{"-B1", `{source=~".+"} |= "status=500" | line_format "{{.source | base}}"`}, ""},
		{[]string{"-B1", `{source=~".+"} |= "status=500" | label_format x=source | line_format "X"`},
			"level=info status=200 path=/a\nX\n"},
		{[]string{"-c", `{source=~".+"} | line_format "x" |= "x"`}, "4\n"},
	} {
		n := len(c.args) - 1
		args := append(append([]string{"search", "--data", dir, "--color=never"}, c.args[:n]...), "--query", c.args[n])
		out, code, stderr := hayInProcessStderr(t, args...)
		if c.want == "" {
			if code == 0 {
				t.Errorf("%q: exit 0 with %q, want an error (unknown function base)", c.args, out)
			}
			continue
		}
		if code != 0 || string(out) != c.want {
			t.Errorf("%q: exit %d %s\n got %q\nwant %q", c.args, code, stderr, out, c.want)
		}
	}
}
