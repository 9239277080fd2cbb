package store

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// randString makes a string of bytes that stress JSON: quotes,
// backslashes, control characters, HTML characters, multi-byte UTF-8,
// U+2028, invalid UTF-8.
func randString(r *rand.Rand) string {
	pieces := []string{"a", "Z", "0", " ", `"`, `\`, "/", "\n", "\t", "\x00", "\x1f", "\x7f", "<", ">", "&",
		"é", "€", "😀", "\u2028", "\xff", "\xc3", "{source=\"api.log\"}", "=", ","}
	var s string
	for range r.IntN(12) {
		s += pieces[r.IntN(len(pieces))]
	}
	return s
}

func randInt(r *rand.Rand) int64 {
	switch r.IntN(5) {
	case 0:
		return 0
	case 1:
		return math.MaxInt64
	case 2:
		return math.MinInt64
	case 3:
		return -r.Int64N(1e18)
	}
	return r.Int64()
}

func randManifest(r *rand.Rand) *Manifest {
	m := &Manifest{NextSeq: r.Uint64() >> r.IntN(64), WALStart: r.Uint64() >> r.IntN(64)}
	if r.IntN(5) == 0 {
		m.NextSeq = math.MaxUint64
	}
	// nil, empty and filled lists: json.Unmarshal gives nil for null and
	// an empty slice for [].
	if k := r.IntN(4); k > 0 {
		m.Segments = []SegmentMeta{}
		for range k - 1 {
			m.Segments = append(m.Segments, SegmentMeta{Name: randString(r), Entries: randInt(r), RawBytes: randInt(r),
				Size: randInt(r), MinTime: randInt(r), MaxTime: randInt(r), Compacted: r.IntN(2) == 0})
		}
	}
	if k := r.IntN(4); k > 0 {
		m.Streams = []StreamDef{}
		for range k - 1 {
			m.Streams = append(m.Streams, StreamDef{ID: r.Uint32(), Labels: randString(r)})
		}
	}
	if k := r.IntN(4); k > 0 {
		m.Sources = []Source{}
		for range k - 1 {
			m.Sources = append(m.Sources, Source{Key: randString(r), Offset: randInt(r), Check: r.Uint32()})
		}
	}
	return m
}

// TestParseManifestJSON: whatever encodeManifest writes takes the fast
// path (no fallback to encoding/json) and decodes to what json.Unmarshal
// gives.
func TestParseManifestJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 3000 {
		m := randManifest(r)
		body, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			body = append(body, '\n') // as encodeManifest writes it
		}
		got, ok := parseManifestJSON(body)
		if !ok {
			t.Fatalf("fell back on what encodeManifest writes: %s", body)
		}
		var want Manifest
		if err := json.Unmarshal(body, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*got, want) {
			t.Fatalf("%s:\ngot  %#v\nwant %#v", body, *got, want)
		}
		enc, err := encodeManifest(m)
		if err != nil {
			t.Fatal(err)
		}
		dec, err := decodeManifest(enc)
		if err != nil || !reflect.DeepEqual(*dec, want) {
			t.Fatalf("decodeManifest: %v", err)
		}
	}
}

// TestParseManifestJSONSubset: valid JSON outside the subset falls back
// (and encoding/json then decodes it); the subset's edges are exact.
func TestParseManifestJSONSubset(t *testing.T) {
	fallback := []string{
		``, `null`, `[]`, `{`, `{"next_seq":1,}`, `{"next_seq":1}x`,
		`{"Next_Seq":1}`, `{"next_seq":1,"next_seq":2}`, `{"other":1}`,
		`{"next_seq":1.0}`, `{"next_seq":1e3}`, `{"next_seq":01}`, `{"next_seq":-1}`, `{"next_seq":null}`,
		`{"next_seq":18446744073709551616}`, `{"segments":[{"size":-0}]}`,
		`{"segments":[{"size":9223372036854775808}]}`, `{"segments":[{"size":-9223372036854775809}]}`,
		`{"streams":[{"id":4294967296}]}`, `{"streams":[null]}`, `{"streams":{}}`,
		`{"streams":[{"labels":"\ud83d\ude00"}]}`, `{"streams":[{"labels":"\ud800"}]}`,
		`{"streams":[{"labels":"` + "\xff" + `"}]}`, `{"streams":[{"labels":"` + "\x01" + `"}]}`,
		`{"streams":[{"labels":"\x"}]}`, `{"streams":[{"labels":"\u12"}]}`, `{"streams":[{"labels":1}]}`,
		`{"streams":[{"id":1,"id":1}]}`, `{"sources":[{"key":"a","key":"b"}]}`,
	}
	for _, s := range fallback {
		if m, ok := parseManifestJSON([]byte(s)); ok {
			t.Errorf("%q: took the fast path: %+v", s, m)
		}
	}
	exact := []string{
		`{}`, " \t\r\n{ } \n", `{"next_seq":0,"wal_start":18446744073709551615}`,
		`{"segments":null,"streams":[],"sources":[ ]}`,
		`{"segments":[{"name":"a\"b\\c\/d\b\f\n\r\t\u00e9\u20AC\u0000","entries":-9223372036854775808,"size":9223372036854775807}]}`,
		`{"streams":[{"id":4294967295,"labels":"{source=\"x\"} é €"},{}]}`,
		`{"sources":[{"key":"","offset":-1,"check":0}]}`,
	}
	for _, s := range exact {
		got, ok := parseManifestJSON([]byte(s))
		if !ok {
			t.Errorf("%q: fell back", s)
			continue
		}
		var want Manifest
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("%q:\ngot  %#v\nwant %#v", s, *got, want)
		}
	}
}

// FuzzManifestJSON: when the fast parser accepts a body, encoding/json
// accepts it too and decodes the same manifest.
func FuzzManifestJSON(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 4 {
		b, _ := json.Marshal(randManifest(r))
		f.Add(b)
	}
	f.Add([]byte(`{"segments":[{"name":"\u00e9","entries":-1}],"streams":[{"id":1,"labels":"\"\\"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := parseManifestJSON(body)
		if !ok {
			return
		}
		var want Manifest
		if err := json.Unmarshal(body, &want); err != nil {
			t.Fatalf("fast path accepted what encoding/json rejects (%v): %q", err, body)
		}
		if !reflect.DeepEqual(*got, want) {
			t.Fatalf("%q:\ngot  %#v\nwant %#v", body, *got, want)
		}
	})
}
