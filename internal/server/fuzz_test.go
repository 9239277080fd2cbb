package server

import (
	"bytes"
	"fmt"
	"testing"

	"haystack/internal/attrs"
)

// checkDecodedMeta checks a decoded stream's metadata: each entry's is
// attrs' canonical encoding (or none), and an entry refused for it has
// none.
func checkDecodedMeta(t *testing.T, s pushStream) {
	t.Helper()
	for j, e := range s.entries {
		if err := attrs.Validate(e.Attrs); err != nil {
			t.Fatalf("entry %d: %v", j, err)
		}
		if s.metaErrs[j] != nil && len(e.Attrs) != 0 {
			t.Fatalf("entry %d: refused, yet has metadata", j)
		}
	}
	for j := range s.metaErrs {
		if j < 0 || j >= len(s.entries) {
			t.Fatalf("refusal of entry %d of %d", j, len(s.entries))
		}
	}
}

// The push decoders take untrusted bytes: they must never panic, and what
// they accept must survive a round trip.

func FuzzDecodePushProto(f *testing.F) {
	f.Add(EncodePushProto([]PushStream{{Labels: `{app="x"}`, Entries: []PushEntry{{Time: 1700000000123456789, Line: "hello"}}}}))
	f.Add([]byte{0x0a, 0x10, 0x01})
	f.Add(EncodePushProto([]PushStream{{Labels: `{app="x"}`, Entries: []PushEntry{{1, "a"}, {2, "b"}, {3, "c"}},
		Metadata: [][]attrs.Pair{{{Name: "trace_id", Value: "0af7651916cd43dd"}, {Name: "k8s.pod", Value: ""}}, nil, {{Name: "a", Value: "1"}, {Name: "a", Value: "2"}}}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		streams, err := decodePushProto(b)
		if err != nil {
			return
		}
		// Re-encoding what was decoded (the metadata as decoded pairs)
		// decodes to the same, except that an entry refused for its
		// metadata is sent without it.
		var ps []PushStream
		for _, s := range streams {
			p := PushStream{Labels: s.labels}
			for j, e := range s.entries {
				p.Entries = append(p.Entries, PushEntry{Time: e.Time, Line: string(e.Line)})
				pairs, err := attrs.Decode(e.Attrs)
				if err != nil {
					t.Fatalf("entry %d: decoded metadata is not attrs' encoding: %v", j, err)
				}
				if s.metaErrs[j] != nil && len(e.Attrs) != 0 {
					t.Fatalf("entry %d: refused, yet has metadata", j)
				}
				p.Metadata = append(p.Metadata, pairs)
			}
			ps = append(ps, p)
		}
		again, err := decodePushProto(EncodePushProto(ps))
		if err != nil {
			t.Fatalf("re-encoded request does not decode: %v", err)
		}
		for i := range streams {
			// (A re-encoded request has no refusals or collisions: the
			// pairs written are those kept.)
			streams[i].metaErrs = nil
			streams[i].collisions = 0
		}
		if fmt.Sprint(again) != fmt.Sprint(streams) {
			t.Fatalf("round trip:\n%v\n%v", streams, again)
		}
	})
}

func FuzzDecodePushJSON(f *testing.F) {
	f.Add([]byte(`{"streams":[{"stream":{"app":"x"},"values":[["1700000000000000000","a line"],["1","b",{"k":"v"}]]}]}`))
	f.Add([]byte(`{"streams":[]}`))
	f.Add([]byte(`{"streams":[{"stream":{"app":"x"},"values":[["x","a"]]}]}`))
	f.Add([]byte(`{"streams":[{"stream":{"app":"x"},"values":[["1","a",{"trace_id":"ab","k8s.pod":"","a":"1","a":"2"}],["2","b",{"n":1}]]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		streams, err := decodePushJSON(b)
		if err != nil {
			return
		}
		for _, s := range streams {
			if s.lmap == nil {
				t.Fatal("accepted stream without labels")
			}
			checkDecodedMeta(t, s)
		}
	})
}

func FuzzDecodePushJSONL(f *testing.F) {
	f.Add([]byte("{\"labels\":{\"app\":\"x\"},\"ts\":\"1700000000000000000\",\"line\":\"a\"}\n{\"labels\":\"{app=\\\"x\\\"}\",\"line\":\"b\"}\r\n\n"))
	f.Add([]byte(`{"stream":{"a":"b"},"time":"2023-11-14T22:13:20Z","line":""}`))
	f.Add([]byte(`{"labels":{"a":"b"},"ts":12,"line":"x"}`))
	f.Add([]byte("{\"labels\":{\"a\":\"b\"},\"line\":\"x\",\"structuredMetadata\":{\"trace_id\":\"ab\",\"1x\":\"\"}}\n{\"labels\":{\"a\":\"b\"},\"line\":\"y\",\"metadata\":{\"a.b\":\"1\",\"a_b\":\"2\"}}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		streams, err := decodePushJSONL(b, 42)
		if err != nil {
			return
		}
		n := 0
		for _, s := range streams {
			checkDecodedMeta(t, s)
			n += len(s.entries)
			if s.lmap == nil && s.labels == "" {
				t.Fatal("accepted entry without labels")
			}
		}
		if n > bytes.Count(b, []byte("\n"))+1 {
			t.Fatalf("%d entries from %d lines", n, bytes.Count(b, []byte("\n"))+1)
		}
	})
}
