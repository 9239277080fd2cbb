package store

import (
	"math"
	"unicode/utf8"
)

// parseManifestJSON decodes a manifest body without reflection, for the
// JSON that encodeManifest writes: the first encoding/json.Unmarshal in a
// process costs ~0.15 ms (reflection, type caches), a tenth of a search
// that the skip index answers; this costs ~10 µs.
//
// It accepts only a strict subset of JSON: exact lower-case field names,
// each at most once; integers without fraction, exponent or leading zero;
// null only for the lists; strings of valid UTF-8 without raw control
// characters, whose \u escapes are not surrogates. On anything else it
// returns false and the caller uses encoding/json, so the result is always
// what json.Unmarshal returns (FuzzManifestJSON checks that).
func parseManifestJSON(body []byte) (*Manifest, bool) {
	p := jsonParser{b: body}
	m := new(Manifest)
	var seen uint
	ok := p.object(func(key []byte) bool {
		var bit uint
		switch string(key) {
		case "next_seq":
			bit = 1
			m.NextSeq = p.uint(math.MaxUint64)
		case "wal_start":
			bit = 2
			m.WALStart = p.uint(math.MaxUint64)
		case "segments":
			bit = 4
			m.Segments = list(&p, func(s *SegmentMeta) bool { return p.segmentMeta(s) })
		case "streams":
			bit = 8
			m.Streams = list(&p, func(s *StreamDef) bool { return p.streamDef(s) })
		case "sources":
			bit = 16
			m.Sources = list(&p, func(s *Source) bool { return p.source(s) })
		case "streams_bytes":
			bit = 32
			m.StreamsBytes = p.int()
		case "streams_count":
			bit = 64
			m.StreamsCount = int(p.int())
		default:
			return false
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return !p.bad
	})
	p.ws()
	if !ok || p.bad || p.i != len(p.b) {
		return nil, false
	}
	return m, true
}

func (p *jsonParser) segmentMeta(s *SegmentMeta) bool {
	var seen uint
	return p.object(func(key []byte) bool {
		var bit uint
		switch string(key) {
		case "name":
			bit = 1
			s.Name = p.str()
		case "entries":
			bit = 2
			s.Entries = p.int()
		case "raw_bytes":
			bit = 4
			s.RawBytes = p.int()
		case "size":
			bit = 8
			s.Size = p.int()
		case "min_time":
			bit = 16
			s.MinTime = p.int()
		case "max_time":
			bit = 32
			s.MaxTime = p.int()
		case "compacted":
			bit = 64
			s.Compacted = p.boolean()
		default:
			return false
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return !p.bad
	})
}

func (p *jsonParser) streamDef(s *StreamDef) bool {
	var seen uint
	return p.object(func(key []byte) bool {
		var bit uint
		switch string(key) {
		case "id":
			bit = 1
			s.ID = uint32(p.uint(math.MaxUint32))
		case "labels":
			bit = 2
			s.Labels = p.str()
		default:
			return false
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return !p.bad
	})
}

func (p *jsonParser) source(s *Source) bool {
	var seen uint
	return p.object(func(key []byte) bool {
		var bit uint
		switch string(key) {
		case "key":
			bit = 1
			s.Key = p.str()
		case "offset":
			bit = 2
			s.Offset = p.int()
		case "check":
			bit = 4
			s.Check = uint32(p.uint(math.MaxUint32))
		default:
			return false
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return !p.bad
	})
}

// jsonParser reads the subset of JSON parseManifestJSON accepts; bad is
// sticky and means "not in the subset" (maybe valid JSON all the same).
type jsonParser struct {
	b   []byte
	i   int
	bad bool
}

func (p *jsonParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// eat skips white space and then c, if it is next.
func (p *jsonParser) eat(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// object reads {"key": value, ...}, calling member after each key and
// colon to read the value.
func (p *jsonParser) object(member func(key []byte) bool) bool {
	if !p.eat('{') {
		return false
	}
	if p.eat('}') {
		return true
	}
	for {
		p.ws()
		key, ok := p.plainString()
		if !ok || !p.eat(':') {
			return false
		}
		if !member(key) {
			return false
		}
		if p.eat('}') {
			return true
		}
		if !p.eat(',') {
			return false
		}
	}
}

// list reads null (nil) or [elem, ...] (non-nil, maybe empty), as
// json.Unmarshal fills a slice.
func list[T any](p *jsonParser, elem func(*T) bool) []T {
	p.ws()
	if p.i+4 <= len(p.b) && string(p.b[p.i:p.i+4]) == "null" {
		p.i += 4
		return nil
	}
	if !p.eat('[') {
		p.bad = true
		return nil
	}
	out := []T{}
	if p.eat(']') {
		return out
	}
	for {
		var v T
		if !elem(&v) {
			p.bad = true
			return nil
		}
		out = append(out, v)
		if p.eat(']') {
			return out
		}
		if !p.eat(',') {
			p.bad = true
			return nil
		}
	}
}

// plainString reads a string without escapes, such as a field name.
func (p *jsonParser) plainString() ([]byte, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, false
	}
	for j := p.i + 1; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			s := p.b[p.i+1 : j]
			p.i = j + 1
			return s, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

// str reads a string value, decoding escapes.
func (p *jsonParser) str() string {
	p.ws()
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		p.bad = true
		return ""
	}
	p.i++
	var out []byte
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			var s string
			if out == nil {
				s = string(p.b[start:p.i])
			} else {
				s = string(append(out, p.b[start:p.i]...))
			}
			p.i++
			return s
		case c < 0x20:
			p.bad = true
			return ""
		case c >= 0x80:
			// encoding/json turns invalid UTF-8 into U+FFFD: leave that
			// to it.
			r, n := utf8.DecodeRune(p.b[p.i:])
			if r == utf8.RuneError && n <= 1 {
				p.bad = true
				return ""
			}
			p.i += n
		case c == '\\':
			out = append(out, p.b[start:p.i]...)
			if p.i+1 >= len(p.b) {
				p.bad = true
				return ""
			}
			e := p.b[p.i+1]
			p.i += 2
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := hex4(p.b[p.i:])
				if !ok || 0xd800 <= r && r < 0xe000 {
					// Surrogates (pairs, and lone ones that become
					// U+FFFD): encoding/json's business.
					p.bad = true
					return ""
				}
				out = utf8.AppendRune(out, r)
				p.i += 4
			default:
				p.bad = true
				return ""
			}
			start = p.i
		default:
			p.i++
		}
	}
	p.bad = true
	return ""
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// digits reads an unsigned decimal integer of at most limit: no sign,
// fraction, exponent or leading zero.
func (p *jsonParser) digits(limit uint64) uint64 {
	j := p.i
	var v uint64
	for j < len(p.b) && '0' <= p.b[j] && p.b[j] <= '9' {
		d := uint64(p.b[j] - '0')
		if v > (limit-d)/10 {
			p.bad = true // out of range: encoding/json's error to give
			return 0
		}
		v = v*10 + d
		j++
	}
	n := j - p.i
	if n == 0 || n > 1 && p.b[p.i] == '0' {
		p.bad = true
		return 0
	}
	if j < len(p.b) {
		switch p.b[j] {
		case '.', 'e', 'E':
			p.bad = true
			return 0
		}
	}
	p.i = j
	return v
}

// boolean reads true or false.
func (p *jsonParser) boolean() bool {
	p.ws()
	rest := p.b[p.i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		p.i += 4
		return true
	case len(rest) >= 5 && string(rest[:5]) == "false":
		p.i += 5
		return false
	}
	p.bad = true
	return false
}

func (p *jsonParser) uint(limit uint64) uint64 {
	p.ws()
	return p.digits(limit)
}

func (p *jsonParser) int() int64 {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
		v := p.digits(1 << 63)
		if v == 0 {
			p.bad = true // "-0": valid, but not what we write
		}
		return int64(-v)
	}
	return int64(p.digits(math.MaxInt64))
}
