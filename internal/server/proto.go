package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"

	"haystack/internal/attrs"
)

// Loki's push.proto, decoded by hand (field numbers from the public
// definition; no generated code):
//
//	PushRequest      { repeated StreamAdapter streams = 1; }
//	StreamAdapter    { string labels = 1; repeated EntryAdapter entries = 2; uint64 hash = 3; }
//	EntryAdapter     { google.protobuf.Timestamp timestamp = 1; string line = 2;
//	                   repeated LabelPairAdapter structuredMetadata = 3; }
//	LabelPairAdapter { string name = 1; string value = 2; }
//	Timestamp        { int64 seconds = 1; int32 nanos = 2; }
//
// Unknown fields are skipped, as protobuf requires. structuredMetadata
// becomes the entry's Attrs (push_attrs.go: names normalized, the last
// pair of a name kept, empty values dropped, values kept as their bytes).

const (
	wireVarint = 0
	wireI64    = 1
	wireLen    = 2
	wireI32    = 5
)

var errProtoTruncated = errors.New("truncated protobuf")

// protoField reads one field header and value from b. For wireLen fields
// val is the payload; for varint/fixed fields num holds the value.
func protoField(b []byte) (field int, typ int, num uint64, val []byte, rest []byte, err error) {
	key, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, 0, 0, nil, nil, errProtoTruncated
	}
	b = b[n:]
	if key>>3 == 0 || key>>3 > math.MaxInt32 {
		return 0, 0, 0, nil, nil, fmt.Errorf("invalid protobuf field number %d", key>>3)
	}
	field, typ = int(key>>3), int(key&7)
	switch typ {
	case wireVarint:
		num, n = binary.Uvarint(b)
		if n <= 0 {
			return 0, 0, 0, nil, nil, errProtoTruncated
		}
		return field, typ, num, nil, b[n:], nil
	case wireI64:
		if len(b) < 8 {
			return 0, 0, 0, nil, nil, errProtoTruncated
		}
		return field, typ, binary.LittleEndian.Uint64(b), nil, b[8:], nil
	case wireI32:
		if len(b) < 4 {
			return 0, 0, 0, nil, nil, errProtoTruncated
		}
		return field, typ, uint64(binary.LittleEndian.Uint32(b)), nil, b[4:], nil
	case wireLen:
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return 0, 0, 0, nil, nil, errProtoTruncated
		}
		b = b[n:]
		return field, typ, 0, b[:l], b[l:], nil
	}
	return 0, 0, 0, nil, nil, fmt.Errorf("unsupported protobuf wire type %d", typ)
}

// decodePushProto decodes an uncompressed PushRequest. Line slices alias b.
// The slices are sized exactly by a first pass over the field headers
// (countProtoField): grown by append, a push of millions of entries
// allocated five times its final arrays (Go grows large slices by 1.25×).
func decodePushProto(b []byte) ([]pushStream, error) {
	nstreams, nentries := 0, 0
	for rest := b; len(rest) > 0; {
		f, t, _, v, r, err := protoField(rest)
		if err != nil {
			break // reported below
		}
		if f == 1 && t == wireLen {
			nstreams++
			nentries += countProtoField(v, 2)
		}
		rest = r
	}
	out := make([]pushStream, 0, nstreams)
	all := make([]pushEntry, 0, nentries) // every stream's entries, in order (inPlace)
	var me metaEncoder
	for len(b) > 0 {
		f, t, _, v, rest, err := protoField(b)
		if err != nil {
			return out, err
		}
		b = rest
		if f != 1 {
			continue
		}
		if t != wireLen {
			return out, fmt.Errorf("stream %d: wrong wire type %d", len(out), t)
		}
		var s pushStream
		s, all, err = decodeStreamProto(v, all, &me)
		if err != nil {
			return out, fmt.Errorf("stream %d: %w", len(out), err)
		}
		s.collisions = me.takeCollisions()
		out = append(out, s)
	}
	return out, nil
}

// decodeStreamProto decodes a StreamAdapter, appending its entries to
// all; s.entries is the part of all they took.
func decodeStreamProto(b []byte, all []pushEntry, me *metaEncoder) (s pushStream, _ []pushEntry, err error) {
	start := len(all)
	defer func() { s.entries = all[start:] }()
	for len(b) > 0 {
		f, t, _, v, rest, err := protoField(b)
		if err != nil {
			return s, all, err
		}
		b = rest
		switch {
		case f == 1 && t == wireLen:
			s.labels = string(v)
		case f == 2 && t == wireLen:
			e, r, err := decodeEntryProto(v, me)
			if err != nil {
				return s, all, fmt.Errorf("entry %d: %w", len(all)-start, err)
			}
			if r != nil {
				s.setMetaRefusal(len(all)-start, r)
			}
			all = append(all, e)
		case f == 1 || f == 2:
			return s, all, fmt.Errorf("field %d: wrong wire type %d", f, t)
		}
	}
	return s, all, nil
}

// countProtoField counts the length-delimited fields numbered f of a
// message, stopping at the first malformed field (the decoder then
// reports it).
func countProtoField(b []byte, f int) int {
	n := 0
	for len(b) > 0 {
		g, t, _, _, rest, err := protoField(b)
		if err != nil {
			break
		}
		if g == f && t == wireLen {
			n++
		}
		b = rest
	}
	return n
}

