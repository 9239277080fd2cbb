package server

import (
	"bytes"
	"fmt"
	"testing"
)

// The push decoders take untrusted bytes: they must never panic, and what
// they accept must survive a round trip.

func FuzzDecodePushProto(f *testing.F) {
	f.Add(EncodePushProto([]PushStream{{Labels: `{app="x"}`, Entries: []PushEntry{{Time: 1700000000123456789, Line: "hello"}}}}))
	f.Add([]byte{0x0a, 0x10, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		streams, err := decodePushProto(b)
		if err != nil {
			return
		}
		var ps []PushStream
		for _, s := range streams {
			p := PushStream{Labels: s.labels}
			for _, e := range s.entries {
				p.Entries = append(p.Entries, PushEntry{Time: e.Time, Line: string(e.Line)})
			}
			ps = append(ps, p)
		}
		again, err := decodePushProto(EncodePushProto(ps))
		if err != nil {
			t.Fatalf("re-encoded request does not decode: %v", err)
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
	f.Fuzz(func(t *testing.T, b []byte) {
		streams, err := decodePushJSON(b)
		if err != nil {
			return
		}
		for _, s := range streams {
			if s.lmap == nil {
				t.Fatal("accepted stream without labels")
			}
		}
	})
}

func FuzzDecodePushJSONL(f *testing.F) {
	f.Add([]byte("{\"labels\":{\"app\":\"x\"},\"ts\":\"1700000000000000000\",\"line\":\"a\"}\n{\"labels\":\"{app=\\\"x\\\"}\",\"line\":\"b\"}\r\n\n"))
	f.Add([]byte(`{"stream":{"a":"b"},"time":"2023-11-14T22:13:20Z","line":""}`))
	f.Add([]byte(`{"labels":{"a":"b"},"ts":12,"line":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		streams, err := decodePushJSONL(b, 42)
		if err != nil {
			return
		}
		n := 0
		for _, s := range streams {
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
