package server

import (
	"fmt"
	"testing"

	"haystack/internal/attrs"
)

// TestDecodePushProtoBytes decodes a PushRequest assembled byte by byte
// from push.proto's field numbers, independently of EncodePushProto, so
// a wrong field number in both would still fail here.
func TestDecodePushProtoBytes(t *testing.T) {
	ts := []byte{0x08, 0x80, 0xe2, 0xcf, 0xaa, 0x06, 0x10, 0x07}                  // seconds=1700000000 (varint), nanos=7
	entry := append([]byte{0x0a, byte(len(ts))}, ts...)                           // EntryAdapter.timestamp = 1
	entry = append(entry, 0x12, 0x02, 'h', 'i')                                   // EntryAdapter.line = 2
	entry = append(entry, 0x1a, 0x06, 0x0a, 0x01, 'k', 0x12, 0x01, 'v')           // structuredMetadata = 3: {name=1: k, value=2: v}
	entry = append(entry, 0x1a, 0x08, 0x0a, 0x03, 'a', '.', 'b', 0x12, 0x01, 'w') // a.b=w, normalized to a_b
	labels := `{a="b"}`
	stream := append([]byte{0x0a, byte(len(labels))}, labels...) // StreamAdapter.labels = 1
	stream = append(stream, 0x12, byte(len(entry)))              // StreamAdapter.entries = 2
	stream = append(stream, entry...)
	stream = append(stream, 0x18, 0x2a)                       // StreamAdapter.hash = 3 (ignored)
	stream = append(stream, 0x25, 1, 2, 3, 4)                 // unknown fixed32 field 4: skipped
	req := append([]byte{0x0a, byte(len(stream))}, stream...) // PushRequest.streams = 1
	got, err := decodePushProto(req)
	if err != nil {
		t.Fatal(err)
	}
	// attrs' encoding of a_b=w, k=v, written out by hand: 2 pairs,
	// each uvarint length + name, uvarint length + value.
	meta := []byte{2, 3, 'a', '_', 'b', 1, 'w', 1, 'k', 1, 'v'}
	want := fmt.Sprint([]pushStream{{labels: labels, entries: []pushEntry{{Time: 1700000000*1e9 + 7, Line: []byte("hi"), Attrs: meta}}}})
	if fmt.Sprint(got) != want {
		t.Fatalf("got %v\nwant %s", got, want)
	}
	// And the encoder writes exactly these bytes for the same content
	// (minus the ignored fields).
	enc := EncodePushProto([]PushStream{{Labels: labels, Entries: []PushEntry{{Time: 1700000000*1e9 + 7, Line: "hi"}},
		Metadata: [][]attrs.Pair{{{Name: "k", Value: "v"}, {Name: "a.b", Value: "w"}}}}})
	again, err := decodePushProto(enc)
	if err != nil || fmt.Sprint(again) != want {
		t.Fatalf("encoder round trip: %v %v", again, err)
	}
	// A structuredMetadata field of the wrong wire type, and a pair
	// whose name is a varint, are malformed.
	badMeta := func(f []byte) []byte {
		e := append([]byte{0x12, 0x01, 'x'}, f...)
		s := append([]byte{0x0a, 0x02, '{', '}', 0x12, byte(len(e))}, e...)
		return append([]byte{0x0a, byte(len(s))}, s...)
	}
	for _, bad := range [][]byte{req[:len(req)-1], {0x0a, 0x05, 0x0a}, {0x08}, {0x0b}, {0x00},
		badMeta([]byte{0x18, 0x01}), badMeta([]byte{0x1a, 0x02, 0x08, 0x01}), badMeta([]byte{0x1a, 0x02, 0x0a, 0x05})} {
		if _, err := decodePushProto(bad); err == nil {
			t.Errorf("decodePushProto(%x) accepted", bad)
		}
	}
}