// decodeEntryProto decodes an EntryAdapter; its structured metadata is
// encoded by me, or refused (r).
func decodeEntryProto(b []byte, me *metaEncoder) (e pushEntry, r *metaRefusal, err error) {
	me.pairs = me.pairs[:0]
	for len(b) > 0 {
		f, t, _, v, rest, err := protoField(b)
		if err != nil {
			return e, nil, err
		}
		b = rest
		switch {
		case f == 1 && t == wireLen:
			ts, err := decodeTimestampProto(v)
			if err != nil {
				return e, nil, fmt.Errorf("timestamp: %w", err)
			}
			e.Time = ts
		case f == 2 && t == wireLen:
			e.Line = v
		case f == 3 && t == wireLen:
			p, err := decodeLabelPairProto(v)
			if err != nil {
				return e, nil, fmt.Errorf("structuredMetadata %d: %w", len(me.pairs), err)
			}
			me.pairs = append(me.pairs, p)
		case f == 1 || f == 2 || f == 3:
			return e, nil, fmt.Errorf("field %d: wrong wire type %d", f, t)
		}
	}
	e.Attrs, r = me.encode(me.pairs)
	return e, r, nil
}

// decodeLabelPairProto decodes a LabelPairAdapter. Its strings alias b
// (the push body, never changed while the push is decoded): they only
// live until the entry's metadata is encoded, which copies them, and
// copying each first was 4 of 5 allocations an entry of two pairs.
func decodeLabelPairProto(b []byte) (attrs.Pair, error) {
	var p attrs.Pair
	for len(b) > 0 {
		f, t, _, v, rest, err := protoField(b)
		if err != nil {
			return p, err
		}
		b = rest
		switch {
		case f == 1 && t == wireLen:
			p.Name = aliasString(v)
		case f == 2 && t == wireLen:
			p.Value = aliasString(v)
		case f == 1 || f == 2:
			return p, fmt.Errorf("field %d: wrong wire type %d", f, t)
		}
	}
	return p, nil
}

func decodeTimestampProto(b []byte) (int64, error) {
	var sec, nanos int64
	for len(b) > 0 {
		f, t, num, _, rest, err := protoField(b)
		if err != nil {
			return 0, err
		}
		b = rest
		switch {
		case f == 1 && t == wireVarint:
			sec = int64(num)
		case f == 2 && t == wireVarint:
			nanos = int64(int32(num))
		}
	}
	if nanos < 0 || nanos >= 1e9 {
		return 0, fmt.Errorf("nanos %d out of range", nanos)
	}
	if sec > math.MaxInt64/int64(1e9)-1 || sec < math.MinInt64/int64(1e9)+1 {
		return 0, fmt.Errorf("seconds %d out of range", sec)
	}
	return sec*1e9 + nanos, nil
}

// PushStream is one stream of a push request for EncodePushProto.
type PushStream struct {
	Labels  string // Loki form: {a="b"}
	Entries []PushEntry
	// Metadata, when not nil, holds the structured metadata of each entry
	// (Metadata[i] is Entries[i]'s), encoded as given (order, names,
	// duplicates), so tests can send what a shipper might. (Beside the
	// entries rather than in PushEntry, whose two fields callers write
	// unkeyed.)
	Metadata [][]attrs.Pair
}

// PushEntry is one entry for EncodePushProto.
type PushEntry struct {
	Time int64 // Unix ns
	Line string
}

// EncodePushProto encodes a PushRequest (uncompressed; Loki clients send it
// snappy-compressed). Tests and `hay bench push` use it.
func EncodePushProto(streams []PushStream) []byte {
	var out, sb, eb, tb, pb []byte
	for _, s := range streams {
		sb = sb[:0]
		sb = appendBytesField(sb, 1, []byte(s.Labels))
		for i, e := range s.Entries {
			tb = tb[:0]
			sec, ns := e.Time/1e9, e.Time%1e9
			if ns < 0 {
				sec, ns = sec-1, ns+1e9
			}
			if sec != 0 {
				tb = binary.AppendUvarint(tb, 1<<3|wireVarint)
				tb = binary.AppendUvarint(tb, uint64(sec))
			}
			if ns != 0 {
				tb = binary.AppendUvarint(tb, 2<<3|wireVarint)
				tb = binary.AppendUvarint(tb, uint64(ns))
			}
			eb = eb[:0]
			eb = appendBytesField(eb, 1, tb)
			eb = appendBytesField(eb, 2, []byte(e.Line))
			var meta []attrs.Pair
			if i < len(s.Metadata) {
				meta = s.Metadata[i]
			}
			for _, p := range meta {
				pb = appendBytesField(pb[:0], 1, []byte(p.Name))
				pb = appendBytesField(pb, 2, []byte(p.Value))
				eb = appendBytesField(eb, 3, pb)
			}
			sb = appendBytesField(sb, 2, eb)
		}
		out = appendBytesField(out, 1, sb)
	}
	return out
}

func appendBytesField(dst []byte, field int, v []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(field)<<3|wireLen)
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

// aliasString is b as a string without a copy; b must not change while
// the string is in use.
func aliasString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
