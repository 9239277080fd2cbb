package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"haystack/internal/attrs"
)

// Structured metadata on push: the name=value pairs a shipper sends with
// an entry (Loki push JSON's third value element, push protobuf's
// EntryAdapter.structuredMetadata, jsonl's "structuredMetadata", OTLP's
// attributes and record fields) become the entry's Attrs, package attrs'
// encoding. As Loki's distributor does for every push format, names are
// normalized to label names (metaName), of the pairs that end up with one
// name the last given wins (counted in
// hay_structured_metadata_collisions_total when the values differ), and
// pairs with an empty value are dropped. Values are kept as their bytes,
// UTF-8 or not. Only entries over attrs' limits (Loki's default
// max_structured_metadata_entries_count and _size) or with a name that
// normalizes to nothing are refused, as Loki refuses them; an entry
// refused for its metadata is refused whole, as for a line over
// --max-line, and the push's other entries are stored.

// metaRefusal is why an entry's metadata was refused: the reason is the
// hay_rejected_total label, msg what the answer says.
type metaRefusal struct {
	reason, msg string
}

// metaName normalizes a metadata name as Prometheus' otlptranslator
// LabelNamer does, which Loki applies to every entry's metadata at push:
// each rune outside [a-zA-Z0-9] becomes '_' (one '_' a rune; an invalid
// UTF-8 byte is one rune), a name starting with a digit gets "key_" in
// front, one starting with a single '_' gets "key" ("__x" is kept). An
// empty name, or one that only became underscores, is refused.
func metaName(s string) (string, error) {
	if s == "" {
		return "", errors.New("empty name")
	}
	if attrs.ValidName(s) && (s[0] != '_' || strings.HasPrefix(s, "__")) {
		return s, nil // the common case: nothing to change, no allocation
	}
	var b strings.Builder
	b.Grow(len(s) + 4)
	for _, r := range s {
		if r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	n := b.String()
	switch {
	case n[0] >= '0' && n[0] <= '9':
		n = "key_" + n
	case n[0] == '_' && !strings.HasPrefix(n, "__"):
		n = "key" + n
	}
	if n != s && strings.Trim(n, "_") == "" {
		return "", fmt.Errorf("name %q normalizes to %q, only underscores", s, n)
	}
	return n, nil
}

// metaEncoder encodes the metadata of a push's entries into an arena of
// chunks (up to 64 KiB), so that a push of many entries allocates a few arrays,
// not one an entry, and never copies what it encoded. Each entry's Attrs
// is a full slice expression of a chunk.
type metaEncoder struct {
	arena []byte
	pairs []attrs.Pair // scratch
	bytes int64        // encoded so far
	// names caches the names metaName changed: the entries of a push
	// repeat the same few names (http.route in every OTLP record).
	names map[string]string
	// collisions counts the names given twice with different values
	// (the later pair won), for hay_structured_metadata_collisions_total.
	collisions int
}

// takeCollisions returns the collisions counted since the last call.
func (me *metaEncoder) takeCollisions() int {
	n := me.collisions
	me.collisions = 0
	return n
}

// name is metaName, cached.
func (me *metaEncoder) name(s string) (string, error) {
	if n, ok := me.names[s]; ok {
		return n, nil
	}
	n, err := metaName(s)
	if err == nil && n != s && len(me.names) < 4096 {
		if me.names == nil {
			me.names = map[string]string{}
		}
		me.names[s] = n
	}
	return n, err
}

// metaChunk is the largest arena chunk of metaEncoder.
const metaChunk = 64 << 10

// encode normalizes names, resolves names given twice, drops empty
// values and checks limits, and returns the encoding of pairs (nil for
// none) or why the entry is refused. pairs may be changed (names
// normalized in place, reordered).
//
// As Loki's distributor (which sets each normalized pair into a labels
// builder in order): of pairs that end up with one name, the last one
// wins, and a pair whose value is empty is dropped (an empty last value
// drops the name). A name given twice with different values is counted
// in me.collisions (hay_structured_metadata_collisions_total), never
// refused: refusing it lost the whole line. A value that is not UTF-8 is
// kept as its bytes (Loki strips the invalid bytes; attrs keeps any
// bytes, and the JSON answers escape them as U+FFFD).
func (me *metaEncoder) encode(pairs []attrs.Pair) ([]byte, *metaRefusal) {
	if len(pairs) == 0 {
		return nil, nil
	}
	for i := range pairs {
		n, err := me.name(pairs[i].Name)
		if err != nil {
			return nil, &metaRefusal{"bad_metadata", fmt.Sprintf("structured metadata: %v", err)}
		}
		pairs[i].Name = n
	}
	// Stable: pairs of one name keep their order, so the last given is
	// the last of its run.
	slices.SortStableFunc(pairs, func(a, b attrs.Pair) int { return strings.Compare(a.Name, b.Name) })
	uniq := pairs[:0]
	for i, p := range pairs {
		if i+1 < len(pairs) && pairs[i+1].Name == p.Name {
			if pairs[i+1].Value != p.Value {
				me.collisions++
			}
			continue // a later pair of this name wins
		}
		if p.Value != "" {
			uniq = append(uniq, p)
		}
	}
	if len(uniq) == 0 {
		return nil, nil
	}
	if len(uniq) > attrs.MaxPairs {
		return nil, &metaRefusal{"structured_metadata_too_many", fmt.Sprintf("%d structured metadata pairs, more than the limit of %d", len(uniq), attrs.MaxPairs)}
	}
	// A new chunk when this entry's encoding might not fit: growing the
	// arena by append copied all of it each time (a third of a protobuf
	// push's decoding).
	if bound := pairsSize(uniq) + binaryMaxVarintLen32; cap(me.arena)-len(me.arena) < bound {
		// Chunks double from 1 KiB (a push of one entry allocates
		// little) up to 64 KiB.
		me.arena = make([]byte, 0, max(min(2*cap(me.arena), metaChunk), 1<<10, bound))
	}
	start := len(me.arena)
	out, err := attrs.Encode(me.arena, uniq)
	if err != nil {
		size := 0
		for _, p := range uniq {
			size += len(p.Name) + len(p.Value)
		}
		return nil, &metaRefusal{"structured_metadata_too_large", fmt.Sprintf("structured metadata of %d bytes (names and values) exceeds the limit of %d bytes encoded", size, attrs.MaxBytes)}
	}
	me.arena = out
	me.bytes += int64(len(out) - start)
	return out[start:len(out):len(out)], nil
}

// setMetaRefusal records that entry j of the stream is refused for its
// metadata.
func (ps *pushStream) setMetaRefusal(j int, r *metaRefusal) {
	if ps.metaErrs == nil {
		ps.metaErrs = map[int]*metaRefusal{}
	}
	ps.metaErrs[j] = r
}

// parseMetaJSON reads a JSON object of string values (Loki push JSON's
// third value element, jsonl's structuredMetadata), appending its pairs
// in order to dst. Anything else (another type, a non-string value) is an
// error: Loki refuses the push as malformed. Keys given twice are kept
// twice, in order, for the encoder to keep the last.
//
// raw must be valid JSON (a json.RawMessage of a document encoding/json
// decoded), so this only walks it: a json.Decoder's tokens cost 35
// allocations an entry of two pairs, a third of a push's decoding.
func parseMetaJSON(raw []byte, dst []attrs.Pair) ([]attrs.Pair, error) {
	i := skipJSONSpace(raw, 0)
	if i == len(raw) || raw[i] != '{' {
		return dst, fmt.Errorf("structured metadata must be an object of strings, got %s", jsonKindAt(raw, i))
	}
	i = skipJSONSpace(raw, i+1)
	for i < len(raw) && raw[i] != '}' {
		name, j, err := jsonStringAt(raw, i)
		if err != nil {
			return dst, err
		}
		j = skipJSONSpace(raw, j)
		if j == len(raw) || raw[j] != ':' {
			return dst, errors.New("structured metadata: invalid JSON")
		}
		j = skipJSONSpace(raw, j+1)
		if j == len(raw) || raw[j] != '"' {
			return dst, fmt.Errorf("structured metadata %q: value must be a string, got %s", name, jsonKindAt(raw, j))
		}
		value, k, err := jsonStringAt(raw, j)
		if err != nil {
			return dst, err
		}
		dst = append(dst, attrs.Pair{Name: name, Value: value})
		i = skipJSONSpace(raw, k)
		if i < len(raw) && raw[i] == ',' {
			i = skipJSONSpace(raw, i+1)
		}
	}
	if i == len(raw) {
		return dst, errors.New("structured metadata: invalid JSON")
	}
	if skipJSONSpace(raw, i+1) != len(raw) {
		return dst, errors.New("structured metadata: data after the object")
	}
	return dst, nil
}

func skipJSONSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// jsonStringAt reads the JSON string starting at b[i] (a '"'),
// returning it and the index after it. One without escapes is taken as
// it is; one with escapes is unquoted by encoding/json.
func jsonStringAt(b []byte, i int) (string, int, error) {
	if i >= len(b) || b[i] != '"' {
		return "", i, errors.New("structured metadata: invalid JSON")
	}
	escaped := false
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			escaped = true
			j++ // the escaped byte (a \u's hex digits are not quotes)
		case '"':
			if !escaped {
				return string(b[i+1 : j]), j + 1, nil
			}
			var s string
			if err := json.Unmarshal(b[i:j+1], &s); err != nil {
				return "", j + 1, fmt.Errorf("structured metadata: %w", err)
			}
			return s, j + 1, nil
		}
	}
	return "", len(b), errors.New("structured metadata: invalid JSON")
}

// jsonKindAt names the JSON type of the value starting at b[i].
func jsonKindAt(b []byte, i int) string {
	if i >= len(b) {
		return "nothing"
	}
	switch b[i] {
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	case '"':
		return "a string"
	case '[':
		return "an array"
	case '{':
		return "an object"
	}
	return "a number"
}

// fromJSON encodes the metadata object raw (see parseMetaJSON): an error
// for a malformed object, a refusal for metadata over attrs' limits or
// with a name that normalizes to nothing. A string without escapes keeps
// its bytes, UTF-8 or not; one with an escape is unquoted by
// encoding/json, which makes invalid bytes and lone surrogates (\ud800)
// U+FFFD, as it does in lines.
func (me *metaEncoder) fromJSON(raw []byte) ([]byte, *metaRefusal, error) {
	var err error
	if me.pairs, err = parseMetaJSON(raw, me.pairs[:0]); err != nil {
		return nil, nil, err
	}
	enc, r := me.encode(me.pairs)
	return enc, r, nil
}
