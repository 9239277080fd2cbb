package attrs

import (
	"bytes"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "b", "trace_id", "span_id", "_x", "Z9", "service_name", "aa", "a_"}
	for range 2000 {
		var pairs []Pair
		want := map[string]string{}
		for range rng.IntN(6) {
			n := names[rng.IntN(len(names))]
			v := string(randBytes(rng, rng.IntN(12)))
			pairs = append(pairs, Pair{n, v})
			want[n] = v // last wins
		}
		enc, err := Encode([]byte("prefix"), pairs)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(enc, []byte("prefix")) {
			t.Fatalf("Encode did not append: %q", enc)
		}
		enc = enc[len("prefix"):]
		if len(pairs) == 0 && len(enc) != 0 {
			t.Fatalf("no pairs encoded as %q", enc)
		}
		got, err := Decode(enc)
		if err != nil {
			t.Fatalf("Decode(Encode(%q)): %v", pairs, err)
		}
		gotMap := map[string]string{}
		for i, p := range got {
			if i > 0 && got[i-1].Name >= p.Name {
				t.Fatalf("names not ascending: %q", got)
			}
			gotMap[p.Name] = p.Value
		}
		if !maps.Equal(gotMap, want) {
			t.Fatalf("pairs %q: decoded %q", pairs, got)
		}
		for n, v := range want {
			if g, ok := Get(enc, n); !ok || string(g) != v {
				t.Fatalf("Get(%q) = %q, %v; want %q", n, g, ok, v)
			}
		}
		if _, ok := Get(enc, "absent_name"); ok {
			t.Fatal("Get found an absent name")
		}
		// Canonical: the same set in another order encodes the same.
		shuffled := slices.Clone(got)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		again, err := Encode(nil, shuffled)
		if err != nil || !bytes.Equal(again, enc) {
			t.Fatalf("re-encoding %q gave %q (%v), want %q", shuffled, again, err, enc)
		}
	}
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.UintN(256)) // invalid UTF-8 and NULs included
	}
	return b
}

func TestEncodeRefuses(t *testing.T) {
	many := make([]Pair, MaxPairs+1)
	for i := range many {
		many[i] = Pair{Name: "n" + strings.Repeat("x", i), Value: "v"}
	}
	for _, tc := range []struct {
		name  string
		pairs []Pair
	}{
		{"empty name", []Pair{{"", "v"}}},
		{"digit first", []Pair{{"1a", "v"}}},
		{"dot", []Pair{{"service.name", "v"}}},
		{"non-ASCII", []Pair{{"é", "v"}}},
		{"too many", many},
		{"too big", []Pair{{"a", strings.Repeat("x", MaxBytes)}}},
	} {
		dst := []byte("keep")
		out, err := Encode(dst, tc.pairs)
		if err == nil {
			t.Errorf("%s: Encode accepted %d pairs", tc.name, len(tc.pairs))
		}
		if string(out) != "keep" {
			t.Errorf("%s: dst changed to %q", tc.name, out)
		}
	}
	// Exactly at the limits is fine.
	if _, err := Encode(nil, many[:MaxPairs]); err != nil {
		t.Errorf("MaxPairs pairs: %v", err)
	}
	// 1 (count) + 1 (name length) + 1 (name) + 3 (value length) + value.
	if enc, err := Encode(nil, []Pair{{"a", strings.Repeat("x", MaxBytes-6)}}); err != nil || len(enc) != MaxBytes {
		t.Errorf("MaxBytes encoding: len %d, %v", len(enc), err)
	}
}

func TestValidateRejects(t *testing.T) {
	good, _ := Encode(nil, []Pair{{"a", "1"}, {"b", ""}})
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"zero pairs", []byte{0}},
		{"count past end", []byte{2, 1, 'a', 0}},
		{"name past end", []byte{1, 5, 'a'}},
		{"value past end", []byte{1, 1, 'a', 3, 'x'}},
		{"trailing byte", append(slices.Clone(good), 0)},
		{"unsorted", []byte{2, 1, 'b', 0, 1, 'a', 0}},
		{"duplicate", []byte{2, 1, 'a', 0, 1, 'a', 0}},
		{"bad name", []byte{1, 1, '.', 0}},
		{"empty name", []byte{1, 0, 0}},
		{"overlong varint", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{"too many pairs", []byte{MaxPairs + 1}},
	} {
		err := Validate(tc.b)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Validate(%q) = %v, want ErrCorrupt", tc.name, tc.b, err)
		}
		if _, err := Decode(tc.b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Decode = %v", tc.name, err)
		}
		called := false
		if err := Each(tc.b, func(_, _ []byte) bool { called = true; return true }); err == nil || called {
			t.Errorf("%s: Each = %v, called %v", tc.name, err, called)
		}
	}
	// Every strict prefix of a valid encoding is invalid.
	for i := 1; i < len(good); i++ {
		if Validate(good[:i]) == nil {
			t.Errorf("prefix %q of %q validated", good[:i], good)
		}
	}
}

func TestEachStops(t *testing.T) {
	enc, _ := Encode(nil, []Pair{{"a", "1"}, {"b", "2"}, {"c", "3"}})
	var seen []string
	if err := Each(enc, func(n, v []byte) bool {
		seen = append(seen, string(n)+"="+string(v))
		return len(seen) < 2
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, []string{"a=1", "b=2"}) {
		t.Fatalf("Each saw %q", seen)
	}
}

func TestValidName(t *testing.T) {
	for s, want := range map[string]bool{
		"a": true, "_": true, "A_9": true, "trace_id": true,
		"": false, "9": false, "a-b": false, "a.b": false, "a b": false, "\xff": false,
	} {
		if got := ValidName(s); got != want {
			t.Errorf("ValidName(%q) = %v", s, got)
		}
	}
}

// FuzzDecode: any bytes either fail with ErrCorrupt or decode to pairs
// whose encoding is the same bytes (the encoding is canonical).
func FuzzDecode(f *testing.F) {
	good, _ := Encode(nil, []Pair{{"trace_id", "4bf92f3577b34da6a3ce929d0e0e4736"}, {"span_id", "00f067aa0ba902b7"}})
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte{1, 1, 'a', 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		pairs, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		enc, err := Encode(nil, pairs)
		if err != nil || !bytes.Equal(enc, b) {
			t.Fatalf("Decode(%q) = %q, which encodes as %q (%v)", b, pairs, enc, err)
		}
	})
}

func TestMustPairs(t *testing.T) {
	want, _ := Encode(nil, []Pair{{"b", "2"}, {"a", "1"}})
	if got := MustPairs("b", "2", "a", "1"); !bytes.Equal(got, want) {
		t.Fatalf("MustPairs = %q, want %q", got, want)
	}
	if got := MustPairs(); len(got) != 0 {
		t.Fatalf("MustPairs() = %q, want none", got)
	}
	for _, kv := range [][]string{{"a"}, {"1a", "v"}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("MustPairs(%q) did not panic", kv)
				}
			}()
			MustPairs(kv...)
		}()
	}
}
