package query

import (
	"errors"
	"testing"
)

// LogQL comments: '#' outside a string starts a comment that runs to the
// end of the line (Loki's "Comments": whole or partial lines of a
// multi-line query). A comment parses like the whitespace it replaces.
func TestComments(t *testing.T) {
	for _, tc := range []struct{ q, want string }{
		{`{app="api"} # errors only`, `{app="api"}`},
		{`{app="api"}#`, `{app="api"}`},
		{"# leading line\n{app=\"api\"}", `{app="api"}`},
		{"{app=\"api\" # the service\n, env=\"prod\"}", `{app="api", env="prod"}`},
		{"{app=\"api\"}\n  | logfmt\n  # | status >= 500\n  | level=\"error\" # the bad ones", `{app="api"} | logfmt | level="error"`},
		{"{app=\"api\"} |= \"a\" # or \"b\"\r\n or \"c\"", `{app="api"} |= "a" or "c"`},
		{"{app=\"api\"} |=#x\n\"a\"", `{app="api"} |= "a"`},
		// Inside strings '#' is text.
		{`{app="a#b"} |= "#x" |~ ` + "`#[0-9]+`" + ` # real comment`, `{app="a#b"} |= "#x" |~ "#[0-9]+"`},
		{`{app="api"} | json | tag="#1" # tag`, `{app="api"} | json | tag="#1"`},
		// A comment line with invalid UTF-8 or a quote in it is skipped whole.
		{"{app=\"api\"} # \xff \"unterminated\n|= \"x\"", `{app="api"} |= "x"`},
	} {
		q, err := Parse(tc.q)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.q, err)
			continue
		}
		if got := q.String(); got != tc.want {
			t.Errorf("Parse(%q) = %s, want %s", tc.q, got, tc.want)
		}
	}
	for _, tc := range []struct {
		q   string
		pos int
		msg string
	}{
		// The comment swallows the closing brace.
		{`{app="api" # }`, 14, `expected "," or "}" in stream selector, got end of query`},
		{"# only a comment", 16, `expected a stream selector starting with {, got end of query`},
		{"{app=\"api\"} |= # \"x\"\n", 21, `expected a string after |=, got end of query`},
	} {
		_, err := Parse(tc.q)
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Pos != tc.pos || pe.Msg != tc.msg {
			t.Errorf("Parse(%q) = %v, want at byte %d: %s", tc.q, err, tc.pos, tc.msg)
		}
	}
}
