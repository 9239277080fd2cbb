// Package attrs encodes an entry's structured metadata: the name=value
// pairs a log shipper sends beside a line (Loki's push API, OTLP
// attributes, trace and span ids) that belong to the entry, not to its
// stream. They are not part of the stream's identity, so a trace id per
// entry does not create a stream per entry.
//
// # Encoding
//
// An entry without metadata is the empty slice. Otherwise:
//
//	uvarint  n        pairs, 1..MaxPairs
//	n x      uvarint len(name), name, uvarint len(value), value
//
// Names are label names ([a-zA-Z_][a-zA-Z0-9_]*), strictly ascending as
// bytes (so each occurs once); values are any bytes, possibly empty. The
// whole encoding is at most MaxBytes. The encoding is canonical: one set
// of pairs has exactly one encoding, so equal sets compare equal as bytes.
// Decode and Validate check all of it, since the bytes come from disk.
package attrs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Limits, the defaults of Loki's max_structured_metadata_size and
// max_structured_metadata_entries_count: a push over them is refused
// rather than cut.
const (
	MaxBytes = 64 << 10
	MaxPairs = 128
)

// Pair is one name=value pair.
type Pair struct {
	Name, Value string
}

// ValidName reports whether s is a label name: [a-zA-Z_][a-zA-Z0-9_]*.
func ValidName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9' {
			continue
		}
		return false
	}
	return true
}

// Encode appends the canonical encoding of pairs to dst. The pairs are
// sorted by name (pairs itself is not changed); when a name occurs more
// than once the last value wins, as in a JSON object. It fails on an
// invalid name or when the result would exceed MaxPairs or MaxBytes, and
// then returns dst unchanged. No pairs encode as nothing.
func Encode(dst []byte, pairs []Pair) ([]byte, error) {
	if len(pairs) == 0 {
		return dst, nil
	}
	sorted := slices.Clone(pairs)
	// Stable, so that among equal names the last given stays last.
	slices.SortStableFunc(sorted, func(a, b Pair) int { return strings.Compare(a.Name, b.Name) })
	uniq := sorted[:0]
	for _, p := range sorted {
		if !ValidName(p.Name) {
			return dst, fmt.Errorf("structured metadata: invalid name %q (want [a-zA-Z_][a-zA-Z0-9_]*)", p.Name)
		}
		if n := len(uniq); n > 0 && uniq[n-1].Name == p.Name {
			uniq[n-1] = p
			continue
		}
		uniq = append(uniq, p)
	}
	if len(uniq) > MaxPairs {
		return dst, fmt.Errorf("structured metadata: %d pairs, at most %d", len(uniq), MaxPairs)
	}
	size := uvarintLen(uint64(len(uniq)))
	for _, p := range uniq {
		size += uvarintLen(uint64(len(p.Name))) + len(p.Name) + uvarintLen(uint64(len(p.Value))) + len(p.Value)
	}
	if size > MaxBytes {
		return dst, fmt.Errorf("structured metadata: %d bytes encoded, at most %d", size, MaxBytes)
	}
	dst = slices.Grow(dst, size)
	dst = binary.AppendUvarint(dst, uint64(len(uniq)))
	for _, p := range uniq {
		dst = binary.AppendUvarint(dst, uint64(len(p.Name)))
		dst = append(dst, p.Name...)
		dst = binary.AppendUvarint(dst, uint64(len(p.Value)))
		dst = append(dst, p.Value...)
	}
	return dst, nil
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// ErrCorrupt is wrapped by every error of Decode, Each and Validate.
var ErrCorrupt = errors.New("corrupt structured metadata")

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// Each calls fn for each pair of the encoding b, in name order, after
// checking all of b (so fn never sees a prefix of a corrupt encoding).
// name and value alias b. It stops early when fn returns false.
func Each(b []byte, fn func(name, value []byte) bool) error {
	if err := Validate(b); err != nil {
		return err
	}
	EachValid(b, fn)
	return nil
}

// EachValid is Each without the check, for an encoding Validate (or
// Encode) already made sure of, as a push's decoded metadata: on an
// invalid one it may panic.
func EachValid(b []byte, fn func(name, value []byte) bool) {
	if len(b) == 0 {
		return
	}
	n, k := binary.Uvarint(b)
	b = b[k:]
	for range n {
		l, k := binary.Uvarint(b)
		name := b[k : k+int(l)]
		b = b[k+int(l):]
		l, k = binary.Uvarint(b)
		value := b[k : k+int(l) : k+int(l)]
		b = b[k+int(l):]
		if !fn(name, value) {
			return
		}
	}
}

// Validate checks that b is a canonical encoding.
func Validate(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if len(b) > MaxBytes {
		return corrupt("%d bytes, at most %d", len(b), MaxBytes)
	}
	n, k := binary.Uvarint(b)
	if k <= 0 || n == 0 || n > MaxPairs {
		return corrupt("bad pair count")
	}
	rest := b[k:]
	var prev []byte
	for i := range n {
		name, r, ok := field(rest)
		if !ok {
			return corrupt("pair %d: name runs past the end", i)
		}
		if !ValidName(string(name)) {
			return corrupt("pair %d: invalid name %q", i, name)
		}
		if i > 0 && string(prev) >= string(name) {
			return corrupt("pair %d: name %q not after %q", i, name, prev)
		}
		value, r, ok := field(r)
		if !ok {
			return corrupt("pair %d (%s): value runs past the end", i, name)
		}
		_ = value
		prev, rest = name, r
	}
	if len(rest) != 0 {
		return corrupt("%d bytes after the last pair", len(rest))
	}
	return nil
}

// field reads one uvarint length and that many bytes.
func field(b []byte) (f, rest []byte, ok bool) {
	l, k := binary.Uvarint(b)
	if k <= 0 || l > uint64(len(b)-k) {
		return nil, nil, false
	}
	return b[k : k+int(l)], b[k+int(l):], true
}

// Decode returns the pairs of the encoding b (nil for none).
func Decode(b []byte) ([]Pair, error) {
	if err := Validate(b); err != nil {
		return nil, err
	}
	var out []Pair
	EachValid(b, func(name, value []byte) bool {
		out = append(out, Pair{string(name), string(value)})
		return true
	})
	return out, nil
}

// Get returns the value of name in the valid encoding b.
func Get(b []byte, name string) (value []byte, ok bool) {
	if Validate(b) != nil {
		return nil, false
	}
	EachValid(b, func(n, v []byte) bool {
		if string(n) == name {
			value, ok = v, true
			return false
		}
		return string(n) < name
	})
	return value, ok
}

// MustPairs encodes name, value, name, value, ... as Encode does, and
// panics on an odd count or what Encode refuses: for tests and literals,
// as regexp.MustCompile.
func MustPairs(kv ...string) []byte {
	if len(kv)%2 != 0 {
		panic(fmt.Sprintf("attrs.MustPairs: %d strings, want name, value pairs", len(kv)))
	}
	ps := make([]Pair, 0, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		ps = append(ps, Pair{Name: kv[i], Value: kv[i+1]})
	}
	b, err := Encode(nil, ps)
	if err != nil {
		panic("attrs.MustPairs: " + err.Error())
	}
	return b
}
