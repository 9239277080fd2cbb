package query

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

type tokKind int

const (
	tEOF tokKind = iota
	tLBrace
	tRBrace
	tLParen
	tRParen
	tComma
	tPipe      // |
	tPipeEq    // |=
	tPipeTilde // |~
	tNeq       // !=
	tNre       // !~
	tEq        // =
	tEqEq      // ==
	tRe        // =~
	tGt        // >
	tGe        // >=
	tLt        // <
	tLe        // <=
	tString    // "..." or `...`; val holds the unquoted text
	tIdent     // label name or keyword
	tNumber    // number, duration or bytes literal as written
	tFlag      // --name
	tPattern   // |> or !> (pattern filters: recognised to be refused clearly)
)

type token struct {
	kind tokKind
	pos  int
	text string // source text
	val  string // unquoted value for tString
}

// describe names a token for error messages: what the parser got.
func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end of query"
	case tString:
		return "string " + strconv.Quote(t.val)
	case tIdent:
		return "identifier " + strconv.Quote(t.text)
	case tNumber:
		return "number " + t.text
	}
	return strconv.Quote(t.text)
}

type lexer struct {
	src string
	pos int
}

func isIdentStart(c byte) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

func isIdentByte(c byte) bool {
	return isIdentStart(c) || ('0' <= c && c <= '9') || c == ':'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// next returns the next token or a *ParseError.
func (l *lexer) next() (token, error) {
	s := l.src
	for l.pos < len(s) {
		switch s[l.pos] {
		case ' ', '\t', '\n', '\r':
			l.pos++
			continue
		case '#':
			// A comment runs to the end of the line, as in Loki: Grafana
			// sends the editor's text as typed, comments included. Inside
			// a string '#' is text (quoted and the raw string scan past it).
			if nl := strings.IndexByte(s[l.pos:], '\n'); nl >= 0 {
				l.pos += nl + 1
			} else {
				l.pos = len(s)
			}
			continue
		}
		break
	}
	start := l.pos
	if start >= len(s) {
		return token{kind: tEOF, pos: start}, nil
	}
	tok := func(k tokKind, n int) (token, error) {
		l.pos += n
		return token{kind: k, pos: start, text: s[start:l.pos]}, nil
	}
	peek := byte(0)
	if start+1 < len(s) {
		peek = s[start+1]
	}
	switch c := s[start]; c {
	case '{':
		return tok(tLBrace, 1)
	case '}':
		return tok(tRBrace, 1)
	case '(':
		return tok(tLParen, 1)
	case ')':
		return tok(tRParen, 1)
	case ',':
		return tok(tComma, 1)
	case '|':
		switch peek {
		case '=':
			return tok(tPipeEq, 2)
		case '~':
			return tok(tPipeTilde, 2)
		case '>':
			return tok(tPattern, 2)
		}
		return tok(tPipe, 1)
	case '!':
		switch peek {
		case '=':
			return tok(tNeq, 2)
		case '~':
			return tok(tNre, 2)
		case '>':
			return tok(tPattern, 2)
		}
		return token{}, errAt(start, "unexpected \"!\": expected != or !~")
	case '=':
		switch peek {
		case '=':
			return tok(tEqEq, 2)
		case '~':
			return tok(tRe, 2)
		}
		return tok(tEq, 1)
	case '>':
		if peek == '=' {
			return tok(tGe, 2)
		}
		return tok(tGt, 1)
	case '<':
		if peek == '=' {
			return tok(tLe, 2)
		}
		return tok(tLt, 1)
	case '"':
		return l.quoted()
	case '`':
		end := -1
		for i := start + 1; i < len(s); i++ {
			if s[i] == '`' {
				end = i
				break
			}
		}
		if end < 0 {
			return token{}, errAt(start, "unterminated raw string: expected a closing `")
		}
		l.pos = end + 1
		return token{kind: tString, pos: start, text: s[start:l.pos], val: s[start+1 : end]}, nil
	case '-':
		if peek == '-' {
			i := start + 2
			for i < len(s) && (isIdentByte(s[i]) || s[i] == '-') {
				i++
			}
			return tok(tFlag, i-start)
		}
		if start+1 < len(s) && isDigit(peek) {
			return l.number()
		}
		return token{}, errAt(start, "unexpected \"-\"")
	default:
		if isIdentStart(c) {
			i := start + 1
			for i < len(s) && isIdentByte(s[i]) {
				i++
			}
			return tok(tIdent, i-start)
		}
		if isDigit(c) {
			return l.number()
		}
		r, _ := utf8.DecodeRuneInString(s[start:])
		if r == utf8.RuneError {
			return token{}, errAt(start, fmt.Sprintf("unexpected byte 0x%02x", c))
		}
		return token{}, errAt(start, fmt.Sprintf("unexpected character %q", r))
	}
}

// number scans a number, duration or bytes literal: an optional '-',
// digits, then any run of digits, letters, '.' and 'µ' (the unit part is
// validated by the parser, which knows whether a value may follow).
func (l *lexer) number() (token, error) {
	s := l.src
	start := l.pos
	i := start
	if s[i] == '-' {
		i++
	}
	for i < len(s) {
		c := s[i]
		switch {
		case isDigit(c) || c == '.' || isIdentStart(c):
			i++
		case c == 0xC2 && i+1 < len(s) && s[i+1] == 0xB5: // µ
			i += 2
		default:
			goto done
		}
	}
done:
	l.pos = i
	return token{kind: tNumber, pos: start, text: s[start:i]}, nil
}

// quoted scans a double-quoted string with Go escapes.
func (l *lexer) quoted() (token, error) {
	s := l.src
	start := l.pos
	i := start + 1
	for i < len(s) {
		switch s[i] {
		case '\\':
			i += 2
			continue
		case '\n':
			return token{}, errAt(start, "newline in string: expected a closing \"")
		case '"':
			text := s[start : i+1]
			v, err := strconv.Unquote(text)
			if err != nil {
				return token{}, errAt(start, "invalid escape in string "+text)
			}
			l.pos = i + 1
			return token{kind: tString, pos: start, text: text, val: v}, nil
		}
		i++
	}
	return token{}, errAt(start, "unterminated string: expected a closing \"")
}
